"""One rank of a torch.distributed job on the "ferry" backend (started by
torch_backend_test.py with RANK and WORLD_SIZE set).

    torch_job.py INIT CHECK...

INIT: "env" (MASTER_ADDR/MASTER_PORT), "tcp://HOST:PORT", "file://PATH",
or "store:PATH" (an explicit FileStore passed as store=). Each CHECK runs
on every rank; "CHECK passed" is printed for each.
"""
import datetime
import sys

import torch
import torch.distributed as dist

import ferry
import ferry.distributed  # noqa: F401 -- registers "ferry"

init, checks = sys.argv[1], sys.argv[2:]
rank = int(__import__("os").environ["RANK"])
world = int(__import__("os").environ["WORLD_SIZE"])
timeout = datetime.timedelta(seconds=60)
if init == "env":
    dist.init_process_group("ferry", timeout=timeout)
elif init.startswith("store:"):
    store = dist.FileStore(init[len("store:"):], world)
    dist.init_process_group("ferry", store=store, rank=rank, world_size=world,
                            timeout=timeout)
else:
    dist.init_process_group("ferry", init_method=init, rank=rank,
                            world_size=world, timeout=timeout)
assert dist.get_backend() == "ferry"
assert dist.get_rank() == rank and dist.get_world_size() == world

OPS = {
    dist.ReduceOp.SUM: sum,
    dist.ReduceOp.PRODUCT: lambda xs: __import__("math").prod(xs),
    dist.ReduceOp.MIN: min,
    dist.ReduceOp.MAX: max,
}
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16,
          torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8]


def value(r):
    return r + 2  # 2, 3, 4: products stay small


