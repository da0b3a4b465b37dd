"""ferry.rpc, torch.distributed.rpc's API on ferry (jobs/torch_rpc_job.py:
the same program on every worker, as torch RPC programs are), and failures
as its users meet them, beside TensorPipe's (jobs/rpc_failure_job.py)."""
import os
import subprocess
import sys

import conftest

JOB = conftest.script("tests/tools/python/jobs/torch_rpc_job.py")


def _checks(out):
    return [line.split("[ok] ", 1)[1] for line in out.splitlines()
            if line.startswith("[0] [ok] ")]


def test_the_api_as_torch_documents_it():
    out = conftest.launch(JOB, 2, "api")
    assert _checks(out) == [
        "torch builtin",
        "kwargs, ranks, WorkerInfo, registered functions",
        "rpc_async is a torch future",
        "TorchScript function, RRef",
        "errors as torch raises them",
        "timeouts: default, _set_rpc_timeout, 0 = none",
        "objects stay on their owner; proxies call their methods",
        "RRef(obj) owned here, its methods called from a peer",
        "async_execution",
        "non-values and lambdas refused on the caller",
        "device_maps refused",
    ], out


def _failures(backend):
    """worker0's FAILED lines of jobs/rpc_failure_job.py on `backend`:
    {what: (seconds, class, message)}."""
    job = conftest.script("tests/tools/python/jobs/rpc_failure_job.py")
    port = conftest.free_port()
    procs = []
    for rank in (0, 1):
        env = dict(os.environ, FERRY_RPC_BACKEND=backend, RANK=str(rank),
                   WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port))
        procs.append(subprocess.Popen(
            [sys.executable, job], env=env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT))
    try:
        out = procs[0].communicate(timeout=180)[0].decode(errors="replace")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
    assert procs[0].returncode == 0, out
    found = {}
    for line in out.splitlines():
        if line.startswith("FAILED "):
            what, seconds, cls, message = line.split(" ", 4)[1:]
            found[what] = (float(seconds), cls, message)
    assert set(found) == {"call", "to_here"}, out
    if backend == "ferry":
        assert "RELEASED True" in out, out
        print([line for line in out.splitlines()
               if line.startswith("RELEASED")][0])
    return found


def test_a_killed_callee_and_a_dead_owner_fail_naming_the_worker():
    # And on ferry.rpc, the dead worker's copy of an RRef is released.
    ferry_failures = _failures("ferry")
    tensorpipe = _failures("tensorpipe")
    for what in ("call", "to_here"):
        seconds, cls, message = ferry_failures[what]
        # UNAVAILABLE, not the 20 s timeout: the death was seen.
        assert cls == "UnavailableError", ferry_failures[what]
        assert "worker1" in message, message
        print(f"{what}: ferry {seconds:.2f} s {cls}: {message}\n"
              f"{what}: TensorPipe {tensorpipe[what][0]:.2f} s "
              f"{tensorpipe[what][1]}: {tensorpipe[what][2]}")
