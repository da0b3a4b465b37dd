"""torch's own distributed test suite on ferry, with gloo as the reference.

Runs tests of ``torch/testing/_internal/distributed/distributed_test.py``
(``DistributedTest._DistTestBase``, shipped with torch) on the backends and
world sizes asked, each test in fresh processes as torch runs them, and
reports, per world size, how many of the tests gloo passes ferry passes:

    python3 tools/python/torch_suite.py --select=subset      # tools/dev test
    python3 tools/python/torch_suite.py --select=full --json=out.json
    python3 tools/python/torch_suite.py test_send_recv test_barrier -w 3

(``tools/dev torch-suite`` runs the full selection.) Exit status 0 when, at
every world size, ferry passes at least ``--target`` (default 90 %) of the
tests gloo passes, no ferry test hung (every test is bounded by
``--timeout``), and every test gloo passes and ferry fails is one of
KNOWN_FAILURES below (the README lists them with the same reasons).

What the runner does to run the suite here, as torch_ucc's runner does:
- ``expecttest`` is not packaged by Debian: a stand-in module;
- torch 1.13's suite switches DDP to its ReplicatedTensor mode, whose
  import fails on Python 3.11: that switch is turned off;
- ferry is listed as a plugin backend with DDP and subgroups;
- tests gated on a backend's *name* although they are backend-neutral CPU
  tests (CPU all_to_all only on MPI; barrier timeouts, coalesced
  all_reduce, batched send/recv only on gloo) run on ferry and gloo alike.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import types

# This file sits beside the package's sources (tools/python/ferry), which
# are not the built package: `import ferry` must find the built one.
# (Compared resolved: run from Bazel's runfiles, this file is a symlink and
# Python puts the directory of its target on the path.)
_HERE = os.path.dirname(os.path.realpath(__file__))
sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != _HERE]

# ---- The selection ----

# Tests that need CUDA, NCCL or MPI by what they do (not by a name gate):
# never selected.
_GPU_WORDS = ("cuda", "nccl", "multigpu", "_gpu", "gpu_", "SyncBatchNorm",
              "sync_bn", "non_default_stream", "with_amp", "high_priority")

# Backend-neutral CPU tests torch gates on a backend's name; their skip
# reasons, exactly. Lifted for ferry and gloo alike.
_NAME_GATES = {
    "Only MPI supports CPU all_to_all_single",
    "Only MPI supports all_to_all",
    "Only gloo backend supports timeouts",
    "GLOO Batch Send Recv CPU",
    "get_future is only supported on mpi, nccl and gloo",
    "Only Nccl & Gloo backend support DistributedDataParallel",
    "Only Gloo backend support sparse all reduce",
    "Only Gloo backend supports sparse all reduce",  # (torch 2.x's words)
}

# Helpers whose body picks the CPU path for "gloo" or "mpi" by name (and
# none for other backends): run on ferry as on gloo.
_BODY_GATES = ["_test_accumulate_gradients_no_sync"]

# A few of each kind, for `tools/dev test` (both backends, world sizes 2
# and 3): collectives, p2p, groups, barriers and their timeouts, object
# collectives, DDP.
SUBSET = {
    2: [
        "test_all_reduce_sum", "test_all_reduce_coalesced_sum",
        "test_all_gather", "test_all_to_all_single_unequal_split",
        "test_broadcast", "test_reduce_sum", "test_scatter", "test_gather",
        "test_send_recv_with_tag", "test_send_recv_any_source",
        "test_batch_isend_irecv_gloo_tags", "test_barrier_timeout_global",
        "test_all_gather_object_default_pg", "test_DistributedDataParallelCPU",
    ],
    3: [
        "test_all_reduce_group_sum", "test_all_to_all_group", "test_send_recv",
        "test_barrier_timeout_group", "test_scatter_object_list",
    ],
}

# Tests gloo passes and ferry does not, with why (README's list): on torch
# 1.13, where ferry's backend is a ProcessGroup (on torch 2.x, none).
KNOWN_FAILURES = {
    "test_monitored_barrier_gloo":
        "monitored_barrier is implemented by ProcessGroupGloo itself; "
        "torch 1.13 refuses it on any other backend",
    "test_monitored_barrier_gloo_subgroup": "as above",
    "test_monitored_barrier_gloo_rank_0_timeout": "as above",
    "test_monitored_barrier_wait_all_ranks": "as above",
    "test_monitored_barrier_failure_order": "as above",
}


def known_failures():
    """The known failures for the torch this runs on."""
    import ferry.distributed  # noqa: E402 -- imports torch: only here
    if ferry.distributed._ON_BACKEND:
        return {}
    return KNOWN_FAILURES


def selected(names, select, world):
    if select == "subset":
        return [n for n in SUBSET.get(world, []) if n in names]
    return [n for n in names
            if not any(w.lower() in n.lower() for w in _GPU_WORDS)]


# ---- Suite mode: this process (and the ones torch spawns from it) ----

_SUITE = os.environ.get("FERRY_TORCH_SUITE_BACKEND")

if _SUITE:
    # expecttest is not in Debian: what torch's test utilities use of it.
    if "expecttest" not in sys.modules:
        import unittest as _unittest
        _stand_in = types.ModuleType("expecttest")
        _stand_in.ACCEPT = False
        _stand_in.TestCase = _unittest.TestCase
        sys.modules["expecttest"] = _stand_in

    os.environ["BACKEND"] = _SUITE
    os.environ.setdefault("INIT_METHOD", "file://" + os.path.join(
        tempfile.gettempdir(), "ferry-torch-suite-init"))
    os.environ.setdefault("TEMP_DIR", tempfile.gettempdir())

    import torch  # noqa: E402
    from torch.testing._internal import common_distributed as _cd  # noqa

    try:  # torch 1.13 only (2.x has no ReplicatedTensor mode).
        import torch.nn.parallel._replicated_tensor_ddp_utils as _rt  # noqa
        # DDP with ReplicatedTensor imports modules that fail on Python 3.11.
        _rt._set_ddp_with_replicated_tensor = lambda value: None
    except ImportError:
        pass
    # Every test bounded (seconds), none overridden longer.
    _cd.TIMEOUT_DEFAULT = int(os.environ.get("FERRY_TORCH_SUITE_TIMEOUT",
                                             "60"))
    getattr(_cd, "TIMEOUT_OVERRIDE", {}).clear()
    if _SUITE == "ferry":
        import ferry.distributed  # noqa: F401,E402 -- registers "ferry"
        for feature in ("plugin", "ddp", "subgroup"):
            _cd.DistTestCases.backend_feature[feature].add("ferry")

    from torch.testing._internal.distributed import distributed_test as _dt

    class TestDistBackendWithSpawn(_dt.TestDistBackend,
                                   _dt.DistributedTest._DistTestBase):
        def setUp(self):
            super().setUp()
            self._spawn_processes()

    _base = _dt.DistributedTest._DistTestBase
    for _name in dir(_base):
        _fn = getattr(_base, _name)
        _why = getattr(_fn, "__unittest_skip_why__", None) or ""
        # require_backend(...) sets with gloo in them: CPU tests that run on
        # gloo (the object collectives' "gpu" feature set is {nccl, gloo}).
        # torch 2.x names the backend in the reason: "Test requires backend
        # ferry to be one of {...}".
        if _why in _NAME_GATES or (
                re.match(r"Test requires backend (\S+ )?to be one of", _why)
                and "'gloo'" in _why):
            _fn.__unittest_skip__ = False

    def _as_if_gloo(fn):
        """`fn` reading the suite's BACKEND as "gloo": for helpers that pick
        their CPU path by the backend's name."""
        def run(*args, **kwargs):
            saved, _dt.BACKEND = _dt.BACKEND, "gloo"
            try:
                return fn(*args, **kwargs)
            finally:
                _dt.BACKEND = saved
        return run

    if _SUITE == "ferry":
        for _name in _BODY_GATES:
            setattr(_base, _name, _as_if_gloo(getattr(_base, _name)))


