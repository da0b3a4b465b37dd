"""torch.distributed.rpc's functions over ferry (the package's docstring
has the contract)."""

from __future__ import annotations

import concurrent.futures
import contextlib
import enum
import math
import os
import re
import sys
import threading
from typing import TYPE_CHECKING, Any, Callable, Iterator, NoReturn

from .. import _errors as _ferry_errors
from .. import _ferry
from .. import _future
from .. import _rpc as _core
from . import _errors, _objects, _refs
from ._options import (RpcBackendOptions, TensorPipeRpcBackendOptions,
                       _no_devices)
from .constants import DEFAULT_SHUTDOWN_TIMEOUT, UNSET_RPC_TIMEOUT

if TYPE_CHECKING:
    import torch
    import torch.futures

    from .._types import Args, TensorType, To

__all__ = [
    "init_rpc", "shutdown", "rpc_sync", "rpc_async", "remote",
    "get_worker_info", "RRef", "WorkerInfo", "is_available",
    "get_rpc_timeout", "_set_rpc_timeout", "_get_rpc_timeout", "_wait_all",
]

_NAME = re.compile(r"[A-Za-z0-9_:-]+")


def _check_name(name: str) -> None:
    """torch's rule for worker names."""
    if not name:
        raise ValueError("a worker name must be non-empty")
    if len(name) >= 128:
        raise ValueError(f"worker name {name[:32]!r}...: names must be "
                         "shorter than 128 characters")
    if not _NAME.fullmatch(name):
        raise ValueError(f"worker name {name!r}: Worker name must match "
                         "^[A-Za-z0-9-_:]*$")


class WorkerInfo(_core.WorkerInfo):
    """torch's WorkerInfo: a worker's ``name`` and ``id`` (its rank). Names
    are torch's: letters, digits, "-", "_" and ":", shorter than 128
    characters (ValueError otherwise, also a RuntimeError as torch's)."""

    __slots__ = ()

    def __new__(cls, name: str, id: int) -> WorkerInfo:  # noqa: A002
        try:
            _check_name(name)
        except ValueError as e:
            raise _errors.translate(
                _ferry_errors.InvalidArgumentError(str(e))) from None
        return super().__new__(cls, name, id)


def _not_initialized() -> RuntimeError:
    return RuntimeError("RPC has not been initialized. Call "
                        "ferry.rpc.init_rpc first.")


def _worker() -> _ferry.Worker:
    """This process's worker; RuntimeError (torch's) before init_rpc."""
    if not _core.is_initialized():
        raise _not_initialized()
    return _core._current()


# Futures rpc_async made in a _wait_all() block, per thread.
_thread_local = threading.local()


def _collect(fut: Any) -> None:
    """Hands ``fut`` to the _wait_all() block this thread is in: ours, or
    torch's own (torch.distributed.rpc.api._wait_all, which a program
    ported with one import changed may still use)."""
    # (A thread-local's __dict__, not getattr: a missing attribute raises
    # inside getattr, 5x the cost on every call.)
    pending = _thread_local.__dict__.get("future_list")
    if pending is None:
        torch_api = sys.modules.get("torch.distributed.rpc.api")
        if torch_api is None:
            return
        pending = torch_api._thread_local_var.__dict__.get("future_list")
        if pending is None:
            return
    pending.append(fut)


@contextlib.contextmanager
def _wait_all() -> Iterator[None]:
    """Waits, on leaving the block, for every future ``rpc_async`` returned
    in it on this thread (torch's private helper of the same name)."""
    _thread_local.future_list = []
    try:
        yield
    finally:
        try:
            for fut in _thread_local.future_list:
                fut.wait()
        finally:
            del _thread_local.future_list

# ferry.rpc's functions on every worker: a call of a callable by reference
# ("ferry.rpc.call"), the same keeping the result as an RRef's value
# (remote), and a method of an RRef's object on its owner.
_CALL, _REMOTE_CALL, _METHOD, _REMOTE_METHOD = _errors.DISPATCHERS

_lock = threading.Lock()
_rpc_timeout = 60.0  # Seconds; 0: none (init_rpc's rpc_timeout).
_store: Any = None   # The file:// rendezvous' store, kept until shutdown.


def is_available() -> bool:
    """torch's ``rpc.is_available()``: always, on ferry."""
    return True


# ---- Timeouts (torch's: seconds; 0 none; -1/UNSET the current default) ----

