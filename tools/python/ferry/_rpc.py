"""Workers, clients, calls and RRefs, as torch.distributed.rpc users know
them.

This process becomes a worker with ``init()`` (torch's ``init_rpc``), or
drives a job from outside with ``connect()``. Functions are called by their
registered name -- never pickled: ``register()`` adds a Python function to
this worker's registry, callable from every worker and client of the job
(C++, Python, ferryctl), like the builtins every worker has (``echo``,
``add``, ``ones``, ...; ``ferryctl functions WORKER`` lists them).

Arguments are positional (``args``) and by keyword (``kwargs``, a dict
with str keys that are names). Python functions take both; a C++ function
(ferryd's builtins, ``Register``-ed C++) refuses keyword arguments with
``InvalidArgumentError`` naming it. Keywords count with the arguments
against the worker's --max_args.

Values: None, bool, int, float, str, bytes, lists/tuples, dicts with str
keys, RRefs, numpy arrays and torch tensors (any of ferry's 12 dtypes;
bfloat16 from numpy as ``ferry.BFloat16``). Tensor arguments are sent from
their own memory, without copies: do not modify one until the call returned
(``rpc_sync``), its future is done (``rpc_async``) or the RRef is
``confirmed_by_owner()`` (``remote``) -- torch's rule too.

Tensors come back as the kind the tensor arguments were: torch tensors if
any was torch, numpy arrays if any was numpy; with no tensor argument, as
the worker's or client's ``tensor_type`` (``init(tensor_type=...)``,
default "numpy"). Results share ferry's receive buffers (no copies): numpy
results are read-only arrays (ferry's tensors are immutable; ``.copy()``
for a writable one), torch results are ordinary tensors over the same
memory. numpy has no bfloat16: without torch, bfloat16 results are float32
arrays (exact).

Timeouts are in seconds: None (or negative) means the default given to
``init``/``connect`` (60 s), 0 means none.
"""

from __future__ import annotations

import atexit
import collections
import inspect
import os
import threading
import time
from typing import (TYPE_CHECKING, Any, Callable, NamedTuple, NoReturn,
                    TypeVar, overload)

from . import _errors
from . import _ferry
from . import _future

if TYPE_CHECKING:
    import concurrent.futures

    import numpy
    import numpy.typing

    from ._types import Args, TensorType, To

    _F = TypeVar("_F", bound=Callable[..., Any])

__all__ = [
    "BFloat16", "Client", "RRef", "WorkerInfo", "connect", "get_worker_info",
    "init", "is_initialized", "rank", "register", "remote", "rpc_async",
    "rpc_sync", "serve", "shutdown", "status", "worker_name", "workers", "world_size",
]

if TYPE_CHECKING:
    class WorkerInfo(NamedTuple):
        name: str
        id: int
else:
    WorkerInfo = collections.namedtuple("WorkerInfo", ["name", "id"])
WorkerInfo.__doc__ = "A worker's name and rank (torch's WorkerInfo)."

_lock = threading.Lock()
# The _ferry.Worker of this process, once init().
_worker: _ferry.Worker | None = None
_default_timeout = 60.0  # init()'s timeout, for collectives.
# register() calls made before init(): Worker.register's arguments.
_pending: list[tuple[str, Callable[..., Any], str, str, TensorType | None,
                     Callable[..., Any]]] = []
_clients: list[Client] = []  # Clients to close at exit.
# Stopped workers (and closed clients' handles), kept until exit (RRefs
# refer).
_retired: list[_ferry.Worker | _ferry.Client] = []
_stopping = False        # shutdown() under way.


def _current() -> _ferry.Worker:
    w = _worker
    if w is None:
        raise _errors.FailedPreconditionError(
            "ferry is not initialized in this process: call ferry.init()")
    return w


def is_initialized() -> bool:
    """True between ``init()`` and ``shutdown()``."""
    return _worker is not None


# ---- init and shutdown ----

