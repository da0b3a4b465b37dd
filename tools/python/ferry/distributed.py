"""torch.distributed on ferry: ``import ferry.distributed`` registers the
backend ``"ferry"``, so an existing program switches with two lines:

    import ferry.distributed
    torch.distributed.init_process_group("ferry", ...)   # was "gloo"

Every init method torch has works (``env://``, ``tcp://``, ``file://``, an
explicit ``store=``; and ferry's own, ``ferry://`` and ``etcd://``, from
``ferry.store``): the ranks exchange ferry's addresses and a fresh job token
through the store torch hands the backend, and become a ferry job -- their
workers ``worker<rank>`` answer ``ferry.rpc_sync`` and ``ferryctl`` like any
other. ``new_group(ranks)`` makes ferry groups. If this process is a ferry
worker already (``ferry.init()`` first), its job is used.

Each op runs ferry's collective with the tensors' own memory as source and
destination (results are received into the output tensors), bounded by the
group's ``timeout`` (or the op's): a rank that never comes, or dies, makes
every other rank raise a ``RuntimeError`` naming it and the op, instead of
hanging. CPU tensors of every dtype ferry has (complex included); every
``ReduceOp`` but ``PREMUL_SUM`` (whose factor torch 1.13 keeps from Python
backends); ``AVG`` too. Point-to-point with tags, from any source too.

Options for the ferry workers the backend starts (TLS across machines, the
address to listen on) are ``configure(**init_kwargs)``'s, or the environment:
``FERRY_HOST`` (default 127.0.0.1: the address ferry listens on and is
reached at), ``FERRY_HEARTBEAT_TIMEOUT`` (seconds). The workers' token is
made fresh by rank 0 for each job and handed out through torch's store.

Tested with torch 1.13 (Debian's python3-torch); the layer uses torch's
public Python API only (a ``ProcessGroup`` subclass, ``Work`` objects over
futures), so torch 2.x loads it without rebuilding anything (see README).
"""

from __future__ import annotations

import datetime
import os
import queue
import secrets
import tempfile
import threading
import time
from typing import Any, Callable, Iterable, Sequence

import torch
import torch.distributed as dist
from torch._C import _distributed_c10d as _c10d

from . import _collectives
from . import _errors
from . import _ferry
from . import _rpc
from . import _torch_ft
from . import _torch_group
from . import store as _store  # noqa: F401 -- ferry:// and etcd:// init

__all__ = ["BACKEND", "ProcessGroupFerry", "configure", "master"]

BACKEND: str = "ferry"

# configure()'s, for the workers the backend starts.
_init_kwargs: dict[str, Any] = {}


def configure(**init_kwargs: Any) -> None:
    """Options for the ferry workers the backend starts (``ferry.init``'s
    keywords: ``tls_cert``, ``tls_key``, ``tls_ca``, ``listen``,
    ``heartbeat_timeout``, ...); rank, world size, master and token come
    from torch's store."""
    _init_kwargs.update(init_kwargs)


# ---- Errors as torch users see them ----

def _torch_error(e: BaseException, what: str) -> RuntimeError:
    """A ferry error as torch raises its own: a RuntimeError naming the op
    (torch's DistBackendError where a torch has one)."""
    cls = getattr(dist, "DistBackendError", RuntimeError)
    if isinstance(e, _errors.Error):
        timed_out = e.code == "DEADLINE_EXCEEDED"
        # "Timed out" as torch's own backends say it (callers match it).
        text = f"[ferry] {what}: {'Timed out ' if timed_out else ''}" \
               f"({e.code}) {e}"
        return cls(text)
    return cls(f"[ferry] {what}: {e}")


# ---- Completing torch's futures ----

class _Completions:
    """One thread that finishes ferry ops and completes their torch
    futures: never a ferry thread, which must not block (finishing waits
    until ferry let go of the inputs) nor run torch's callbacks. ferry's
    threads only push a done op's id (no GIL); this one waits for ids with
    the GIL released."""

    def __init__(self) -> None:
        self._done = _ferry.DoneQueue()
        # id -> (handle, finish)
        self._pending: dict[int, tuple[_ferry.Work,
                                       Callable[[_ferry.Work], None]]] = {}
        self._next_id = 0
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def add(self, handle: _ferry.Work,
            finish: Callable[[_ferry.Work], None]) -> None:
        """Runs ``finish(handle)`` here once ``handle`` (a ferry op) is
        done."""
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="ferry-torch", daemon=True)
                self._thread.start()
            self._next_id += 1
            op_id = self._next_id
            self._pending[op_id] = (handle, finish)
        self._done.watch(handle, op_id)

    def _run(self) -> None:
        while True:
            op_id = self._done.next(3600.0)
            if op_id is None:
                continue
            with self._lock:
                handle, finish = self._pending.pop(op_id)
            try:
                finish(handle)
            except BaseException as e:  # noqa: B902 -- never kill the thread
                print(f"ferry.distributed: completing an op failed: {e!r}")


_completions = _Completions()


