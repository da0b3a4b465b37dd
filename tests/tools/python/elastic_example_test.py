"""tools/python/examples/elastic_training.py as a real job, on both
membership backends: 4 Python workers train, one is killed (SIGKILL, by
itself at step KILL_AT), the survivors shrink and go on from their last
committed step, a replacement started for the dead rank joins, the group
grows back to 4 and every rank finishes the training -- no survivor
restarted. On the embedded master rank 2 dies; on etcd, worker0."""
import os
import re
import subprocess
import sys
import time

import conftest

EXAMPLE = conftest.script("tools/python/examples/elastic_training.py")
WORLD = 4
STEPS = 40
KILL_AT = 10
HEARTBEAT_S = 2.0
# On etcd, the lease TTL. With 2 s, in 1 of 4 runs (before shrunk groups
# were pinned to their incarnations; 0 of 9 since, 6 of them on
# 2026-11-27 with FERRY_TEST_ETCD_TTL_S=2) the survivors saw the
# replacement's rank key deleted moments after it joined ("replaced", then
# "died" for it) while it went on unfenced -- not understood (RELIABILITY.md,
# open findings); 5 s keeps this test off that edge. Set
# FERRY_TEST_ETCD_TTL_S to run it at another TTL by hand.
ETCD_HEARTBEAT_S = float(os.environ.get("FERRY_TEST_ETCD_TTL_S", "5.0"))
# Bound on the whole job (each step is short; detection and joins take
# heartbeats): generous for a loaded 2-core machine.
JOB_TIMEOUT = 150


def start(rank, env, *args):
    return subprocess.Popen(
        [sys.executable, EXAMPLE, f"--steps={STEPS}", "--step-delay=0.05",
         *args],
        env=dict(env, RANK=str(rank)), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)


def output(p, deadline):
    """`p`'s whole output, waiting until `deadline` (time.monotonic)."""
    return p.communicate(timeout=max(1, deadline - time.monotonic()))[0]


def stop_all(procs):
    for p in procs.values():
        if p.poll() is None:
            p.kill()
            p.communicate()


def run(env, victim, heartbeat_s=HEARTBEAT_S):
    """The job with `victim` killed and replaced: each process's output, by
    rank ("victim" the killed one's, `victim` its replacement's)."""
    env = dict(os.environ, WORLD_SIZE=str(WORLD), HEARTBEAT_S=str(heartbeat_s),
               **env)
    procs = {r: start(r, env, "--expect-rejoins=1", f"--kill-rank={victim}",
                      f"--kill-at={KILL_AT}")
             for r in range(WORLD)}
    deadline = time.monotonic() + JOB_TIMEOUT
    outs = {}
    try:
        # The victim kills itself; a supervisor would restart it: here,
        # once it is gone.
        outs["victim"] = output(procs[victim], deadline)
        assert procs[victim].returncode == -9, outs["victim"]
        procs[victim] = start(victim, env, "--rejoin")
        outs.update({r: output(p, deadline) for r, p in procs.items()})
    finally:
        stop_all(procs)
    failed = [r for r in range(WORLD) if procs[r].returncode != 0]
    assert not failed, "\n".join(f"--- rank {r} (exit {procs[r].returncode}):"
                                 f"\n{outs.get(r)}" for r in range(WORLD))
    return outs


def check(outs, victim):
    survivors = [r for r in range(WORLD) if r != victim]
    assert "killed" in outs["victim"]
    for r in survivors:
        out = outs[r]
        # Shrunk to the 3 living, back to the last commit (step 10 commits
        # before the kill).
        m = re.search(r"shrank to 3 ranks \[([0-9, ]+)\]; back to step (\d+)",
                      out)
        assert m, f"rank {r}:\n{out}"
        assert [int(x) for x in m.group(1).split(",")] == survivors
        assert int(m.group(2)) == KILL_AT, out
        assert "width 3" in out, out          # Trained on without it.
        assert "grew to 4 ranks" in out, out  # And grew back.
    # The replacement got the survivors' state and trained with them.
    assert "grew to 4 ranks" in outs[victim], outs[victim]
    finals = {}
    for r in range(WORLD):
        m = re.search(r"done at step (\d+) loss ([0-9.]+)", outs[r])
        assert m, f"rank {r}:\n{outs[r]}"
        assert int(m.group(1)) == STEPS
        finals[r] = float(m.group(2))
    # The loss curve went on down: the model learned across the changes.
    first = float(re.search(r"step 1 loss ([0-9.]+)", outs[survivors[0]])
                  .group(1))
    for r, loss in finals.items():
        assert loss < first / 10, (r, loss, first)


def test_elastic_training_on_the_embedded_master():
    port = conftest.free_port()
    outs = run({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)},
               victim=2)
    check(outs, victim=2)


def test_elastic_training_on_etcd_with_worker0_killed(etcd):
    outs = run({"FERRY_RENDEZVOUS": f"etcd://{etcd}/elastic"}, victim=0,
               heartbeat_s=ETCD_HEARTBEAT_S)
    check(outs, victim=0)


def test_two_of_five_killed_at_once_the_three_go_on():
    # No replacement: the three survivors shrink (once or twice, as the
    # deaths come to light) and finish the training alone.
    world, victims = 5, [1, 3]
    env = dict(os.environ, WORLD_SIZE=str(world), HEARTBEAT_S=str(HEARTBEAT_S),
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(conftest.free_port()))
    args = [f"--kill-rank={v}" for v in victims] + [f"--kill-at={KILL_AT}"]
    procs = {r: start(r, env, *args) for r in range(world)}
    deadline = time.monotonic() + JOB_TIMEOUT
    try:
        outs = {r: output(p, deadline) for r, p in procs.items()}
    finally:
        stop_all(procs)
    for v in victims:
        assert procs[v].returncode == -9 and "killed" in outs[v], outs[v]
    for r in (0, 2, 4):
        out = outs[r]
        assert procs[r].returncode == 0, f"rank {r}:\n{out}"
        shrinks = re.findall(r"shrank to (\d) ranks \[([0-9, ]+)\]", out)
        assert shrinks and shrinks[-1] == ("3", "0, 2, 4"), out
        assert "width 3" in out, out
        assert re.search(rf"done at step {STEPS} ", out), out