def _env_int(value: int | None, var: str) -> int:
    if value is not None:
        return int(value)
    text = os.environ.get(var)
    if text is None:
        raise _errors.InvalidArgumentError(
            f"{var.lower()}: not given, and {var} is not set")
    try:
        return int(text)
    except ValueError:
        raise _errors.InvalidArgumentError(
            f"{var}={text!r} is not an integer") from None


def _master(master: str | None, master_addr: str | None,
            master_port: int | str | None, rendezvous: str | None,
            world_size: int) -> str:
    # (mypy does not narrow rendezvous to str by the `not in` test.)
    if rendezvous not in (None, "env://"):
        if rendezvous.startswith("tcp://"):  # type: ignore[union-attr]
            return rendezvous[len("tcp://"):]  # type: ignore[index]
        if rendezvous.startswith("etcd://"):  # type: ignore[union-attr]
            return ""  # Membership in etcd: no master.
        raise _errors.InvalidArgumentError(
            f"rendezvous {rendezvous!r}: expected env://, tcp://HOST:PORT "
            "or etcd://HOST:PORT[,HOST:PORT...]/JOB")
    if master is not None:
        return master
    addr = master_addr or os.environ.get("MASTER_ADDR")
    port = master_port if master_port is not None else os.environ.get(
        "MASTER_PORT")
    if addr is None and port is None:
        if world_size == 1:
            return ""  # A job of one: rank 0 picks a port.
        raise _errors.InvalidArgumentError(
            "master: not given, and MASTER_ADDR/MASTER_PORT are not set")
    if addr is None or port is None:
        missing = "MASTER_ADDR" if addr is None else "MASTER_PORT"
        raise _errors.InvalidArgumentError(f"master: {missing} is not set")
    return f"{addr}:{int(port)}"


