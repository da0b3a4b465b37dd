"""mixed_job_test.py's Python worker: rank 0 of a job whose other ranks are
ferryd daemons. Registers Python functions, calls the daemons' builtins,
then serves until the job is shut down (ferryctl down)."""
import torch

import ferry


@ferry.register("py_scale")
def py_scale(t, k):
    """t * k, computed in Python."""
    return t * k


@ferry.register("py_greet")
def py_greet(name):
    return f"hello {name} from {ferry.worker_name()}"


ferry.init(tensor_type="torch")
r = ferry.rpc_sync("worker1", "add", args=(torch.ones(2), 1))
assert torch.equal(r, torch.full((2,), 2.0)), r
rref = ferry.remote("worker2", "arange", args=(4,))
assert torch.equal(rref.to_here(), torch.arange(4)), rref.to_here()
print("python worker: ready", flush=True)
assert ferry.serve(timeout=240), "the job was not shut down"
ferry.shutdown()
print("python worker: stopped", flush=True)