def check_collectives():
    for dtype in DTYPES:
        for op, fold in OPS.items():
            t = torch.full((5,), value(rank), dtype=dtype)
            dist.all_reduce(t, op=op)
            want = fold([value(r) for r in range(world)])
            assert torch.equal(t, torch.full((5,), want, dtype=dtype)), \
                (dtype, op, t)
    # Bitwise ops on integers and bool; AVG on floats.
    for op, fold in [(dist.ReduceOp.BAND, lambda a, b: a & b),
                     (dist.ReduceOp.BOR, lambda a, b: a | b),
                     (dist.ReduceOp.BXOR, lambda a, b: a ^ b)]:
        t = torch.tensor([rank + 1, 6], dtype=torch.int64)
        dist.all_reduce(t, op=op)
        want = [rank + 1 for rank in range(world)]
        acc = want[0]
        for x in want[1:]:
            acc = fold(acc, x)
        assert t.tolist()[0] == acc, (op, t)
    b = torch.tensor([rank == 0, True, False])
    dist.all_reduce(b, op=dist.ReduceOp.BAND)
    assert b.tolist() == [world == 1, True, False], b
    a = torch.full((3,), float(rank))
    dist.all_reduce(a, op=dist.ReduceOp.AVG)
    assert torch.allclose(a, torch.full((3,), (world - 1) / 2)), a
    z = torch.tensor([complex(rank, 1)], dtype=torch.complex64)
    dist.all_reduce(z)
    assert z.item() == complex(sum(range(world)), world), z
    # Async, with Work's API. An all_reduce's Work is torch's over a
    # future on both torchs (torch 1.13's C++ holds all_reduce Works, torch
    # 2.x's every async op's: ferry/distributed.py's _work), which waits
    # without a bound of its own; torch 1.13's reduce is ferry's Python
    # Work, with wait(timeout) and exception().
    t = torch.ones(1000)
    work = dist.all_reduce(t, async_op=True)
    assert work.wait()
    if ferry.distributed._ON_BACKEND:
        # (torch 2.14's Work over a future does not ask the future: its
        # is_completed() stays False; README: torch versions.)
        assert work.exception() is None
    else:
        # (torch 1.13's exception() of a C++ Work cannot be converted to
        # Python: "Unregistered type : std::__exception_ptr".)
        assert work.is_completed() and work.is_success()
    assert torch.equal(work.get_future().wait()[0], torch.full((1000,), world))
    r = torch.ones(3)
    work = dist.reduce(r, 0, async_op=True)
    if not ferry.distributed._ON_BACKEND:
        assert work.wait(timeout=datetime.timedelta(seconds=30))
        assert work.is_completed() and work.is_success()
    assert work.wait() and work.exception() is None
    assert rank != 0 or torch.equal(r, torch.full((3,), world)), r
    # A Work only C++ holds (as DDP's are): torch's C++ broadcast waits on
    # Works whose last Python reference went when the method returned.
    held = [torch.full((2,), float(rank))]
    torch._C._distributed_c10d._broadcast_coalesced(
        dist.distributed_c10d._get_default_group(), held, 1 << 20, 0)
    assert held[0].tolist() == [0.0, 0.0], held
    # Large enough for the ring (in place).
    big = torch.arange(300_000, dtype=torch.float32) * (rank + 1)
    dist.all_reduce(big)
    assert torch.equal(big, torch.arange(300_000, dtype=torch.float32) *
                       sum(range(1, world + 1)))
    # Coalesced.
    xs = [torch.full((2,), float(rank)), torch.full((3,), 1.0)]
    dist.all_reduce_coalesced(xs)
    assert xs[0].tolist() == [sum(range(world))] * 2 and \
        xs[1].tolist() == [world] * 3
    # Reduce, in place at the root; broadcast.
    r = torch.full((2,), float(rank + 1))
    dist.reduce(r, dst=world - 1, op=dist.ReduceOp.MAX)
    if rank == world - 1:
        assert r.tolist() == [world] * 2, r
    bc = torch.arange(4) if rank == 1 % world else torch.zeros(4, dtype=torch.int64)
    dist.broadcast(bc, src=1 % world)
    assert bc.tolist() == [0, 1, 2, 3], bc
    # all_gather, uneven too; into one tensor.
    outs = [torch.empty(r + 1, dtype=torch.complex128) for r in range(world)]
    dist.all_gather(outs, torch.full((rank + 1,), complex(rank, -rank),
                                     dtype=torch.complex128))
    for r, o in enumerate(outs):
        assert torch.equal(o, torch.full((r + 1,), complex(r, -r),
                                         dtype=torch.complex128)), outs
    flat = torch.empty(world * 2, dtype=torch.int16)
    dist._all_gather_base(flat, torch.full((2,), rank, dtype=torch.int16))
    assert flat.tolist() == [r for r in range(world) for _ in range(2)], flat
    # gather, scatter.
    g = [torch.empty(2) for _ in range(world)] if rank == 0 else None
    dist.gather(torch.full((2,), float(rank)), g, dst=0)
    if rank == 0:
        assert [x.tolist() for x in g] == [[r, r] for r in range(world)]
    s = torch.empty(3, dtype=torch.uint8)
    pieces = [torch.full((3,), r, dtype=torch.uint8) for r in range(world)]
    dist.scatter(s, pieces if rank == 0 else None, src=0)
    assert s.tolist() == [rank] * 3, s
    # reduce_scatter (gloo has none in torch 1.13) and its flat form.
    rs = torch.empty(2)
    dist.reduce_scatter(rs, [torch.full((2,), float(rank + r))
                             for r in range(world)])
    assert rs.tolist() == [sum(q + rank for q in range(world))] * 2, rs
    rs2 = torch.empty(2)
    dist._reduce_scatter_base(rs2, torch.arange(2.0 * world))
    assert rs2.tolist() == [world * (2 * rank), world * (2 * rank + 1)], rs2
    # all_to_all (list, shapes per pair) and all_to_all_single with splits.
    ins = [torch.full((rank + 1, 2), rank * 10 + r) for r in range(world)]
    outs = [torch.empty(r + 1, 2, dtype=torch.int64) for r in range(world)]
    dist.all_to_all(outs, ins)
    for r, o in enumerate(outs):
        assert torch.equal(o, torch.full((r + 1, 2), r * 10 + rank)), outs
    in_splits = [r + 1 for r in range(world)]
    out_splits = [rank + 1] * world
    src = torch.cat([torch.full((r + 1,), rank * 100 + r)
                     for r in range(world)]).double()
    dst = torch.empty(sum(out_splits), dtype=torch.float64)
    dist.all_to_all_single(dst, src, out_splits, in_splits)
    want = torch.cat([torch.full((rank + 1,), r * 100 + rank)
                      for r in range(world)]).double()
    assert torch.equal(dst, want), dst
    even = torch.empty(world)
    dist.all_to_all_single(even, torch.arange(float(world)) + rank * world)
    assert even.tolist() == [r * world + rank for r in range(world)], even
    dist.barrier()


def check_p2p():
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    dist.send(torch.full((3,), rank), nxt, tag=7)
    got = torch.empty(3, dtype=torch.int64)
    assert dist.recv(got, prv, tag=7) == prv and got.tolist() == [prv] * 3
    reqs = dist.batch_isend_irecv([
        dist.P2POp(dist.isend, torch.full((2,), float(rank)), nxt, tag=1),
        dist.P2POp(dist.irecv, got2 := torch.empty(2), prv, tag=1),
    ])
    for q in reqs:
        q.wait()
    assert got2.tolist() == [prv] * 2
    # From any source: rank 0 hears from everyone else. Not on torch 2.x's
    # Backend: torch reads the source rank from the C++ Work, which a
    # Backend written in Python cannot set (README: torch versions).
    if rank == 0 and ferry.distributed._ON_BACKEND:
        for src in range(1, world):
            t = torch.empty(1)
            dist.recv(t, src=src, tag=3)
            assert t.item() == src, (t, src)
    elif rank == 0:
        seen = set()
        for _ in range(world - 1):
            t = torch.empty(1)
            src = dist.recv(t, tag=3)
            assert t.item() == src, (t, src)
            seen.add(src)
        assert seen == set(range(1, world)), seen
    else:
        dist.send(torch.full((1,), float(rank)), 0, tag=3)
    dist.barrier()