def get_rpc_timeout() -> float:
    """The default timeout of calls, seconds (0: none)."""
    return _rpc_timeout


_get_rpc_timeout = get_rpc_timeout


def _set_rpc_timeout(rpc_timeout: float) -> None:
    """Sets the default timeout of calls made from now on (seconds; 0:
    none)."""
    global _rpc_timeout
    if rpc_timeout < 0:
        raise ValueError(f"rpc_timeout: {rpc_timeout} is negative")
    _rpc_timeout = float(rpc_timeout)


def _timeout(timeout: float | None) -> float:
    """ferry's timeout (0: none) for torch's ``timeout`` argument."""
    if timeout is None or timeout < 0:  # UNSET_RPC_TIMEOUT
        return _rpc_timeout
    return float(timeout)


# ---- Errors ----

def _raise(error: _ferry_errors.Error, shown: str | None = None,
           shift: int = 0) -> NoReturn:
    raise _errors.translate(error, shown, shift) from None


def _settler(fut: Any, shown: str | None) -> Callable[[bool, Any], None]:
    """A ferry settle callback completing the torch (or ferry) future
    ``fut`` with the value, or with the translated error."""
    def settle(ok: bool, value: Any) -> None:
        if ok:
            fut.set_result(value)
        elif isinstance(value, _ferry_errors.Error):
            fut.set_exception(_errors.translate(value, shown))
        else:
            fut.set_exception(value)
    return settle


def _new_future() -> Any:
    """torch's Future when torch is here (what torch's rpc_async returns),
    else a ``ferry.Future`` (with the same wait/then/value/done)."""
    torch = sys.modules.get("torch")
    if torch is not None:
        return torch.futures.Future()
    return _future._new()


# ---- init and shutdown ----

def _check_backend(backend: Any, options: Any) -> None:
    """torch's checks of init_rpc's arguments (TypeError)."""
    if backend is not None and not isinstance(backend, enum.Enum):
        raise TypeError(f"backend {backend!r}: Argument backend must be a "
                        "member of BackendType")
    if backend is not None and backend.name not in ("TENSORPIPE", "FERRY"):
        raise ValueError(f"backend {backend!r}: ferry.rpc runs torch's "
                         "TensorPipe backend's programs "
                         "(BackendType.TENSORPIPE)")
    if options is None:
        return
    if not (hasattr(options, "rpc_timeout")
            and hasattr(options, "init_method")):
        raise TypeError(f"{options!r}: Argument rpc_backend_options must be "
                        "an instance of RpcBackendOptions")
    if backend is None and not hasattr(options, "num_worker_threads"):
        raise TypeError(f"Could not infer backend for options {options!r}: "
                        "pass TensorPipeRpcBackendOptions")


def _env_int(name: str) -> int:
    text = os.environ.get(name)
    if text is None:
        raise ValueError(f"{name.lower()}: not given, and {name} is not set")
    return int(text)


def _file_rendezvous(path: str, rank: int, world_size: int,
                     timeout: float) -> dict[str, Any]:
    """ferry.init's master for init_method "file://PATH", through torch's
    FileStore at PATH (which a gloo process group of the same init_method
    shares): rank 0 publishes the address it listens on."""
    global _store
    import datetime

    import torch.distributed as dist
    store = dist.FileStore(path, world_size)
    store.set_timeout(datetime.timedelta(seconds=timeout))
    # Every init_rpc on this file is one round (a program may init again
    # after shutdown): its key is the round's.
    round_ = (int(store.add("ferry.rpc/inits", 1)) - 1) // world_size
    key = f"ferry.rpc/{round_}/master"
    _store = store
    if rank == 0:
        host = os.environ.get("MASTER_ADDR", "127.0.0.1")
        return {"master": f"{host}:0",
                "_on_listen": lambda address: store.set(key, address)}
    return {"master": store.get(key).decode()}


def _master_options(init_method: str, rank: int, world_size: int,
                    timeout: float) -> dict[str, Any]:
    if init_method.startswith("file://"):
        return _file_rendezvous(init_method[len("file://"):], rank,
                                world_size, timeout)
    if init_method.startswith("tcp://"):
        return {"master": init_method[len("tcp://"):].split("?")[0]}
    if init_method == "env://":
        return {}
    raise ValueError(f"init_method {init_method!r}: expected env://, "
                     "tcp://HOST:PORT or file://PATH")


