"""Elastic training: survivors go on when a rank dies, and the group grows
back when a replacement joins -- nobody restarts.

N workers fit a linear model by data-parallel SGD (each computes the
gradient on its own shard; an all_reduce averages them). Every few steps
they commit their state (all ranks hold the same weights). When a rank
dies, the step's all_reduce fails on every survivor (UNAVAILABLE naming
it); they revoke the group (so every member stops at once), shrink it to
the living, roll back to the last committed step and go on. A process
started again for the dead rank (``--rejoin``, as a supervisor's restart)
joins the job; the survivors hear of it (``ferry.on_membership_change``),
agree to grow, and everyone gets the whole world back, the newcomer the
survivors' state. The loss curve goes on from the committed step.

    # 4 workers; rank 2 dies at step 15 (fault injection, for the demo)
    tools/dev python -m ferry.launch -n 4 tools/python/examples/elastic_training.py \\
        --kill-rank=2 --kill-at=15
    # then, for the dead rank (same environment, RANK=2):
    RANK=2 ... python3 elastic_training.py --rejoin

Each rank prints "step S loss L width W" lines, and "shrank ..." or
"grew ..." when the group changes; at the end "done at step S loss L".
"""
from __future__ import annotations

import argparse
import os
import signal
import threading
import time

import numpy as np

import ferry

FEATURES = 8
SHARD = 64  # Samples per rank per step.
LR = 0.1


def batch(rank: int, step: int) -> tuple[np.ndarray, np.ndarray]:
    """Rank `rank`'s samples at `step`: the same on any incarnation."""
    rng = np.random.default_rng(1000 * step + rank)
    x = rng.standard_normal((SHARD, FEATURES)).astype(np.float32)
    truth = np.arange(1, FEATURES + 1, dtype=np.float32)
    return x, x @ truth


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--commit-every", type=int, default=5)
    p.add_argument("--kill-rank", type=int, action="append", default=[])
    p.add_argument("--kill-at", type=int, default=-1)
    p.add_argument("--rejoin", action="store_true",
                   help="this process replaces a dead rank")
    p.add_argument("--expect-rejoins", type=int, default=0,
                   help="replacements to wait for before finishing")
    p.add_argument("--step-delay", type=float, default=0.0,
                   help="seconds to pause after each step (demos, tests)")
    args = p.parse_args()

    # env:// (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), or etcd with
    # FERRY_RENDEZVOUS=etcd://HOST:PORT/JOB (then RANK, WORLD_SIZE too).
    rendezvous = os.environ.get("FERRY_RENDEZVOUS")
    ferry.init(rank=int(os.environ["RANK"]) if rendezvous else None,
               world_size=int(os.environ["WORLD_SIZE"]) if rendezvous
               else None,
               rendezvous=rendezvous,
               heartbeat_timeout=float(os.environ.get("HEARTBEAT_S", "30")))
    rank = ferry.get_rank()
    world = ferry.get_world_size()

    # A replacement joining is news for the survivors: they grow at the
    # next step every live member agrees on.
    joined = threading.Event()

    def on_change(e: dict) -> None:
        print(f"event {e['seq']}: {e['event']} {e['worker']}: {e['detail']}", flush=True)
        if e["event"] == "replaced":
            joined.set()

    ferry.on_membership_change(on_change)

    w = np.zeros(FEATURES, dtype=np.float32)
    step = 0
    if args.rejoin:
        group, step, w = grow(None, step, w, survivor=False)
    else:
        # The training group: the world's ranks, pinned to these processes
        # (a shrunk group's ops fail at once once a member is replaced,
        # rather than wait for the newcomer, which is growing the world).
        group = ferry.shrink_group()
    committed = (step, w.copy())
    rejoins = 0

    while step < args.steps or rejoins < args.expect_rejoins:
        ok = True
        if step < args.steps:
            try:
                x, y = batch(rank, step)
                err = x @ w - y
                grad = (x.T @ err / SHARD).astype(np.float32)
                loss = np.array([float(np.mean(err ** 2))], dtype=np.float32)
                ferry.all_reduce(grad, group=group)
                ferry.all_reduce(loss, group=group)
            except (ferry.UnavailableError, ferry.AbortedError) as e:
                ok = False  # A member died during the step: told to all.
                print(f"step {step + 1} failed: {e}", flush=True)
        else:
            # Trained; the survivors wait for their replacement.
            joined.wait(timeout=1.0)
        # ULFM's pattern: whether the step worked everywhere is agreed, so
        # every survivor commits, or rolls back, alike.
        flag, members = ferry.agree(ok, group=group)
        if not flag or len(members) < ferry.get_world_size(group):
            group = ferry.shrink_group(group)
            step, w = committed[0], committed[1].copy()
            print(f"shrank to {ferry.get_world_size(group)} ranks "
                  f"{group.ranks}; back to step {step}", flush=True)
            continue
        if step < args.steps:
            width = ferry.get_world_size(group)
            w -= LR * grad / width
            step += 1
            print(f"step {step} loss {loss[0] / width:.4f} width {width}",
                  flush=True)
            time.sleep(args.step_delay)
            if step == args.kill_at and rank in args.kill_rank:
                print("killed", flush=True)
                os.kill(os.getpid(), signal.SIGKILL)
        if step % args.commit_every == 0 or step >= args.steps:
            committed = (step, w.copy())
            # Grow when any live member saw a replacement join.
            if not ferry.agree(not joined.is_set(), group=group)[0]:
                joined.clear()
                group, step, w = grow(group, step, w, survivor=True)
                committed = (step, w.copy())
                rejoins += 1
    x, y = batch(rank, step)
    print(f"done at step {step} loss {float(np.mean((x @ w - y) ** 2)):.4f}",
          flush=True)
    ferry.shutdown()


def grow(group: ferry.Group | None, step: int, w: np.ndarray,
         survivor: bool) -> tuple[ferry.Group, int, np.ndarray]:
    """The world back (ferry.grow_group), and the survivors' state on every
    rank: one all_reduce of (weights, step) from the survivors, which hold
    the same; the newcomer adds zeros."""
    world = ferry.grow_group(group)
    state = np.zeros(FEATURES + 2, dtype=np.float64)
    if survivor:
        state[:FEATURES] = w
        state[FEATURES] = step
        state[FEATURES + 1] = 1.0
    ferry.all_reduce(state, group=world)  # Sum.
    n = state[FEATURES + 1]
    w = (state[:FEATURES] / n).astype(np.float32)
    step = int(round(state[FEATURES] / n))
    print(f"grew to {ferry.get_world_size(world)} ranks at step {step}",
          flush=True)
    return ferry.shrink_group(world), step, w  # Pinned again, as at start.


if __name__ == "__main__":
    main()