def _run_suite(names):
    """Runs each test, printing one JSON line per test."""
    import unittest

    class Result(unittest.TestResult):
        outcome = "passed"
        detail = ""

        def addFailure(self, test, err):
            self.outcome, self.detail = "failed", self._exc_info_to_string(
                err, test)

        def addError(self, test, err):
            self.addFailure(test, err)

        def addSkip(self, test, reason):
            self.outcome, self.detail = "skipped", reason

    for name in names:
        start = time.monotonic()
        result = Result()
        TestDistBackendWithSpawn(name).run(result)
        outcome, detail = result.outcome, result.detail
        if outcome == "failed" and "Timing out after" in detail:
            outcome = "timeout"
        print("FERRY_TORCH_SUITE " + json.dumps({
            "test": name, "outcome": outcome,
            "seconds": round(time.monotonic() - start, 2),
            "detail": detail[-2000:]}), flush=True)


# ---- Controller mode ----

_LIST = """
import sys, types, unittest
m = types.ModuleType("expecttest"); m.ACCEPT = False
m.TestCase = unittest.TestCase; sys.modules["expecttest"] = m
from torch.testing._internal import common_distributed as cd
from torch.testing._internal.distributed import distributed_test as d
base = d.DistributedTest._DistTestBase
# Wrappers that skip unless there are GPUs (the same code object for every
# test they wrap).
gpu = {cd.skip_if_lt_x_gpu(2)(lambda: 0).__code__,
       cd.skip_if_no_gpu(lambda: 0).__code__}
def needs_gpu(f):
    while f is not None:
        if getattr(f, "__code__", None) in gpu:
            return True
        f = getattr(f, "__wrapped__", None)
    return False
print(" ".join(n for n in dir(base)
               if n.startswith("test_") and not needs_gpu(getattr(base, n))))
"""