def _register_dispatchers() -> None:
    functions: list[tuple[str, Callable[..., Any]]] = [
        (_CALL, _call), (_REMOTE_CALL, _remote_call), (_METHOD, _method),
        (_REMOTE_METHOD, _remote_method)]
    for name, fn in functions:
        _core.register(name, fn)


def init_rpc(name: str, backend: Any = None, rank: int = -1,
             world_size: int | None = None,
             rpc_backend_options: RpcBackendOptions | None = None) -> None:
    """Makes this process worker ``name`` of a job of ``world_size`` and
    returns once every worker joined (torch's ``init_rpc``). ``rank`` -1
    and ``world_size`` None read ``RANK`` and ``WORLD_SIZE``; the options'
    ``init_method`` says where rank 0 is: "env://" (``MASTER_ADDR``,
    ``MASTER_PORT``), "tcp://HOST:PORT" or "file://PATH"."""
    global _rpc_timeout, _store
    if _core.is_initialized():
        raise RuntimeError("RPC is already initialized (ferry.rpc: this "
                           f"process is {_core.worker_name()})")
    _check_backend(backend, rpc_backend_options)
    _check_name(name)
    options = rpc_backend_options or TensorPipeRpcBackendOptions()
    for devices in ("device_maps", "devices"):
        if getattr(options, devices, None):  # torch's own options object
            raise _no_devices(devices)
    rank = int(rank) if int(rank) >= 0 else _env_int("RANK")
    world_size = (int(world_size) if world_size is not None
                  else _env_int("WORLD_SIZE"))
    for module in getattr(options, "allow", ()):
        _refs.allow_module(module)
    timeout = float(options.rpc_timeout)
    startup = timeout if timeout > 0 else 600.0
    tensor_type: TensorType = "numpy"
    try:
        # Tensors arrive as torch's, and torch builtins run here, even in
        # a program that did not import torch (the seed's worker1).
        import torch  # noqa: F401
        tensor_type = "torch"
    except ImportError:
        pass
    try:
        master = _master_options(options.init_method, rank, world_size,
                                 startup)
        _register_dispatchers()
        _core.init(rank=rank, world_size=world_size, name=name,
                   timeout=timeout, startup_timeout=startup,
                   executor_threads=int(getattr(options, "num_worker_threads",
                                                16)),
                   tensor_type=tensor_type,
                   **master)
    except _ferry_errors.Error as e:
        _store = None
        _raise(e)
    except BaseException:
        _store = None
        raise
    # RRefs this process receives are ferry.rpc's (torch's proxies).
    _ferry._set_classes(_core.RRef, RRef._from_handle, _core.BFloat16)
    with _lock:
        _rpc_timeout = timeout


def shutdown(graceful: bool = True,
             timeout: float = DEFAULT_SHUTDOWN_TIMEOUT) -> None:
    """Leaves the job (torch's ``shutdown``). Graceful: waits until every
    worker called it, serving calls meanwhile, then for the calls and RRef
    messages under way, and stops -- within ``timeout`` seconds, or, with
    0 (torch's default), as long as every worker is alive (a dead worker
    fails the wait). Otherwise stops this worker at once."""
    global _store
    if not _core.is_initialized():
        raise _not_initialized()
    try:
        _core.shutdown(graceful, math.inf if timeout <= 0 else timeout)
    except _ferry_errors.Error as e:
        _raise(e)
    finally:
        _store = None


def get_worker_info(worker_name: str | None = None) -> WorkerInfo:
    """``WorkerInfo(name, id)`` of ``worker_name`` (default: this
    worker); id is its rank."""
    _worker()
    try:
        info = _core.get_worker_info(worker_name)
    except _ferry_errors.Error as e:
        _raise(e)
    return WorkerInfo(info.name, info.id)


# ---- Calls ----

def _target(to: To) -> str:
    if isinstance(to, float):
        raise ValueError(f"to: {to} is not a rank (an int), a worker's name "
                         "or a WorkerInfo")
    return _core._target(to)


def _callee(func: Any) -> tuple[str, str | None]:
    """The ferry function a call of ``func`` runs, and the reference it
    passes first (None: ``func`` is registered with ferry and called by
    its name)."""
    if isinstance(func, str):
        return func, None
    registered = getattr(func, "__ferry_name__", None)
    if isinstance(registered, str):
        return registered, None
    return _CALL, _refs.reference(func)


