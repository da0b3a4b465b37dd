#!/usr/bin/env python3
"""How close each test came to its timeout, from a `bazel test` log.

    python3 tools/checks/test_headroom.py LOG [--limit FRACTION]

Reads the summary bazel prints at the end of `bazel test` (`//t PASSED in
12.6s`, and for sharded or repeated targets the `Stats over N runs: max =`
line under it), looks up each target's timeout (its `timeout`, or the one
its `size` implies: 60/300/900/3600 s; each shard has the whole timeout) and
prints the targets by the share of it their slowest run used. Targets
above FRACTION (default 1/3: the headroom a test needs on a machine whose
other core is busy) are marked; the exit status is 1 if any is. Cached
results say nothing about this run and are skipped.

tools/dev test prints the slowest targets with it after every run; it
does not fail a run (timings are not asserted), it says where the
headroom went.
"""
import argparse
import re
import subprocess
import sys

SECONDS = {"short": 60, "moderate": 300, "long": 900, "eternal": 3600}

RESULT = re.compile(r"^(//\S+)\s+(PASSED|FAILED|FLAKY|TIMEOUT) in ([\d.]+)s")
STATS = re.compile(r"^\s+Stats over \d+ runs: max = ([\d.]+)s")


def slowest_runs(lines):
    """{label: seconds of its slowest run} for the tests this log ran."""
    times = {}
    last = None
    for line in lines:
        m = RESULT.match(line)
        if m:
            last = m.group(1)
            times[last] = float(m.group(3))
            continue
        m = STATS.match(line)
        if m and last is not None:
            times[last] = max(times[last], float(m.group(1)))
    return times


def timeouts():
    """{label: timeout in seconds} for every test target (bazel's query
    gives each target's timeout, the one its size implies included)."""
    result = {}
    for kind, seconds in SECONDS.items():
        out = subprocess.run(
            ["bazel", "query", "--noshow_progress",
             f"attr(timeout, {kind}, tests(//...))"],
            check=True, capture_output=True, text=True).stdout
        result.update((label, seconds) for label in out.split())
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("log")
    parser.add_argument("--limit", type=float, default=1 / 3)
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args()
    with open(args.log, errors="replace") as f:
        times = slowest_runs(f.read().splitlines())
    limits = timeouts()
    rows = sorted(((t / limits[label], t, limits[label], label)
                   for label, t in times.items() if label in limits),
                  reverse=True)
    over = [r for r in rows if r[0] > args.limit]
    print(f"test headroom: {len(rows)} tests ran, {len(over)} above "
          f"{args.limit:.0%} of their timeout")
    for share, t, limit, label in rows[:max(args.top, len(over))]:
        mark = "  <-- over" if share > args.limit else ""
        print(f"  {share:6.1%}  {t:7.1f} s of {limit:4d} s  {label}{mark}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
