"""A callee killed in the middle of a call, an RRef whose owner died, and
(ferry.rpc) an object whose only other holder died, as a
torch.distributed.rpc program meets them: run with
FERRY_RPC_BACKEND=ferry (ferry.rpc) or tensorpipe (torch's own), 2
workers, env:// (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE). worker0
prints one line per failure: "FAILED <what> <seconds> <class> <message>",
and on ferry.rpc "RELEASED <True|False> <seconds>"."""
import os
import signal
import time

import torch

if os.environ["FERRY_RPC_BACKEND"] == "ferry":
    import ferry.rpc as rpc
else:
    import torch.distributed.rpc as rpc

RANK = int(os.environ["RANK"])
TIMEOUT = 20.0  # The call's timeout: the failure must come before it.


_kept = []


class Held:
    """An object worker0 owns, whose RRef worker1 holds when it dies."""


def keep(rref):
    _kept.append(rref)


def killed_in(seconds):
    """Dies (SIGKILL) `seconds` into the call."""
    time.sleep(seconds)
    os.kill(os.getpid(), signal.SIGKILL)


def report(what, start, error):
    message = " ".join(str(error).split())[:300]
    print(f"FAILED {what} {time.monotonic() - start:.2f} "
          f"{type(error).__name__} {message}", flush=True)


def main():
    rpc.init_rpc(f"worker{RANK}", rank=RANK, world_size=2)
    if RANK == 1:
        rpc.shutdown()  # Killed by worker0's call before it returns.
        return
    owned = rpc.remote("worker1", torch.add, args=(torch.ones(2), 0))
    assert torch.equal(owned.to_here(), torch.ones(2))
    if os.environ["FERRY_RPC_BACKEND"] == "ferry":
        # worker1 holds the only other reference to an object owned here.
        rpc.rpc_sync("worker1", keep, args=(rpc.RRef(Held()),))
    start = time.monotonic()
    fut = rpc.rpc_async("worker1", killed_in, args=(0.5,), timeout=TIMEOUT)
    try:
        fut.wait()
        print("NOT FAILED call", flush=True)
    except Exception as e:  # noqa: B902 -- reported
        report("call", start, e)
    start = time.monotonic()
    try:
        owned.to_here(timeout=TIMEOUT)
        print("NOT FAILED to_here", flush=True)
    except Exception as e:  # noqa: B902 -- reported
        report("to_here", start, e)
    if os.environ["FERRY_RPC_BACKEND"] == "ferry":
        # The dead user's copy is released: the object is freed.
        import gc
        start = time.monotonic()
        while rpc._objects.live() > 0 and time.monotonic() - start < 90:
            gc.collect()
            time.sleep(0.1)
        print(f"RELEASED {rpc._objects.live() == 0} "
              f"{time.monotonic() - start:.1f}", flush=True)
    os._exit(0)  # Its peer is dead: no shutdown to agree on.


if __name__ == "__main__":
    main()
