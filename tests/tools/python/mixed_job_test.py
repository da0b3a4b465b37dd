"""A job of a Python worker (rank 0) and two ferryd daemons, driven by
ferryctl and by a Python client: ferryctl reaches Python functions, a C++
worker fetches an RRef the Python worker owns."""
import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import conftest
import ferry


def ctl(ferryctl, master, *args, stdin=None):
    r = subprocess.run([ferryctl, f"--master={master}", *args], input=stdin,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=90)
    assert r.returncode == 0, f"ferryctl {args}: {r.stderr}"
    return json.loads(r.stdout) if r.stdout.strip() else None


def wait_for(path, proc, seconds=60):
    deadline = time.monotonic() + seconds
    while not os.path.exists(path):
        assert proc.poll() is None, "the Python worker exited early"
        assert time.monotonic() < deadline, f"no {path}"
        time.sleep(0.02)
    return open(path).read().strip()


@pytest.fixture
def job(tmp_path, ferryd):
    address_file = str(tmp_path / "address")
    env = dict(os.environ, RANK="0", WORLD_SIZE="3", MASTER_ADDR="127.0.0.1",
               MASTER_PORT="0", FERRY_ADDRESS_FILE=address_file)
    log = open(tmp_path / "python_worker.log", "w+")
    python_worker = subprocess.Popen(
        [sys.executable,
         conftest.script("tests/tools/python/jobs/mixed_worker.py")],
        env=env, stdout=log, stderr=subprocess.STDOUT)
    master = wait_for(address_file, python_worker)
    daemons = [subprocess.Popen(
        [ferryd, f"--master={master}", f"--rank={r}", "--world_size=3"],
        stderr=subprocess.DEVNULL) for r in (1, 2)]
    yield master, python_worker, log
    for p in [python_worker] + daemons:
        if p.poll() is None:
            p.kill()
        p.wait()


def test_python_and_ferryd_workers_in_one_job(job, ferryctl):
    master, python_worker, log = job
    # ferryctl reaches the Python worker's functions.
    assert ctl(ferryctl, master, "call", "worker0", "py_greet",
               '["ctl"]') == "hello ctl from worker0"
    scaled = ctl(ferryctl, master, "call", "worker0", "py_scale",
                 '[{"dtype":"float32","data":[1,2]}, 3]')
    assert scaled == {"dtype": "float32", "data": [3, 6]}
    listed = ctl(ferryctl, master, "functions", "worker0")
    assert "py_scale(t: value, k: value) -> value" in json.dumps(listed)
    # A ferryd worker fetches an RRef owned by the Python worker.
    ctl(ferryctl, master, "run", "-", stdin="""
R = remote worker0 py_scale [{"dtype":"int64","data":[1,2]}, 5]
X = call worker1 to_here [$R]
expect $X {"dtype":"int64","data":[5,10]}
""")
    # A Python client calls both kinds of worker.
    client = ferry.connect(master)
    assert client.rpc_sync("worker0", "py_greet", args=("client",)) == (
        "hello client from worker0")
    r = client.rpc_sync("worker2", "add", args=(np.ones(2), 1))
    np.testing.assert_array_equal(r, [2, 2])
    rref = client.remote("worker0", "py_scale", args=(np.arange(3), 2))
    np.testing.assert_array_equal(rref.to_here(), [0, 2, 4])
    assert client.workers() == ["worker0", "worker1", "worker2"]
    assert client.status("worker0")["name"] == "worker0"
    # ferryctl down stops every worker, the Python one included.
    ctl(ferryctl, master, "down")
    assert python_worker.wait(60) == 0
    log.seek(0)
    assert "python worker: stopped" in log.read()
    # Calls to workers that are gone fail at once, by code.
    with pytest.raises(ConnectionError) as e:
        client.rpc_sync("worker0", "echo", args=(1,))
    assert e.value.code == "UNAVAILABLE" and "worker0" in str(e.value)
    client.close()
