"""One rank of a torch 2.x job on "ferry" that exercises torch's
fault-tolerance Backend API (ferry/_torch_ft.py): SCENARIO is one of

  reconfigure  handles, reconfigure to all, to all but the middle rank
               (who leaves), uuid reuse and bad handles refused
  abort        rank 0 aborts while the others wait in an all_reduce: they
               fail at once with REMOTE_ERROR naming rank 0, rank 0's hook
               ran and its next op fails (COMM_ERROR); reconfigure recovers
  kill         the last rank is SIGKILLed: the others' all_reduce fails
               with REMOTE_ERROR naming it; ferry.agree on torch's group
               names the survivors; torch's shrink_group goes on
  timeout      rank 1 never joins a 2-rank group's all_reduces: rank 0's
               asynchronous one raises from wait(), get_error() is TIMEOUT
               naming rank 1
  hooks        torch's pre/post collective hooks see ferry's ops
  split        ProcessGroup.split_group: the world into halves, a
               subgroup into a rank alone and a pair; a split leaving out
               the caller refused
  merge        the halves merged again with merge_remote_group

Usage: torch_ft_job.py SCENARIO INIT_FILE (RANK, WORLD_SIZE in the
environment). Prints "SCENARIO passed" at the end."""
import datetime
import os
import signal
import sys

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import ErrorType

import ferry
import ferry.distributed  # noqa: F401 -- registers "ferry"

RANK = int(os.environ["RANK"])
WORLD = int(os.environ["WORLD_SIZE"])
TIMEOUT = datetime.timedelta(seconds=60)


def init(store, reconfigure):
    dist.init_process_group("ferry", rank=RANK, world_size=WORLD,
                            store=store, timeout=TIMEOUT,
                            enable_reconfigure=reconfigure)
    return dist.get_backend_impl(dist.group.WORLD, torch.device("cpu"))


def barrier(store, name, ranks=None):
    """A barrier through torch's store (not the group under test)."""
    store.set(f"{name}/{RANK}", "1")
    for r in (ranks if ranks is not None else range(WORLD)):
        store.get(f"{name}/{r}")


def handles(store, name):
    store.set(f"{name}/{RANK}", dist._get_reconfigure_handle())
    return [store.get(f"{name}/{r}").decode() for r in range(WORLD)]


def reconfigure(uuid, hs):
    dist._reconfigure(uuid, hs, timeout=TIMEOUT).wait()


def summed(value, expected):
    t = torch.full((4,), float(value))
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((4,), float(expected))), t


def raises(fn, text):
    try:
        fn()
    except (RuntimeError, ValueError) as e:
        assert text in str(e), f"{text!r} not in {e}"
        return e
    raise AssertionError(f"did not raise ({text!r})")


def scenario_reconfigure(store):
    backend = init(store, reconfigure=True)
    assert dist._supports_reconfigure()
    hs = handles(store, "all")
    assert hs[RANK] == dist._get_reconfigure_handle()
    assert hs[RANK].startswith("ferry:") and len(set(hs)) == WORLD, hs
    reconfigure(100, hs)
    assert (dist.get_rank(), dist.get_world_size()) == (RANK, WORLD)
    summed(RANK + 1, sum(range(1, WORLD + 1)))
    # The middle rank leaves; the others make a group without it.
    middle = WORLD // 2
    if RANK != middle:
        reconfigure(101, [h for r, h in enumerate(hs) if r != middle])
        assert dist.get_world_size() == WORLD - 1
        assert dist.get_rank() == (RANK if RANK < middle else RANK - 1)
        summed(RANK + 1, sum(range(1, WORLD + 1)) - (middle + 1))
        raises(lambda: reconfigure(101, hs), "uuid 101 already used")
    barrier(store, "left")
    # A set: ranks in ferry rank order.
    reconfigure(102, set(hs))
    assert (dist.get_rank(), dist.get_world_size()) == (RANK, WORLD)
    raises(lambda: reconfigure(103, ["gloo:0:-1:0:"] + hs[1:]),
           "is not one of this ferry job's")
    raises(lambda: reconfigure(104, hs + [hs[0]]), "given twice")
    others = [h for r, h in enumerate(hs) if r != RANK]
    raises(lambda: reconfigure(105, others), "is not among the")
    raises(lambda: reconfigure(1 << 62, hs), "out of range")
    assert backend.get_error() == ErrorType.SUCCESS
    barrier(store, "done")


def scenario_abort(store):
    backend = init(store, reconfigure=True)
    hs = handles(store, "all")
    reconfigure(200, hs)
    summed(1, WORLD)
    hooked = []
    if RANK == 0:
        backend.registerAbortHook(7, lambda: hooked.append("replaced"))
        dist.group.WORLD.register_abort_hook(7, lambda: hooked.append(7))
        dist.group.WORLD.register_abort_hook(8, lambda: hooked.append(8))
        dist.group.WORLD.unregister_abort_hook(8)
        barrier(store, "waiting", ranks=range(1, WORLD))
        dist.group.WORLD.abort()
        assert hooked == [7], hooked
        assert backend.get_error() == ErrorType.COMM_ERROR
        raises(lambda: summed(1, WORLD), "ABORTED")
        assert backend.get_error() == ErrorType.COMM_ERROR
    else:
        work = dist.all_reduce(torch.ones(4), async_op=True)
        barrier(store, "waiting", ranks=range(1, WORLD))
        raises(work.wait, "revoked by worker0")
        assert backend.get_error() == ErrorType.REMOTE_ERROR
        assert backend.failure().rank == 0, backend.failure()
    # Recovered without restarting anything.
    reconfigure(201, hs)
    assert backend.get_error() == ErrorType.SUCCESS
    summed(RANK + 1, sum(range(1, WORLD + 1)))
    barrier(store, "done")