def _suite_names():
    """The tests of _DistTestBase (listed without running anything), but
    those that skip themselves without GPUs."""
    env = dict(os.environ, BACKEND="gloo", WORLD_SIZE="2",
               TEMP_DIR=tempfile.gettempdir())
    out = subprocess.run([sys.executable, "-c", _LIST], env=env, check=True,
                         stdout=subprocess.PIPE).stdout.decode()
    return out.split()


def _run_backend(backend, world, names, timeout, verbose):
    """Runs `names` on `backend` at `world` ranks in a process of their
    own; {test: record}."""
    env = dict(os.environ, FERRY_TORCH_SUITE_BACKEND=backend,
               WORLD_SIZE=str(world), FERRY_TORCH_SUITE_TIMEOUT=str(timeout))
    env.pop("INIT_METHOD", None)
    cmd = [sys.executable, os.path.abspath(__file__), "--suite-mode", *names]
    records = {}
    tail = []  # The suite process's last other lines, shown if it dies.
    # Bounded as a whole too: each test's own bound, and a margin.
    deadline = time.monotonic() + len(names) * (timeout + 30) + 60
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    try:
        for line in proc.stdout:
            text = line.decode(errors="replace")
            if text.startswith("FERRY_TORCH_SUITE "):
                r = json.loads(text[len("FERRY_TORCH_SUITE "):])
                records[r["test"]] = r
                print(f"  {backend:5s} w{world} {r['outcome']:8s} "
                      f"{r['seconds']:6.1f}s {r['test']}", flush=True)
                if verbose and r["outcome"] in ("failed", "timeout", "skipped"):
                    print(r["detail"], flush=True)
            else:
                tail = (tail + [text.rstrip()])[-30:]
            if time.monotonic() > deadline:
                break
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    if len(records) < len(names):
        print(f"  {backend} w{world}: the suite process stopped (exit "
              f"{proc.returncode}) after {len(records)} of {len(names)} "
              "tests; its last lines:\n    " + "\n    ".join(tail),
              flush=True)
    for n in names:
        records.setdefault(n, {"test": n, "outcome": "timeout", "seconds": 0,
                               "detail": "the suite process was stopped"})
    return records


def _report(world, gloo, ferry, target):
    """Prints the comparison at one world size; whether it meets the bar."""
    gloo_passed = [n for n, r in gloo.items() if r["outcome"] == "passed"]
    both = [n for n in gloo_passed if ferry[n]["outcome"] == "passed"]
    missing = [n for n in gloo_passed if n not in both]
    hung = [n for n, r in ferry.items() if r["outcome"] == "timeout"]
    known = known_failures()
    unknown = [n for n in missing if n not in known]
    extra = [n for n, r in ferry.items()
             if r["outcome"] == "passed" and gloo[n]["outcome"] != "passed"]
    share = len(both) / len(gloo_passed) if gloo_passed else 1.0
    print(f"world {world}: gloo passed {len(gloo_passed)} of {len(gloo)}; "
          f"ferry passed {len(both)} of those ({100 * share:.1f} %), "
          f"{len(extra)} more that gloo did not; ferry hung: {len(hung)}")
    for n in missing:
        why = known.get(n, "NOT KNOWN: " + ferry[n]["outcome"])
        print(f"  ferry fails {n}: {why}")
    for n in hung:
        print(f"  ferry hung (bounded at the timeout): {n}")
    return share >= target and not hung and not unknown


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("tests", nargs="*", help="test names (default: --select)")
    p.add_argument("--select", choices=["subset", "full"], default="subset")
    p.add_argument("-w", "--world-size", type=int, action="append",
                   help="world sizes (default: 2 and 3)")
    p.add_argument("-b", "--backend", action="append",
                   choices=["ferry", "gloo"],
                   help="backends (default: both; ferry is compared with "
                        "gloo only when both run)")
    p.add_argument("--timeout", type=int, default=60,
                   help="seconds per test (torch's bound on its processes)")
    p.add_argument("--target", type=float, default=0.9)
    p.add_argument("--json", help="write every record here")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="print the output of failed tests")
    p.add_argument("--suite-mode", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.suite_mode:
        _run_suite(args.tests)
        return 0
    all_names = _suite_names()
    backends = args.backend or ["gloo", "ferry"]
    ok = True
    results = {}
    for world in args.world_size or [2, 3]:
        names = args.tests or selected(all_names, args.select, world)
        start = time.monotonic()
        by_backend = {}
        for backend in backends:
            by_backend[backend] = _run_backend(backend, world, names,
                                               args.timeout, args.verbose)
        results[world] = by_backend
        print(f"world {world}: {len(names)} tests in "
              f"{time.monotonic() - start:.0f} s")
        if "gloo" in by_backend and "ferry" in by_backend:
            ok = _report(world, by_backend["gloo"], by_backend["ferry"],
                         args.target) and ok
        elif "ferry" in by_backend:
            bad = [n for n, r in by_backend["ferry"].items()
                   if r["outcome"] in ("failed", "timeout")]
            ok = ok and not bad
    if args.json:
        with open(args.json, "w") as f:
            json.dump({str(w): r for w, r in results.items()}, f, indent=1)
    print("torch suite: PASSED" if ok else "torch suite: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
