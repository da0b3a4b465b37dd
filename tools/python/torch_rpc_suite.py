"""torch's own RPC tests on ferry.rpc, with TensorPipe as the reference.

Runs the tests of torch's RPC suites (shipped with torch, under
``torch/testing/_internal/distributed/rpc/``) at world size 4 as torch runs
them -- each test in fresh processes -- once with ``torch.distributed.rpc``
(TensorPipe) and once with ``ferry.rpc`` substituted for it in the suites'
modules, and reports how many of the tests TensorPipe passes ferry passes:

    python3 tools/python/torch_rpc_suite.py                 # tools/dev
    python3 tools/python/torch_rpc_suite.py --select=subset # tools/dev test
    python3 tools/python/torch_rpc_suite.py test_self_add test_rref_forward_chain

(``tools/dev torch-rpc-suite`` runs the full selection.) The suites:
``RpcTest`` (with ``RpcTestCommon``), ``JitRpcTest``, and the examples
``ParameterServerTest`` and ``ReinforcementLearningRpcTest``. Distributed
autograd and the distributed optimizer (``DistAutogradTest``,
``DistOptimizerTest``, ``JitDistAutogradTest``) are not run on ferry:
ferry.rpc does not support them (README); they are listed as unsupported.

The substitution: in the suites' modules (and torch's ``dist_utils``,
whose ``dist_init`` starts and stops RPC) the names ``rpc``, ``RRef``,
``WorkerInfo``, ``rpc_sync``, ``rpc_async``, ``remote`` are ferry.rpc's;
the suites' modules are allowed on every worker (``allow=[...]``): they
are the program every worker runs, as ``__main__`` is in a torch RPC
program. The fixture is TensorPipe's with ferry's timeout message.

Exit status 0 when every test TensorPipe passes and ferry fails is in
KNOWN_FAILURES (with its reason) and no other test hung past
``--timeout``. The workers are forked from the suite's process (torch's
MultiProcessTestCase spawns; forking skips importing torch four times per
test), for both backends alike.
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

_HERE = os.path.dirname(os.path.realpath(__file__))
sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != _HERE]

_BACKEND = os.environ.get("FERRY_RPC_SUITE_BACKEND")

# The suites: (module under torch.testing._internal.distributed.rpc,
# class).
SUITES = [
    ("rpc_test", "RpcTest"),
    ("jit.rpc_test", "JitRpcTest"),
    ("examples.parameter_server_test", "ParameterServerTest"),
    ("examples.reinforcement_learning_rpc_test",
     "ReinforcementLearningRpcTest"),
]
# Not run on ferry: ferry.rpc has no distributed autograd nor optimizer.
UNSUPPORTED_SUITES = [
    ("dist_autograd_test", "DistAutogradTest"),
    ("dist_optimizer_test", "DistOptimizerTest"),
    ("jit.dist_autograd_test", "JitDistAutogradTest"),
]
_PREFIX = "torch.testing._internal.distributed.rpc."

# A few of each kind, for `tools/dev test`.
SUBSET = [
    "RpcTest.test_self_add", "RpcTest.test_add_with_id",
    "RpcTest.test_rref_forward_chain", "RpcTest.test_async_function_simple",
    "RpcTest.test_py_function_exception", "RpcTest.test_wait_all",
    "RpcTest.test_user_rrefs_confirmed",
    "JitRpcTest.test_torchscript_function",
    "ParameterServerTest.test_batch_updating_parameter_server",
]

# Why a test TensorPipe passes fails on ferry.rpc, by reason.
REASONS = {
    "pickle": "needs what only pickling sends: an object of the program's "
              "class, a bound method, a future or a module as an argument "
              "or result, a dict with tensor keys (ferry.rpc sends values "
              "and functions by name; it refuses the rest with "
              "TypeError/PermissionError, never pickling)",
    "torchscript": "TorchScript code that itself calls rpc_async/rpc_sync/"
                   "remote or takes RRef[T] arguments: those are torch's "
                   "own agent's TorchScript operators",
    "autograd": "needs distributed autograd (not supported by ferry.rpc)",
    "internals": "reads or drives torch.distributed.rpc's internals "
                 "(rpc.api, the agent object, backend_registry, debug info, "
                 "RRef._get_type/_get_future, the RPC profiler, "
                 "internal.serialize, its C++ options class)",
    "messages": "asserts torch's own wording of an error ferry.rpc raises "
                "with its own (an unknown worker, a taken name, a function "
                "the callee lacks, an RRef's ids; on torch 2.x also an "
                "RRef made before init_rpc, and a remote exception that "
                "cannot be rebuilt, which ferry names by its class)",
    "dense": "expects a non-contiguous view to arrive non-contiguous; "
             "ferry's tensors travel dense",
    "futures": "torch's wait_all (1.13's, 2.14's) exits early only on an "
               "error set in C++; a torch.futures.Future completed from "
               "Python (as "
               "ferry.rpc's are) holds its exception as a value, so "
               "wait_all waits for the other, blocked call and the test "
               "times out (bounded)",
}


def _known(reason, names):
    return {n: reason for n in names.split()}


# The tests TensorPipe passes and ferry.rpc fails, each with its reason
# (README's list; BENCHMARKS.md has the run).
KNOWN_FAILURES = {
    **_known("pickle", """
        RpcTest.test_py_class_constructor RpcTest.test_py_class_instance_method
        RpcTest.test_py_nested_pickle RpcTest.test_pickle_future
        RpcTest.test_return_future RpcTest.test_return_future_async
        RpcTest.test_return_future_remote RpcTest.test_my_parameter_server
        RpcTest.test_py_tensors_in_container
        ParameterServerTest.test_batch_updating_parameter_server
        JitRpcTest.test_create_script_module_on_remote
        JitRpcTest.test_torchscript_functions_not_supported
        JitRpcTest.test_create_local_script_module_rref_in_py"""),
    **_known("autograd", """
        RpcTest.test_owner_rref_backward RpcTest.test_user_rref_backward
        RpcTest.test_profiler_with_autograd_context
        RpcTest.test_profiler_with_autograd_context_single_threaded"""),
    **_known("torchscript", """
        JitRpcTest.test_all_kwargs_are_populated_by_defaults
        JitRpcTest.test_args_and_kwargs_contain_different_types
        JitRpcTest.test_args_kwargs_are_neither_passed
        JitRpcTest.test_async_function_remote
        JitRpcTest.test_async_function_remote_multi
        JitRpcTest.test_async_function_simple
        JitRpcTest.test_call_python_function_remotely_from_script_not_supported
        JitRpcTest.test_call_rpc_with_profiling
        JitRpcTest.test_call_script_function_that_not_exists_remotely_from_script
        JitRpcTest.test_call_script_function_that_raises_remotely_from_script
        JitRpcTest.test_future_passed_between_python_and_jit
        JitRpcTest.test_kwargs_not_passed
        JitRpcTest.test_less_than_needed_args_are_specified
        JitRpcTest.test_load_script_module_with_pickled_rref
        JitRpcTest.test_local_rref_local_value
        JitRpcTest.test_more_than_needed_args_are_specified
        JitRpcTest.test_my_script_module_with_rrefs
        JitRpcTest.test_no_kwargs_are_populated_by_defaults
        JitRpcTest.test_record_function_on_caller_rpc_async
        JitRpcTest.test_remote_script_module
        JitRpcTest.test_return_local_script_class_rref_in_py_and_use_in_script
        JitRpcTest.test_return_local_script_module_rref_in_py_and_use_in_script
        JitRpcTest.test_rpc_async_jit_profiled
        JitRpcTest.test_rpc_torchscript_record_function
        JitRpcTest.test_rref_as_arg_and_return JitRpcTest.test_rref_is_owner
        JitRpcTest.test_rref_jit_pickle_not_supported
        JitRpcTest.test_rref_list_mutate JitRpcTest.test_rref_local_value
        JitRpcTest.test_rref_python_annotation
        JitRpcTest.test_some_kwargs_are_populated_by_defaults
        JitRpcTest.test_unexepected_kwarg_is_specified
        JitRpcTest.test_user_rrefs_confirmed
        JitRpcTest.test_user_rrefs_confirmed_remote"""),
    **_known("internals", """
        RpcTest.test_all_gather RpcTest.test_all_gather_timeout
        RpcTest.test_disable_gil_profiling RpcTest.test_get_worker_infos
        RpcTest.test_shutdown_errors RpcTest.test_wait_all_workers_dense
        RpcTest.test_wait_all_workers_timeout
        RpcTest.test_wait_all_workers_twice_dense
        RpcTest.test_worker_info_pickle RpcTest.test_duplicate_name
        RpcTest.test_register_rpc_backend_and_set_and_start_rpc_backend
        RpcTest.test_rpc_barrier_all RpcTest.test_rpc_barrier_multithreaded
        RpcTest.test_rpc_barrier_partial_subset RpcTest.test_rpc_barrier_subset
        RpcTest.test_debug_info RpcTest.test_rref_context_debug_info
        RpcTest.test_rref_type_blocking RpcTest.test_rref_type_non_blocking
        RpcTest.test_rref_type_owner_blocking
        RpcTest.test_rref_type_owner_non_blocking
        RpcTest.test_rref_type_slow_init
        RpcTest.test_rref_type_with_error_blocking
        RpcTest.test_rref_type_with_error_non_blocking
        RpcTest.test_rref_get_future RpcTest.test_rref_timeout
        RpcTest.test_rref_leak RpcTest.test_cannot_infer_backend_from_options
        RpcTest.test_use_rref_after_shutdown RpcTest.test_rref_proxy_non_exist
        RpcTest.test_server_process_global_profiler
        RpcTest.test_profiler_export_trace
        RpcTest.test_profiler_remote_events_profiled
        RpcTest.test_profiler_remote_events_profiled_single_threaded
        RpcTest.test_profiler_rpc_key_names RpcTest.test_profiler_rpc_memory
        RpcTest.test_profiler_rpc_record_shapes
        RpcTest.test_profiler_with_async_rpc_builtin
        RpcTest.test_profiler_with_async_rpc_builtin_single_threaded
        RpcTest.test_profiler_with_async_rpc_udf
        RpcTest.test_profiler_with_async_rpc_udf_single_threaded
        RpcTest.test_profiler_with_remote_builtin
        RpcTest.test_profiler_with_remote_builtin_single_threaded
        RpcTest.test_profiler_with_remote_udf
        RpcTest.test_profiler_with_remote_udf_single_threaded
        RpcTest.test_profiler_with_script_async_rpc
        RpcTest.test_profiler_with_script_async_rpc_single_threaded
        RpcTest.test_profiler_with_script_remote_rpc
        RpcTest.test_profiler_with_script_remote_rpc_single_threaded
        RpcTest.test_profiler_with_script_sync_rpc
        RpcTest.test_profiler_with_script_sync_rpc_single_threaded
        RpcTest.test_profiler_with_sync_rpc_builtin
        RpcTest.test_profiler_with_sync_rpc_builtin_single_threaded
        RpcTest.test_profiler_with_sync_rpc_udf
        RpcTest.test_profiler_with_sync_rpc_udf_single_threaded
        RpcTest.test_rpc_profiling_async_function
        RpcTest.test_rpc_profiling_async_function_single_threaded
        RpcTest.test_rpc_profiling_remote_record_function"""),
    **_known("messages", """
        RpcTest.test_duplicate_name_2 RpcTest.test_worker_id
        RpcTest.test_function_not_on_callee RpcTest.test_rref_str
        RpcTest.test_local_value_not_on_owner
        RpcTest.test_custom_exception_throw_during_reconstruction
        RpcTest.test_pg_init_no_rpc_init"""),
    **_known("dense", "RpcTest.test_non_cont_tensors"),
    **_known("futures", """
        RpcTest.test_wait_all_exit_early_builtin
        RpcTest.test_wait_all_exit_early_python
        RpcTest.test_wait_all_exit_early_script_function"""),
}


# ---- Suite mode: this process (and the ones torch spawns from it) ----

def _fixture(ferry_rpc, modules):
    from torch.testing._internal.distributed.rpc.rpc_agent_test_fixture \
        import RpcAgentTestFixture

    class FerryRpcAgentTestFixture(RpcAgentTestFixture):
        @property
        def rpc_backend(self):
            return ferry_rpc.BackendType.TENSORPIPE

        @property
        def rpc_backend_options(self):
            return ferry_rpc.TensorPipeRpcBackendOptions(
                init_method=self.init_method, allow=modules)

        def get_shutdown_error_regex(self):
            return ".*"

        def get_timeout_error_regex(self):
            return "no reply within"

    return FerryRpcAgentTestFixture


def _substitute(ferry_rpc, module):
    """ferry.rpc's names for torch.distributed.rpc's in `module`."""
    import torch.distributed.rpc as torch_rpc
    for name in ("rpc_sync", "rpc_async", "remote", "RRef", "WorkerInfo",
                 "get_worker_info"):
        if getattr(module, name, None) is getattr(torch_rpc, name):
            setattr(module, name, getattr(ferry_rpc, name))
    if getattr(module, "rpc", None) is torch_rpc:
        module.rpc = ferry_rpc


def _test_classes():
    """{suite class name: runnable class} for this process's backend."""
    import importlib

    import torch.multiprocessing
    from torch.testing._internal import dist_utils
    from torch.testing._internal.common_distributed import \
        MultiProcessTestCase

    class ForkHelper(MultiProcessTestCase):
        """torch's SpawnHelper, forking: the workers start from this
        process as it is (torch and the suites imported) instead of
        importing everything again, which took most of a test's time."""

        def setUp(self):
            super().setUp()
            self._start_processes(
                torch.multiprocessing.get_context("fork").Process)

    modules = [importlib.import_module(_PREFIX + m) for m, _ in SUITES]
    if _BACKEND == "ferry":
        import ferry.rpc as ferry_rpc
        for m in modules + [dist_utils]:
            _substitute(ferry_rpc, m)
        fixture = _fixture(ferry_rpc, [m.__name__ for m in modules])
    else:
        from torch.testing._internal.distributed.rpc.\
            tensorpipe_rpc_agent_test_fixture import \
            TensorPipeRpcAgentTestFixture as fixture
    out = {}
    for (module_name, cls_name), module in zip(SUITES, modules):
        suite = getattr(module, cls_name)
        out[cls_name] = types.new_class(
            f"{cls_name}With{_BACKEND.capitalize()}",
            (suite, fixture, ForkHelper))
        out[cls_name].__module__ = __name__
        globals()[out[cls_name].__name__] = out[cls_name]
    return out


