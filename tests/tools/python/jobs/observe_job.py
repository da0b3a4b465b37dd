"""observe_test.py's jobs of three Python workers, by argv[1]:

  mismatch  rank 2 runs all_gather where the others run all_reduce (the
            group's op 1): every rank's op fails naming both; the workers
            write flight recorder dumps into FERRY_DUMP_DIR.
  stuck     rank 2 sleeps in a registered function (stall) while ranks 0
            and 1 wait for it in an all_reduce; runs until killed.
  trace     relay0 on worker0 calls relay1 on worker1, which calls leaf on
            worker2; serves until the job is shut down.

argv[2]: a file where rank 1 writes the master's address once joined.
"""
import os
import sys
import time

import numpy as np

import ferry

mode, address_file = sys.argv[1], sys.argv[2]


@ferry.register("stall")
def stall(seconds):
    time.sleep(seconds)  # The frame `ferryctl stacks worker2` shows.


@ferry.register("relay0")
def relay0():
    return ferry.rpc_sync("worker1", "relay1", args=())


@ferry.register("relay1")
def relay1():
    return ferry.rpc_sync("worker2", "leaf", args=())


@ferry.register("leaf")
def leaf():
    return 42


ferry.init(timeout=300 if mode == "stuck" else 30)
rank = ferry.rank()
if rank == 1:
    tmp = f"{address_file}.tmp"
    with open(tmp, "w") as f:
        f.write(f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}")
    os.replace(tmp, address_file)

if mode == "mismatch":
    ferry.barrier()  # The group's op 0.
    x = np.ones(2, np.float32)
    try:
        if rank == 2:
            ferry.all_gather([], x)
        else:
            ferry.all_reduce(x)
    except ferry.Error as e:
        print(f"rank {rank}: {e.code}: {e}", flush=True)
        assert e.code == "INVALID_ARGUMENT", e
        assert "rank 2 (worker2)" in str(e), e
    else:
        sys.exit(f"rank {rank}: the mismatched op did not fail")
    ferry.barrier()  # The group works for the next op.
    ferry.shutdown()
elif mode == "stuck":
    ferry.barrier()
    if rank == 2:
        ferry.rpc_sync("worker2", "stall", args=(600,), timeout=0)
    else:
        ferry.all_reduce(np.ones(2, np.float32))
elif mode == "trace":
    ferry.serve()
