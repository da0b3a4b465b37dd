"""Shared fixtures of the Python tests: where things are, and jobs of
Python workers started with ferry.launch."""
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))


def _binary(name):
    """A ferry binary: from the test's runfiles, else bazel-bin."""
    for path in (os.path.join(ROOT, "tools", name),
                 os.path.join(ROOT, "bazel-bin", "tools", name)):
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    pytest.skip(f"{name} is not built")


@pytest.fixture
def ferryd():
    return _binary("ferryd")


@pytest.fixture
def ferryctl():
    return _binary("ferryctl")


def script(*parts):
    return os.path.join(ROOT, *parts)


def launch(path, nproc, *args, timeout=150):
    """Runs `path` as `nproc` Python workers; fails the test with their
    output unless every one exits 0."""
    cmd = [sys.executable, "-m", "ferry.launch", "-n", str(nproc),
           "--timeout", str(timeout), path, *args]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=timeout + 30)
    out = r.stdout.decode(errors="replace")
    assert r.returncode == 0, f"{os.path.basename(path)} failed:\n{out}"
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def etcd(tmp_path):
    """A single-member etcd on 127.0.0.1: its client endpoint."""
    binary = os.environ.get("FERRY_ETCD", "/usr/bin/etcd")
    if not os.access(binary, os.X_OK):
        pytest.skip(f"etcd is not installed ({binary})")
    client, peer = free_port(), free_port()
    endpoint = f"127.0.0.1:{client}"
    proc = subprocess.Popen(
        [binary, "--name=e0", f"--data-dir={tmp_path}/etcd",
         f"--listen-client-urls=http://{endpoint}",
         f"--advertise-client-urls=http://{endpoint}",
         f"--listen-peer-urls=http://127.0.0.1:{peer}",
         f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
         f"--initial-cluster=e0=http://127.0.0.1:{peer}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:  # Until it answers.
            try:
                socket.create_connection(("127.0.0.1", client), 1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "etcd did not start"
                assert proc.poll() is None, "etcd exited"
                time.sleep(0.05)
        yield endpoint
    finally:
        proc.kill()
        proc.wait()


def run_ranks(args, world, timeout=240, env=None, killed=()):
    """Runs `args` (a command) as `world` ranks (RANK, WORLD_SIZE set, and
    `env`); returns their outputs, failing the test unless each exits 0,
    or by SIGKILL for the ranks in `killed`."""
    procs = []
    for rank in range(world):
        e = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world),
                 **(env or {}))
        procs.append(subprocess.Popen(args, env=e, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT))
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=timeout)[0].decode(
                errors="replace"))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for rank, (p, out) in enumerate(zip(procs, outs)):
        expected = -signal.SIGKILL if rank in killed else 0
        assert p.returncode == expected, f"rank {rank} failed:\n{out}"
    return outs
