"""tf.distribute.ReplicaContext.all_gather's documentation examples, on 2
workers (the page's two replicas).

    tools/dev python -m ferry.launch -n 2 tools/python/examples/all_gather_tf.py

A single tensor, a nested list, and a dict whose tensors differ in size
along the axis (the page prints 'a' as [1, 2] by mistake: it is [0, 1]).
"""
import torch

import ferry

ferry.init()
rank = ferry.rank()
assert ferry.world_size() == 2, "run with 2 workers"

# A single tensor.
local_value = torch.tensor([1, 2, 3], dtype=torch.int32)
result = ferry.all_gather(local_value, axis=0)
print(f"single: {result}  # replica {rank}")
assert torch.equal(result, torch.tensor([1, 2, 3, 1, 2, 3],
                                        dtype=torch.int32))

# A nested structure: a list of two tensors.
value_1 = torch.tensor([1, 2, 3], dtype=torch.int32)
value_2 = torch.tensor([[1, 2], [3, 4]], dtype=torch.int32)
result = ferry.all_gather([value_1, value_2], axis=0)
print(f"nest: {result}  # replica {rank}")
assert torch.equal(result[0], torch.tensor([1, 2, 3, 1, 2, 3],
                                           dtype=torch.int32))
assert torch.equal(result[1], torch.tensor([[1, 2], [3, 4], [1, 2], [3, 4]],
                                           dtype=torch.int32))

# Different shapes on different replicas (along the axis only).
value = [{"a": torch.tensor([0]), "b": torch.tensor([[0, 1]])},
         {"a": torch.tensor([1]), "b": torch.tensor([[2, 3], [4, 5]])}][rank]
result = ferry.all_gather(value, axis=0)
print(f"uneven: {result}  # replica {rank}")
assert torch.equal(result["a"], torch.tensor([0, 1]))
assert torch.equal(result["b"], torch.tensor([[0, 1], [2, 3], [4, 5]]))

ferry.shutdown()