def _check_script_call(func: Any, args: Args) -> None:
    """A TorchScript function's arity, checked on the caller as torch does
    (so remote() raises at once, as torch's)."""
    script = _refs._script_function_type()
    if script is None or args is None or type(func) is not script:
        return
    named: Any = func  # (mypy narrows func to object above.)
    schema = named.schema
    if len(args) > len(schema.arguments):
        raise RuntimeError(
            f"{named.name}() expected at most {len(schema.arguments)} "
            f"argument(s) but received {len(args)} argument(s). "
            f"Declaration: {schema}")


def _arguments(ref: str | None, args: Args) -> tuple[Any, ...]:
    """The call's arguments: ``ref`` first for ferry.rpc's dispatcher,
    which also takes functions among them by reference."""
    if args is None:
        args = ()
    elif not isinstance(args, (tuple, list)):
        raise TypeError(f"args: expected a tuple, got {type(args).__name__}")
    if ref is None:
        return tuple(args)
    return (ref, *_refs.encode_callables(
        args if type(args) is tuple else tuple(args)))


def _kwargs(kwargs: Any, ref: str | None) -> dict[str, Any] | None:
    if kwargs is not None and not isinstance(kwargs, dict):
        raise TypeError(f"kwargs: expected a dict, got "
                        f"{type(kwargs).__name__}")
    if ref is None:
        return kwargs or None
    return _refs.encode_callable_kwargs(kwargs) or None


def rpc_sync(to: To, func: Callable[..., Any] | str, args: Args = None,
             kwargs: dict[str, Any] | None = None,
             timeout: float = UNSET_RPC_TIMEOUT) -> Any:
    """``func(*args, **kwargs)`` on worker ``to`` (a name, rank or
    WorkerInfo); its result. ``func`` travels by name (the package's
    docstring says what a callee runs)."""
    fn, ref = _callee(func)
    _check_script_call(func, args)
    try:
        return _worker().rpc_sync(
            _target(to), fn, _arguments(ref, args), _kwargs(kwargs, ref),
            _timeout(timeout))
    except _ferry_errors.Error as e:
        _raise(e, ref, 0 if ref is None else 1)


def rpc_async(to: To, func: Callable[..., Any] | str, args: Args = None,
              kwargs: dict[str, Any] | None = None,
              timeout: float = UNSET_RPC_TIMEOUT) -> torch.futures.Future[Any]:
    """Like ``rpc_sync``; returns at once a future of the result (torch's
    ``torch.futures.Future`` when torch is imported, else a
    ``ferry.Future``)."""
    fn, ref = _callee(func)
    _check_script_call(func, args)
    fut = _new_future()
    try:
        _worker().rpc_async(
            _target(to), fn, _arguments(ref, args), _kwargs(kwargs, ref),
            _timeout(timeout), _settler(fut, ref))
    except _ferry_errors.Error as e:
        _raise(e, ref, 0 if ref is None else 1)
    _collect(fut)
    return fut


def remote(to: To, func: Callable[..., Any] | str, args: Args = None,
           kwargs: dict[str, Any] | None = None,
           timeout: float = UNSET_RPC_TIMEOUT) -> RRef:
    """Runs ``func(*args, **kwargs)`` on ``to``, which keeps the result
    (a value, or any Python object: it stays there); returns an ``RRef``
    to it at once. The creation's errors (its timeout too) surface on the
    RRef's use."""
    fn, ref = _callee(func)
    _check_script_call(func, args)
    if ref is not None:
        fn = _REMOTE_CALL
    try:
        handle = _worker().remote(
            _target(to), fn, _arguments(ref, args), _kwargs(kwargs, ref),
            _timeout(timeout))
    except _ferry_errors.Error as e:
        _raise(e, ref, 0 if ref is None else 1)
    return RRef._made(handle, ref)


# ---- The callee's side: ferry.rpc's functions ----

