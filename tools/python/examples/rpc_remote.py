"""torch.distributed.rpc.remote's documentation examples, on 2 workers.

    tools/dev python -m ferry.launch -n 2 tools/python/examples/rpc_remote.py

ferry calls functions by registered name, never by pickle: torch.add is the
builtin "add" every worker has, and the TorchScript function of the page is
a Python function registered on both workers.
"""
import torch

import ferry


@ferry.register("my_script_add", tensor_type="torch")
def my_script_add(t1, t2):
    return torch.add(t1, t2)


ferry.init()  # worker0 or worker1, from RANK
assert ferry.world_size() == 2, "run with 2 workers"

if ferry.rank() == 0:
    rref1 = ferry.remote("worker1", "add", args=(torch.ones(2), 3))
    rref2 = ferry.remote("worker1", "add", args=(torch.ones(2), 1))
    x = rref1.to_here() + rref2.to_here()
    print(f"x = {x}")
    assert torch.equal(x, torch.tensor([6.0, 6.0]))
    assert rref1.owner_name() == "worker1" and not rref1.is_owner()

    rref = ferry.remote("worker1", my_script_add, args=(torch.ones(2), 3))
    y = rref.to_here()
    print(f"my_script_add: {y}")
    assert torch.equal(y, torch.tensor([4.0, 4.0]))
    assert rref.confirmed_by_owner()

ferry.shutdown()  # worker1 serves worker0's calls until both got here
