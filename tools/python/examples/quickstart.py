# README's Python example: a job of two Python workers.
#   tools/dev python -m ferry.launch -n 2 tools/python/examples/quickstart.py
import torch

import ferry


@ferry.register("scale")  # callable by name from C++, Python and ferryctl
def scale(t, k):
    return t * k


ferry.init(tensor_type="torch")  # RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
if ferry.rank() == 0:
    print(ferry.rpc_sync("worker1", "scale", args=(torch.ones(2), 3)))  # tensor([3., 3.])
    rref = ferry.remote("worker1", "arange", args=(4,))  # a builtin; worker1 owns the result
    print(rref.to_here())                                # tensor([0, 1, 2, 3])
t = torch.full((2,), ferry.rank() + 1.0)
ferry.all_reduce(t)  # in place, on every worker: tensor([3., 3.])
assert t.tolist() == [3.0, 3.0]
ferry.shutdown()