def _write_atomically(path: str, text: str) -> None:
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def init(rank: int | None = None, world_size: int | None = None,
         master_addr: str | None = None, master_port: int | None = None, *,
         name: str | None = None,
         master: str | None = None, rendezvous: str | None = None,
         listen: str | None = None, timeout: float = 60.0,
         startup_timeout: float = 60.0, shutdown_timeout: float = 10.0,
         heartbeat_timeout: float = 30.0, executor_threads: int = 8,
         rref_lease: float = 10.0, tensor_type: TensorType = "numpy",
         token_file: str | None = None, tls_cert: str | None = None,
         tls_key: str | None = None, tls_ca: str | None = None,
         tls_server_name: str | None = None,
         address_file: str | None = None, etcd_ca: str | None = None,
         etcd_cert: str | None = None, etcd_key: str | None = None,
         etcd_user: str | None = None,
         etcd_password_file: str | None = None,
         _on_listen: Callable[[str], object] | None = None,
         flight_recorder_entries: int = 2000, dump_dir: str | None = None,
         metrics_listen: str | None = None,
         trace_file: str | None = None,
         shared_memory: bool | None = None) -> WorkerInfo:
    """Makes this process worker ``name`` (default ``worker<rank>``) of a
    job, with every builtin and the functions ``register()``-ed so far, and
    returns once all ``world_size`` workers joined (torch's ``init_rpc``).

    ``rank``, ``world_size``, ``master_addr`` and ``master_port`` default to
    the environment's ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` and
    ``MASTER_PORT`` (torch's env://); ``master="HOST:PORT"`` or
    ``rendezvous="tcp://HOST:PORT"`` name the master at once.
    ``rendezvous="etcd://HOST:PORT[,HOST:PORT...]/JOB"`` keeps membership
    in etcd instead (no rank is special; ``etcd_*``: TLS files and a user
    with a password file, as ferryd's flags; ``rank`` must be given). Rank 0 listens
    on the master's port (port 0: one it picks). ``address_file`` (or env
    ``FERRY_ADDRESS_FILE``) receives the address this worker listens on
    before it joins -- how a launcher learns the port rank 0 picked.
    Python workers and ``ferryd`` workers mix in one job.

    ``timeout`` is the default for calls and collectives (seconds; 0:
    none). ``tensor_type`` ("numpy" or "torch") is how tensors come back
    when no tensor argument says. TLS and token options are ferryd's.

    Observing the job (ferryd's flags of the same names): the flight
    recorder keeps ``flight_recorder_entries`` recent collectives (0:
    none) and writes its dump into ``dump_dir`` (env ``FERRY_DUMP_DIR``)
    when one fails; ``metrics_listen="HOST:PORT"`` (env
    ``FERRY_METRICS_LISTEN``) serves Prometheus' /metrics; ``trace_file``
    (env ``FERRY_TRACE_FILE``) receives this worker's spans as JSON lines.
    ``ferryctl stacks`` shows this process's Python stacks too.

    ``shared_memory`` (ferryd's ``--shared_memory``; default on, env
    ``FERRY_SHARED_MEMORY=0`` turns it off): calls of 2 MiB or more to
    workers on this host move their bytes through memory files instead of
    the socket.
    """
    global _worker, _default_timeout
    with _lock:
        if _worker is not None:
            raise _errors.FailedPreconditionError(
                f"ferry is already initialized as {_worker.name}")
        rank = _env_int(rank, "RANK")
        world_size = _env_int(world_size, "WORLD_SIZE")
        options = {
            "name": name, "rank": rank, "world_size": world_size,
            "master": _master(master, master_addr, master_port, rendezvous,
                              world_size),
            "listen": listen, "timeout": float(timeout),
            "startup_timeout": float(startup_timeout),
            "shutdown_timeout": float(shutdown_timeout),
            "heartbeat_timeout": float(heartbeat_timeout),
            "executor_threads": int(executor_threads),
            "rref_lease": float(rref_lease), "tensor_type": tensor_type,
            "token_file": token_file, "tls_cert": tls_cert,
            "tls_key": tls_key, "tls_ca": tls_ca,
            "tls_server_name": tls_server_name,
            "rendezvous": rendezvous if (rendezvous or "").startswith(
                "etcd://") else None,
            "etcd_ca": etcd_ca, "etcd_cert": etcd_cert, "etcd_key": etcd_key,
            "etcd_user": etcd_user, "etcd_password_file": etcd_password_file,
            "flight_recorder_entries": int(flight_recorder_entries),
            "dump_dir": dump_dir or os.environ.get("FERRY_DUMP_DIR"),
            "metrics_listen": (metrics_listen
                               or os.environ.get("FERRY_METRICS_LISTEN")),
            "trace_file": trace_file or os.environ.get("FERRY_TRACE_FILE"),
            "shared_memory": (shared_memory if shared_memory is not None
                              else os.environ.get("FERRY_SHARED_MEMORY",
                                                  "1") != "0"),
        }
        worker = _ferry.Worker(options)
        worker.register(_PYTHON_STACKS, _python_stacks,
                        f"{_PYTHON_STACKS}() -> value",
                        "this process's Python threads and their stacks "
                        "(ferryctl stacks)", tensor_type, _invoke)
        for name_, fn, signature, doc, kind, invoke in _pending:
            worker.register(name_, fn, signature, doc, kind or tensor_type,
                            invoke)
        address = worker.listen()
        address_file = address_file or os.environ.get("FERRY_ADDRESS_FILE")
        if address_file:
            _write_atomically(address_file, address)
        if _on_listen is not None:
            _on_listen(address)  # ferry.distributed: through torch's store.
        # Set before start() returns: calls are served from the moment the
        # job formed, and a function they run may use ferry at once
        # (torch RPC's functions call get_worker_info()).
        _worker = worker
        _default_timeout = float(timeout)
        try:
            worker.start()
        except BaseException:
            _worker = None
            raise
        _pending.clear()
        return WorkerInfo(worker.name, worker.rank)


_PYTHON_STACKS = "ferry.python_stacks"


def _python_stacks() -> list[dict[str, Any]]:
    """Every Python thread's stack, innermost frame last (as tracebacks
    print): [{"thread", "ident", "daemon", "frames": [{"file", "line",
    "function", "code"}]}]."""
    import sys
    import traceback
    threads = {t.ident: t for t in threading.enumerate()}
    out = []
    for ident, frame in sys._current_frames().items():
        t = threads.get(ident)
        out.append({
            "thread": t.name if t is not None else f"thread {ident}",
            "ident": ident,
            "daemon": bool(t is not None and t.daemon),
            "frames": [{"file": f.filename, "line": f.lineno or 0,
                        "function": f.name, "code": f.line or ""}
                       for f in traceback.extract_stack(frame)],
        })
    return out


