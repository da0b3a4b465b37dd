"""One rank of the failure matrix (torch_failure_matrix_test.py): 3 ranks
on BACKEND ("ferry" or "gloo", torch 2.x) with enable_reconfigure; after
a first all_reduce, rank 2 fails as CASE says while ranks 0 and 1 start a
second one:

  killed        rank 2 SIGKILLs itself
  stopped       rank 2 SIGSTOPs itself (the test continues and kills it)
  never_joins   rank 2 does not call the all_reduce (it waits for the
                survivors to finish, then leaves)
  partitioned   each rank on a host of its own (network namespaces, the
                test's); rank 2 writes STORE_FILE.ready and the test cuts
                its host's link, then writes STORE_FILE.cut, after which
                the survivors start; rank 2 lives on, cut off

Each survivor prints one JSON line: what it raised (type, message, whether
the message names rank 2), get_error(), the seconds until it raised, and
whether the job could go on without restarting: both survivors
reconfigure to the two of them and all_reduce.

Usage: failure_matrix_job.py BACKEND CASE STORE_FILE TIMEOUT_S (RANK,
WORLD_SIZE=3 in the environment; across hosts, FERRY_HOST and TLS_DIR,
where ca.pem, cert.pem and key.pem serve every host's address: ferry
serves no plaintext off the loopback)."""
import datetime
import json
import os
import re
import signal
import sys
import time

import torch
import torch.distributed as dist

import ferry.distributed  # noqa: F401 -- registers "ferry"

RANK = int(os.environ["RANK"])
WORLD = int(os.environ["WORLD_SIZE"])
VICTIM = 2


def names_victim(text):
    """Whether an error message names rank 2 (by rank or ferry worker)."""
    return bool(re.search(r"\brank 2\b|worker2\b", text))


def main():
    backend_name, case, store_file, timeout_s = sys.argv[1:5]
    timeout = datetime.timedelta(seconds=float(timeout_s))
    tls = os.environ.get("TLS_DIR")
    if tls:
        ferry.distributed.configure(
            tls_cert=os.path.join(tls, "cert.pem"),
            tls_key=os.path.join(tls, "key.pem"),
            tls_ca=os.path.join(tls, "ca.pem"))
    store = dist.FileStore(store_file, WORLD)
    dist.init_process_group(backend_name, rank=RANK, world_size=WORLD,
                            store=store, timeout=timeout,
                            enable_reconfigure=True)
    store.set(f"handle/{RANK}", dist._get_reconfigure_handle())
    handles = [store.get(f"handle/{r}").decode() for r in range(WORLD)]
    dist._reconfigure(1, handles, timeout=timeout).wait()
    # (gloo's handle changes once configured: torch's own tests take them
    # again.)
    store.set(f"configured/{RANK}", dist._get_reconfigure_handle())
    handles = [store.get(f"configured/{r}").decode() for r in range(WORLD)]
    backend = dist.get_backend_impl(dist.group.WORLD, torch.device("cpu"))
    dist.all_reduce(torch.ones(4))
    store.set(f"warm/{RANK}", "1")
    for r in range(WORLD):
        store.get(f"warm/{r}")
    if RANK == VICTIM:
        if case == "killed":
            os.kill(os.getpid(), signal.SIGKILL)
        if case == "stopped":
            os.kill(os.getpid(), signal.SIGSTOP)
        if case == "partitioned":
            open(store_file + ".ready", "w").close()
        # (The store is a file: a cut-off rank still reads it.)
        store.wait(["done/0", "done/1"], datetime.timedelta(seconds=300))
        return  # never_joins: leaves once the survivors finished.
    if case == "partitioned":  # Once the test cut rank 2 off.
        deadline = time.monotonic() + 120
        while not os.path.exists(store_file + ".cut"):
            assert time.monotonic() < deadline, "the test never cut rank 2"
            time.sleep(0.02)
    row = {"backend": backend_name, "case": case, "rank": RANK}
    start = time.monotonic()
    try:
        dist.all_reduce(torch.ones(4))
        row.update(raised=None)
    except Exception as e:  # noqa: B902 -- what torch users catch
        text = str(e).split("\n")[0]
        row.update(raised=type(e).__name__, message=text[:300],
                   names_rank=names_victim(str(e)))
    row["seconds"] = round(time.monotonic() - start, 2)
    row["get_error"] = backend.get_error().name
    # Going on: the survivors reconfigure to the two of them.
    try:
        dist._reconfigure(2, handles[:VICTIM], timeout=timeout).wait()
        t = torch.full((4,), float(RANK + 1))
        dist.all_reduce(t)
        row["went_on"] = bool(t[0].item() == 3.0)
    except Exception as e:  # noqa: B902
        row["went_on"] = False
        row["went_on_error"] = str(e).split("\n")[0][:600]
    print(json.dumps(row), flush=True)
    store.set(f"done/{RANK}", "1")
    # Neither survivor leaves before the other's second all_reduce is done:
    # rank 0 is ferry's master, and its exit ends the job, failing an op
    # rank 1 had not finished yet (naming worker0 dead), and rank 1's exit
    # fails rank 0's -- a test race that failed 2 runs in 5 beside other
    # tests.
    store.wait(["done/0", "done/1"], datetime.timedelta(seconds=300))
    os._exit(0)  # Not destroy_process_group: a peer is dead or stopped.


if __name__ == "__main__":
    main()