if _BACKEND:
    if "expecttest" not in sys.modules:  # Not in Debian: a stand-in.
        import unittest as _unittest
        _stand_in = types.ModuleType("expecttest")
        _stand_in.ACCEPT = False
        _stand_in.TestCase = _unittest.TestCase
        sys.modules["expecttest"] = _stand_in
    os.environ.setdefault("TEMP_DIR", tempfile.gettempdir())
    from torch.testing._internal import common_distributed as _cd
    _cd.TIMEOUT_DEFAULT = int(os.environ.get("FERRY_RPC_SUITE_TIMEOUT", "60"))
    getattr(_cd, "TIMEOUT_OVERRIDE", {}).clear()
    _CLASSES = _test_classes()


def _run_suite(names):
    """Runs each "Suite.test" in this process, one JSON line per test."""
    import unittest

    class Result(unittest.TestResult):
        outcome, detail = "passed", ""

        def addFailure(self, test, err):
            self.outcome = "failed"
            self.detail = self._exc_info_to_string(err, test)

        def addError(self, test, err):
            self.addFailure(test, err)

        def addSkip(self, test, reason):
            self.outcome, self.detail = "skipped", reason

    for full in names:
        suite, test = full.split(".", 1)
        start = time.monotonic()
        result = Result()
        _CLASSES[suite](test).run(result)
        outcome, detail = result.outcome, result.detail
        if outcome == "failed" and ("Timing out after" in detail or
                                    "terminated or timed out" in detail):
            outcome = "timeout"
        print("FERRY_RPC_SUITE " + json.dumps({
            "test": full, "outcome": outcome,
            "seconds": round(time.monotonic() - start, 2),
            "detail": detail[-3000:]}), flush=True)


