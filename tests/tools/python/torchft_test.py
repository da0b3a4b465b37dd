"""ferry inside torchft (ferry/torchft.py): two replicas train under
torchft's Manager and a real lighthouse, on ferry's ProcessGroupFerry and
on torchft's ProcessGroupGloo; one replica SIGKILLs itself inside a step,
after the quorum counted it. The survivor's all_reduce fails (on ferry
naming the dead replica's worker), the manager leaves that step
uncommitted, the next quorum goes on without the dead replica, and the
survivor finishes — with, on ferry, the very weights it ends with on
gloo."""
import os
import re
import signal
import subprocess
import sys

import pytest
from conftest import script

torchft = pytest.importorskip("torchft")
from torchft._torchft import LighthouseServer  # noqa: E402

JOB = script("tests", "tools", "python", "jobs", "torchft_job.py")
STEPS, DIE_AT = 16, 6


def run(backend, tmp_path):
    """Both replicas of one job; the survivor's output."""
    lighthouse = LighthouseServer(bind="[::]:0", min_replicas=1,
                                  join_timeout_ms=10000,
                                  heartbeat_timeout_ms=2000)
    ready = tmp_path / f"ready-{backend}"
    ready.mkdir()
    args = [backend, "2", str(ready), lighthouse.address(), str(STEPS)]
    try:
        survivor = subprocess.Popen(
            [sys.executable, JOB, args[0], "0", *args[1:]],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        victim = subprocess.Popen(
            [sys.executable, JOB, args[0], "1", *args[1:], str(DIE_AT)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            out = survivor.communicate(timeout=240)[0].decode(errors="replace")
            dead = victim.communicate(timeout=60)[0].decode(errors="replace")
        finally:
            for p in (survivor, victim):
                if p.poll() is None:
                    p.kill()
                    p.wait()
    finally:
        lighthouse.shutdown()
    assert victim.returncode == -signal.SIGKILL, dead
    assert f"killing myself in step {DIE_AT}" in dead, dead
    assert survivor.returncode == 0, out
    return out


def steps(out):
    """[(step, participants, committed)] as the survivor printed them."""
    return [(int(s), int(n), c == "True") for s, n, c in re.findall(
        r"replica 0: step (\d+) participants (\d+) loss \S+ committed (\w+)",
        out)]


def test_a_replica_dies_and_the_survivor_goes_on_as_on_gloo(tmp_path):
    outs = {backend: run(backend, tmp_path) for backend in ("ferry", "gloo")}
    for backend, out in outs.items():
        s = steps(out)
        # Two replicas until the death; the step it died in not committed,
        # then run again by the survivor alone, to the end.
        assert s[:DIE_AT] == [(k, 2, True) for k in range(DIE_AT)], (
            backend, out)
        assert (DIE_AT, 2, False) in s, (backend, out)
        assert s[-1] == (STEPS - 1, 1, True), (backend, out)
        assert f"done at step {STEPS}, 1 steps not committed" in out, (
            backend, out)
    # ferry names the dead replica's worker, and how it knew.
    assert re.search(r"all_reduce op \d+: rank 1 \(worker1\) died",
                     outs["ferry"]), outs["ferry"]

    def weights(out):
        return re.search(r"weights (\[.*\])", out).group(1)
    assert weights(outs["ferry"]) == weights(outs["gloo"]), outs
