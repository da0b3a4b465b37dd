#!/usr/bin/env python3
"""Ray measured as ferry_bench measures ferry, for ferry_bench --peers: an
actor call as the RPC suite's echo (tools/bench/rpc_bench.cc), and
ray.util.collective's CPU collectives (its "gloo" backend: torch's Gloo
under Ray's actors) as the collectives suite's ops
(tools/bench/collective_bench.cc).

One local Ray instance (ray.init on 127.0.0.1, no dashboard), started by
this process, which is the driver.

  ray_actor       the driver calls `echo` on one actor; the payload is a
                  numpy uint8 array (Ray passes arrays over 100 KiB through
                  its shared-memory object store, zero-copy on read).
                  latency_p50_us/p99_us, calls_per_s (closed loop:
                  `inflight` calls outstanding, each completion issuing the
                  next, through ray.wait), bandwidth_MBps: the definitions
                  of torch_rpc_bench.py
  ray_collective  W actors in one collective group; each builds its
                  buffers, runs one warm-up op, waits at the group's
                  barrier, then runs `iterations` ops; the time per op runs
                  from the first actor's start to the last actor's end
                  (CLOCK_MONOTONIC, common to one host's processes). Ops as
                  torch_gloo_bench.py's; all_to_all_single is "unsupported"
                  (ray.util.collective has none)

Ray comes from the peers environment (tools/dev peers); run with another
Python, the program answers "unsupported" at once.

  ray_bench.py --serve --system=ray_actor
      requests on stdin (peer_common.py): "latency N",
      "throughput INFLIGHT SECONDS", "bandwidth BYTES ECHOES"
  ray_bench.py --serve --system=ray_collective --world=W
      requests: "time OP BYTES ITERATIONS"
"""

import argparse
import os
import sys
import time

# No __pycache__ beside the scripts (a checkout, or Bazel's runfiles).
sys.dont_write_bytecode = True
import peer_common  # noqa: E402

CALL_TIMEOUT_S = 60
OPS = ("all_to_all_single", "all_gather", "all_reduce", "reduce_scatter",
       "broadcast")


def start_ray():
    """A local Ray instance on loopback, quiet, sized for a small host."""
    import ray
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(address="local", _node_ip_address="127.0.0.1",
             include_dashboard=False, log_to_driver=False,
             configure_logging=False, num_cpus=max(os.cpu_count() or 1, 4))
    return ray


def payload(size):
    import numpy as np
    return np.resize(np.arange(256, dtype=np.uint8), size)


class ActorCaller(peer_common.EchoCaller):
    """The driver's calls to one Echo actor, with ferry_bench's
    definitions."""

    system = "ray_actor"

    def __init__(self, ray):
        @ray.remote(num_cpus=0)
        class Echo:
            def echo(self, t):
                return t

        self.ray = ray
        self.actor = Echo.remote()
        ray.get(self.actor.echo.remote(payload(8)), timeout=CALL_TIMEOUT_S)

    def payload(self, size):
        return payload(size)

    def call(self, t):
        return self.ray.get(self.actor.echo.remote(t), timeout=CALL_TIMEOUT_S)

    def throughput(self, inflight, seconds):
        t = payload(8)
        start = time.perf_counter()
        end = start + seconds
        pending = [self.actor.echo.remote(t) for _ in range(inflight)]
        completed = 0
        while pending:
            ready, pending = self.ray.wait(pending, num_returns=1,
                                           timeout=CALL_TIMEOUT_S)
            if not ready:
                raise RuntimeError("no echo returned within %d s"
                                   % CALL_TIMEOUT_S)
            for ref in ready:
                self.ray.get(ref)
                completed += 1
                if time.perf_counter() < end:
                    pending.append(self.actor.echo.remote(t))
        rate = completed / (time.perf_counter() - start)
        return [self.row("calls_per_s", 8, inflight, rate)]


def member_class(ray):
    """The actor of one rank of the collective group."""

    @ray.remote(num_cpus=0)
    class Member:
        def __init__(self, world, rank):
            import ray.util.collective as col
            self.col, self.world, self.rank = col, world, rank
            col.init_collective_group(world, rank, backend="gloo",
                                      group_name="bench")

        def make(self, op, size):
            import torch
            col, w = self.col, self.world
            if op == "all_reduce":
                data = torch.ones(max(size // 4, 1), dtype=torch.float32)
                return lambda: col.allreduce(data, "bench")
            if op == "reduce_scatter":
                chunk = max(size // 4 // w, 1)
                inputs = [torch.ones(chunk, dtype=torch.float32)
                          for _ in range(w)]
                output = torch.empty(chunk, dtype=torch.float32)
                return lambda: col.reducescatter(output, inputs, "bench")
            data = torch.ones(size, dtype=torch.uint8)
            if op == "all_gather":
                outputs = [torch.empty(size, dtype=torch.uint8)
                           for _ in range(w)]
                return lambda: col.allgather(outputs, data, "bench")
            if op == "broadcast":
                return lambda: col.broadcast(data, 0, "bench")
            raise ValueError(op)

        def time(self, op, size, iterations):
            run = self.make(op, size)
            run()  # Warm-up.
            self.col.barrier("bench")
            start = time.monotonic()
            for _ in range(iterations):
                run()
            return start, time.monotonic()

    return Member


class CollectiveTimer:
    """W member actors, timed as torch_gloo_bench.py times its ranks."""

    def __init__(self, ray, world):
        self.ray, self.world = ray, world
        member = member_class(ray)
        self.members = [member.remote(world, r) for r in range(world)]
        # Every member made its group (a cheap call each, waited for).
        ray.get([m.__ray_ready__.remote() for m in self.members],
                timeout=CALL_TIMEOUT_S)

    def handle(self, words):
        if len(words) != 4 or words[0] != "time" or words[1] not in OPS:
            raise ValueError("bad request: " + " ".join(words))
        op, size, iterations = words[1], int(words[2]), int(words[3])
        if size <= 0 or iterations <= 0:
            raise ValueError("bad request: " + " ".join(words))
        if op == "all_to_all_single":
            raise peer_common.Unsupported(
                "ray.util.collective has no all_to_all")
        spans = self.ray.get(
            [m.time.remote(op, size, iterations) for m in self.members],
            timeout=CALL_TIMEOUT_S * 5)
        first = min(s for s, _ in spans)
        last = max(e for _, e in spans)
        return [peer_common.row("collectives", "op_time_us",
                                "ray_collective", op, size, self.world, 1,
                                (last - first) / iterations * 1e6)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--system", choices=("ray_actor", "ray_collective"),
                        default="ray_actor")
    parser.add_argument("--world", type=int, default=2)
    parser.add_argument("--serve", action="store_true")
    args = parser.parse_args()
    peer_common.use_loopback()
    try:
        import ray  # noqa: F401
    except ImportError:
        # ferry_bench leaves Ray out, saying why.
        print("unsupported Ray is not installed in %s (it is in the peers "
              "environment: tools/dev peers)" % sys.executable, flush=True)
        return 0
    ray = start_ray()
    handler = (ActorCaller(ray) if args.system == "ray_actor"
               else CollectiveTimer(ray, args.world))
    if args.serve:
        print("ok", flush=True)  # Ready.
        peer_common.serve(handler.handle)
    else:
        for words in (["latency", "300"], ["throughput", "16", "1"]):
            for r in handler.handle(words):
                peer_common.print_row(r)
    ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