def scenario_kill(store):
    backend = init(store, reconfigure=False)
    assert backend.supports_shrinking and not backend.supports_reconfigure
    summed(1, WORLD)
    last = WORLD - 1
    barrier(store, "before")
    if RANK == last:
        os.kill(os.getpid(), signal.SIGKILL)
    e = raises(lambda: summed(1, WORLD), f"rank {last} (worker{last})")
    assert backend.get_error() == ErrorType.REMOTE_ERROR, e
    assert backend.failure().rank == last, backend.failure()
    # ferry's agreement (no torch backend has one) on torch's group: the
    # survivors agree, and on who they are.
    assert ferry.agree(True, group=dist.group.WORLD) == \
        (True, list(range(last)))
    group = dist.shrink_group([last])
    assert group is dist.group.WORLD  # torch made it the default group
    assert (dist.get_rank(), dist.get_world_size()) == (RANK, WORLD - 1)
    summed(RANK + 1, sum(range(1, WORLD)))
    new = dist.get_backend_impl(group, torch.device("cpu"))
    assert new.get_error() == ErrorType.SUCCESS
    barrier(store, "done", ranks=range(last))


def scenario_timeout(store):
    backend = init(store, reconfigure=False)
    pair = dist.new_group([0, 1], timeout=datetime.timedelta(seconds=2))
    inner = dist.get_backend_impl(pair, torch.device("cpu"))
    if RANK == 0:
        # An asynchronous op's failure reaches wait() (torch's own Work
        # over a future returned from it as if it had succeeded).
        work = dist.all_reduce(torch.ones(2), group=pair, async_op=True)
        raises(lambda: work.wait(datetime.timedelta(milliseconds=100)),
               "not done within 0.1 s")
        raises(work.wait, "rank 1 (worker1) did not join")
        raises(lambda: dist.all_reduce(torch.ones(2), group=pair),
               "Timed out")
        assert inner.get_error() == ErrorType.TIMEOUT, inner.failure()
        assert inner.failure().rank == 1, inner.failure()
        assert backend.get_error() == ErrorType.SUCCESS
    barrier(store, "done")


def scenario_hooks(store):
    init(store, reconfigure=False)
    seen = []
    pg = dist.group.WORLD
    pg.register_pre_hook(1, lambda a: seen.append(("pre", a.name.name)))
    pg.register_post_hook(2, lambda a: seen.append(("post", a.name.name)))
    summed(1, WORLD)
    dist.broadcast(torch.ones(2), src=0)
    pg.unregister_pre_hook(1)
    pg.unregister_post_hook(2)
    summed(1, WORLD)
    assert seen == [("pre", "ALLREDUCE"), ("post", "ALLREDUCE"),
                    ("pre", "BROADCAST"), ("post", "BROADCAST")], seen
    barrier(store, "done")


def halves(group):
    """The world split into [0, 1] and [2, 3] (torch's split_group needs
    an accelerator; the ProcessGroup method does not)."""
    mine = [0, 1] if RANK < 2 else [2, 3]
    half = group.split_group(mine, timeout=TIMEOUT)
    assert (half.rank(), half.size()) == (RANK % 2, 2)
    t = torch.full((3,), float(RANK))
    dist.all_reduce(t, group=half)
    assert t.tolist() == [float(sum(mine))] * 3, t
    return half


def scenario_split(store):
    init(store, reconfigure=False)
    world = dist.group.WORLD
    backend = dist.get_backend_impl(world, torch.device("cpu"))
    assert backend.supports_splitting
    halves(world)
    # A subgroup's split names torch's global ranks.
    sub = dist.new_group([1, 2, 3])
    if RANK >= 1:
        mine = [1] if RANK == 1 else [2, 3]
        part = sub.split_group(mine)
        t = torch.ones(1) * RANK
        dist.all_reduce(t, group=part)
        assert t.item() == sum(mine), t
        raises(lambda: sub.split_group([r for r in (1, 2, 3) if r != RANK]),
               f"leave out this rank ({RANK})")
    barrier(store, "done")


def scenario_merge(store):
    init(store, reconfigure=False)
    half = halves(dist.group.WORLD)
    merged = half.merge_remote_group(dist.PrefixStore("merge", store), WORLD,
                                     TIMEOUT)
    assert merged.size() == WORLD
    t = torch.ones(2)
    dist.all_reduce(t, group=merged)
    assert t.tolist() == [float(WORLD)] * 2, t
    # Ranks as torch numbered them: a broadcast from merged rank 0.
    t = torch.full((1,), float(merged.rank()))
    merged.broadcast(t, 0).wait()  # (torch's registry does not know it)
    assert t.item() == 0.0, t
    barrier(store, "done")


def main():
    scenario, path = sys.argv[1], sys.argv[2]
    store = dist.FileStore(path, WORLD)
    globals()[f"scenario_{scenario}"](store)
    print(f"{scenario} passed", flush=True)
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
