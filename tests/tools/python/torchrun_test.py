"""torchrun on etcd v3 through ferry (ferry/torchrun.py): real torchrun
processes (on torch 2.x, the peers environment, its ``torchrun`` finding
``--rdzv-backend=ferry-etcd`` through the package's entry point; on torch
1.13, ``python3 -m ferry.torchrun``), a real single-member etcd, and every process of the job forbidden to make a
TCPStore (a sitecustomize.py makes constructing one raise). The node whose
worker is rank 0 is killed and the job restarts on the survivor; a node
joins a running job and both go on. Waits are bounded; nothing asserts on
time."""
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
import torch
from conftest import script

JOB = script("tests", "tools", "python", "jobs", "torchrun_job.py")
if torch.__version__ >= "2":
    TORCHRUN = [os.path.join(os.path.dirname(sys.executable), "torchrun")]
else:
    # torch 1.13's torchrun knows no entry points; on Python 3.11 its
    # default --redirects/--tee fail to parse (README, "torch.distributed").
    TORCHRUN = [sys.executable, "-m", "ferry.torchrun", "--redirects=2",
                "--tee=2"]

# Imported first by every Python process of the job (agents and workers):
# from then on, making a TCPStore raises.
NO_TCPSTORE = '''
import sys
try:
    import torch.distributed as _d
except Exception:
    pass
else:
    _made = _d.TCPStore
    class _Forbidden:
        def __init__(self, *args, **kwargs):
            raise RuntimeError("a TCPStore was made (forbidden by the test)")
    for _m in list(sys.modules.values()):
        if getattr(_m, "TCPStore", None) is _made:
            setattr(_m, "TCPStore", _Forbidden)
'''


class Node:
    """One torchrun (an elastic agent and its worker), its output read as
    it comes."""

    def __init__(self, name, etcd, run_id, tmp_path, **env):
        hooks = tmp_path / "hooks"
        hooks.mkdir(exist_ok=True)
        (hooks / "sitecustomize.py").write_text(NO_TCPSTORE)
        e = dict(os.environ, NODE=name, **env)
        e["PYTHONPATH"] = f"{hooks}:{e.get('PYTHONPATH', '')}"
        self.name = name
        self.proc = subprocess.Popen(
            TORCHRUN + [
                "--nnodes=1:2", "--nproc_per_node=1", "--max_restarts=2",
                "--monitor_interval=0.5", "--rdzv_backend=ferry-etcd",
                f"--rdzv_id={run_id}", f"--rdzv_endpoint=etcd://{etcd}",
                "--rdzv_conf=last_call_timeout=2,keep_alive_interval=1,"
                "keep_alive_max_attempt=3,join_timeout=120", JOB],
            env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.lines = []
        self.changed = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for raw in self.proc.stdout:
            with self.changed:
                self.lines.append(raw.decode(errors="replace"))
                self.changed.notify_all()

    def output(self):
        with self.changed:
            return "".join(self.lines)

    def wait_for(self, text, seconds=180):
        deadline = time.monotonic() + seconds
        with self.changed:
            while not any(text in line for line in self.lines):
                left = deadline - time.monotonic()
                assert left > 0 and self.proc.poll() is None, (
                    f"node {self.name} never printed {text!r}:\n"
                    + "".join(self.lines))
                self.changed.wait(min(left, 1.0))

    def finish(self, seconds=240):
        try:
            self.proc.wait(timeout=seconds)
        finally:
            self.kill()
        self.reader.join(timeout=30)
        return self.proc.returncode, self.output()

    def kill(self):
        """SIGKILLs the agent and its worker (torch starts each worker in
        a session of its own, so a process group would miss it)."""
        workers = children(self.proc.pid)
        if self.proc.poll() is None:
            self.proc.kill()
        for pid in workers:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()


def children(pid):
    kids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # "PID (COMM) STATE PPID ...": COMM may hold spaces and parentheses.
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            kids.append(int(entry))
    return kids


@pytest.fixture
def nodes():
    started = []
    yield started
    for n in started:
        n.kill()


def test_killing_rank_0s_node_restarts_the_job_on_the_survivor(
        tmp_path, etcd, nodes):
    if not os.access(TORCHRUN[0], os.X_OK):
        pytest.skip(f"no {TORCHRUN[0]}")
    env = {"FINISH_AT_WORLD": "1", "FINISH_AFTER_RESTART": "1"}
    a = Node("A", etcd, "kill", tmp_path, **env)
    b = Node("B", etcd, "kill", tmp_path, **env)
    nodes.extend([a, b])
    # Both train in one world of 2 (perhaps after a first round of one).
    for n in (a, b):
        n.wait_for(" of 2: step 2")
    victim, survivor = (a, b) if "node A: rank 0 of 2" in a.output() else (b, a)
    assert f"node {victim.name}: rank 0 of 2" in victim.output(), (
        a.output(), b.output())
    victim.kill()
    code, out = survivor.finish()
    assert code == 0, out
    # The survivor's worker failed, its agent restarted it, and the
    # rendezvous (in etcd, rank 0's node gone) gave it a world of one.
    assert f"node {survivor.name}: rank 0 of 1, restart 1" in out, out
    assert f"node {survivor.name}: done in a world of 1" in out, out
    assert "TCPStore was made" not in out + victim.output()


def test_a_node_that_joins_a_running_job_is_taken_in(tmp_path, etcd, nodes):
    if not os.access(TORCHRUN[0], os.X_OK):
        pytest.skip(f"no {TORCHRUN[0]}")
    env = {"FINISH_AT_WORLD": "2", "FINISH_AFTER_RESTART": "0"}
    a = Node("A", etcd, "join", tmp_path, **env)
    nodes.append(a)
    a.wait_for("node A: rank 0 of 1: step 2")
    b = Node("B", etcd, "join", tmp_path, **env)
    nodes.append(b)
    (code_a, out_a), (code_b, out_b) = a.finish(), b.finish()
    assert code_a == 0, out_a
    assert code_b == 0, out_b
    # A's agent saw B waiting and restarted its worker in a world of two
    # (a change of membership, not a failure: no restart counted).
    assert "node A: done in a world of 2" in out_a, out_a
    assert "node B: done in a world of 2" in out_b, out_b
    assert "restart 0" in out_b, out_b
    assert "TCPStore was made" not in out_a + out_b
