"""elastic_test.py's job: elastic groups from Python (ferry.agree,
ferry.revoke_group, ferry.shrink_group) on 3 workers, all alive. Any failed
check exits non-zero.

A revoke reaches the other members asynchronously, and an op started on a
member that has not heard of it yet may still complete with the messages
of a member that has (ULFM's revoke is the same): the ranks signal each
other (signal/await_signal, over rpc) so that each op checked here starts
either before the revoke (pending: it must fail when it arrives) or after
this rank knew of it."""
import collections
import threading

import torch

import ferry

_signals = collections.defaultdict(lambda: threading.Semaphore(0))
_signals_lock = threading.Lock()


def _signal(name):
    with _signals_lock:
        sem = _signals[name]
    sem.release()


@ferry.register("elastic_signal")
def elastic_signal(name):
    _signal(name)


def signal(rank, name):
    ferry.rpc_sync(f"worker{rank}", "elastic_signal", args=(name,))


def await_signal(name, n=1):
    with _signals_lock:
        sem = _signals[name]
    for _ in range(n):
        check(f"signal {name}", sem.acquire(timeout=30))


ferry.init(timeout=30)
rank, world = ferry.rank(), ferry.world_size()
assert world == 3


def check(name, ok):
    if not ok:
        raise AssertionError(f"rank {rank}: {name}")


# agree: the AND of everyone's flags, and who took part (global ranks).
got = ferry.agree(rank != 1)
check("agree with one False", got == (False, [0, 1, 2]))
check("agree result types", isinstance(got[0], bool) and
      all(isinstance(r, int) for r in got[1]))
check("agree all True", ferry.agree(timeout=20) == (True, [0, 1, 2]))
# On a group: its members' global ranks, not group ranks.
pair = ferry.new_group([0, 2])
if rank == 1:
    try:
        ferry.agree(group=pair)
        check("agree on a non-member raises", False)
    except ferry.InvalidArgumentError as e:
        check("non-member named", "not a member" in str(e))
else:
    check("agree on a group", ferry.agree(True, pair) == (True, [0, 2]))

# A reason over 256 bytes is refused here, before anything is revoked.
try:
    ferry.revoke_group(reason="x" * 257)
    check("long reason raises", False)
except ValueError as e:
    check("long reason code", e.code == "INVALID_ARGUMENT")

# revoke_group: ranks 1 and 2 wait in a barrier rank 0 never joins; rank 0
# revokes the world once both wait; their barrier fails, ABORTED.
if rank == 0:
    await_signal("world pending", world - 1)
    check("revoke returns None",
          ferry.revoke_group(reason="rank 0 gives up") is None)
else:
    work = ferry.barrier(async_op=True)
    signal(0, "world pending")
    try:
        work.wait()
        check("pending barrier raises", False)
    except ferry.AbortedError as e:
        check("pending code", e.code == "ABORTED")
        check("pending message", "revoked" in str(e) and
              "worker0 (rank 0" in str(e) and "rank 0 gives up" in str(e))
    check("work failed", work.is_completed() and not work.is_success() and
          isinstance(work.exception(), ferry.AbortedError))

# Every later op of the world fails at once, the revoker's included.
for name, op in [("barrier", lambda: ferry.barrier(timeout=20)),
                 ("all_reduce", lambda: ferry.all_reduce(torch.ones(1)))]:
    try:
        op()
        check(f"later {name} raises", False)
    except ferry.AbortedError as e:
        check(f"later {name} message", "revoked" in str(e))

# agree still works on the revoked world; shrink_group makes the way on.
check("agree on a revoked group", ferry.agree() == (True, [0, 1, 2]))
live = ferry.shrink_group(timeout=20)
check("shrink type", type(live) is type(pair) and live.is_member())
check("shrink ranks", live.ranks == [0, 1, 2])
check("shrink rank/size", live.rank() == rank and live.size() == 3 and
      ferry.get_rank(live) == rank and ferry.get_world_size(live) == 3)
for _ in range(2):  # Twice: the new group's sequence goes on.
    ferry.barrier(group=live)
    t = torch.tensor([float(rank)])
    ferry.all_reduce(t, group=live)
    check("all_reduce on the shrunk group", t.item() == 3.0)
check("agree on the shrunk group", ferry.agree(group=live) == (True, [0, 1, 2]))

# A group's ranks are renumbered densely: [0, 2] revoked by rank 2 while
# rank 0 waits in a barrier on it, and shrunk: rank 2 is group rank 1.
if rank == 0:
    work = ferry.barrier(group=pair, async_op=True)
    signal(2, "pair pending")
    try:
        work.wait()
        check("pending pair barrier raises", False)
    except ferry.AbortedError as e:
        check("pair message", "revoked by worker2 (rank 2" in str(e) and
              "rank 2 gives up" in str(e))
    signal(2, "pair aborted")
elif rank == 2:
    await_signal("pair pending")
    ferry.revoke_group(pair, "rank 2 gives up")
    await_signal("pair aborted")
if rank != 1:
    try:
        ferry.barrier(group=pair, timeout=20)
        check("later pair barrier raises", False)
    except ferry.AbortedError as e:
        check("later pair message", "rank 2 gives up" in str(e))
    duo = ferry.shrink_group(pair)
    check("shrunk pair", duo.ranks == [0, 2] and duo.rank() == rank // 2)
    b = torch.full((2,), float(rank))
    ferry.broadcast(b, src=2, group=duo)  # src: a global rank
    check("broadcast on the shrunk pair", torch.equal(b, torch.full((2,), 2.)))
    # Both alive: grown back, it is a new group of the pair's ranks (named
    # alike on both), not the revoked pair.
    again = ferry.grow_group(duo, timeout=20)
    check("grown pair", again.ranks == [0, 2] and again.rank() == rank // 2)
    b = torch.full((2,), float(rank + 1))
    ferry.broadcast(b, src=0, group=again)
    check("broadcast on the grown pair", torch.equal(b, torch.ones(2)))
else:
    try:
        ferry.shrink_group(pair)
        check("shrink on a non-member raises", False)
    except ferry.InvalidArgumentError:
        pass

ferry.barrier(group=live)
ferry.shutdown()
print(f"rank {rank}: elastic groups passed")
