"""ferry as torch's store and rendezvous (ferry/store.py): torch's own gloo
groups rendezvous on a ferry job's master (ferry://) and on etcd
(etcd://, a real single-member etcd started here), and ferry.init
rendezvous on etcd."""
import json
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest

import conftest

GLOO_JOB = """
import sys, torch, torch.distributed as dist
import ferry.store
rank, world = int(sys.argv[2]), int(sys.argv[3])
dist.init_process_group("gloo", init_method=sys.argv[1], rank=rank,
                        world_size=world)
t = torch.full((2,), float(rank + 1))
dist.all_reduce(t)
assert t.tolist() == [sum(range(1, world + 1))] * 2, t
dist.barrier()
print("gloo on", sys.argv[1].split(":")[0], "passed", flush=True)
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def gloo_job(tmp_path, url, world=2):
    script = tmp_path / "gloo_job.py"
    script.write_text(GLOO_JOB)
    procs = [subprocess.Popen([sys.executable, str(script), url, str(r),
                               str(world)], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT)
             for r in range(world)]
    for p in procs:
        out = p.communicate(timeout=180)[0].decode(errors="replace")
        assert p.returncode == 0 and "passed" in out, out


def test_gloo_rendezvous_on_a_ferry_job(tmp_path, ferryctl, ferryd,
                                        monkeypatch):
    # A job started as users start one: ferryctl up (it records the job's
    # token under $XDG_STATE_HOME, where the store finds it by the master's
    # address; the test's own, since a test has no home).
    (tmp_path / "state").mkdir()
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    env = dict(os.environ, FERRYD=ferryd)
    up = subprocess.run([ferryctl, "up", "--world_size=1", "--port=0",
                         f"--dir={tmp_path}/job"], env=env, check=True,
                        stdout=subprocess.PIPE, timeout=120)
    master = json.loads(up.stdout)["master"]
    try:
        gloo_job(tmp_path, f"ferry://{master}/job1")
    finally:
        subprocess.run([ferryctl, f"--master={master}", "down"], env=env,
                       timeout=60)


def test_gloo_rendezvous_on_etcd(tmp_path, etcd):
    gloo_job(tmp_path, f"etcd://{etcd}/torchjob")


def test_the_store_api_on_etcd(etcd):
    import datetime
    import ferry.store
    store = ferry.store.FerryStore(f"etcd://{etcd}/api",
                                   datetime.timedelta(seconds=5))
    store.set("a", "1")
    assert store.get("a") == b"1"
    assert store.add("n", 5) == 5 and store.add("n", -2) == 3
    assert store.compare_set("c", "", "x") == b"x"
    assert store.compare_set("c", "y", "z") == b"x"
    assert store.check(["a", "n"]) and not store.check(["missing"])
    assert store.delete_key("a") and not store.check(["a"])
    with pytest.raises(TimeoutError, match="missing"):
        store.wait(["missing"], datetime.timedelta(seconds=0.5))


ETCD_WORKER = """
import sys, ferry, numpy as np
url, rank = sys.argv[1], int(sys.argv[2])
ferry.init(rank=rank, world_size=2, rendezvous=url, timeout=60)
assert ferry.rpc_sync(f"worker{1 - rank}", "worker_name") == f"worker{1 - rank}"
t = np.full(3, rank + 1.0)
ferry.all_reduce(t)
assert t.tolist() == [3.0] * 3
ferry.barrier()
print("etcd worker passed", flush=True)
ferry.shutdown()
"""


def test_ferry_init_rendezvous_on_etcd(tmp_path, etcd):
    script = tmp_path / "etcd_worker.py"
    script.write_text(ETCD_WORKER)
    procs = [subprocess.Popen([sys.executable, str(script),
                               f"etcd://{etcd}/pyjob", str(r)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
             for r in range(2)]
    for p in procs:
        out = p.communicate(timeout=180)[0].decode(errors="replace")
        assert p.returncode == 0 and "etcd worker passed" in out, out