def _returned(fn: Callable[..., Any], result: Any) -> Any:
    """``result`` as a registered function returns it: an
    ``async_execution`` function's torch future as a concurrent one."""
    if getattr(fn, "_wrapped_async_rpc_function", None) is None:
        return result
    if isinstance(result, concurrent.futures.Future):
        return result
    if not callable(getattr(result, "add_done_callback", None)):
        script = _refs._script_function_type()
        if script is not None and isinstance(
                getattr(fn, "_wrapped_async_rpc_function"), script):
            raise RuntimeError(  # TorchScript's words, as torch's.
                "Async functions must return an IValue of Future type, but "
                f"got {type(result).__name__}")
        raise RuntimeError(
            "Functions decorated with @rpc.async_function must return a "
            "torch.futures.Future object, but got "
            f"{type(result)}")
    out = _future._new()

    def done(f: Any) -> None:
        try:
            out.set_result(f.wait())
        except BaseException as e:  # noqa: B902 -- handed to the caller
            out.set_exception(e)

    result.add_done_callback(done)
    return out


def _kept(result: Any) -> Any:
    """A remote() result: a value as is, an object boxed (it stays)."""
    if isinstance(result, concurrent.futures.Future):
        out = _future._new()

        def done(f: concurrent.futures.Future[Any]) -> None:
            try:
                out.set_result(_kept(f.result()))
            except BaseException as e:  # noqa: B902 -- handed on
                out.set_exception(e)

        result.add_done_callback(done)
        return out
    return result if _objects.is_value(result) else _objects.box(result)


def _logged(what: str, error: BaseException) -> None:
    """Writes a function's exception to this worker's stderr, as torch's
    agent does, before the caller gets it."""
    import traceback
    text = "".join(traceback.format_exception(error))
    sys.stderr.write(f"ferry.rpc: on {_core.worker_name()}: {what} raised "
                     f"{type(error).__name__}: {error}\n{text}")


def _call(ref: str, /, *args: Any, **kwargs: Any) -> Any:
    fn = _refs.resolve(ref)
    args, kwargs = _refs.decode_callables(args, kwargs)
    try:
        result = fn(*args, **kwargs)
    except Exception as e:
        _logged(ref, e)
        raise
    return _returned(fn, result)


def _remote_call(ref: str, /, *args: Any, **kwargs: Any) -> Any:
    return _kept(_call(ref, *args, **kwargs))


def _bound_method(rref: _core.RRef, name: str) -> Callable[..., Any]:
    """Method ``name`` of the object ``rref`` (owned here) refers to, if
    its class allows it."""
    obj = _objects.unbox(rref._handle.local_value())
    cls = type(obj)
    if name.startswith("__") or not name.isidentifier():
        raise PermissionError(f"{name!r}: ferry.rpc calls public methods "
                              "only")
    if not _refs.class_allowed(cls):
        raise PermissionError(
            f"{cls.__module__}.{cls.__qualname__}.{name}: the RRef's object "
            f"is a {cls.__qualname__}, a class not defined in this "
            "worker's __main__ nor in a module it allows "
            f"(ferry.rpc.allow_module({cls.__module__!r}))")
    method = getattr(obj, name)
    if not callable(method):
        raise TypeError(f"{cls.__qualname__}.{name} is not a method")
    return method


def _method(rref: _core.RRef, name: str, /, *args: Any,
            **kwargs: Any) -> Any:
    method = _bound_method(rref, name)
    args, kwargs = _refs.decode_callables(args, kwargs)
    try:
        result = method(*args, **kwargs)
    except Exception as e:
        _logged(f"{getattr(method, '__qualname__', name)}", e)
        raise
    return _returned(method, result)


def _remote_method(rref: _core.RRef, name: str, /, *args: Any,
                   **kwargs: Any) -> Any:
    return _kept(_method(rref, name, *args, **kwargs))


# ---- RRefs ----

class _RRefProxy:
    """``rref.rpc_sync().method(*args, **kwargs)``: the method of the
    object ``rref`` refers to, run on its owner (torch's proxies)."""

    def __init__(self, rref: RRef, kind: str,
                 timeout: float | None) -> None:
        self._rref, self._kind, self._timeout = rref, kind, timeout

    def __getattr__(self, name: str) -> Callable[..., Any]:
        rref, kind, timeout = self._rref, self._kind, self._timeout

        def call(*args: Any, **kwargs: Any) -> Any:
            owner = rref.owner_name()
            shown = f"{rref._shown or 'RRef'}.{name}"
            args = _refs.encode_callables(args)
            kwargs = _refs.encode_callable_kwargs(kwargs) or {}
            if kind == "sync":
                try:
                    return _worker().rpc_sync(
                        owner, _METHOD, (rref, name, *args), kwargs or None,
                        _timeout(timeout))
                except _ferry_errors.Error as e:
                    _raise(e, shown, 2)
            if kind == "async":
                fut = _new_future()
                try:
                    _worker().rpc_async(
                        owner, _METHOD, (rref, name, *args), kwargs or None,
                        _timeout(timeout), _settler(fut, shown))
                except _ferry_errors.Error as e:
                    _raise(e, shown, 2)
                return fut
            try:
                handle = _worker().remote(
                    owner, _REMOTE_METHOD, (rref, name, *args),
                    kwargs or None, _timeout(timeout))
            except _ferry_errors.Error as e:
                _raise(e, shown, 2)
            return RRef._made(handle, shown)

        call.__name__ = name
        return call


