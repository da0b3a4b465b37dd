"""A small call through ferry.rpc (torch.distributed.rpc's API on ferry),
beside ferry's native Python rpc_sync and torch.distributed.rpc itself
(TensorPipe), in the same two processes and the same run.

    tools/dev python --opt -m ferry.launch -n 2 tools/python/bench/rpc_api_bench.py [--quick] [--json]

Both processes run ferry.rpc (ferry, on the launcher's port) and
torch.distributed.rpc (TensorPipe, on a port rank 0 picks and passes on
through ferry) at once. worker0 calls `echo` -- a Python function of this
program, returning its argument, an 8-byte uint8 tensor -- on worker1:

  native      ferry.rpc_sync("worker1", "py_echo", ...): the same function
              registered with ferry, called by its name (what ferry.rpc's
              call costs over)
  ferry.rpc   rpc.rpc_sync("worker1", echo, ...) through ferry.rpc: echo
              travels as "__main__:echo", resolved on worker1
  tensorpipe  torch.distributed.rpc.rpc_sync("worker1", echo, ...):
              TensorPipe's defaults, echo pickled by reference

Rows (ferry_bench's format, suite "rpc_api"): latency_p50_us of one
synchronous call at a time (the three systems alternate call by call, so
each sees the same host), and calls_per_s with 16 calls in flight
(rpc_async, closed loop, 0.3 s each, the systems in turn, 15 rounds, the
median).
"""
import argparse
import json
import os
import socket
import statistics
import threading
import time

import torch
import torch.distributed.rpc as tp

import ferry
import ferry.rpc as rpc


@ferry.register("py_echo")
def py_echo(x):
    return x


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# TensorPipe's port: rank 0 picks it and tells rank 1 (rank 0's own Python
# is busy in TensorPipe's init, which holds the GIL while it waits).
_tp_port = []
_tp_port_told = threading.Event()


@ferry.register("tp_port")
def tp_port(port):
    _tp_port.append(port)
    _tp_port_told.set()


def echo(x):
    """What ferry.rpc and TensorPipe call, by reference."""
    return x


def timed_us(fn):
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e6


def calls_per_s(issue, inflight, seconds):
    """Closed loop: `inflight` calls kept in flight for `seconds`."""
    done = 0
    deadline = time.perf_counter() + seconds
    pending = [issue() for _ in range(inflight)]
    start = time.perf_counter()
    while time.perf_counter() < deadline:
        pending.pop(0).wait()
        done += 1
        pending.append(issue())
    for f in pending:
        f.wait()
    return done / (time.perf_counter() - start)


def row(metric, system, value):
    return {"suite": "rpc_api", "metric": metric, "system": system,
            "op": "echo", "size_bytes": 8, "world": 2,
            "inflight": 16 if metric == "calls_per_s" else 1, "value": value}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rpc.init_rpc(f"worker{os.environ['RANK']}")
    rank = rpc.get_worker_info().id
    if rank == 0:
        port = free_port()
        ferry.rpc_sync("worker1", "tp_port", args=(port,))
    else:
        assert _tp_port_told.wait(60), "rank 0 never told TensorPipe's port"
        port = _tp_port[0]
    tp.init_rpc(f"worker{rank}", rank=rank, world_size=2,
                rpc_backend_options=tp.TensorPipeRpcBackendOptions(
                    init_method=f"tcp://127.0.0.1:{port}"))
    calls = 300 if args.quick else 3000
    rounds, seconds = (3, 0.1) if args.quick else (15, 0.3)
    small = torch.zeros(8, dtype=torch.uint8)
    systems = {
        "native": (
            lambda: ferry.rpc_sync("worker1", "py_echo", args=(small,)),
            lambda: ferry.rpc_async("worker1", "py_echo", args=(small,))),
        "ferry.rpc": (
            lambda: rpc.rpc_sync("worker1", echo,
                                 args=(small,)),
            lambda: rpc.rpc_async("worker1", echo,
                                  args=(small,))),
        "tensorpipe": (
            lambda: tp.rpc_sync("worker1", echo, args=(small,)),
            lambda: tp.rpc_async("worker1", echo,
                                 args=(small,))),
    }
    rows = []
    if rank == 0:
        for sync, _ in systems.values():  # Warm-up.
            for _ in range(calls // 10):
                sync()
        latency = {name: [] for name in systems}
        for _ in range(calls):
            for name, (sync, _) in systems.items():
                latency[name].append(timed_us(sync))
        rates = {name: [] for name in systems}
        for _ in range(rounds):
            for name, (_, issue) in systems.items():
                rates[name].append(calls_per_s(issue, 16, seconds))
        for name in systems:
            rows.append(row("latency_p50_us", name,
                            statistics.median(latency[name])))
            rows.append(row("calls_per_s", name,
                            statistics.median(rates[name])))
    tp.shutdown()
    rpc.shutdown()
    if rank == 0:
        if args.json:
            print(json.dumps(rows))
        else:
            for r in rows:
                print(f"{r['metric']:15s} {r['system']:11s} "
                      f"{r['value']:12.1f}")
        native = {r["metric"]: r["value"] for r in rows
                  if r["system"] == "native"}
        for r in rows:
            if r["system"] != "native":
                print(f"{r['system']} {r['metric']}: "
                      f"{r['value'] / native[r['metric']]:.2f}x native")


if __name__ == "__main__":
    main()