# ---- Controller mode ----

_LIST = """
import importlib, sys, types, unittest
m = types.ModuleType("expecttest"); m.ACCEPT = False
m.TestCase = unittest.TestCase; sys.modules["expecttest"] = m
for module, cls in SUITES:
    c = getattr(importlib.import_module(PREFIX + module), cls)
    print(" ".join(f"{cls}.{n}" for n in dir(c) if n.startswith("test_")
                   and "cuda" not in n.lower() and "gpu" not in n.lower()))
"""


def _suite_names(suites):
    code = f"SUITES = {suites!r}\nPREFIX = {_PREFIX!r}\n" + _LIST
    out = subprocess.run([sys.executable, "-c", code], check=True,
                         stdout=subprocess.PIPE).stdout.decode()
    return out.split()


def _run_backend(backend, names, timeout, verbose):
    """Runs `names` on `backend` in a process of their own; {test: record}."""
    env = dict(os.environ, FERRY_RPC_SUITE_BACKEND=backend,
               FERRY_RPC_SUITE_TIMEOUT=str(timeout))
    cmd = [sys.executable, os.path.abspath(__file__), "--suite-mode", *names]
    records, tail = {}, []
    deadline = time.monotonic() + len(names) * (timeout + 30) + 60
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    try:
        for line in proc.stdout:
            text = line.decode(errors="replace")
            if text.startswith("FERRY_RPC_SUITE "):
                r = json.loads(text[len("FERRY_RPC_SUITE "):])
                records[r["test"]] = r
                print(f"  {backend:10s} {r['outcome']:8s} "
                      f"{r['seconds']:6.1f}s {r['test']}", flush=True)
                if verbose and r["outcome"] in ("failed", "timeout"):
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
        print(f"  {backend}: the suite process stopped after {len(records)} "
              f"of {len(names)} tests; its last lines:\n    "
              + "\n    ".join(tail), flush=True)
    for n in names:
        records.setdefault(n, {"test": n, "outcome": "timeout", "seconds": 0,
                               "detail": "the suite process was stopped"})
    return records


