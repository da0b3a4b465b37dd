"""torch.distributed.all_to_all's documentation examples, on 4 workers.

    tools/dev python -m ferry.launch -n 4 tools/python/examples/all_to_all.py

The three examples of the seed page: even splits, uneven splits, complex
tensors (whose output the page allocates as int64 by mistake: it must be
complex). Each rank prints its output like the page and checks it.
"""
import torch

import ferry

ferry.init()
rank = ferry.rank()
assert ferry.world_size() == 4, "run with 4 workers"


def check(name, output, expected):
    print(f"{name}: {output}  # Rank {rank}")
    for got, want in zip(output, expected):
        assert torch.equal(got, want), (name, output, expected)


# Even: rank r sends element i to rank i.
input = torch.arange(4) + rank * 4
input = list(input.chunk(4))
output = list(torch.empty([4], dtype=torch.int64).chunk(4))
ferry.all_to_all(output, input)
check("even", output, [torch.tensor([rank + 4 * r]) for r in range(4)])

# Essentially, it is similar to scatter from every rank in turn.
gather_list = list(torch.empty([4], dtype=torch.int64).chunk(4))
for i in range(4):
    ferry.scatter(gather_list[i], input if i == rank else [], src=i)
check("scatter", gather_list, output)

# Uneven splits.
inputs = [torch.tensor([0, 1, 2, 3, 4, 5]),
          torch.tensor([10, 11, 12, 13, 14, 15, 16, 17, 18]),
          torch.tensor([20, 21, 22, 23, 24]),
          torch.tensor([30, 31, 32, 33, 34, 35, 36])]
input_splits = [[2, 2, 1, 1], [3, 2, 2, 2], [2, 1, 1, 1], [2, 2, 2, 1]]
output_splits = [[2, 3, 2, 2], [2, 2, 1, 2], [1, 2, 1, 2], [1, 2, 1, 1]]
input = list(inputs[rank].split(input_splits[rank]))
output = [torch.empty(n, dtype=torch.int64) for n in output_splits[rank]]
ferry.all_to_all(output, input)
expected = [
    [[0, 1], [10, 11, 12], [20, 21], [30, 31]],
    [[2, 3], [13, 14], [22], [32, 33]],
    [[4], [15, 16], [23], [34, 35]],
    [[5], [17, 18], [24], [36]],
][rank]
check("uneven", output, [torch.tensor(e) for e in expected])

# The same with all_to_all_single: one tensor, split sizes.
single = torch.empty(sum(output_splits[rank]), dtype=torch.int64)
ferry.all_to_all_single(single, inputs[rank], output_splits[rank],
                        input_splits[rank])
check("single", [single], [torch.cat([torch.tensor(e) for e in expected])])

# Complex tensors (torch.cfloat).
input = torch.tensor([1 + 1j, 2 + 2j, 3 + 3j, 4 + 4j],
                     dtype=torch.cfloat) + 4 * rank * (1 + 1j)
input = list(input.chunk(4))
output = list(torch.empty([4], dtype=torch.cfloat).chunk(4))
ferry.all_to_all(output, input)
check("complex", output,
      [torch.tensor([(rank + 1 + 4 * r) * (1 + 1j)], dtype=torch.cfloat)
       for r in range(4)])

ferry.shutdown()
