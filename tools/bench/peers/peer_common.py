"""What ferry_bench's peer programs share: rows, percentiles, ports, the
serve loop.

A row is ferry_bench's (docs/DESIGN.md "Performance"): one JSON object per line,
{"suite","metric","system","op","size_bytes","world","inflight","value"}.

Serve mode (ferry_bench --peers): the program reads one request per line on
stdin and answers each with zero or more row lines and then exactly one
status line: "ok", "unsupported <why>" (this peer cannot do that request;
ferry_bench leaves its row out) or "error <why>". EOF or "quit" ends it.
"""

import json
import os
import socket
import sys
import time

# Only loopback: TensorPipe and Gloo otherwise pick the address their host
# name resolves to.
LOOPBACK_ENV = {"TP_SOCKET_IFNAME": "lo", "GLOO_SOCKET_IFNAME": "lo"}


def use_loopback():
    """Before torch is imported: loopback only, and torch's C++ INFO lines
    (e.g. "RPC agent ... is shutting down") off unless asked for."""
    os.environ.update(LOOPBACK_ENV)
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "WARNING")
    os.environ.setdefault("GLOG_minloglevel", "1")


def free_port():
    """A port free on 127.0.0.1 now (bound to port 0, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentile(samples, p):
    """ferry_bench's Percentile (tools/bench/report.cc): nearest rank."""
    if not samples:
        return 0.0
    s = sorted(samples)
    index = int(p / 100.0 * (len(s) - 1) + 0.5)
    return s[min(index, len(s) - 1)]


def median(values):
    """ferry_bench's median of rounds: the upper middle of an even count."""
    return sorted(values)[len(values) // 2]


def row(suite, metric, system, op, size_bytes, world, inflight, value):
    return {"suite": suite, "metric": metric, "system": system, "op": op,
            "size_bytes": int(size_bytes), "world": int(world),
            "inflight": int(inflight), "value": round(float(value), 3)}


def print_row(r):
    print(json.dumps(r, separators=(",", ":")), flush=True)


def row_key(r):
    return tuple(r[k] for k in ("suite", "metric", "system", "op",
                                "size_bytes", "world", "inflight"))


def print_medians(rounds_of_rows):
    """One row per key, its value the median over rounds, in first-seen
    order."""
    values, first = {}, {}
    for rows in rounds_of_rows:
        for r in rows:
            key = row_key(r)
            first.setdefault(key, r)
            values.setdefault(key, []).append(r["value"])
    for key, r in first.items():
        print_row(dict(r, value=round(median(values[key]), 3)))


class Unsupported(Exception):
    """A request this peer cannot do (e.g. an op its backend lacks)."""


def serve(handle):
    """The serve loop: handle(words) returns rows or raises Unsupported."""
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "quit":
            break
        try:
            for r in handle(words):
                print_row(r)
            print("ok", flush=True)
        except Unsupported as e:
            print("unsupported " + one_line(e, with_type=False), flush=True)
        except Exception as e:  # Reported to ferry_bench, which stops.
            print("error " + one_line(e), flush=True)


def one_line(e, with_type=True):
    text = (type(e).__name__ + ": " if with_type else "") + str(e)
    return text.replace("\n", " ")[:500]


class EchoCaller:
    """ferry_bench's RPC suite as one system's echo calls (tools/bench/
    rpc_bench.cc): latency and bandwidth here; a subclass gives `system`,
    payload(size), call(payload) (one echo, waited for) and
    throughput(inflight, seconds) (its own closed loop)."""

    system = ""

    def payload(self, size):
        raise NotImplementedError

    def call(self, t):
        raise NotImplementedError

    def throughput(self, inflight, seconds):
        raise NotImplementedError

    def latency(self, iterations):
        t = self.payload(8)
        for _ in range(iterations // 10):  # Warm-up.
            self.call(t)
        samples = []
        for _ in range(iterations):
            start = time.perf_counter()
            self.call(t)
            samples.append((time.perf_counter() - start) * 1e6)
        return [self.row("latency_p50_us", 8, 1, percentile(samples, 50)),
                self.row("latency_p99_us", 8, 1, percentile(samples, 99))]

    def bandwidth(self, size, echoes):
        t = self.payload(size)
        self.call(t)  # Warm-up.
        start = time.perf_counter()
        for _ in range(echoes):
            self.call(t)
        seconds = time.perf_counter() - start
        return [self.row("bandwidth_MBps", size, 1,
                         size * echoes / seconds / 1e6)]

    def row(self, metric, size, inflight, value):
        return row("rpc", metric, self.system, "echo", size, 2, inflight,
                   value)

    def handle(self, words):
        kind, args = words[0], words[1:]
        if kind == "latency" and len(args) == 1:
            return self.latency(int(args[0]))
        if kind == "throughput" and len(args) == 2:
            return self.throughput(int(args[0]), float(args[1]))
        if kind == "bandwidth" and len(args) == 2:
            return self.bandwidth(int(args[0]), int(args[1]))
        raise ValueError("bad request: " + " ".join(words))