def shutdown(graceful: bool = True, timeout: float | None = None) -> None:
    """Leaves the job. Graceful (torch's default): waits, bounded, until
    every worker called it -- serving calls meanwhile -- drains calls and
    RRef messages, then stops. Otherwise stops this worker at once."""
    global _worker, _stopping
    with _lock:
        worker = _worker
        if worker is None or _stopping:
            return
        _stopping = True
    try:
        if worker.wait_stopped(0):
            return  # Stopped already (the job was shut down: serve()).
        if graceful:
            worker.shutdown(timeout)
        else:
            worker.stop()
    finally:
        with _lock:
            _worker, _stopping = None, False
            _retired.append(worker)


def serve(timeout: float | None = None) -> bool:
    """Serves calls until this worker stops -- when the job is shut down
    (``ferryctl down``, a client's ``shutdown_job``, the other workers'
    ``shutdown()``) -- or ``timeout`` seconds pass. True if it stopped."""
    w = _current()
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        left = 1.0 if deadline is None else deadline - time.monotonic()
        if w.wait_stopped(max(0.0, min(1.0, left))):
            return True
        if deadline is not None and time.monotonic() >= deadline:
            return False


@atexit.register
def _at_exit() -> None:
    # ferry's threads stop before the interpreter does: from then on they
    # must not take the GIL.
    global _worker
    with _lock:
        worker, _worker = _worker, None
    if worker is not None:
        worker.stop()
        _retired.append(worker)
    for client in list(_clients):
        client.close()
    _ferry._stop_deferring()


def rank() -> int:
    """This worker's rank."""
    return _current().rank


def world_size() -> int:
    """The number of workers in the job."""
    return _current().world_size


def worker_name() -> str:
    """This worker's name."""
    return _current().name


def workers() -> list[str]:
    """The workers' names, by rank."""
    return _current().workers()


def get_worker_info(worker_name: str | None = None) -> WorkerInfo:
    """``WorkerInfo(name, id)`` of a worker (default: this one); id is its
    rank."""
    w = _current()
    if worker_name is None:
        return WorkerInfo(w.name, w.rank)
    names = w.workers()
    if worker_name not in names:
        raise _errors.NotFoundError(f"no worker named {worker_name!r}")
    return WorkerInfo(worker_name, names.index(worker_name))


def status() -> dict[str, Any]:
    """This worker's status (``ferryctl status``'s fields) as a dict."""
    return _current().status()


# ---- registering functions ----

def _signature(name: str, fn: Callable[..., Any]) -> str:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return f"{name}(...) -> value"
    shown = []
    for p in params:
        if p.kind == p.VAR_POSITIONAL:
            shown.append(f"*{p.name}")
        elif p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            shown.append(f"{p.name}: value")
    return f"{name}({', '.join(shown)}) -> value"


def _invoke(fn: Callable[..., Any], args: list[Any],
            kwargs: dict[str, Any] | None, promise: _ferry.Promise,
            caller: str) -> None:
    """Runs a registered function for a call (on a ferry thread, with the
    GIL) and settles the call's promise: now, or when the coroutine or
    future it returned is done."""
    del caller  # Known to ferry; not passed to functions.
    try:
        result = fn(*args, **kwargs) if kwargs else fn(*args)
    except BaseException as e:  # noqa: B902 -- the caller gets it
        promise.set_exception(e)
        return
    if inspect.iscoroutine(result):
        result = _future.asyncio.run_coroutine_threadsafe(
            result, _future.event_loop())
    if isinstance(result, _future.concurrent.futures.Future):
        result.add_done_callback(lambda done: _settle_from(done, promise))
    else:
        promise.set_result(result)


def _settle_from(done: concurrent.futures.Future[Any],
                 promise: _ferry.Promise) -> None:
    try:
        value = done.result()
    except BaseException as e:  # noqa: B902 -- the caller gets it
        promise.set_exception(e)
        return
    promise.set_result(value)


