"""rpc_test.py's other worker (rank 1): Python functions for rank 0 to
call, then a shutdown that serves until rank 0 shuts down too."""
import asyncio

import ferry

events = {}


def event(name):
    return events.setdefault(name, asyncio.Event())


@ferry.register("py_add")
def py_add(a, b):
    return a + b


@ferry.register("py_keywords")
def py_keywords(a, b=10, *, scale=1, **rest):
    return {"sum": (a + b) * scale, "rest": rest}


@ferry.register("raise_value")
def raise_value(message):
    raise ValueError(message)


@ferry.register("raise_runtime")
def raise_runtime():
    raise RuntimeError("it broke")


@ferry.register("raise_not_found")
def raise_not_found():
    raise ferry.NotFoundError("no such thing")


@ferry.register("coro_wait")
async def coro_wait(name):
    await asyncio.wait_for(event(name).wait(), 30)
    return f"{name} done"


@ferry.register("coro_set")
async def coro_set(name):
    event(name).set()
    return True


@ferry.register("call_back")
def call_back(fn, args):
    return ferry.rpc_sync("worker0", fn, args)


@ferry.register("forward_async")
def forward_async(to, fn, args):
    return ferry.rpc_async(to, fn, args)


@ferry.register("tensor_module", tensor_type="torch")
def tensor_module(x):
    return type(x).__module__.split(".")[0]


@ferry.register("numpy_module")
def numpy_module(x):
    return type(x).__module__.split(".")[0]


@ferry.register("local_of")
def local_of(rref):
    return rref.local_value()


@ferry.register("fetch")
def fetch(rref):
    return rref.to_here()


@ferry.register("owner_of")
def owner_of(rref):
    return [rref.owner_name(), rref.is_owner()]


@ferry.register("scaled")
def scaled(value, k):
    return value * k


# One executor thread: coroutines must not hold it while they wait.
ferry.init(executor_threads=1, shutdown_timeout=300)
ferry.shutdown()
