"""torch.distributed.rpc.remote's documentation example (the seed page),
on ferry: the page's two programs as written, but for the import --
`import torch.distributed.rpc as rpc` is `import ferry.rpc as rpc`.

    tools/dev python -m ferry.launch -n 2 tools/python/examples/rpc_remote.py

ferry.launch sets MASTER_ADDR and MASTER_PORT (the page's `export`s) and
RANK, which picks the page's program for this process. torch.add travels
by name, never pickled (README, "torch.distributed.rpc").
"""
import os

if os.environ["RANK"] == "0":
    # On worker 0:
    import torch
    import ferry.rpc as rpc
    rpc.init_rpc("worker0", rank=0, world_size=2)
    rref1 = rpc.remote("worker1", torch.add, args=(torch.ones(2), 3))
    rref2 = rpc.remote("worker1", torch.add, args=(torch.ones(2), 1))
    x = rref1.to_here() + rref2.to_here()
    rpc.shutdown()
else:
    # On worker 1:
    import ferry.rpc as rpc
    rpc.init_rpc("worker1", rank=1, world_size=2)
    rpc.shutdown()

# Not the page's: what worker 0 got, for the test that runs this.
if os.environ["RANK"] == "0":
    print(f"x = {x}")
    assert x.tolist() == [6.0, 6.0]
