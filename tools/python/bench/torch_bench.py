"""torch.distributed on ferry, measured: DDP step time of a ~10M-parameter
MLP on "ferry" and on "gloo", and every collective through the torch
backend (dist.* on a ferry process group) against ferry's native Python
call (ferry.*) on the same group, at 1 MiB and 16 MiB per rank.

    tools/dev python tools/python/bench/torch_bench.py [--world=2]
        [--rounds=5] [--json=FILE] [--sizes=BYTES,...] [--ops=NAME,...]
        [--no-ddp]

A small synchronous op, where the backend's Python per op shows most (1000
calls of an 8-float all_reduce each round):

    tools/dev python tools/python/bench/torch_bench.py --no-ddp \
        --sizes=32 --ops=all_reduce --reps=1000

Starts `--world` local processes (env:// on a free port). Both backends run
in the same processes, in interleaved rounds (ferry, gloo, ferry, …), and
within a round each collective's two forms are called alternately (torch
backend, native, torch backend, …), so a noisy machine slows both alike;
figures are medians over the rounds (each round's figure the median of
its repetitions). Prints a table, and JSON rows with --json.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

MiB = 1 << 20


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed_pairs(a, b, reps):
    """Median seconds of a() and of b(), timed alternately (a, b, a, b, …,
    after one warm-up each): drift on a noisy machine falls on both alike,
    so their ratio holds where two separate runs' would not."""
    a()
    b()
    ta, tb = [], []
    for _ in range(reps):
        for fn, times in ((a, ta), (b, tb)):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
    return statistics.median(ta), statistics.median(tb)


