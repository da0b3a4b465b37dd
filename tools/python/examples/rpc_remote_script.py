"""torch.distributed.rpc.remote's TorchScript example (the seed page), on
ferry: as written, but for `import ferry.rpc as rpc` (the page's
`import torch.distributed.rpc as rpc`), and for `import torch`, which the
page imports in its first example.

    tools/dev python -m ferry.launch -n 2 \\
        tools/python/examples/rpc_remote_script.py

The TorchScript function is defined in the program both workers run: the
callee runs its own my_script_add, found by name (never pickled). (The
page's `rref.to_here()` shows its value in a doctest; here it is fetched
and dropped, as the page's program does.)
"""
import os

import torch

# On both workers:
@torch.jit.script
def my_script_add(t1, t2):
   return torch.add(t1, t2)

if os.environ["RANK"] == "0":
    # On worker 0:
    import ferry.rpc as rpc
    rpc.init_rpc("worker0", rank=0, world_size=2)
    rref = rpc.remote("worker1", my_script_add, args=(torch.ones(2), 3))
    rref.to_here()
    rpc.shutdown()
else:
    # On worker 1:
    import ferry.rpc as rpc
    rpc.init_rpc("worker1", rank=1, world_size=2)
    rpc.shutdown()

