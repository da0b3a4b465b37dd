"""Runs a Python script as N local workers, torchrun-style.

    python3 -m ferry.launch -n 4 script.py [ARGS...]

Each process gets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (what
``ferry.init()`` reads). Rank 0 starts first on a port it picks
(MASTER_PORT=0) and reports it through FERRY_ADDRESS_FILE; the others start
with that port. Output lines are prefixed with the rank. Exits with the
first non-zero exit status (the others are then stopped), or 0; every
process is stopped after --timeout seconds.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from typing import IO, Mapping, Sequence


def _pump(rank: int, stream: IO[bytes], out: IO[str]) -> None:
    for line in iter(stream.readline, b""):
        out.write(f"[{rank}] {line.decode(errors='replace')}")
        out.flush()


def _start(rank: int, world: int, port: int, cmd: Sequence[str],
           extra_env: Mapping[str, str],
           address_file: str | None = None) -> subprocess.Popen[bytes]:
    env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world),
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), **extra_env)
    if address_file:
        env["FERRY_ADDRESS_FILE"] = address_file
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)
    threading.Thread(target=_pump, args=(rank, p.stdout, sys.stdout),
                     daemon=True).start()
    return p


def _wait_address(path: str, first: subprocess.Popen[bytes],
                  deadline: float) -> str | None:
    while time.monotonic() < deadline:
        if os.path.exists(path):
            with open(path) as f:
                return f.read().strip()
        if first.poll() is not None:
            return None
        time.sleep(0.02)
    return None


def _stop(procs: Sequence[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def run(nproc: int, cmd: Sequence[str], timeout: float = 120.0,
        env: Mapping[str, str] | None = None) -> int:
    """Runs ``cmd`` as ``nproc`` workers; returns the exit status."""
    deadline = time.monotonic() + timeout
    with tempfile.TemporaryDirectory(prefix="ferry-launch-") as d:
        address_file = os.path.join(d, "address")
        procs = [_start(0, nproc, 0, cmd, env or {}, address_file)]
        address = _wait_address(address_file, procs[0], deadline)
        if address is None:
            _stop(procs)
            print("ferry.launch: rank 0 did not start listening",
                  file=sys.stderr)
            return procs[0].returncode or 1
        port = int(address.rsplit(":", 1)[1])
        procs += [_start(r, nproc, port, cmd, env or {})
                  for r in range(1, nproc)]
        status = 0
        try:
            while time.monotonic() < deadline:
                codes = [p.poll() for p in procs]
                # (No None is left; mypy does not narrow by `not in`.)
                failed: list[int] = [
                    c for c in codes  # type: ignore[misc]
                    if c not in (None, 0)]
                if failed:
                    status = failed[0]
                    break
                if all(c == 0 for c in codes):
                    return 0
                time.sleep(0.05)
            else:
                print(f"ferry.launch: still running after {timeout} s",
                      file=sys.stderr)
                status = 1
        finally:
            _stop(procs)
        return status


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m ferry.launch",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("-n", "--nproc", type=int, required=True)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    a = parser.parse_args(argv)
    return run(a.nproc, [sys.executable, a.script] + a.args, a.timeout)


if __name__ == "__main__":
    sys.exit(main())