@overload
def register(name: str, fn: None = None, *, doc: str | None = None,
             tensor_type: TensorType | None = None) -> Callable[[_F], _F]:
    ...


@overload
def register(name: str, fn: _F, *, doc: str | None = None,
             tensor_type: TensorType | None = None) -> _F:
    ...


def register(name: str, fn: Any = None, *, doc: str | None = None,
             tensor_type: TensorType | None = None) -> Any:
    """Registers ``fn`` as ``name`` on this worker (before or after
    ``init``); callable from any worker or client by name. Use as
    ``register("f", fn)`` or as a decorator ``@register("f")``.

    ``fn`` gets the call's arguments (tensors as ``tensor_type``, default
    the worker's) and returns a value, a ``ferry.Future`` (or any
    ``concurrent.futures.Future``) of one, or a coroutine (``async def``):
    those run on ferry's asyncio loop and hold no ferry thread while they
    wait. An exception reaches the caller as an error with its message
    (``ferry.Error`` subclasses keep their code; ValueError is
    INVALID_ARGUMENT, ... ; others INTERNAL).
    """
    if fn is None:
        return lambda f: register(name, f, doc=doc, tensor_type=tensor_type)
    if not callable(fn):
        raise TypeError(f"register({name!r}): {fn!r} is not callable")
    doc = doc if doc is not None else (inspect.getdoc(fn) or "").split(
        "\n")[0]
    with _lock:
        if _worker is None:
            # tensor_type None: the worker's, known at init().
            _pending.append((name, fn, _signature(name, fn), doc,
                             tensor_type, _invoke))
        else:
            _worker.register(name, fn, _signature(name, fn), doc,
                             tensor_type or _worker.tensor_type, _invoke)
    try:
        fn.__ferry_name__ = name  # rpc_sync(to, fn) then finds the name.
    except (AttributeError, TypeError):
        pass  # Builtins take no attributes: call them by name.
    return fn


# ---- calls ----

def _target(to: To) -> str:
    if isinstance(to, WorkerInfo):
        return to.name
    if isinstance(to, int) and not isinstance(to, bool):
        return str(to)
    if isinstance(to, str):
        return to
    raise TypeError(f"to: expected a worker name, rank or WorkerInfo, "
                    f"got {type(to).__name__}")


def _function(func: str | Callable[..., Any]) -> str:
    if isinstance(func, str):
        return func
    name = getattr(func, "__ferry_name__", None)
    if name is None:
        raise TypeError(
            f"func: ferry calls functions by their registered name; "
            f"{func!r} is not registered (ferry.register(name, fn))")
    return name


def _args(args: Args) -> tuple[Any, ...] | list[Any]:
    if args is None:
        return ()
    if not isinstance(args, (tuple, list)):
        raise TypeError(f"args: expected a tuple, got {type(args).__name__}")
    return args


class _Calls:
    """rpc_sync / rpc_async / remote over an endpoint (worker or client)."""

    def _endpoint(self) -> _ferry.Worker | _ferry.Client:
        raise NotImplementedError

    def rpc_sync(self, to: To, func: str | Callable[..., Any],
                 args: Args = None, kwargs: dict[str, Any] | None = None,
                 timeout: float | None = None) -> Any:
        """``func(*args, **kwargs)`` on worker ``to`` (a name, rank or
        WorkerInfo); returns its result (the GIL is released while
        waiting)."""
        return self._endpoint().rpc_sync(
            _target(to), _function(func), _args(args), kwargs, timeout)

    def rpc_async(self, to: To, func: str | Callable[..., Any],
                  args: Args = None, kwargs: dict[str, Any] | None = None,
                  timeout: float | None = None) -> _future.Future:
        """Like ``rpc_sync``; returns a ``ferry.Future`` at once."""
        fut = _future._new()
        self._endpoint().rpc_async(_target(to), _function(func),
                                   _args(args), kwargs, timeout, fut._settle)
        return fut

    def remote(self, to: To, func: str | Callable[..., Any],
               args: Args = None, kwargs: dict[str, Any] | None = None,
               timeout: float | None = None) -> RRef:
        """Runs ``func(*args, **kwargs)`` on ``to``, which keeps the
        result; returns an ``RRef`` to it at once (creation errors surface
        on its use)."""
        return RRef._from_handle(self._endpoint().remote(
            _target(to), _function(func), _args(args), kwargs, timeout))