def _report(tp, ferry):
    passed = [n for n, r in tp.items() if r["outcome"] == "passed"]
    both = [n for n in passed if ferry[n]["outcome"] == "passed"]
    missing = [n for n in passed if n not in both]
    hung = [n for n, r in ferry.items() if r["outcome"] == "timeout"
            and n not in KNOWN_FAILURES]
    unknown = [n for n in missing if n not in KNOWN_FAILURES]
    print(f"TensorPipe passed {len(passed)} of {len(tp)}; ferry.rpc passed "
          f"{len(both)} of those; ferry.rpc hung: {len(hung)} (beyond the "
          "known ones)")
    by_reason = {}
    for n in missing:
        by_reason.setdefault(KNOWN_FAILURES.get(n, "NOT KNOWN"), []).append(n)
    for reason, tests in sorted(by_reason.items()):
        print(f"  {len(tests)} fail on ferry.rpc: "
              f"{REASONS.get(reason, reason)}")
        for n in tests:
            print(f"    {n}")
    return not hung and not unknown


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("tests", nargs="*", help="Suite.test names "
                   "(default: --select)")
    p.add_argument("--select", choices=["subset", "full"], default="full")
    p.add_argument("-b", "--backend", action="append",
                   choices=["ferry", "tensorpipe"],
                   help="backends (default: both)")
    p.add_argument("--timeout", type=int, default=60,
                   help="seconds per test (torch's bound on its processes)")
    p.add_argument("--json", help="write every record here")
    p.add_argument("-v", "--verbose", action="store_true")
    p.add_argument("--suite-mode", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.suite_mode:
        _run_suite(args.tests)
        return 0
    if args.tests:
        names = args.tests
    elif args.select == "subset":
        names = SUBSET
    else:
        names = _suite_names(SUITES)
    unsupported = _suite_names(UNSUPPORTED_SUITES)
    start = time.monotonic()
    results = {b: _run_backend(b, names, args.timeout, args.verbose)
               for b in args.backend or ["tensorpipe", "ferry"]}
    print(f"{len(names)} tests in {time.monotonic() - start:.0f} s; "
          f"{len(unsupported)} more not run on ferry.rpc: "
          f"{REASONS['autograd']} ({', '.join(c for _, c in UNSUPPORTED_SUITES)})")
    ok = True
    if "tensorpipe" in results and "ferry" in results:
        ok = _report(results["tensorpipe"], results["ferry"])
    elif "ferry" in results:
        ok = not any(r["outcome"] == "timeout"
                     for r in results["ferry"].values())
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    print("torch RPC suite: PASSED" if ok else "torch RPC suite: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