def check_objects():
    objs = [None] * world
    dist.all_gather_object(objs, {"rank": rank, "list": [rank] * rank})
    assert objs == [{"rank": r, "list": [r] * r} for r in range(world)]
    lst = [f"hello {world}", 42] if rank == 0 else [None, None]
    dist.broadcast_object_list(lst, src=0)
    assert lst == [f"hello {world}", 42]
    out = [None]
    dist.scatter_object_list(out, [r * 2 for r in range(world)] if rank == 0
                             else None, src=0)
    assert out == [rank * 2]
    gathered = [None] * world if rank == 0 else None
    dist.gather_object(("r", rank), gathered, dst=0)
    if rank == 0:
        assert gathered == [("r", r) for r in range(world)]


def check_groups():
    # A group of every rank but 0 (and the world again, as a group).
    others = dist.new_group(list(range(1, world)))
    everyone = dist.new_group(list(range(world)))
    if rank > 0:
        t = torch.ones(1)
        dist.all_reduce(t, group=others)
        assert t.item() == world - 1
        assert dist.get_rank(others) == rank - 1
    t = torch.full((1,), float(rank))
    dist.all_reduce(t, group=everyone, op=dist.ReduceOp.MAX)
    assert t.item() == world - 1


def check_works():
    # A p2p Work's state as gloo's: torch 2.x's holder of a Python
    # Backend's Work said is_completed() False even after wait() (a program
    # polling it never ended), and had no sender of a receive from any
    # source.
    nxt, prev = (rank + 1) % world, (rank - 1) % world
    got = torch.zeros(2)
    sent = dist.isend(torch.full((2,), float(rank)), nxt, tag=5)
    received = dist.irecv(got, prev, tag=5)
    sent.wait()
    received.wait()
    assert sent.is_completed() and received.is_completed()
    assert got.tolist() == [float(prev)] * 2, got
    if rank == 0:
        any_src = dist.irecv(got, tag=6)
        any_src.wait()
        assert any_src.is_completed() and any_src.source_rank() == 1
    elif rank == 1:
        dist.send(torch.ones(2), 0, tag=6)
    if not ferry.distributed._ON_BACKEND:
        return  # torch 1.13 refuses monitored_barrier but on gloo.
    # monitored_barrier: every rank comes; then rank 0 alone, naming rank 1
    # (gloo's words); torch asks the group's name from C++.
    dist.monitored_barrier(timeout=datetime.timedelta(seconds=30))
    assert dist.group.WORLD.name() == "ferry", dist.group.WORLD.name()
    if rank == 0:
        try:
            dist.monitored_barrier(timeout=datetime.timedelta(seconds=1))
        except RuntimeError as e:
            assert "Rank 1 failed to pass monitoredBarrier in 1000 ms" in str(
                e), e
        else:
            raise AssertionError("monitored_barrier passed without rank 1")
    dist.barrier()


def check_ferry_job():
    # The ranks are a ferry job: callable by name.
    peer = f"worker{(rank + 1) % world}"
    assert ferry.rpc_sync(peer, "worker_name") == peer
    assert ferry.world_size() == world and ferry.rank() == rank
    dist.barrier()  # Nobody leaves while another still calls it.


def check_timeout():
    # Rank 0 waits at a barrier nobody else joins: it fails, bounded by the
    # op's timeout, naming who did not come.
    group = dist.new_group(list(range(world)),
                           timeout=datetime.timedelta(seconds=2))
    if rank == 0:
        try:
            dist.barrier(group=group)
        except RuntimeError as e:
            assert "Timed out" in str(e) and "worker1" in str(e), e
        else:
            raise AssertionError("the barrier returned")
    dist.barrier()


def check_elastic():
    # Every rank alive: the shrunk group is all of them, a new process
    # group that torch's ops and DDP take.
    pg = ferry.distributed.shrink_group()
    assert pg.size() == world and pg.rank() == rank, (pg.size(), pg.rank())
    t = torch.full((3,), float(rank))
    dist.all_reduce(t, group=pg)
    assert torch.equal(t, torch.full((3,), float(sum(range(world))))), t
    model = torch.nn.parallel.DistributedDataParallel(
        torch.nn.Linear(4, 2), process_group=pg)
    model(torch.ones(8, 4)).sum().backward()
    dist.barrier(group=pg)
    # Grown back (nobody died): a process group of the whole world again.
    grown = ferry.distributed.grow_group(pg)
    assert grown.size() == world and grown.rank() == rank
    dist.all_reduce(t, group=grown)
    assert torch.equal(t, torch.full((3,), float(world * sum(range(world)))))


for name in checks:
    globals()[f"check_{name}"]()
    print(f"{name} passed", flush=True)
dist.destroy_process_group()
