"""ferry.rpc as torch.distributed.rpc programs use it: the same program on
every worker (as ferry.launch runs it), worker0 calling the others. Each
scenario (argv[1]) prints "[ok] NAME" per check on worker0; any failure
exits non-zero. tests/tools/python/torch_rpc_test.py runs them."""
import os
import sys
import threading
import time

import torch

import ferry
import ferry.rpc as rpc

RANK = int(os.environ["RANK"])
SCENARIO = sys.argv[1]


def ok(name):
    print(f"[ok] {name}", flush=True)


def expect(exc, match, fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except exc as e:
        assert match in str(e), f"{match!r} not in {str(e)!r}"
        return e
    raise AssertionError(f"{fn} did not raise {exc.__name__}")


# ---- What callers run here (defined in __main__: allowed) ----

def add_kw(a, b=1, *, scale=1):
    return (a + b) * scale


def raise_value(text):
    raise ValueError(text)


def raise_type(text):
    raise TypeError(text)


def sleep_s(seconds):
    time.sleep(seconds)
    return seconds


@torch.jit.script
def my_script_add(t1, t2):
    return torch.add(t1, t2)


class Counter:
    """An object that stays on its owner (not a ferry value)."""

    def __init__(self, start):
        self.count = start

    def increment(self, by=1):
        self.count += by
        return self.count

    def value(self):
        return self.count

    def _private(self):
        return "secret"

    @staticmethod
    def static_twice(x):
        return 2 * x


def make_counter(start):
    return Counter(start)


def call_method(method, rref, *args, **kwargs):
    """torch programs' helper: a method (passed by reference) of the
    object an RRef owned here refers to."""
    return method(rref.local_value(), *args, **kwargs)


def objects_kept():
    """How many objects this worker keeps for RRefs (after a collection:
    a dropped value may still wait in a reference cycle)."""
    import gc
    gc.collect()
    return rpc._objects.live()


class Other:
    pass


@rpc.functions.async_execution
def async_add(to, x):
    return rpc.rpc_async(to, torch.add, args=(x, 1)).then(
        lambda fut: fut.wait() * 2)


@ferry.register("registered_mul")
def registered_mul(a, b):
    return a * b


# The hostile scenario's evidence: anything run here would leave a mark.
MARK = os.path.join(os.environ.get("TMPDIR", "/tmp"),
                    f"ferry-rpc-hostile-{os.getpid()}")


def hostile_marks():
    return os.path.exists(MARK)


# ---- Scenarios (worker0's side) ----

def api():
    ones = torch.ones(2)
    assert torch.equal(rpc.rpc_sync("worker1", torch.add, args=(ones, 3)),
                       torch.full((2,), 4.0))
    ok("torch builtin")
    assert rpc.rpc_sync("worker1", add_kw, args=(1,),
                        kwargs={"b": 2, "scale": 10}) == 30
    assert rpc.rpc_sync(1, add_kw, kwargs={"a": 1}) == 2
    assert rpc.rpc_sync(rpc.get_worker_info("worker1"), registered_mul,
                        args=(3, 4)) == 12
    ok("kwargs, ranks, WorkerInfo, registered functions")
    fut = rpc.rpc_async("worker1", add_kw, args=(2,), kwargs={"b": 2})
    assert isinstance(fut, torch.futures.Future)
    assert fut.then(lambda f: f.wait() + 1).wait() == 5
    assert fut.done() and fut.value() == 4
    ok("rpc_async is a torch future")
    r = rpc.remote("worker1", my_script_add,
                   args=(torch.ones(2), torch.tensor(3)))
    assert torch.equal(r.to_here(), torch.full((2,), 4.0))
    assert r.owner() == rpc.get_worker_info("worker1")
    assert r.owner().id == 1 and r.owner_name() == "worker1"
    assert not r.is_owner() and r.confirmed_by_owner()
    ok("TorchScript function, RRef")
    e = expect(ValueError, "worker1: __main__:raise_value: ValueError: bad",
               rpc.rpc_sync, "worker1", raise_value, args=("bad",))
    assert isinstance(e, ferry.InvalidArgumentError)
    expect(TypeError, "TypeError: wrong", rpc.rpc_sync, "worker1",
           raise_type, args=("wrong",))
    e = expect(RuntimeError, "no reply within", rpc.rpc_sync, "worker1",
               sleep_s, args=(5,), timeout=0.2)
    assert isinstance(e, ferry.DeadlineExceededError)
    expect(RuntimeError, "no reply within",
           rpc.rpc_async("worker1", sleep_s, args=(5,), timeout=0.2).wait)
    expect(RuntimeError, "no reply within",
           rpc.remote("worker1", sleep_s, args=(5,), timeout=0.2).to_here)
    ok("errors as torch raises them")
    assert rpc.get_rpc_timeout() == 60.0
    rpc._set_rpc_timeout(0.2)
    expect(RuntimeError, "no reply within", rpc.rpc_sync, "worker1",
           sleep_s, args=(5,))
    assert rpc.rpc_sync("worker1", sleep_s, args=(0.5,), timeout=0) == 0.5
    rpc._set_rpc_timeout(60)
    ok("timeouts: default, _set_rpc_timeout, 0 = none")
    counter = rpc.remote("worker1", Counter, args=(10,))
    assert counter.rpc_sync().increment(by=5) == 15
    assert counter.rpc_async().increment().wait() == 16
    again = counter.remote().value()
    assert again.to_here() == 16
    expect(TypeError, "a __main__.Counter object", counter.to_here)
    made = rpc.remote("worker1", make_counter, args=(1,))
    assert made.rpc_sync().value() == 1
    # (A proxy's own attributes hide a dunder: asked for by name.)
    expect(PermissionError, "public methods only",
           counter.rpc_sync().__getattr__("__init__"), 5)
    assert rpc.rpc_sync("worker1", Counter.static_twice, args=(4,)) == 8
    assert rpc.rpc_sync("worker1", call_method,
                        args=(Counter.increment, made), kwargs={"by": 2}) == 3
    kept = rpc.rpc_sync("worker1", objects_kept)
    assert kept >= 2, kept
    del counter, made, again
    deadline = time.monotonic() + 30
    while rpc.rpc_sync("worker1", objects_kept) > kept - 2:
        assert time.monotonic() < deadline, "objects not freed"
        time.sleep(0.05)
    ok("objects stay on their owner; proxies call their methods")
    local = rpc.RRef(Counter(3))
    assert local.is_owner() and local.local_value().value() == 3
    assert rpc.rpc_sync("worker1", rref_value_plus, args=(local, 1)) == 4
    ok("RRef(obj) owned here, its methods called from a peer")
    assert torch.equal(rpc.rpc_sync("worker1", async_add,
                                    args=("worker0", torch.ones(1))),
                       torch.full((1,), 4.0))
    ok("async_execution")
    expect(TypeError, "args[1]", rpc.rpc_sync, "worker1", add_kw,
           args=(1, Other()))
    expect(TypeError, "kwargs['scale']", rpc.rpc_sync, "worker1", add_kw,
           args=(1,), kwargs={"scale": Other()})
    expect(PermissionError, "lambda", rpc.rpc_sync, "worker1",
           lambda: 1)
    ok("non-values and lambdas refused on the caller")
    expect(ValueError, "device_maps", rpc.TensorPipeRpcBackendOptions,
           device_maps={"worker1": {0: 1}})
    ok("device_maps refused")


def rref_value_plus(rref, k):
    """worker1 calls a method of worker0's object, through its RRef."""
    return rref.rpc_sync().value() + k


def hostile():
    import builtins
    import shutil
    import subprocess
    refused = [
        (os.system, (f"touch {MARK}",)),
        (builtins.eval, (f"open({MARK!r}, 'w')",)),
        (builtins.exec, (f"open({MARK!r}, 'w')",)),
        (subprocess.run, (["touch", MARK],)),
        (shutil.rmtree, ("/nonexistent",)),
        (torch.save, (torch.ones(1), MARK)),
        (torch.load, (MARK,)),
    ]
    for fn, args in refused:
        for call in (rpc.rpc_sync, lambda *a: rpc.rpc_async(*a).wait(),
                     lambda *a: rpc.remote(*a).to_here()):
            e = expect(PermissionError, "is not allowed here", call,
                       "worker1", fn, args)
            assert isinstance(e, ferry.PermissionDeniedError), e
    ok("os.system, eval, exec, subprocess, shutil, torch.save/load refused")
    # Names that are merely imported into the callee's __main__.
    for ref in ("__main__:os.system", "__main__:time.sleep",
                "__main__:torch.load", "__main__:ferry.shutdown",
                "__main__:Counter.__init__", "__main__:sys.exit",
                "builtins:eval", "os:system", "posix:system",
                "__main__:threading.Thread"):
        expect(PermissionError, "is not allowed here", rpc.rpc_sync,
               "worker1", "ferry.rpc.call", args=(ref, MARK))
    ok("references by hand to imported names refused")
    # A pickled object as an argument: refused on the caller, never sent.
    import pickle
    evil = pickle.dumps(Other())
    expect(TypeError, "args[0]", rpc.rpc_sync, "worker1", add_kw,
           args=(Other(),))
    # Bytes are bytes: the callee never unpickles them.
    assert rpc.rpc_sync("worker1", add_kw, args=(evil, b"")) == evil + b""
    # A function as an argument travels by reference, and the callee
    # resolves it under its own rules.
    expect(PermissionError, "posix:system is not allowed here", rpc.rpc_sync,
           "worker1", call_method, args=(os.system, None))
    expect(PermissionError, "os:system is not allowed here", rpc.rpc_sync,
           "worker1", add_kw, args=({"ferry.rpc.function": "os:system"},
                                    MARK))
    ok("objects refused as arguments; bytes stay bytes; functions as "
       "arguments resolved by the callee's rules")
    # A method of an object whose class the callee does not allow.
    odd = rpc.remote("worker1", make_thread)
    expect(PermissionError, "not defined in this worker's __main__",
           odd.rpc_sync().start)
    ok("methods of objects of classes not allowed refused")
    assert rpc.rpc_sync("worker1", hostile_marks) is False
    assert not os.path.exists(MARK)
    ok("the callee ran nothing")


def make_thread():
    return threading.Thread(target=print)


def main():
    rpc.init_rpc(f"worker{RANK}", rank=RANK,
                 world_size=int(os.environ["WORLD_SIZE"]))
    if RANK == 0:
        {"api": api, "hostile": hostile}[SCENARIO]()
    rpc.shutdown()


if __name__ == "__main__":
    main()