class _Failed:
    """What an op's inner future carries when the op failed."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


def _unwrap(inner: torch.futures.Future[Any]) -> Any:
    """The op's result, or its error raised: so the future torch's C++
    sees fails as a C++ future does (torch 1.13's set_exception only marks
    it for Python, and DDP's reducer would take the exception for tensors).
    """
    value = inner.value()
    if isinstance(value, _Failed):
        raise value.error
    return value


class _Op:
    """One ProcessGroup call: ferry ops (its parts), done -- their outputs
    written -- when each is finished. Its torch future is made only for
    whoever asks for it (a Work over it, get_future): a synchronous op's
    caller holding a _Work waits on the parts themselves.

    Every synchronous op through torch's Python API passes here, so it is
    kept lean (slots, one lock per finished part; a part is claimed by
    taking it out of a dict, which the GIL makes atomic): at world 2 on a
    2-core host, the Python around an op adds 5-10 % to a 1 MiB op's time
    (BENCHMARKS.md)."""

    __slots__ = ("what", "result", "source", "_parts", "_unclaimed",
                 "_lock", "_left", "_error", "_watched", "_outcome",
                 "_inner", "_future", "_group")

    def __init__(self, what: str, result: Any,
                 parts: Sequence[_ferry.Work] = (),
                 group: _torch_ft.FaultTolerance | None = None) -> None:
        self.what = what
        self.result = result
        self._group = group  # Told of a failure (its get_error()).
        self.source = -1
        # Every part, counted before any is watched: a part done at once
        # must not complete the op while others are still being added
        # (torch's futures complete once).
        self._parts = tuple(parts)
        # id -> part, until a thread takes it to finish it.
        self._unclaimed = {id(h): h for h in self._parts}
        self._lock = threading.Lock()
        self._left = len(self._parts)
        self._error: BaseException | None = None
        self._watched = False
        # Once done: (error or None,).
        self._outcome: tuple[BaseException | None] | None = \
            None if self._parts else (None,)
        # The torch future's source, once asked for.
        self._inner: torch.futures.Future[Any] | None = None
        self._future: torch.futures.Future[Any] | None = None

    def watch(self) -> None:
        """Has the completions thread finish the parts once they are done
        (idempotent): for whoever waits on the future rather than on the
        op -- C++ callers (DDP's reducer), get_future, polling. Until then
        nothing but the waiter wakes when ferry is done (a second thread
        waking for every op costs a small op on a 2-core host ~10 %)."""
        with self._lock:
            if self._watched:
                return
            self._watched = True
        for handle in self._parts:
            _completions.add(handle, self._finish)

    @property
    def future(self) -> torch.futures.Future[Any]:
        """The op's torch future (made on first use): its result once done,
        or its error raised."""
        with self._lock:
            if self._future is None:
                self._inner = torch.futures.Future()
                self._future = self._inner.then(_unwrap)
                outcome = self._outcome
            else:
                outcome = None
        if outcome is not None:
            # (Set above: outcome is None unless this thread made it.)
            self._complete(self._inner, outcome)  # type: ignore[arg-type]
        return self._future

    def done(self) -> bool:
        return self._outcome is not None

    def error(self) -> BaseException | None:
        """The op's error once done (None: it succeeded)."""
        return self._outcome[0] if self._outcome is not None else None

    def wait(self) -> None:
        """Waits until done, on the parts here where no other thread took
        them (the GIL released while ferry waits; bounded by the op's own
        timeout), so a synchronous op's caller wakes when ferry is done,
        not one thread hand-off later. Raises the op's error."""
        for handle in self._parts:
            self._finish(handle)
        if self._outcome is None:
            self.future.wait()  # Finished by the completions thread.
        elif self._outcome[0] is not None:
            raise self._outcome[0]

    def _finish(self, handle: _ferry.Work) -> None:
        if self._unclaimed.pop(id(handle), None) is None:
            return  # Another thread finishes it.
        try:
            r = handle.wait()
            if isinstance(r, int):
                self.source = r
            error = None
        except BaseException as e:  # noqa: B902 -- the op carries it
            error = _torch_error(e, self.what)
            if self._group is not None:
                self._group._note_failure(e)
        with self._lock:
            self._error = self._error or error
            self._left -= 1
            if self._left:
                return
            self._outcome = outcome = (self._error,)
            inner = self._inner
        if inner is not None:
            self._complete(inner, outcome)

    def _complete(self, inner: torch.futures.Future[Any],
                  outcome: tuple[BaseException | None]) -> None:
        inner.set_result(self.result if outcome[0] is None
                         else _Failed(outcome[0]))


class _Work(_c10d.Work):
    """torch's Work over an op, as a Python object: wait(timeout) that
    raises a deadline error (torch's Work over a future refuses a finite
    timeout), is_completed, exception, get_future, the source rank of a
    receive from any source, and a synchronous op's caller woken by ferry
    itself (it waits on ferry's handles; no thread hand-off). Only for
    Works that Python holds: see _work."""

    def __init__(self, op: _Op) -> None:
        super().__init__()
        self._op = op

    def wait(self, timeout: datetime.timedelta = datetime.timedelta(0)
             ) -> bool:
        if not timeout:  # (torch's Python API waits so: no bound of its own)
            self._op.wait()
            return True
        seconds = timeout.total_seconds()
        if seconds > 0 and not self._op.done():
            self._op.watch()
            done = threading.Event()
            self._op.future.add_done_callback(lambda _: done.set())
            if not done.wait(seconds):
                raise _torch_error(
                    _errors.DeadlineExceededError(
                        f"not done within {seconds:g} s (the op goes on)"),
                    self._op.what)
        self._op.wait()
        return True

    def is_completed(self) -> bool:
        self._op.watch()
        return self._op.done()

    def is_success(self) -> bool:
        return self.is_completed() and self.exception() is None

    def exception(self) -> BaseException | None:
        self._op.watch()
        return self._op.error()

    def get_future(self) -> torch.futures.Future[Any]:
        self._op.watch()
        return self._op.future

    def result(self) -> Any:
        self.wait()
        return self._op.result

    def source_rank(self) -> int:
        return self._op.source

    def _source_rank(self) -> int:
        return self._op.source

    def synchronize(self) -> None:
        pass


# The ProcessGroup methods whose Work torch 1.13's C++ calls for and holds:
# DDP's reducer and its built-in comm hooks (allreduce; and the all_reduce
# Join's notify_join_context starts in Python, handed to the reducer by
# _set_forward_pass_work_handle), broadcast_coalesced (broadcast: DDP's
# parameter and buffer sync) and verify_params_across_processes
# (allgather).
_HELD_BY_CXX_113 = frozenset({"allreduce", "broadcast", "allgather"})


def _work(op: _Op, method: str, opts: Any) -> _c10d.Work:
    """The Work of ``op``, returned by the ProcessGroup method ``method``
    called with ``opts``: ours (_Work), or on torch 1.13 where its C++ may
    hold it, torch's own over the op's future.

    On torch 2.x (2.14.1 tested), always ours: torch wraps the Work a Python
    Backend returns in a holder that hands wait() and get_future() to it,
    whoever calls (DDP's reducer, DDP under Join: 2.14.1 finishes
    pytorch/tutorials' generic_join so, with gloo's gradients). Its own Work
    over a future waited without raising: an asynchronous op that failed or
    timed out returned from wait() as if it had succeeded. (Through that
    holder Python sees only wait() and get_future(); is_completed() and
    exception() are torch's own, never set.)

    On torch 1.13, a choice: torch keeps only the C++ half of a Python Work
    that C++ holds (DDP's reducer, DDP under Join), and that half never
    completes -- C++ waiting on it hangs (DDP + Join did). A Work over the
    future completes or fails with the ferry op, within its timeout. But it
    is waited on through a future the completions thread sets (a thread
    hand-off per op), torch's refuses wait() with a finite timeout, and
    torch 1.13's exception() cannot hand its error to Python; _Work has none
    of these costs. The choice, from the method, never from who calls: the
    methods torch 1.13's C++ does not hold the Work of get _Work; those it
    holds (_HELD_BY_CXX_113) the future's, synchronous calls of them too, as
    nothing tells them apart. That is the price of DDP not hanging without
    asking who calls: the hand-off makes a synchronous 8-float all_reduce or
    broadcast about 12 % slower (1.06x -> 1.19x ferry's native call;
    BENCHMARKS.md, torch.distributed on ferry), and their asynchronous Works
    lack wait(timeout) and exception() (is_success() tells)."""
    # torch 2.x's options say asyncOp False for its Python API's
    # synchronous calls, which wait at once: woken by ferry itself.
    synchronous = getattr(opts, "asyncOp", None) is False
    if _ON_BACKEND:
        if not synchronous:  # Maybe waited on through its future.
            op.watch()
        return _Work(op)
    if synchronous or method not in _HELD_BY_CXX_113:
        return _Work(op)
    op.watch()
    # (Missing from torch 1.13's type stubs.)
    return _c10d._create_work_from_future(  # type: ignore[attr-defined]
        op.future)


# monitored_barrier's messages: a tag torch's users do not send on (theirs
# are not negative).
_MONITORED_TAG = -0x6D62


# ---- Reduce ops ----

_REDUCE_OPS = {
    "SUM": "sum", "PRODUCT": "prod", "MIN": "min", "MAX": "max",
    "AVG": "avg", "BAND": "band", "BOR": "bor", "BXOR": "bxor",
}


def _reduce_op(op: Any) -> str:
    kind = getattr(op, "op", op)
    try:
        return _REDUCE_BY_KIND[kind]
    except (KeyError, TypeError):
        pass
    name = getattr(kind, "name", None) or str(kind).rsplit(".", 1)[-1]
    if name not in _REDUCE_OPS:
        raise ValueError(
            f"[ferry] ReduceOp.{name} is not supported (torch 1.13 does "
            "not show a Python backend PREMUL_SUM's factor)")
    _REDUCE_BY_KIND[kind] = _REDUCE_OPS[name]
    return _REDUCE_OPS[name]


# torch's ReduceOp kinds seen so far -> ferry's names (reading a pybind
# enum's name costs a microsecond, on every op).
_REDUCE_BY_KIND: dict[Any, str] = {}


# ---- The ferry job behind the groups ----

class _Job:
    """This process's ferry worker as the backend uses it."""

    def __init__(self, owned: bool, from_world: bool) -> None:
        self.owned = owned            # Started by the backend.
        self.from_world = from_world  # Ferry rank == torch global rank.


_job: _Job | None = None
_job_lock = threading.Lock()


def _private_token_file(token: str) -> tuple[str, str]:
    d = tempfile.mkdtemp(prefix="ferry-torch-")
    path = os.path.join(d, "token")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token)
    return d, path


def _get(store: dist.Store, key: str) -> str:
    value = store.get(key)
    return value.decode() if isinstance(value, bytes) else str(value)


def _start_job(store: dist.Store, rank: int, size: int,
               timeout: datetime.timedelta) -> None:
    """Makes this process rank ``rank`` of a new ferry job of ``size``:
    rank 0 publishes its address and a fresh token through ``store``."""
    seconds = max(timeout.total_seconds(), 1.0)
    host = os.environ.get("FERRY_HOST", "127.0.0.1")
    heartbeat = float(os.environ.get(
        "FERRY_HEARTBEAT_TIMEOUT", min(30.0, max(5.0, seconds / 2))))
    if rank == 0:
        token = secrets.token_hex(32)
        store.set("ferry/token", token)
    else:
        token = _get(store, "ferry/token")
    directory, token_file = _private_token_file(token)
    kwargs: dict[str, Any] = dict(
        timeout=seconds, startup_timeout=seconds, heartbeat_timeout=heartbeat,
        tensor_type="torch", token_file=token_file)
    kwargs.update(_init_kwargs)
    try:
        if rank == 0:
            _rpc.init(rank=0, world_size=size, master=f"{host}:0",
                      _on_listen=lambda address: store.set("ferry/master",
                                                           address),
                      **kwargs)
        else:
            _rpc.init(rank=rank, world_size=size,
                      master=_get(store, "ferry/master"),
                      listen=kwargs.pop("listen", f"{host}:0"), **kwargs)
    finally:
        os.remove(token_file)
        os.rmdir(directory)


def _ensure_job(store: dist.Store, rank: int, size: int,
                timeout: datetime.timedelta, default_group: bool) -> _Job:
    """The job the groups run on: this process's ferry worker, started now
    if there is none (or, for a new default group, restarted)."""
    global _job
    with _job_lock:
        if default_group and _job is not None and _job.owned:
            _rpc.shutdown(graceful=False)  # The old default group's job.
            _job = None
        if _job is not None and _rpc.is_initialized():
            return _job
        if _rpc.is_initialized():
            _job = _Job(owned=False, from_world=False)
            return _job
        _start_job(store, rank, size, timeout)
        _job = _Job(owned=True, from_world=default_group)
        return _job


def _ferry_ranks(store: dist.Store, group_rank: int, group_size: int,
                 global_ranks: Sequence[int], job: _Job) -> list[int]:
    """The ferry rank of each member, by group rank."""
    if job.from_world:
        return list(global_ranks) if global_ranks else list(range(group_size))
    # Told through the group's own store.
    store.set(f"ferry/rank/{group_rank}", str(_rpc.rank()))
    return [int(_get(store, f"ferry/rank/{r}")) for r in range(group_size)]


def _create(opts: Any, pg_options: object = None) -> Any:
    # opts: torch's _DistributedBackendOptions, or _Options below.
    """torch's creator (extended API): a ProcessGroupFerry for the group
    (with ``enable_reconfigure``, torch's ProcessGroup over one:
    _torch_ft.ReconfigurableGroup)."""
    del pg_options
    store, rank, size = opts.store, opts.group_rank, opts.group_size
    timeout = opts.timeout
    global_ranks = list(opts.global_ranks_in_group)
    default_group = not global_ranks
    try:
        job = _ensure_job(store, rank, size, timeout, default_group)
        ranks = _ferry_ranks(store, rank, size, global_ranks, job)
    except _errors.Error as e:
        raise _torch_error(e, f"starting process group {opts.group_id}")
    worker = _rpc._current()
    if ranks == list(range(worker.world_size)) and default_group:
        handle = worker.world()
    else:
        handle = worker.new_group(ranks)
    pg = ProcessGroupFerry(rank, size, handle, ranks, timeout)
    # torch's global rank of each member, as torch's split_group names them.
    pg._torch_ranks = global_ranks or list(range(size))
    if opts.group_id and hasattr(pg, "_set_group_name"):
        # torch 2.x named the group it made before it took this one in its
        # place; functional collectives find a group by that name.
        pg._set_group_name(opts.group_id)
    if getattr(opts, "enable_reconfigure", False) and _ON_BACKEND:
        # torch's ProcessGroup reads a Backend's rank and size from fields
        # Python cannot change: a group reconfigure may resize is ours.
        pg._reconfigurable = True
        return _torch_ft.ReconfigurableGroup(pg, store)
    if _ON_BACKEND:
        # torch's ProcessGroup as ferry's subclass (_torch_group.Group), which
        # torch takes as the group itself. (Unwrapped under
        # TORCH_DISTRIBUTED_DEBUG=DETAIL too: torch wraps a plugin's Backend
        # in its C++ checker, which asks a Python Backend its name where it
        # has none -- every op failed an internal assert. ferry checks itself
        # what that checker would: ranks calling different ops, or the same
        # op with different shapes, fail naming both.)
        return _torch_group.Group(pg, store)
    return pg


# ---- The process group ----

def _base() -> tuple[Any, bool]:
    """The class the backend subclasses, and whether it is torch's Backend.

    torch 2.x splits a ProcessGroup into one Backend per device and calls
    the CPU Backend for every op, by the names 2.x gives them
    (``all_gather_single``, ``reduce_scatter_single``,
    ``all_to_all_single``, ``gather_single``, the coalesced forms,
    ``monitored_barrier``...): where its Backend has a Python constructor,
    ferry's is a Backend, which torch wraps in its own ProcessGroup.
    Elsewhere -- torch 1.13, which has no Backend, and 2.x releases whose
    Backend Python cannot construct -- it is a ProcessGroup (when a
    backend's creator returns one, 2.x uses it as the group itself)."""
    backend = getattr(_c10d, "Backend", None)
    if backend is not None:
        try:
            backend(0, 1)
            return backend, True
        except TypeError:
            pass
    return _c10d.ProcessGroup, False


_PG_BASE: Any
_ON_BACKEND: bool
_PG_BASE, _ON_BACKEND = _base()


def _seconds(op_timeout: datetime.timedelta | None,
             default: float) -> float:
    if op_timeout is not None:
        s = op_timeout.total_seconds()
        if s > 0:
            return s
    return default


# (Any to type checkers: torch's stubs of its methods differ by version.)
class ProcessGroupFerry(_torch_ft.FaultTolerance, _PG_BASE):
    """A torch ProcessGroup whose ops are ferry's collectives on ferry's
    group ``handle`` of the ferry ranks ``ranks`` (by group rank). torch's
    fault-tolerance API (get_error, abort, shrink, reconfigure) is
    _torch_ft's."""

    def __init__(self, rank: int, size: int, handle: _ferry.Group,
                 ranks: Iterable[int], timeout: datetime.timedelta) -> None:
        super().__init__(rank, size)
        self._handle = handle
        self._ranks = list(ranks)
        self._timeout = max(timeout.total_seconds(), 0.001)
        self._group_rank = rank  # rank(), kept: asked on every op
        self._size = size
        self._reconfigurable = False  # (_create)
        self._torch_ranks = list(range(size))  # (_create, split)
        self._ft_init()
        # ferry's own collectives take this group too (ferry.all_reduce(t,
        # group=pg), ferry.SparseFeaturesAllToAll(pg, ...)).
        self._ferry_group = _collectives.Group(ranks, handle)

    # -- identity --

    # What torch 2.x asks a Backend before it picks a path (its C++
    # properties, asked of a Python subclass, recurse): each op runs on its
    # own (batch_isend_irecv too). (Splitting, shrinking, reconfiguring,
    # and the options torch reads when it splits or merges: _torch_ft.)
    supports_coalescing = property(lambda self: False)
    supports_time_estimate = property(lambda self: False)
    supports_window = property(lambda self: False)

    # This rank and the group's size, as reconfigure leaves them (torch's
    # own rank() of a Backend is the one it was made with).
    def rank(self) -> int:
        return self._group_rank

    def size(self) -> int:
        return self._size

    def getBackendName(self) -> str:
        return BACKEND

    def name(self) -> str:
        return BACKEND

    def __repr__(self) -> str:
        return f"ProcessGroupFerry(rank={self.rank()}, size={self.size()})"

    # -- helpers --

    def _t(self, opts: Any) -> float:
        return _seconds(getattr(opts, "timeout", None), self._timeout)

    def _run(self, method: str, opts: Any, result: Any,
             start: Callable[[], list[_ferry.Work]],
             what: str | None = None) -> _c10d.Work:
        """``start()`` -> ferry op handles (started, async); the Work of the
        ProcessGroup method ``method`` called with ``opts`` (see _work),
        done once they all are. ``what`` names the op in errors (default:
        the method)."""
        what = f"{what or method} on rank {self._group_rank}"
        try:
            handles = start()
        except _errors.Error as e:
            self._note_failure(e)
            raise _torch_error(e, what) from None
        return _work(_Op(what, result, handles, self), method, opts)

    @staticmethod
    def _check(tensors: Iterable[torch.Tensor], what: str) -> None:
        for t in tensors:
            if t.device.type != "cpu":
                raise RuntimeError(
                    f"[ferry] {what}: ferry moves CPU tensors; got one on "
                    f"{t.device}")
            if not t.is_contiguous():
                raise RuntimeError(f"[ferry] {what}: tensors must be "
                                   "contiguous")

    # -- collectives --

    def allreduce(self, tensors: list[torch.Tensor] | torch.Tensor,
                  opts: dist.AllreduceOptions | dist.ReduceOp | None = None
                  ) -> _c10d.Work:
        if opts is None or isinstance(opts, dist.ReduceOp):
            # allreduce(tensors) and allreduce(tensors, op) as torch has.
            o = dist.AllreduceOptions()
            if opts is not None:
                o.reduceOp = opts
            opts = o
        if isinstance(tensors, torch.Tensor):
            tensors = [tensors]
        red = _reduce_op(opts.reduceOp)
        t = self._t(opts)
        if any(x.is_sparse for x in tensors):
            return self._sparse_allreduce(tensors, red, t, opts)
        self._check(tensors, "allreduce")
        return self._run("allreduce", opts, tensors, lambda: [
            _ferry.all_reduce(self._handle, x, red, t, True, "torch")
            for x in tensors])

    def _sparse_allreduce(self, tensors: list[torch.Tensor], red: str,
                          t: float, opts: Any) -> _c10d.Work:
        """Sparse COO tensors, summed (as gloo does: every rank's indices
        and values gathered, uneven, then added up), in place. Runs before
        it returns."""
        what = f"allreduce of sparse tensors on rank {self._group_rank}"
        if red != "sum":
            raise RuntimeError(f"[ferry] {what}: sparse tensors are summed "
                               "only (ReduceOp.SUM)")
        try:
            for x in tensors:
                c = x.coalesce()
                gathered = [
                    _ferry.all_gather(self._handle, part.contiguous(), None, t,
                                      False, "torch").wait()
                    for part in (c.indices(), c.values())]
                x.copy_(torch.sparse_coo_tensor(
                    torch.cat(gathered[0], dim=1), torch.cat(gathered[1]),
                    x.shape).coalesce())
        except _errors.Error as e:
            self._note_failure(e)
            raise _torch_error(e, what) from None
        return _work(_Op(what, tensors), "allreduce", opts)

    def allreduce_coalesced(
            self, tensors: list[torch.Tensor],
            opts: dist.AllreduceCoalescedOptions | None = None) -> _c10d.Work:
        opts = opts if opts is not None else dist.AllreduceCoalescedOptions()
        self._check(tensors, "allreduce_coalesced")
        red = _reduce_op(opts.reduceOp)
        t = self._t(opts)
        return self._run("allreduce_coalesced", opts, tensors, lambda: [
            _ferry.all_reduce(self._handle, x, red, t, True, "torch")
            for x in tensors])

    def broadcast(self, tensors: list[torch.Tensor] | torch.Tensor,
                  opts: dist.BroadcastOptions | None = None) -> _c10d.Work:
        opts = opts if opts is not None else dist.BroadcastOptions()
        if isinstance(tensors, torch.Tensor):
            tensors = [tensors]
        self._check(tensors, "broadcast")
        t = self._t(opts)
        return self._run("broadcast", opts, tensors, lambda: [
            # (opts is not None here: mypy does not narrow into lambdas.)
            _ferry.broadcast(self._handle, x,
                             opts.rootRank,  # type: ignore[union-attr]
                             t, True, "torch")
            for x in tensors])

    def reduce(self, tensors: list[torch.Tensor],
               opts: dist.ReduceOptions | None = None) -> _c10d.Work:
        opts = opts if opts is not None else dist.ReduceOptions()
        self._check(tensors, "reduce")
        red = _reduce_op(opts.reduceOp)
        t = self._t(opts)
        return self._run("reduce", opts, tensors, lambda: [
            _ferry.reduce(self._handle, x,
                          opts.rootRank,  # type: ignore[union-attr]
                          red, t, True, "torch")
            for x in tensors])

    def allgather(self, output_tensors: list[list[torch.Tensor]],
                  input_tensors: list[torch.Tensor],
                  opts: _c10d.AllGatherOptions | None = None) -> _c10d.Work:
        t = self._t(opts)
        for outs in output_tensors:
            self._check(outs, "allgather")
        self._check(input_tensors, "allgather")
        return self._run("allgather", opts, output_tensors, lambda: [
            _ferry.all_gather(self._handle, x, outs, t, True, "torch")
            for x, outs in zip(input_tensors, output_tensors)])

    def _allgather_base(self, output: torch.Tensor, input: torch.Tensor,
                        opts: _c10d.AllGatherOptions | None = None
                        ) -> _c10d.Work:
        t = self._t(opts)
        self._check([output, input], "_allgather_base")
        if output.numel() != input.numel() * self.size():
            raise ValueError(
                "[ferry] _allgather_base: the output must have world size "
                "times the input's elements")
        # Views of the output, one per rank: received straight there.
        outs = list(output.view(self.size(), *input.shape).unbind(0)) \
            if output.numel() else [output.new_empty(input.shape)
                                    for _ in range(self.size())]
        return self._run("_allgather_base", opts, [output], lambda: [
            _ferry.all_gather(self._handle, input, outs, t, True, "torch")])

    def allgather_coalesced(self, output_lists: list[list[torch.Tensor]],
                            input_list: list[torch.Tensor],
                            opts: _c10d.AllGatherOptions | None = None
                            ) -> _c10d.Work:
        t = self._t(opts)
        self._check(input_list, "allgather_coalesced")
        return self._run("allgather_coalesced", opts, output_lists, lambda: [
            _ferry.all_gather(self._handle, x,
                              [output_lists[r][j] for r in range(self.size())],
                              t, True, "torch")
            for j, x in enumerate(input_list)])

    def gather(self, output_tensors: list[list[torch.Tensor]],
               input_tensors: list[torch.Tensor],
               opts: dist.GatherOptions | None = None) -> _c10d.Work:
        opts = opts if opts is not None else dist.GatherOptions()
        t = self._t(opts)
        root = opts.rootRank
        self._check(input_tensors, "gather")
        here = self._group_rank == root
        return self._run("gather", opts, output_tensors, lambda: [
            _ferry.gather(self._handle, x, output_tensors[i] if here else [],
                          root, t, True, "torch")
            for i, x in enumerate(input_tensors)])

    def scatter(self, output_tensors: list[torch.Tensor],
                input_tensors: list[list[torch.Tensor]],
                opts: dist.ScatterOptions | None = None) -> _c10d.Work:
        opts = opts if opts is not None else dist.ScatterOptions()
        t = self._t(opts)
        root = opts.rootRank
        self._check(output_tensors, "scatter")
        here = self._group_rank == root
        return self._run("scatter", opts, output_tensors, lambda: [
            _ferry.scatter(self._handle, out,
                           input_tensors[i] if here else None, root, t, True,
                           "torch")
            for i, out in enumerate(output_tensors)])

    def reduce_scatter(self, output_tensors: list[torch.Tensor],
                       input_tensors: list[list[torch.Tensor]],
                       opts: dist.ReduceScatterOptions | None = None
                       ) -> _c10d.Work:
        opts = opts if opts is not None else dist.ReduceScatterOptions()
        t = self._t(opts)
        red = _reduce_op(opts.reduceOp)
        self._check(output_tensors, "reduce_scatter")
        return self._run("reduce_scatter", opts, output_tensors, lambda: [
            _ferry.reduce_scatter(self._handle, out, ins, red, t, True,
                                  "torch")
            for out, ins in zip(output_tensors, input_tensors)])

    def _reduce_scatter_base(self, output: torch.Tensor, input: torch.Tensor,
                             opts: dist.ReduceScatterOptions | None = None
                             ) -> _c10d.Work:
        opts = opts if opts is not None else dist.ReduceScatterOptions()
        t = self._t(opts)
        red = _reduce_op(opts.reduceOp)
        self._check([output, input], "_reduce_scatter_base")
        ins = list(input.view(self.size(), *output.shape).unbind(0))
        return self._run("_reduce_scatter_base", opts, [output], lambda: [
            _ferry.reduce_scatter(self._handle, output, ins, red, t, True,
                                  "torch")])

    # -- torch 2.x's names (its ProcessGroup calls its Backend so) --

    def all_gather_single(self, output: torch.Tensor, input: torch.Tensor,
                          opts: Any = None) -> _c10d.Work:
        return self._allgather_base(output, input, opts)

    def reduce_scatter_single(self, output: torch.Tensor,
                              input: torch.Tensor,
                              opts: Any = None) -> _c10d.Work:
        return self._reduce_scatter_base(output, input, opts)

    def all_to_all_single(self, output: torch.Tensor, input: torch.Tensor,
                          output_split_sizes: list[int] | None,
                          input_split_sizes: list[int] | None,
                          opts: Any = None) -> _c10d.Work:
        return self.alltoall_base(output, input, output_split_sizes,
                                  input_split_sizes, opts)

    def gather_single(self, output: torch.Tensor, input: torch.Tensor,
                      opts: Any = None) -> _c10d.Work:
        """gather into one tensor of group size times the input's elements
        at the root (elsewhere: unused)."""
        opts = opts if opts is not None else dist.GatherOptions()
        t = self._t(opts)
        root = opts.rootRank
        self._check([input], "gather_single")
        here = self._group_rank == root
        outs = self._views("gather_single", output, input) if here else []
        return self._run("gather_single", opts, [output], lambda: [
            _ferry.gather(self._handle, input, outs, root, t, True,
                          "torch")])

    def all_gather_single_coalesced(self, outputs: list[torch.Tensor],
                                    inputs: list[torch.Tensor],
                                    opts: Any = None) -> _c10d.Work:
        t = self._t(opts)
        self._check(inputs + outputs, "all_gather_single_coalesced")
        views = [self._views("all_gather_single_coalesced", o, i)
                 for o, i in zip(outputs, inputs)]
        return self._run("all_gather_single_coalesced", opts, outputs,
                         lambda: [_ferry.all_gather(self._handle, i, v, t,
                                                    True, "torch")
                                  for i, v in zip(inputs, views)])

    def reduce_scatter_single_coalesced(self, outputs: list[torch.Tensor],
                                        inputs: list[torch.Tensor],
                                        opts: Any = None) -> _c10d.Work:
        opts = opts if opts is not None else dist.ReduceScatterOptions()
        t = self._t(opts)
        red = _reduce_op(opts.reduceOp)
        self._check(inputs + outputs, "reduce_scatter_single_coalesced")
        ins = [self._views("reduce_scatter_single_coalesced", i, o)
               for o, i in zip(outputs, inputs)]
        return self._run("reduce_scatter_single_coalesced", opts, outputs,
                         lambda: [
                             _ferry.reduce_scatter(self._handle, o, parts,
                                                   red, t, True, "torch")
                             for o, parts in zip(outputs, ins)])

    def _views(self, what: str, whole: torch.Tensor,
               part: torch.Tensor) -> list[torch.Tensor]:
        """``whole`` (group size times ``part``'s elements) as one view of
        ``part``'s shape per rank."""
        if whole.numel() != part.numel() * self.size():
            raise ValueError(
                f"[ferry] {what}: a tensor of {whole.numel()} elements is "
                f"not group size ({self.size()}) times {part.numel()}")
        return list(whole.view(self.size(), *part.shape).unbind(0))

    def alltoall(self, output_tensors: list[torch.Tensor],
                 input_tensors: list[torch.Tensor],
                 opts: dist.AllToAllOptions | None = None) -> _c10d.Work:
        t = self._t(opts)
        self._check(output_tensors, "alltoall")
        self._check(input_tensors, "alltoall")
        return self._run("alltoall", opts, output_tensors, lambda: [
            _ferry.all_to_all(self._handle, input_tensors, output_tensors, t,
                              True, "torch")])

    def alltoall_base(self, output: torch.Tensor, input: torch.Tensor,
                      output_split_sizes: list[int] | None,
                      input_split_sizes: list[int] | None,
                      opts: dist.AllToAllOptions | None = None
                      ) -> _c10d.Work:
        t = self._t(opts)
        self._check([output, input], "alltoall_base")
        out_splits = list(output_split_sizes or [])
        in_splits = list(input_split_sizes or [])
        if not out_splits and output.dim() > 0:
            if output.size(0) % self.size():
                raise ValueError(
                    f"[ferry] alltoall_base: output has {output.size(0)} "
                    f"rows, not divisible by the group size {self.size()}")
            out_splits = [output.size(0) // self.size()] * self.size()
        return self._run("alltoall_base", opts, output, lambda: [
            _ferry.all_to_all_single(self._handle, input, output, out_splits,
                                     in_splits, t, True, "torch")])

    def barrier(self, opts: dist.BarrierOptions | None = None
                ) -> _c10d.Work:
        t = self._t(opts)
        return self._run("barrier", opts, [], lambda: [
            _ferry.barrier(self._handle, t, True)])

    # -- point-to-point --

    def send(self, tensors: list[torch.Tensor], dst: int,
             tag: int) -> _c10d.Work:
        self._check(tensors, "send")
        return self._run("send", None, tensors,
                         lambda: [_ferry.send(self._handle, x, dst, tag,
                                              self._timeout, True, "torch")
                                  for x in tensors],
                         f"send to rank {dst} with tag {tag}")

    def recv(self, tensors: list[torch.Tensor], src: int,
             tag: int) -> _c10d.Work:
        self._check(tensors, "recv")
        return self._run("recv", None, tensors,
                         lambda: [_ferry.recv(self._handle, x, src, tag,
                                              self._timeout, True, "torch")
                                  for x in tensors],
                         f"recv from rank {src} with tag {tag}")

    def recv_anysource(self, tensors: list[torch.Tensor],
                       tag: int) -> _c10d.Work:
        self._check(tensors, "recv_anysource")
        return self._run("recv_anysource", None, tensors,
                         lambda: [_ferry.recv(self._handle, x, -1, tag,
                                              self._timeout, True, "torch")
                                  for x in tensors],
                         f"recv from any rank with tag {tag}")

    def monitored_barrier(self, timeout: Any = None,
                          wait_all_ranks: bool = False) -> None:
        """torch's monitored_barrier (torch 2.x calls it through
        _torch_group.Group; 1.13 refuses it for any backend but gloo):
        rank 0 waits for a message from every other rank within ``timeout``
        (a timedelta or seconds; default: the group's) and then answers
        each; it raises naming the first rank that did not come (every
        one, with ``wait_all_ranks``), and the others raise if rank 0's
        answer does not come. gloo's semantics and words, over ferry's
        point-to-point on a tag of its own."""
        if isinstance(timeout, datetime.timedelta):
            seconds = max(timeout.total_seconds(), 0.0)
        else:
            seconds = self._timeout if timeout is None else float(timeout)
        deadline = time.monotonic() + seconds
        me = self._group_rank
        token = torch.zeros(1, dtype=torch.uint8)

        def exchange(kind: Any, peer: int) -> None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            kind(self._handle, token, peer, _MONITORED_TAG, left, True,
                 "torch").wait()

        if me != 0:
            try:
                exchange(_ferry.send, 0)
                exchange(_ferry.recv, 0)
            except (TimeoutError, _errors.Error) as e:
                raise RuntimeError(
                    f"Rank {me} successfully reached monitoredBarrier, but "
                    "received errors while waiting for send/recv from rank "
                    f"0. Please check rank 0 logs for faulty rank. ({e})"
                ) from None
            return
        ms = int(seconds * 1000)
        missing = []
        for peer in range(1, self.size()):
            if time.monotonic() >= deadline and not wait_all_ranks:
                raise RuntimeError(
                    f"Rank 0 timed out in monitoredBarrier after {ms} ms.")
            try:
                exchange(_ferry.recv, peer)
            except (TimeoutError, _errors.Error):
                if not wait_all_ranks:
                    raise RuntimeError(
                        f"[Rank 0]: Rank {peer} failed to pass "
                        f"monitoredBarrier in {ms} ms") from None
                missing.append(peer)
        if missing:
            raise RuntimeError(
                f"[Rank 0]: Ranks {', '.join(map(str, missing))} failed to "
                f"pass monitoredBarrier in {ms} ms")
        for peer in range(1, self.size()):
            _ferry.send(self._handle, token, peer, _MONITORED_TAG,
                        max(seconds, 1.0), True, "torch").wait()

    # batch_isend_irecv's brackets (torch 1.13 passes the requests to the
    # end, 2.x the device to both): each op runs on its own.
    def _start_coalescing(self, *args: object) -> None:
        pass

    def _end_coalescing(self, *args: object) -> None:
        pass


def _ferry_pg(pg: Any, what: str) -> ProcessGroupFerry:
    """The ferry process group ``pg`` stands for (default: the default
    group; on torch 2.x, torch's group whose CPU backend is ferry's)."""
    if pg is None:
        pg = dist.distributed_c10d._get_default_group()
    if not isinstance(pg, ProcessGroupFerry) and _ON_BACKEND:
        try:
            pg = pg._get_backend(torch.device("cpu"))
        except (AttributeError, RuntimeError):
            pass
    if not isinstance(pg, ProcessGroupFerry):
        raise ValueError(f"{what}: {pg!r} is not a ferry group")
    return pg


def _as_group(backend: ProcessGroupFerry) -> Any:
    """What torch's API takes as ``group=`` for ``backend``: itself, or on
    torch 2.x torch's ProcessGroup over it (_torch_group.Group)."""
    if not _ON_BACKEND:
        return backend
    return _torch_group.Group(backend)


def _elastic(pg: Any, timeout: float | None, what: str, op: Any) -> Any:
    """A new process group from ``op(handle, seconds)`` on ``pg``'s."""
    inner = _ferry_pg(pg, what)
    seconds = timeout if timeout is not None else inner._timeout
    try:
        handle = op(inner._handle, seconds)
    except _errors.Error as e:
        raise _torch_error(e, f"{what} on rank {inner.rank()}")
    return _as_group(ProcessGroupFerry(
        handle.rank, handle.size, handle, handle.members,
        datetime.timedelta(seconds=inner._timeout)))


def shrink_group(pg: Any = None, timeout: float | None = None) -> Any:
    """A new "ferry" process group of the live members of ``pg`` (default:
    the default group), as ``ferry.shrink_group`` agrees them: its ranks
    renumbered densely in the old order, nobody re-initialised. Pass it as
    ``group=`` to torch.distributed's ops and to DDP (``process_group=``);
    read its ``rank()`` and ``size()`` from it (torch's group registry does
    not hold it). Raises as the ops do (RuntimeError naming what failed)."""
    return _elastic(pg, timeout, "shrink_group", _ferry.shrink)


def grow_group(pg: Any = None, timeout: float | None = None) -> Any:
    """The process group ``pg`` was shrunk from, again, once replacements
    took the dead ranks' places (``ferry.grow_group``): the survivors pass
    the group they shrank to, a replacement its default group (or a group
    of the same ranks). Used as ``shrink_group``'s result is."""
    return _elastic(pg, timeout, "grow_group", _ferry.grow)


def master() -> str:
    """The address of the ferry job's master (rank 0's worker): what
    ``ferryctl --master=`` and ``ferry.connect`` take (with the token the
    workers were given: ``configure(token_file=...)``)."""
    return _rpc._current().master_address


def _register() -> None:
    if BACKEND.upper() in dist.Backend._plugins:
        return
    try:  # torch 2.x: a backend names its devices.
        dist.Backend.register_backend(BACKEND, _create, extended_api=True,
                                      devices=["cpu"])  # type: ignore[call-arg]
        return
    except TypeError:  # torch 1.13: no devices.
        pass
    try:
        dist.Backend.register_backend(BACKEND, _create, extended_api=True)
    except TypeError:  # A torch without the extended API.
        dist.Backend.register_backend(
            BACKEND, lambda store, rank, size, timeout: _create(
                _Options(store, rank, size, timeout)))


class _Options:
    def __init__(self, store: dist.Store, rank: int, size: int,
                 timeout: datetime.timedelta) -> None:
        self.store, self.group_rank, self.group_size = store, rank, size
        self.timeout = timeout
        self.global_ranks_in_group: list[int] = []
        self.group_id = ""


_register()