class _ThisWorker(_Calls):
    def _endpoint(self) -> _ferry.Worker:
        return _current()


_this_worker = _ThisWorker()
rpc_sync = _this_worker.rpc_sync
rpc_async = _this_worker.rpc_async
remote = _this_worker.remote


class Client(_Calls):
    """A program driving a job without being one of its ranks (``connect``).
    Calls and RRefs as on a worker, plus the job's administration."""

    def __init__(self, handle: _ferry.Client) -> None:
        self._handle: _ferry.Client | None = handle

    def _endpoint(self) -> _ferry.Client:
        if self._handle is None:
            raise _errors.FailedPreconditionError("the client is closed")
        return self._handle

    @property
    def name(self) -> str:
        """"client<N>", as workers see it."""
        return self._endpoint().name

    def workers(self) -> list[str]:
        """The workers' names, by rank."""
        return self._endpoint().workers()

    def status(self, worker: To,
               timeout: float | None = None) -> dict[str, Any]:
        """A worker's status as a dict."""
        return self._endpoint().status(_target(worker), timeout)

    def functions(self, worker: To,
                  timeout: float | None = None) -> list[dict[str, str]]:
        """A worker's functions: [{"name", "signature", "doc"}]."""
        return self._endpoint().functions(_target(worker), timeout)

    def run_collective(self, op: str, request: dict[str, Any]) -> Any:
        """A collective run by the workers on inputs sent from here, in
        ferryctl's request form: {"ranks": [input per rank], ...} →
        {"ranks": [output per rank]}."""
        return self._endpoint().run_collective(op, request)

    def shutdown_job(self, timeout: float = 10.0) -> None:
        """Asks every worker to shut down gracefully."""
        self._endpoint().shutdown_job(timeout)

    def close(self) -> None:
        """Releases this client's RRefs and leaves the job. Idempotent."""
        handle, self._handle = self._handle, None
        if handle is not None:
            handle.close()
            _retired.append(handle)
        if self in _clients:
            _clients.remove(self)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(master: str | None = None, *, timeout: float = 60.0,
            connect_timeout: float = 30.0, description: str = "python",
            tensor_type: TensorType = "numpy", token_file: str | None = None,
            tls_cert: str | None = None, tls_key: str | None = None,
            tls_ca: str | None = None,
            tls_server_name: str | None = None) -> Client:
    """A ``Client`` of the job whose master is ``master`` ("HOST:PORT";
    default env ``FERRY_MASTER``, else ``MASTER_ADDR:MASTER_PORT``)."""
    if master is None:
        master = os.environ.get("FERRY_MASTER") or _master(
            None, None, None, None, 0)
    handle = _ferry.Client.connect({
        "master": master, "description": description,
        "connect_timeout": float(connect_timeout), "timeout": float(timeout),
        "tensor_type": tensor_type, "token_file": token_file,
        "tls_cert": tls_cert, "tls_key": tls_key, "tls_ca": tls_ca,
        "tls_server_name": tls_server_name,
    })
    client = Client(handle)
    _clients.append(client)
    return client


# ---- RRefs ----

class _Proxy:
    """``rref.rpc_sync().fn(*args)``: registered ``fn(value, *args)`` on the
    owner (torch's proxies, by registered name)."""

    def __init__(self, rref: RRef, mode: str, timeout: float | None) -> None:
        self._rref, self._mode, self._timeout = rref, mode, timeout

    def __getattr__(self, fn: str) -> Callable[..., Any]:
        h = self._rref._handle
        timeout = self._timeout

        def call(*args: Any) -> Any:
            if self._mode == "sync":
                return h.rpc_sync(fn, args, timeout)
            if self._mode == "async":
                fut = _future._new()
                h.rpc_async(fn, args, timeout, fut._settle)
                return fut
            return RRef._from_handle(h.remote(fn, args, timeout))

        call.__name__ = fn
        return call


