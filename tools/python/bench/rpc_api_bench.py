"""A small call through ferry.rpc (torch.distributed.rpc's API on ferry),
beside ferry's native Python rpc_sync and torch.distributed.rpc itself
(TensorPipe), on the same machine in the same run.

    tools/dev python --opt tools/python/bench/rpc_api_bench.py [--quick] [--json] [--rounds=N]

The run alternates two kinds of process pairs, round after round: a pair running only ferry, and a
pair running only torch.distributed.rpc. Each system is measured with
nothing of the other alive: TensorPipe's reactor busy-polls while idle
(about half a core per process here, the `idle_cpu` row), which in shared
processes would take from ferry's calls the CPU TensorPipe does not use
itself. worker0 calls `echo` -- a Python function of this program,
returning its argument, an 8-byte uint8 tensor -- on worker1:

  native      ferry.rpc_sync("worker1", "py_echo", ...): the same function
              registered with ferry, called by its name (what ferry.rpc's
              call costs over)
  ferry.rpc   rpc.rpc_sync("worker1", echo, ...) through ferry.rpc: echo
              travels as "__main__:echo", resolved on worker1
  tensorpipe  torch.distributed.rpc.rpc_sync("worker1", echo, ...):
              TensorPipe's defaults, echo pickled by reference

Rows (ferry_bench's format, suite "rpc_api"), each the median over the
rounds: latency_p50_us of one synchronous call at a time (native and
ferry.rpc alternate call by call), calls_per_s with 16 calls in flight
(rpc_async, closed loop), cpu_us_per_call: the CPU both processes used
in that loop per call, and idle_cpu: the CPU seconds per second both
processes of the pair use while no call is made (each measured in turn).
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

SYSTEMS = {"ferry": ("native", "ferry.rpc"), "tensorpipe": ("tensorpipe",)}
_ROWS = "rpc_api_bench rows: "


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def echo(x):
    """What ferry.rpc and TensorPipe call, by reference."""
    return x


def idle_cpu(seconds):
    """This process's CPU seconds per second over `seconds` of doing
    nothing (what its RPC system's own threads use)."""
    start = time.process_time()
    time.sleep(seconds)
    return (time.process_time() - start) / seconds


def cpu_now():
    """This process's CPU seconds so far."""
    return time.process_time()


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
    done += len(pending)
    return done / (time.perf_counter() - start), done


def measure(systems, calls, seconds, remote):
    """worker0's side of a phase: {(metric, system): value}. `systems`:
    name -> (sync call, async issue); `remote(fn, *args)`: fn(*args) run
    on worker1, synchronously."""
    for sync, _ in systems.values():  # Warm-up.
        for _ in range(calls // 10):
            sync()
    latency = {name: [] for name in systems}
    for _ in range(calls):
        for name, (sync, _) in systems.items():
            latency[name].append(timed_us(sync))
    out = {}
    for name, (_, issue) in systems.items():
        out["latency_p50_us", name] = statistics.median(latency[name])
        cpu = cpu_now() + remote(cpu_now)
        rate, done = calls_per_s(issue, 16, seconds)
        cpu = cpu_now() + remote(cpu_now) - cpu
        out["calls_per_s", name] = rate
        out["cpu_us_per_call", name] = cpu / done * 1e6
    idle = remote(idle_cpu, 1.0) + idle_cpu(1.0)  # One after the other.
    for name in systems:
        out["idle_cpu", name] = idle
    return out


def phase_ferry(calls, seconds):
    import torch

    import ferry
    import ferry.rpc as rpc

    @ferry.register("py_echo")
    def py_echo(x):
        return x

    rpc.init_rpc(f"worker{os.environ['RANK']}")
    out = {}
    if rpc.get_worker_info().id == 0:
        small = torch.zeros(8, dtype=torch.uint8)
        out = measure({
            "native": (
                lambda: ferry.rpc_sync("worker1", "py_echo", args=(small,)),
                lambda: ferry.rpc_async("worker1", "py_echo",
                                        args=(small,))),
            "ferry.rpc": (
                lambda: rpc.rpc_sync("worker1", echo, args=(small,)),
                lambda: rpc.rpc_async("worker1", echo, args=(small,))),
        }, calls, seconds,
            lambda fn, *a: rpc.rpc_sync("worker1", fn, args=a))
    rpc.shutdown()
    return out


def phase_tensorpipe(calls, seconds, port):
    import torch
    import torch.distributed.rpc as tp

    rank = int(os.environ["RANK"])
    tp.init_rpc(f"worker{rank}", rank=rank, world_size=2,
                rpc_backend_options=tp.TensorPipeRpcBackendOptions(
                    init_method=f"tcp://127.0.0.1:{port}"))
    out = {}
    if rank == 0:
        small = torch.zeros(8, dtype=torch.uint8)
        out = measure({
            "tensorpipe": (
                lambda: tp.rpc_sync("worker1", echo, args=(small,)),
                lambda: tp.rpc_async("worker1", echo, args=(small,))),
        }, calls, seconds,
            lambda fn, *a: tp.rpc_sync("worker1", fn, args=a))
    tp.shutdown()
    return out


def run_phase(system, calls, seconds):
    """One pair of processes measuring `system`: ferry's started by
    ferry.launch, TensorPipe's (which has its own rendezvous, on a port
    picked here) directly."""
    cmd = [sys.executable, os.path.abspath(__file__), f"--phase={system}",
           f"--calls={calls}", f"--seconds={seconds}",
           f"--tp-port={free_port()}"]
    if system == "ferry":
        pairs = [subprocess.Popen(
            [sys.executable, "-m", "ferry.launch", "-n", "2", *cmd[1:]],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)]
    else:
        pairs = [subprocess.Popen(
            cmd, env=dict(os.environ, RANK=str(rank), WORLD_SIZE="2"),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for rank in (0, 1)]
    outputs = [p.communicate(timeout=600) for p in pairs]
    for out, _ in outputs:
        for line in out.splitlines():
            if _ROWS in line:
                return json.loads(line.split(_ROWS, 1)[1])
    sys.exit(f"rpc_api_bench: the {system} pair gave no rows (exit "
             f"{[p.returncode for p in pairs]}):\n" +
             "\n".join(out + err for out, err in outputs))


def row(metric, system, value):
    return {"suite": "rpc_api", "metric": metric, "system": system,
            "op": "echo", "size_bytes": 8, "world": 2,
            "inflight": 16 if metric == "calls_per_s" else 1, "value": value}


def drive(args):
    calls, seconds = (300, 0.3) if args.quick else (3000, 2.0)
    rounds = args.rounds or (1 if args.quick else 5)
    values = {}
    for _ in range(rounds):
        for system in SYSTEMS:
            for entry in run_phase(system, calls, seconds):
                values.setdefault((entry[0], entry[1]), []).append(entry[2])
    rows = [row(metric, system, statistics.median(v))
            for (metric, system), v in sorted(values.items())]
    if args.json:
        print(json.dumps(rows))
    else:
        for r in rows:
            print(f"{r['metric']:15s} {r['system']:11s} {r['value']:12.2f}")
    value = {(r["metric"], r["system"]): r["value"] for r in rows}
    for metric in ("latency_p50_us", "calls_per_s", "cpu_us_per_call"):
        for system in ("ferry.rpc", "tensorpipe"):
            print(f"{system} {metric}: "
                  f"{value[metric, system] / value[metric, 'native']:.2f}x "
                  f"native")
    ratio = (value["calls_per_s", "ferry.rpc"]
             / value["calls_per_s", "tensorpipe"])
    print(f"ferry.rpc calls_per_s: {ratio:.2f}x tensorpipe ({rounds} rounds)")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--rounds", type=int, default=0)
    parser.add_argument("--phase", choices=list(SYSTEMS),
                        help=argparse.SUPPRESS)
    parser.add_argument("--calls", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--tp-port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase is None:
        drive(args)
        return
    if args.phase == "ferry":
        out = phase_ferry(args.calls, args.seconds)
    else:
        out = phase_tensorpipe(args.calls, args.seconds, args.tp_port)
    if out:
        print(_ROWS + json.dumps([[m, s, v] for (m, s), v in out.items()]),
              flush=True)


if __name__ == "__main__":
    main()
