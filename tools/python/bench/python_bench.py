"""Python's cost over the C++ API: the same calls from Python and from C++
(looped in C++ by _ferry.bench, on the same worker, in the same run).

    tools/dev python --opt -m ferry.launch -n 2 tools/python/bench/python_bench.py [--quick] [--json]

Rows (rank 0 prints them; ferry_bench's row format, suite "python", system
"python" or "cpp"):
  rpc_sync  latency_p50_us   an 8-byte echo, worker0 -> worker1
  echo      bandwidth_MBps   a 64 MiB uint8 numpy array echoed (payload / time)
  all_reduce op_time_us      a 16 MiB float32 torch tensor, sum, 2 workers
Systems interleave over 3 rounds; medians are reported. Like ferry_bench,
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


def python_rpc_us(n):
    times = []
    for _ in range(n):
        start = time.perf_counter()
        ferry.rpc_sync("worker1", "echo", args=(np.zeros(8, np.uint8),))
        times.append((time.perf_counter() - start) * 1e6)
    return times


def echo_mbps(send, payload, n):
    send()  # Warm-up.
    start = time.perf_counter()
    for _ in range(n):
        send()
    return payload * n / (time.perf_counter() - start) / 1e6


def python_all_reduce_us(t, n):
    times = []
    for _ in range(n):
        start = time.perf_counter()
        ferry.all_reduce(t)
        times.append((time.perf_counter() - start) * 1e6)
    return times


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
    calls = 300 if args.quick else 2000
    echoes = 1 if args.quick else 3
    reduces = 3 if args.quick else 10
    samples = {}

    def add(key, value):
        samples.setdefault(key, []).append(value)

    payload = np.ones(64 << 20, np.uint8)
    tensor = torch.ones(4 << 20, dtype=torch.float32)
    for _ in range(3):
        if rank == 0:
            add(("python", "rpc"), statistics.median(python_rpc_us(calls)))
            add(("cpp", "rpc"), statistics.median(ferry._ferry.bench.rpc_sync_us(
                worker, "worker1", "echo", (np.zeros(8, np.uint8),), calls)))
            add(("python", "echo"), echo_mbps(
                lambda: ferry.rpc_sync("worker1", "echo", args=(payload,)),
                payload.nbytes, echoes))
            add(("cpp", "echo"), echo_mbps(
                lambda: ferry._ferry.bench.rpc_sync_us(
                    worker, "worker1", "echo", (payload,), 1),
                payload.nbytes, echoes))
        ferry.barrier()
        add(("python", "all_reduce"),
            statistics.median(python_all_reduce_us(tensor, reduces)))
        add(("cpp", "all_reduce"), statistics.median(
            ferry._ferry.bench.all_reduce_us(worker.world(), tensor, reduces)))
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
