"""collectives_test.py's job: every collective from Python, torch and numpy,
synchronous and async_op, on the world and on a group; run with 3 workers.
Any failed check exits non-zero."""
import numpy as np
import torch

import ferry

ferry.init(timeout=30)
rank, world = ferry.rank(), ferry.world_size()
assert world == 3


def check(name, ok):
    if not ok:
        raise AssertionError(f"rank {rank}: {name}")


# all_reduce: in place, every op; numpy and torch; a tensor large enough
# for the ring algorithm (> 1 MiB per rank).
t = torch.full((4,), float(rank + 1))
assert ferry.all_reduce(t) is None
check("all_reduce sum", torch.equal(t, torch.full((4,), 6.0)))
a = np.full(3, rank + 2, np.int64)
ferry.all_reduce(a, op=ferry.ReduceOp.MAX)
check("all_reduce max numpy", (a == 4).all())
big = torch.arange(1 << 19, dtype=torch.float32) * (rank + 1)
ferry.all_reduce(big, op="avg")
check("all_reduce ring avg", torch.equal(big, torch.arange(1 << 19) * 2.0))
c = torch.tensor([1 + 1j], dtype=torch.complex128)
ferry.all_reduce(c, op=ferry.ReduceOp.PRODUCT)
check("all_reduce prod complex", torch.equal(c, torch.tensor([(1 + 1j) ** 3])))
bits = torch.tensor([1 << rank], dtype=torch.int32)
ferry.all_reduce(bits, op=ferry.ReduceOp.BOR)
check("all_reduce bor", bits.item() == 7)

# broadcast in place, from a global rank.
b = torch.full((2, 2), float(rank))
ferry.broadcast(b, src=2)
check("broadcast", torch.equal(b, torch.full((2, 2), 2.0)))

# all_gather, torch's form: a list to fill, and an empty one (uneven).
out = [torch.empty(2, dtype=torch.int64) for _ in range(world)]
ferry.all_gather(out, torch.tensor([rank, rank]))
check("all_gather", all(torch.equal(o, torch.tensor([r, r]))
                        for r, o in enumerate(out)))
grown = []
ferry.all_gather(grown, torch.arange(rank + 1))
check("all_gather uneven", [len(g) for g in grown] == [1, 2, 3])

# tf's form over a nested structure with a tuple.
value = {"x": (torch.ones(rank + 1, 2),), "y": [np.full(1, rank)]}
g = ferry.all_gather(value, axis=0)
check("tf all_gather structure", isinstance(g["x"], tuple))
check("tf all_gather x", g["x"][0].shape == (6, 2))
check("tf all_gather y", list(g["y"][0]) == [0, 1, 2])

# reduce_scatter, scatter, gather.
rs = torch.empty(2)
ferry.reduce_scatter(rs, [torch.full((2,), float(i)) for i in range(world)])
check("reduce_scatter", torch.equal(rs, torch.full((2,), 3.0 * rank)))
sc = torch.empty(1, dtype=torch.int64)
ferry.scatter(sc, [torch.tensor([10 * i]) for i in range(world)]
              if rank == 1 else None, src=1)
check("scatter", sc.item() == 10 * rank)
gl = [torch.empty(1) for _ in range(world)] if rank == 0 else None
ferry.gather(torch.tensor([float(rank)]), gl, dst=0)
check("gather", rank != 0 or [x.item() for x in gl] == [0.0, 1.0, 2.0])

# all_to_all_single with output splits left to ferry.
inp = torch.arange(world) + 10 * rank
outp = torch.empty(world, dtype=torch.int64)
ferry.all_to_all_single(outp, inp)
check("all_to_all_single", torch.equal(outp, torch.arange(world) * 10 + rank))

# async_op: work handles; several in flight at once.
x = torch.ones(3)
y = np.ones(3, np.float32) * rank
w1 = ferry.all_reduce(x, async_op=True)
w2 = ferry.all_reduce(y, async_op=True)
w3 = ferry.barrier(async_op=True)
check("work wait", w1.wait() is True and w2.wait() is True and w3.wait())
check("work done", w1.is_completed() and w1.is_success())
check("async results", torch.equal(x, torch.full((3,), 3.0)) and
      (y == 3).all())
wg = ferry.all_gather({"v": torch.ones(1)}, axis=0, async_op=True)
check("async tf all_gather", wg.wait()["v"].shape == (3,))

# Groups: ranks 0 and 2; rank 1 is not a member (its collectives are None).
pair = ferry.new_group([0, 2])
t = torch.tensor([float(rank)])
r = ferry.all_reduce(t, group=pair)
if rank == 1:
    check("non-member", r is None and t.item() == 1.0 and pair.rank() == -1)
else:
    check("group all_reduce", t.item() == 2.0)
    check("group rank", pair.rank() == [0, 2].index(rank))
    z = torch.tensor([float(rank)])
    ferry.broadcast(z, src=2, group=pair)
    check("group broadcast from global rank", z.item() == 2.0)

# Errors: the same on every rank, as Python exceptions by code.
try:
    ferry.all_reduce(torch.ones(2) if rank else torch.ones(3))
    check("mismatch raises", False)
except ValueError as e:
    check("mismatch code", e.code == "INVALID_ARGUMENT")
try:
    ferry.all_to_all([torch.empty(1, dtype=torch.int64)] * world,
                     [torch.tensor([1.0])] * world)
    check("output dtype raises", False)
except ferry.InvalidArgumentError as e:
    check("output dtype message", "output_tensor_list[0]" in str(e))
if rank != 0:  # rank 0 never comes: a bounded failure naming it.
    try:
        ferry.barrier(group=ferry.new_group([1, 2]), timeout=30)
        ferry.all_reduce(torch.ones(1), group=ferry.new_group([0, 1, 2]),
                         timeout=1)
        check("missing rank raises", False)
    except TimeoutError as e:
        check("missing rank named", "0" in str(e))
else:
    ferry.new_group([0, 1, 2])
ferry.barrier()
# The group works again after a failure.
t = torch.ones(1)
ferry.all_reduce(t)
check("after failure", t.item() == 3.0)

# Inputs are free once an op returned: reusing one right away is safe.
src = torch.full((1 << 20,), float(rank))
n = src.chunk(world)[rank].numel()
dst = [torch.empty(n) for _ in range(world)]
ferry.all_to_all(dst, list(src.chunk(world)))
src.fill_(-1)
check("inputs free", all((d == r).all() for r, d in enumerate(dst)))

ferry.shutdown()
print(f"rank {rank}: all collectives passed")