class RRef:
    """A reference to a value owned by a worker (torch's RRef).

    ``RRef(value)`` makes one owned here. Passing an RRef as an argument
    passes a reference (torch's fork protocol: the owner counts it), not
    the value. Tensors of its value come back as the kind of the arguments
    that made it (or ``tensor_type``)."""

    _handle: _ferry.RRefHandle

    def __init__(self, value: Any) -> None:
        self._handle = _current().wrap(value)

    @classmethod
    def _from_handle(cls, handle: _ferry.RRefHandle) -> RRef:
        r = cls.__new__(cls)
        r._handle = handle
        return r

    def to_here(self, timeout: float | None = None) -> Any:
        """A copy of the value, fetched from the owner."""
        return self._handle.to_here(timeout)

    def to_here_async(self, timeout: float | None = None) -> _future.Future:
        """``to_here`` as a ``ferry.Future``."""
        fut = _future._new()
        self._handle.to_here_async(timeout, fut._settle)
        return fut

    def owner(self) -> WorkerInfo:
        """The owner's ``WorkerInfo``."""
        return WorkerInfo(self._handle.owner_name, self._handle.owner_rank)

    def owner_name(self) -> str:
        return self._handle.owner_name

    def is_owner(self) -> bool:
        return self._handle.is_owner()

    def confirmed_by_owner(self) -> bool:
        """True once the owner holds the value (for ``remote``: its call
        returned successfully)."""
        return self._handle.confirmed_by_owner()

    def local_value(self) -> Any:
        """The value itself, on the owner only."""
        return self._handle.local_value()

    def rpc_sync(self, timeout: float | None = None) -> _Proxy:
        """Proxy: ``rref.rpc_sync().fn(*args)`` runs registered
        ``fn(value, *args)`` on the owner."""
        return _Proxy(self, "sync", timeout)

    def rpc_async(self, timeout: float | None = None) -> _Proxy:
        return _Proxy(self, "async", timeout)

    def remote(self, timeout: float | None = None) -> _Proxy:
        return _Proxy(self, "remote", timeout)

    @property
    def tensor_type(self) -> TensorType:
        return self._handle.tensor_type

    @tensor_type.setter
    def tensor_type(self, kind: TensorType) -> None:
        self._handle.tensor_type = kind

    def __repr__(self) -> str:
        return f"RRef({self._handle.id} owned by {self._handle.owner_name})"

    def __reduce__(self) -> NoReturn:
        raise TypeError("ferry RRefs are passed as call arguments, "
                        "not pickled")


class BFloat16:
    """A bfloat16 tensor for numpy, which lacks the dtype: ``bits`` is a
    uint16 array of the values' bit patterns (sent without a copy).
    ``BFloat16.from_float(a)`` rounds a float array (to nearest even);
    ``to_float()`` widens back to float32 (exact). With torch, pass
    ``torch.bfloat16`` tensors instead."""

    bits: numpy.ndarray[Any, numpy.dtype[numpy.uint16]]

    def __init__(self, bits: numpy.typing.ArrayLike) -> None:
        import numpy
        self.bits = numpy.asarray(bits)
        if self.bits.dtype != numpy.uint16:
            raise TypeError("BFloat16(bits): bits must be a uint16 array")

    @classmethod
    def from_float(cls, values: numpy.typing.ArrayLike) -> BFloat16:
        import numpy
        f = numpy.ascontiguousarray(values, dtype=numpy.float32)
        u = f.view(numpy.uint32).astype(numpy.uint64)
        rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
        nan = numpy.isnan(f)
        bits = numpy.where(nan, (u >> 16) | 0x40, rounded).astype(
            numpy.uint16)
        return cls(bits)

    def to_float(self) -> numpy.ndarray[Any, numpy.dtype[numpy.float32]]:
        import numpy
        return (self.bits.astype(numpy.uint32) << 16).view(numpy.float32)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.bits.shape

    def __repr__(self) -> str:
        return f"BFloat16({self.to_float()!r})"
