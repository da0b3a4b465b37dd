#!/usr/bin/env python3
"""torch.distributed's Gloo backend measured as ferry_bench's collectives
suite measures ferry (tools/bench/collective_bench.cc), for ferry_bench
--peers.

W ranks: this process is rank 0, the others are child processes; the group
connects over TCP on 127.0.0.1 (port picked free). The definitions are
ferry_bench's: per-rank size is each rank's input; all_reduce and
reduce_scatter sum float32 (reduce_scatter: the input split in W parts, at
least one element each), the others move uint8; all_to_all_single splits
its input evenly; broadcast from rank 0. Buffers are made outside the
timing, each rank runs one warm-up op, then from a common start
`iterations` ops; the time per op runs from the first rank's start to the
last rank's return (one host: CLOCK_MONOTONIC is common to the processes).
Calibration as ferry_bench's: one timed op, then enough iterations for the
budget, 3 to 200.

torch 1.13's Gloo process group has no reduce_scatter: that request answers
"unsupported" and the standalone run leaves the row out.

  torch_gloo_bench.py [--world=2] [--quick] [--rounds=N]
      every op and size, medians over N rounds, rows on stdout
  torch_gloo_bench.py --serve --world=W
      requests on stdin (peer_common.py): "time OP BYTES ITERATIONS"
"""

import argparse
import multiprocessing
import sys
import time

# No __pycache__ beside the scripts (a checkout, or Bazel's runfiles).
sys.dont_write_bytecode = True
import peer_common  # noqa: E402

SYSTEM = "torch_gloo"
OPS = ("all_to_all_single", "all_gather", "all_reduce", "reduce_scatter",
       "broadcast")
TIMEOUT_S = 60


def make_op(op, size, world):
    """This rank's op over `size` bytes per rank, buffers made now."""
    import torch
    import torch.distributed as dist
    if op == "all_reduce":
        data = torch.ones(max(size // 4, 1), dtype=torch.float32)
        return lambda: dist.all_reduce(data)
    if op == "reduce_scatter":
        chunk = max(size // 4 // world, 1)
        inputs = [torch.ones(chunk, dtype=torch.float32)
                  for _ in range(world)]
        output = torch.empty(chunk, dtype=torch.float32)
        return lambda: dist.reduce_scatter(output, inputs)
    data = torch.ones(size, dtype=torch.uint8)
    if op == "all_gather":
        outputs = [torch.empty(size, dtype=torch.uint8) for _ in range(world)]
        return lambda: dist.all_gather(outputs, data)
    if op == "all_to_all_single":
        output = torch.empty(size, dtype=torch.uint8)
        return lambda: dist.all_to_all_single(output, data)
    if op == "broadcast":
        return lambda: dist.broadcast(data, src=0)
    raise ValueError("no op " + op)


def time_op(op, size, iterations):
    """Every rank: the time per op in microseconds (see the docstring) and
    the CPU time per op of every rank's process together (process_time:
    all threads, Gloo's included), or Unsupported on every rank alike."""
    import torch
    import torch.distributed as dist
    world = dist.get_world_size()
    run = make_op(op, size, world)
    try:
        run()  # Warm-up.
    except RuntimeError as e:
        if "does not support" in str(e):
            raise peer_common.Unsupported("torch %s Gloo: %s" % (
                torch.__version__, str(e).splitlines()[0]))
        raise
    dist.barrier()
    start = time.monotonic()
    cpu_start = time.process_time()
    for _ in range(iterations):
        run()
    end = time.monotonic()
    cpu = time.process_time() - cpu_start
    span = torch.tensor([-start, end], dtype=torch.float64)
    dist.all_reduce(span, op=dist.ReduceOp.MAX)
    cpus = torch.tensor([cpu], dtype=torch.float64)
    dist.all_reduce(cpus)
    return ((span[0].item() + span[1].item()) * 1e6 / iterations,
            cpus[0].item() * 1e6 / iterations)


def op_row(op, size, world, us):
    return peer_common.row("collectives", "op_time_us", SYSTEM, op, size,
                           world, 1, us)


def init_rank(rank, world, port):
    peer_common.use_loopback()
    import torch.distributed as dist
    from datetime import timedelta
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port,
                            rank=rank, world_size=world,
                            timeout=timedelta(seconds=TIMEOUT_S))


def follower(rank, world, port):
    """Ranks 1..W-1: run whatever rank 0 broadcasts until it says stop."""
    import torch.distributed as dist
    init_rank(rank, world, port)
    while True:
        words = next_request(None)
        if words is None:
            break
        try:
            time_op(words[1], int(words[2]), int(words[3]))
        except peer_common.Unsupported:
            pass
    dist.destroy_process_group()


def next_request(words):
    """Rank 0 passes `words` (None: stop); every rank gets them back."""
    import torch.distributed as dist
    box = [words]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def handle(words, world):
    """Rank 0's serve requests."""
    if len(words) != 4 or words[0] != "time" or words[1] not in OPS:
        raise ValueError("bad request: " + " ".join(words))
    op, size, iterations = words[1], int(words[2]), int(words[3])
    if size < 1 or iterations < 1:
        raise ValueError("bad request: " + " ".join(words))
    next_request(words)
    us, cpu_us = time_op(op, size, iterations)
    return [op_row(op, size, world, us),
            peer_common.row("collectives", "cpu_us_per_op", SYSTEM, op, size,
                            world, 1, cpu_us)]


def calibrated(op, size, world, budget_s):
    """ferry_bench's Calibrate: iterations for about budget_s of ops."""
    once = handle(["time", op, str(size), "1"], world)[0]["value"]
    n = int(budget_s * 1e6 / once) if once > 0 else 200
    return min(max(n, 3), 200)


def standalone(world, quick, rounds):
    sizes = (8, 1 << 20) if quick else (8, 64 << 10, 1 << 20, 16 << 20)
    budget_s = 0.1 if quick else 0.4
    for op in OPS:
        for size in sizes:
            try:
                n = calibrated(op, size, world, budget_s)
            except peer_common.Unsupported as e:
                print("torch_gloo: %s: %s; no row" % (op, e), file=sys.stderr)
                break
            peer_common.print_medians(
                [handle(["time", op, str(size), str(n)], world)
                 for _ in range(rounds)])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--world", type=int, default=2)
    parser.add_argument("--serve", action="store_true")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=0)
    args = parser.parse_args()
    if not 2 <= args.world <= 16:
        parser.error("--world must be 2 to 16")
    port = peer_common.free_port()
    spawn = multiprocessing.get_context("spawn")
    others = [spawn.Process(target=follower, args=(r, args.world, port),
                            daemon=True) for r in range(1, args.world)]
    for p in others:
        p.start()
    init_rank(0, args.world, port)
    if args.serve:
        print("ok", flush=True)  # Ready.
        peer_common.serve(lambda words: handle(words, args.world))
    else:
        standalone(args.world, args.quick,
                   args.rounds or (1 if args.quick else 3))
    next_request(None)
    import torch.distributed as dist
    dist.destroy_process_group()
    for p in others:
        p.join(TIMEOUT_S)
    return 0


if __name__ == "__main__":
    sys.exit(main())
