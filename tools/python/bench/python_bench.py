"""Python's cost over the C++ API: the same calls from Python and from C++
(looped in C++ by _ferry.bench, on the same worker, in the same run).

    tools/dev python --opt -m ferry.launch -n 2 tools/python/bench/python_bench.py [--quick] [--json]

Rows (rank 0 prints them; ferry_bench's row format, suite "python", system
"python" or "cpp"):
  rpc_sync  latency_p50_us   an 8-byte echo, worker0 -> worker1
  echo      bandwidth_MBps   a 64 MiB uint8 numpy array echoed (payload / time)
  all_reduce op_time_us      a 16 MiB float32 torch tensor, sum, 2 workers
Python's and C++'s calls alternate (pairs), and medians are reported. Like ferry_bench,
both processes keep large buffers on the heap (rpc/process_tuning.h's
malloc settings, applied here through ctypes).
"""
import argparse
import ctypes
import json
import statistics
import time

import numpy as np
import torch

import ferry

M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4


def tune_malloc():
    libc = ctypes.CDLL("libc.so.6")
    libc.mallopt(M_MMAP_MAX, 0)
    libc.mallopt(M_TRIM_THRESHOLD, 512 << 20)


def timed_us(fn):
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e6


def paired(samples, n, python_fn, cpp_fn):
    """n times: Python's then C++'s call, each timed (µs), so both see the
    same state of a noisy host."""
    for _ in range(n):
        samples.setdefault("python", []).append(timed_us(python_fn))
        samples.setdefault("cpp", []).append(cpp_fn())


def row(metric, system, op, size, value):
    return {"suite": "python", "metric": metric, "system": system, "op": op,
            "size_bytes": size, "world": 2, "inflight": 1, "value": value}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    tune_malloc()
    ferry.init(timeout=600, shutdown_timeout=600)
    rank = ferry.rank()
    worker = ferry._rpc._current()
    calls = 300 if args.quick else 3000
    echoes = 2 if args.quick else 12
    reduces = 4 if args.quick else 30
    payload = np.ones(64 << 20, np.uint8)
    small = np.zeros(8, np.uint8)
    tensor = torch.ones(4 << 20, dtype=torch.float32)
    rpc, echo, reduce = {}, {}, {}
    cpp = ferry._ferry.bench
    if rank == 0:
        ferry.rpc_sync("worker1", "echo", args=(payload,))  # Warm-up.
        for _ in range(calls // 100):
            paired(rpc, 100,
                   lambda: ferry.rpc_sync("worker1", "echo", args=(small,)),
                   lambda: cpp.rpc_sync_us(worker, "worker1", "echo",
                                           (small,), 1)[0])
        paired(echo, echoes,
               lambda: ferry.rpc_sync("worker1", "echo", args=(payload,)),
               lambda: cpp.rpc_sync_us(worker, "worker1", "echo",
                                       (payload,), 1)[0])
    ferry.barrier()
    paired(reduce, reduces, lambda: ferry.all_reduce(tensor),
           lambda: cpp.all_reduce_us(worker.world(), tensor, 1)[0])
    mbps = {k: [payload.nbytes / us for us in v] for k, v in echo.items()}
    samples = {("python", "rpc"): rpc.get("python"),
               ("cpp", "rpc"): rpc.get("cpp"),
               ("python", "echo"): mbps.get("python"),
               ("cpp", "echo"): mbps.get("cpp"),
               ("python", "all_reduce"): reduce["python"],
               ("cpp", "all_reduce"): reduce["cpp"]}
    if rank == 0:
        rows = []
        for system in ("python", "cpp"):
            rows.append(row("latency_p50_us", system, "rpc_sync", 8,
                            statistics.median(samples[(system, "rpc")])))
            rows.append(row("bandwidth_MBps", system, "echo", payload.nbytes,
                            statistics.median(samples[(system, "echo")])))
            rows.append(row("op_time_us", system, "all_reduce",
                            tensor.numel() * 4,
                            statistics.median(samples[(system, "all_reduce")])))
        if args.json:
            for r in rows:
                print(json.dumps(r))
        else:
            by = {(r["system"], r["op"]): r["value"] for r in rows}
            targets = {"rpc_sync": "<= 1.5x", "echo": ">= 0.9x",
                       "all_reduce": "<= 1.1x"}
            print(f"{'metric':34} {'python':>10} {'c++':>10} {'ratio':>7}"
                  "  target")
            for op, metric in (("rpc_sync", "rpc_sync p50 (us)"),
                               ("echo", "echo 64 MiB numpy (MB/s)"),
                               ("all_reduce", "all_reduce 16 MiB torch (us)")):
                p, c = by[("python", op)], by[("cpp", op)]
                print(f"{metric:34} {p:10.1f} {c:10.1f} {p / c:6.2f}x"
                      f"  {targets[op]}")
    ferry.shutdown()


if __name__ == "__main__":
    main()
