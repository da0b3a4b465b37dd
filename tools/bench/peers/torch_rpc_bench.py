#!/usr/bin/env python3
"""torch.distributed.rpc (TensorPipe) measured as ferry_bench's RPC suite
measures ferry (tools/bench/rpc_bench.cc), for ferry_bench --peers.

worker0 (this process) calls `echo` on worker1 (a child process), both on
127.0.0.1 with ports picked free. The payload is a uint8 tensor; small calls
carry 8 bytes. Definitions, as ferry_bench's:
  latency_p50_us/p99_us  sequential 8-byte echoes (a tenth more first as
                         warm-up), nearest-rank percentiles; inflight 1
  calls_per_s            closed loop: `inflight` echoes outstanding, each
                         completion issuing the next, for a fixed time
  bandwidth_MBps         one warm-up echo, then sequential echoes of
                         size_bytes: size_bytes x echoes / seconds / 1e6
                         (the payload counted once, though it travels both
                         ways)

Systems:
  torch_rpc      TensorPipe restricted to TCP: transport "uv", channel
                 "basic" (what two hosts would use)
  torch_rpc_shm  TensorPipe's defaults: on one host its shared-memory
                 transport and cross-memory-attach channels

  torch_rpc_bench.py [--system=torch_rpc] [--quick] [--rounds=N]
      the whole suite, medians over N interleaved rounds, rows on stdout
  torch_rpc_bench.py --serve [--system=...]
      requests on stdin (peer_common.py): "latency N",
      "throughput INFLIGHT SECONDS", "bandwidth BYTES ECHOES"
"""

import argparse
import multiprocessing
import sys
import threading
import time

# No __pycache__ beside the scripts (a checkout, or Bazel's runfiles).
sys.dont_write_bytecode = True
import peer_common  # noqa: E402

CALL_TIMEOUT_S = 60

SYSTEMS = {
    "torch_rpc": {"_transports": ["uv"], "_channels": ["basic"]},
    "torch_rpc_shm": {},
}


def echo(t):
    """The remote function: returns its argument (worker1)."""
    return t


def rpc_options(system, port):
    from torch.distributed import rpc
    return rpc.TensorPipeRpcBackendOptions(
        init_method="tcp://127.0.0.1:%d" % port, rpc_timeout=CALL_TIMEOUT_S,
        **SYSTEMS[system])


def callee(system, port):
    """worker1: serves echoes until worker0 shuts the group down."""
    peer_common.use_loopback()
    from torch.distributed import rpc
    rpc.init_rpc("worker1", rank=1, world_size=2,
                 rpc_backend_options=rpc_options(system, port))
    rpc.shutdown()


def payload(size):
    import torch
    pattern = torch.arange(256, dtype=torch.uint8)
    return pattern.repeat((size + 255) // 256)[:size].clone()


class Caller(peer_common.EchoCaller):
    """worker0's measurements, with ferry_bench's definitions."""

    def __init__(self, system):
        self.system = system

    def payload(self, size):
        return payload(size)

    def call(self, t):
        from torch.distributed import rpc
        return rpc.rpc_sync("worker1", echo, args=(t,))

    def throughput(self, inflight, seconds):
        from torch.distributed import rpc
        t = payload(8)
        lock = threading.Lock()
        state = {"completed": 0, "outstanding": inflight, "error": None}
        drained = threading.Event()
        end = time.perf_counter() + seconds

        def issue():
            rpc.rpc_async("worker1", echo, args=(t,)).add_done_callback(done)

        def done(fut):
            error = None
            try:
                fut.wait()
            except Exception as e:  # Counted below; the loop stops.
                error = e
            with lock:
                if error is not None and state["error"] is None:
                    state["error"] = error
                state["completed"] += 1
                again = state["error"] is None and time.perf_counter() < end
                if not again:
                    state["outstanding"] -= 1
                    if state["outstanding"] == 0:
                        drained.set()
            if again:
                issue()

        start = time.perf_counter()
        for _ in range(inflight):
            issue()
        if not drained.wait(seconds + CALL_TIMEOUT_S):
            raise RuntimeError("throughput run did not drain")
        if state["error"] is not None:
            raise state["error"]
        rate = state["completed"] / (time.perf_counter() - start)
        return [self.row("calls_per_s", 8, inflight, rate)]


def suite_requests(quick):
    """ferry_bench's RPC suite, as requests (tools/bench/rpc_bench.cc)."""
    requests = [["latency", str(300 if quick else 2000)]]
    for inflight in (1, 16, 128):
        requests.append(["throughput", str(inflight),
                         "0.3" if quick else "1"])
    for mib in (1, 16, 64):
        echoes = 2 if quick else (3 if mib == 64 else 8)
        requests.append(["bandwidth", str(mib << 20), str(echoes)])
    return requests


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--system", choices=sorted(SYSTEMS),
                        default="torch_rpc")
    parser.add_argument("--serve", action="store_true")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=0)
    args = parser.parse_args()
    peer_common.use_loopback()
    from torch.distributed import rpc
    port = peer_common.free_port()
    worker1 = multiprocessing.get_context("spawn").Process(
        target=callee, args=(args.system, port), daemon=True)
    worker1.start()
    rpc.init_rpc("worker0", rank=0, world_size=2,
                 rpc_backend_options=rpc_options(args.system, port))
    caller = Caller(args.system)
    if args.serve:
        print("ok", flush=True)  # Ready.
        peer_common.serve(caller.handle)
    else:
        rounds = args.rounds or (1 if args.quick else 3)
        peer_common.print_medians(
            [sum((caller.handle(r) for r in suite_requests(args.quick)), [])
             for _ in range(rounds)])
    rpc.shutdown()
    worker1.join(CALL_TIMEOUT_S)
    return 0


if __name__ == "__main__":
    sys.exit(main())