def collectives(dist, ferry, torch, pg, rank, world, size):
    """{name: (torch-backend fn, native fn)} at `size` bytes per rank."""
    n = size // 4
    x = torch.ones(n)
    out = torch.empty(n)
    outs = [torch.empty(n) for _ in range(world)]
    chunks = [torch.ones(n // world) for _ in range(world)]
    small = torch.empty(n // world)
    big = torch.empty(n * world)
    g = pg  # ferry's own calls take a "ferry" process group as its group.
    peer = 1 - rank if world == 2 else (rank + 1) % world
    prev = (rank - 1) % world

    def p2p_torch():
        if rank % 2 == 0:
            dist.send(x, peer, group=pg)
            dist.recv(out, peer, group=pg)
        else:
            dist.recv(out, prev, group=pg)
            dist.send(x, prev, group=pg)

    def p2p_native():
        if rank % 2 == 0:
            ferry.send(x, peer, group=g)
            ferry.recv(out, peer, group=g)
        else:
            ferry.recv(out, prev, group=g)
            ferry.send(x, prev, group=g)

    return {
        "all_reduce": (lambda: dist.all_reduce(x, group=pg),
                       lambda: ferry.all_reduce(x, group=g)),
        "broadcast": (lambda: dist.broadcast(x, 0, group=pg),
                      lambda: ferry.broadcast(x, 0, group=g)),
        "reduce": (lambda: dist.reduce(x, 0, group=pg),
                   lambda: ferry.reduce(x, 0, group=g)),
        "all_gather": (lambda: dist.all_gather(outs, x, group=pg),
                       lambda: ferry.all_gather(outs, x, group=g)),
        "all_gather_into_tensor": (
            lambda: dist._all_gather_base(big, x, group=pg),
            lambda: ferry.all_gather(list(big.view(world, n).unbind(0)), x,
                                     group=g)),
        "gather": (lambda: dist.gather(x, outs if rank == 0 else None, 0,
                                       group=pg),
                   lambda: ferry.gather(x, outs if rank == 0 else None, 0,
                                        group=g)),
        "scatter": (lambda: dist.scatter(small, chunks if rank == 0 else None,
                                         0, group=pg),
                    lambda: ferry.scatter(small, chunks if rank == 0 else None,
                                          0, group=g)),
        "reduce_scatter": (
            lambda: dist.reduce_scatter(small, chunks, group=pg),
            lambda: ferry.reduce_scatter(small, chunks, group=g)),
        "all_to_all_single": (
            lambda: dist.all_to_all_single(out, x, group=pg),
            lambda: ferry.all_to_all_single(out, x, group=g)),
        "all_to_all": (lambda: dist.all_to_all(list(out.chunk(world)),
                                               list(x.chunk(world)), group=pg),
                       lambda: ferry.all_to_all(list(out.chunk(world)),
                                                list(x.chunk(world)),
                                                group=g)),
        "send_recv": (p2p_torch, p2p_native),
    }


def rank_main(args):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    import ferry
    import ferry.distributed  # noqa: F401

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    groups = {"ferry": dist.new_group(backend="ferry"),
              "gloo": dist.new_group(backend="gloo")}

    def mlp():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(1024, 2048), nn.ReLU(),
                             nn.Linear(2048, 2048), nn.ReLU(),
                             nn.Linear(2048, 1024), nn.ReLU(),
                             nn.Linear(1024, 1024))

    models = {b: DDP(mlp(), process_group=pg) for b, pg in groups.items()}
    params = sum(p.numel() for p in models["ferry"].parameters())
    opts = {b: torch.optim.SGD(m.parameters(), lr=1e-4)
            for b, m in models.items()}
    data = torch.randn(32, 1024)

    def step(backend):
        m, o = models[backend], opts[backend]
        o.zero_grad()
        m(data).square().mean().backward()
        o.step()

    rows = []
    per_round = {("ddp_step", b, 0): [] for b in groups} if args.ddp else {}
    sizes = [int(s) for s in args.sizes.split(",")]
    fns = {s: collectives(dist, ferry, torch, groups["ferry"], rank, world, s)
           for s in sizes}
    ops = args.ops.split(",") if args.ops else list(fns[sizes[0]])
    for r in range(args.rounds):
        dist.barrier()
        if args.ddp:
            f, g = timed_pairs(lambda: step("ferry"), lambda: step("gloo"),
                               args.steps)
            per_round[("ddp_step", "ferry", 0)].append(f)
            per_round[("ddp_step", "gloo", 0)].append(g)
        for s in sizes:
            for name in ops:
                through_torch, native = fns[s][name]
                dist.barrier()
                t, n = timed_pairs(through_torch, native, args.reps)
                per_round.setdefault((name, "torch_backend", s), []).append(t)
                per_round.setdefault((name, "ferry_native", s), []).append(n)
    if rank == 0:
        for (op, system, size), values in per_round.items():
            rows.append({"suite": "torch", "op": op, "system": system,
                         "size_bytes": size, "world": world,
                         "metric": "op_time_us",
                         "value": round(statistics.median(values) * 1e6, 1),
                         "rounds": len(values)})
        print("FERRY_TORCH_BENCH " + json.dumps(
            {"params": params, "rows": rows}), flush=True)
    dist.barrier()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=6,
                   help="DDP steps timed per round and backend")
    p.add_argument("--reps", type=int, default=20,
                   help="collective calls timed per round, each system")
    p.add_argument("--sizes", default=f"{MiB},{16 * MiB}",
                   help="bytes per rank of each collective, comma-separated")
    p.add_argument("--ops", help="only these collectives (comma-separated)")
    p.add_argument("--no-ddp", dest="ddp", action="store_false",
                   help="skip the DDP steps")
    p.add_argument("--json", help="write the rows here")
    p.add_argument("--rank-main", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.rank_main:
        return rank_main(args)
    env = dict(os.environ, MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(free_port()), WORLD_SIZE=str(args.world))
    cmd = [sys.executable, os.path.abspath(__file__), "--rank-main",
           f"--rounds={args.rounds}", f"--steps={args.steps}",
           f"--reps={args.reps}", f"--sizes={args.sizes}",
           f"--ops={args.ops or ''}"] + ([] if args.ddp else ["--no-ddp"])
    procs = [subprocess.Popen(cmd, env=dict(env, RANK=str(r)),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
             for r in range(args.world)]
    outs = [p.communicate()[0].decode(errors="replace") for p in procs]
    result = None
    for line in outs[0].splitlines():
        if line.startswith("FERRY_TORCH_BENCH "):
            result = json.loads(line[len("FERRY_TORCH_BENCH "):])
    if result is None or any(p.returncode for p in procs):
        print("\n".join(outs))
        return 1
    rows = result["rows"]
    by = {(r["op"], r["system"], r["size_bytes"]): r["value"] for r in rows}
    if args.ddp:
        ferry_step, gloo_step = by[("ddp_step", "ferry", 0)], \
            by[("ddp_step", "gloo", 0)]
        print(f"DDP step, {result['params'] / 1e6:.1f}M-parameter MLP, world "
              f"{args.world}: ferry {ferry_step / 1e3:.1f} ms, gloo "
              f"{gloo_step / 1e3:.1f} ms ({ferry_step / gloo_step:.2f}x "
              "gloo)")
    print(f"{'collective':24s} {'bytes':>9s} {'torch backend':>14s} "
          f"{'ferry native':>13s} {'ratio':>6s}")
    for (op, system, size), v in sorted(by.items()):
        if system != "torch_backend":
            continue
        native = by[(op, "ferry_native", size)]
        print(f"{op:24s} {size:9d} {v:12.1f}us {native:11.1f}us "
              f"{v / native:6.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
