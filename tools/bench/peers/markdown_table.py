#!/usr/bin/env python3
"""ferry_bench --json rows (stdin) as BENCHMARKS.md's side-by-side tables:
ferry, bare gRPC, libgloo and the torch peers, with ferry/peer ratios
(ferry's value over the peer's: below 1 is better for ferry in times and
latencies, above 1 in calls/s and MB/s).

  ferry_bench --suite=rpc --peers --json | markdown_table.py
"""

import json
import sys

RPC_METRICS = [
    ("latency_p50_us", 1, 8, "latency p50 (µs)"),
    ("latency_p99_us", 1, 8, "latency p99 (µs)"),
    ("calls_per_s", 1, 8, "calls/s, 1 in flight"),
    ("calls_per_s", 16, 8, "calls/s, 16 in flight"),
    ("calls_per_s", 128, 8, "calls/s, 128 in flight"),
    ("bandwidth_MBps", 1, 1 << 20, "echo 1 MiB (MB/s)"),
    ("bandwidth_MBps", 1, 16 << 20, "echo 16 MiB (MB/s)"),
    ("bandwidth_MBps", 1, 64 << 20, "echo 64 MiB (MB/s)"),
]
# (title, ferry's op, peers as (system, op)).
RPC_TABLES = [
    ("TCP loopback", "echo_tcp", [("grpc", "echo"), ("torch_rpc", "echo")]),
    ("one host's own transports (ferry, gRPC: unix socket; TensorPipe: "
     "shared memory)", "echo",
     [("grpc", "echo_uds"), ("torch_rpc_shm", "echo")]),
]
COLLECTIVE_PEERS = ["gloo", "torch_gloo"]


def fmt(v):
    if v is None:
        return "—"
    return "{:,.0f}".format(v) if v >= 100 else "{:.1f}".format(v)


def ratio(a, b):
    return "—" if a is None or b is None or b == 0 else "%.2fx" % (a / b)


def rpc_tables(rows):
    def get(system, op, metric, inflight, size):
        for r in rows:
            if (r["suite"], r["system"], r["op"], r["metric"], r["inflight"],
                    r["size_bytes"]) == ("rpc", system, op, metric, inflight,
                                         size):
                return r["value"]
        return None

    out = []
    for title, ferry_op, peers in RPC_TABLES:
        names = ["%s %s" % p for p in peers]
        out.append("**%s**\n" % title)
        out.append("| metric | ferry %s | %s | %s |" % (
            ferry_op, " | ".join(names),
            " | ".join("ferry / %s" % p[0] for p in peers)))
        out.append("|---|" + "---:|" * (1 + 2 * len(peers)))
        for metric, inflight, size, label in RPC_METRICS:
            ferry = get("ferry", ferry_op, metric, inflight, size)
            values = [get(s, o, metric, inflight, size) for s, o in peers]
            out.append("| %s | %s | %s | %s |" % (
                label, fmt(ferry), " | ".join(fmt(v) for v in values),
                " | ".join(ratio(ferry, v) for v in values)))
        out.append("")
    return out


def size_label(b):
    if b >= 1 << 20:
        return "%d MiB" % (b >> 20)
    if b >= 1 << 10:
        return "%d KiB" % (b >> 10)
    return "%d B" % b


def collective_table(rows):
    cells, keys = {}, []
    for r in rows:
        if r["suite"] != "collectives":
            continue
        key = (r["world"], r["op"], r["size_bytes"])
        if key not in cells:
            keys.append(key)
        cells.setdefault(key, {})[r["system"]] = r["value"]
    if not keys:
        return []
    out = ["| op | per-rank size | world | ferry (µs) | %s | %s |" % (
        " | ".join("%s (µs)" % p for p in COLLECTIVE_PEERS),
        " | ".join("ferry / %s" % p for p in COLLECTIVE_PEERS)),
        "|---|---|---:|" + "---:|" * (1 + 2 * len(COLLECTIVE_PEERS))]
    for world, op, size in keys:
        c = cells[(world, op, size)]
        ferry = c.get("ferry")
        out.append("| %s | %s | %d | %s | %s | %s |" % (
            op, size_label(size), world, fmt(ferry),
            " | ".join(fmt(c.get(p)) for p in COLLECTIVE_PEERS),
            " | ".join(ratio(ferry, c.get(p)) for p in COLLECTIVE_PEERS)))
    return out


def main():
    rows = [json.loads(line) for line in sys.stdin if line.startswith("{")]
    if any(r["suite"] == "rpc" for r in rows):
        print("\n".join(rpc_tables(rows)))
    print("\n".join(collective_table(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