class RRef(_core.RRef):
    """A reference to a value or object owned by a worker (torch's RRef).

    ``RRef(value)`` makes one owned here, of any value or Python object.
    An object that is not a ferry value (an instance of the program's
    class) stays on its owner: ``local_value()`` there returns it, its
    methods run through the proxies (``rref.rpc_sync().method(...)``), and
    ``to_here()`` elsewhere raises (ferry never pickles it)."""

    _shown: str | None = None  # The function that made it, for messages.

    def __init__(self, value: Any, type_hint: Any = None) -> None:
        del type_hint  # torch's, for TorchScript; values carry their kind.
        if not _objects.is_value(value):
            value = _objects.box(value)
        try:
            super().__init__(value)
        except _ferry_errors.Error as e:
            _raise(e)

    @classmethod
    def _made(cls, handle: _ferry.RRefHandle, shown: str | None) -> RRef:
        """The RRef of ``handle``, made by calling ``shown``."""
        r = cls.__new__(cls)
        r._handle = handle
        r._shown = shown
        return r

    def __class_getitem__(cls, item: Any) -> Any:
        """``RRef[T]`` in annotations, as torch's RRef allows."""
        return cls

    def to_here(self, timeout: float | None = UNSET_RPC_TIMEOUT) -> Any:
        """A copy of the value, fetched from the owner (within ``timeout``
        seconds; 0: none; -1: the default)."""
        _worker()
        try:
            value = self._handle.to_here(_timeout(timeout))
        except _ferry_errors.Error as e:
            _raise(e, self._shown)
        if _objects.is_box(value):
            if self.is_owner():
                return _objects.unbox(value)
            raise TypeError(
                f"RRef of {_objects.describe(value)} owned by "
                f"{self.owner_name()}: the object stays there (ferry.rpc "
                "never pickles objects); call its methods with "
                "rref.rpc_sync().method(...), or return values from them")
        return value

    def owner(self) -> WorkerInfo:
        """The owner's ``WorkerInfo``."""
        return WorkerInfo(self._handle.owner_name, self._handle.owner_rank)

    def local_value(self) -> Any:
        """The value or object itself, on the owner only."""
        try:
            return _objects.unbox(self._handle.local_value())
        except _ferry_errors.Error as e:
            _raise(e)

    def rpc_sync(self, timeout: float | None = UNSET_RPC_TIMEOUT) -> Any:
        """Proxy: ``rref.rpc_sync().m(*args, **kwargs)`` runs method ``m``
        of the object on its owner and returns the result."""
        return _RRefProxy(self, "sync", timeout)

    def rpc_async(self, timeout: float | None = UNSET_RPC_TIMEOUT) -> Any:
        """Proxy: as ``rpc_sync()``, returning a future."""
        return _RRefProxy(self, "async", timeout)

    def remote(self, timeout: float | None = UNSET_RPC_TIMEOUT) -> Any:
        """Proxy: as ``rpc_sync()``, the result kept on the owner as an
        RRef's."""
        return _RRefProxy(self, "remote", timeout)

    def backward(self, dist_autograd_ctx_id: int = -1,
                 retain_graph: bool = False) -> NoReturn:
        """Distributed autograd is not supported by ferry.rpc."""
        raise NotImplementedError(
            "RRef.backward: ferry.rpc has no distributed autograd")

    def __repr__(self) -> str:
        return (f"RRef({self._handle.id} owned by "
                f"{self._handle.owner_name})")

    def __reduce__(self) -> NoReturn:
        raise RuntimeError("Can not pickle rref in python pickler: ferry.rpc "
                           "passes RRefs as call arguments")

