"""A rank killed (SIGKILL) during a DDP step, as torch users see it: on
"ferry" every survivor raises, within the group's timeout, a RuntimeError
naming the dead rank and the op; the same job on "gloo" side by side, to
show the difference (gloo's survivors are stopped by this test once they
passed the timeout without raising). jobs/ddp_kill_job.py is the job."""
import os
import re
import socket
import subprocess
import sys
import threading
import time

import conftest

JOB = conftest.script("tests/tools/python/jobs/ddp_kill_job.py")
WORLD = 3
TIMEOUT = 20.0  # The group's timeout, seconds.
# What a survivor may take beyond it (ferry asks the others whether they
# joined, briefly; torch's bookkeeping; a loaded machine).
GRACE = 10.0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_job(backend):
    """The job on `backend`: each rank's output. A survivor that raised
    holds its process until its stdin closes; it is closed once every rank
    printed its last line or ended, or at the latest after the timeout and
    grace (a survivor still running then is stopped here)."""
    env = dict(os.environ, MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(free_port()), WORLD_SIZE=str(WORLD))
    procs = [subprocess.Popen([sys.executable, JOB, backend, str(TIMEOUT)],
                              env=dict(env, RANK=str(r)),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT)
             for r in range(WORLD)]
    outs = [[] for _ in procs]
    settled = [threading.Event() for _ in procs]

    def read(r):
        for line in procs[r].stdout:
            text = line.decode(errors="replace")
            outs[r].append(text)
            if text.startswith(("raised after", "finished")):
                settled[r].set()
        settled[r].set()  # Ended.

    readers = [threading.Thread(target=read, args=(r,), daemon=True)
               for r in range(WORLD)]
    for t in readers:
        t.start()
    deadline = time.monotonic() + 120 + TIMEOUT + GRACE
    for e in settled:
        e.wait(max(0.0, deadline - time.monotonic()))
    for r, p in enumerate(procs):
        if not settled[r].is_set():
            p.kill()
            outs[r].append("\n(stopped by the test)")
        p.stdin.close()
    for p, t in zip(procs, readers):
        p.wait(timeout=60)
        t.join(timeout=60)
    return procs, ["".join(o) for o in outs]


def survivors_raised(outs):
    """{rank: (seconds, message)} of the survivors that raised."""
    raised = {}
    for r, out in enumerate(outs[:-1]):
        m = re.search(r"raised after ([0-9.]+) s: (.*)", out)
        if m:
            raised[r] = (float(m.group(1)), m.group(2))
    return raised


def test_killed_rank_on_ferry_raises_everywhere_naming_it():
    procs, outs = run_job("ferry")
    assert "killing myself mid-step" in outs[-1], outs[-1]
    raised = survivors_raised(outs)
    assert sorted(raised) == list(range(WORLD - 1)), "\n---\n".join(outs)
    for r, (seconds, message) in raised.items():
        assert seconds <= TIMEOUT + GRACE, (r, seconds, message)
        assert f"worker{WORLD - 1}" in message, message  # The dead rank.
        assert "allreduce" in message, message             # The op.
        # Named from the dead process's host refusing connections, not
        # after the heartbeat timeout.
        assert "its process is gone" in message, message
        print(f"ferry rank {r}: raised after {seconds:.1f} s: {message}")


def test_the_same_job_on_gloo_for_comparison():
    # Recorded, not required: gloo's survivors may raise (a connection
    # reset) or wait until their timeout, and its message names no rank.
    procs, outs = run_job("gloo")
    raised = survivors_raised(outs)
    for r in range(WORLD - 1):
        if r in raised:
            seconds, message = raised[r]
            print(f"gloo rank {r}: raised after {seconds:.1f} s: {message}")
        else:
            print(f"gloo rank {r}: did not raise: {outs[r][-300:]!r}")
    assert "killing myself mid-step" in outs[-1], outs[-1]
