"""Collectives with torch.distributed's signatures (and tf's all_gather).

Every worker of the group calls the same collectives in the same order.
``group=None`` is the world; ``new_group(ranks)`` makes a group, called on
every worker (non-members get a handle whose collectives return None, as in
torch). Ranks in ``src``/``dst`` are global ranks, as in torch.

Outputs are written in place (torch's output arguments, and ``all_reduce``,
``broadcast`` and ``reduce`` on their tensor): what the other ranks send is
received straight into them (nothing is copied back at the end). They must
be contiguous CPU tensors or writable C-contiguous numpy arrays of the
result's dtype and shape, and must not overlap the inputs. Inputs
are sent from their own memory; once a collective returns (or its work
handle's ``wait()`` does) ferry no longer reads them, so they may be reused.
Tensors a collective returns (tf's ``all_gather``, jagged all-to-alls) come
back as the kind of its inputs.

``async_op=True`` returns a ``Work``: ``wait(timeout=None)`` finishes the
op (outputs are written by then) and returns True, or the result for ops
that return one. Every collective is bounded by ``timeout`` (seconds;
default ``init``'s) and fails on every rank alike: DeadlineExceededError
naming the ranks that never came, UnavailableError naming a dead one,
InvalidArgumentError naming the rank and field at fault.

Elastic groups (collectives/elastic/elastic.h, ULFM's agree/shrink/revoke): when a
member dies, ``revoke_group(group, reason)`` on any member makes every
pending and later op of the group fail at once on every member
(AbortedError: "group G was revoked by workerR (rank r): reason"); the
survivors then call ``shrink_group(group)`` for a group of the live members
and go on with it. ``agree(flag, group)`` is a fault-tolerant AND among the
members that take part. ``agree`` and ``shrink_group`` are ops of the group
like the collectives (every live member calls them, in the same order) and
the only ones that work on a revoked group.
"""

from __future__ import annotations

import sys
import threading
import traceback
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence

from . import _errors
from . import _ferry
from . import _nest
from . import _rpc

if TYPE_CHECKING:
    from ._types import GroupArg, ReduceOpArg, Tensor, TensorArg, TensorType

__all__ = [
    "Group", "ReduceOp", "Work", "agree", "all_gather", "all_reduce",
    "all_to_all", "all_to_all_single", "barrier", "broadcast", "gather",
    "get_rank", "get_world_size", "grow_group", "irecv", "isend",
    "membership_events", "new_group", "on_membership_change", "recv",
    "reduce", "reduce_scatter", "revoke_group", "scatter", "send",
    "shrink_group",
]


class ReduceOp:
    """Reductions (torch's names; torch.distributed.ReduceOp and strings
    such as "sum" work too)."""
    SUM: str = "sum"
    PRODUCT: str = "prod"
    MIN: str = "min"
    MAX: str = "max"
    AVG: str = "avg"
    BAND: str = "band"
    BOR: str = "bor"
    BXOR: str = "bxor"


def _reduce_op(op: ReduceOpArg) -> str:
    if isinstance(op, str):
        return {"product": "prod"}.get(op.lower(), op.lower())
    name = getattr(op, "name", None) or str(op).rsplit(".", 1)[-1]
    return {"PRODUCT": "prod"}.get(name.upper(), name.lower())


class Group:
    """A process group: its global ranks, in group order."""

    ranks: list[int]
    # None on non-members: typed as the group, which it is wherever the ops
    # use it (after is_member()).
    _handle: _ferry.Group

    def __init__(self, ranks: Iterable[int],
                 handle: _ferry.Group | None) -> None:
        self.ranks = list(ranks)
        self._handle = handle  # type: ignore[assignment]

    def rank(self) -> int:
        """This worker's rank in the group (-1 if not a member)."""
        return self._handle.rank if self._handle is not None else -1

    def size(self) -> int:
        return len(self.ranks)

    def is_member(self) -> bool:
        return self._handle is not None

    def group_rank(self, global_rank: int) -> int:
        """The group rank of a global rank."""
        try:
            return self.ranks.index(global_rank)
        except ValueError:
            raise _errors.InvalidArgumentError(
                f"rank {global_rank} is not in the group {self.ranks}"
            ) from None

    def __repr__(self) -> str:
        return f"Group({self.ranks})"


_world: dict[int, Group] = {}  # id(worker) -> its world


def _cpu_backend(group: Any) -> Any:
    """torch 2.x's CPU backend of the ProcessGroup ``group`` (None if it
    has none)."""
    try:
        return group._get_backend(sys.modules["torch"].device("cpu"))
    except (KeyError, RuntimeError):
        return None


def _group(group: GroupArg) -> Group:
    if group is not None:
        # A torch ProcessGroup of the "ferry" backend stands for its group
        # (on torch 2.x, through its CPU backend, which is ferry's).
        inner = getattr(group, "_ferry_group", None)
        if inner is None and hasattr(group, "_get_backend"):
            inner = getattr(_cpu_backend(group), "_ferry_group", None)
        return inner if inner is not None else group

    worker = _rpc._current()
    g = _world.get(id(worker))
    if g is None:
        _world.clear()
        g = Group(range(worker.world_size), worker.world())
        _world[id(worker)] = g
    return g


def new_group(ranks: Iterable[int] | None = None) -> Group:
    """A group of ``ranks`` (global ranks, in group order; None: all).
    Every worker calls it, members in the same order of group creations."""
    worker = _rpc._current()
    if ranks is None:
        ranks = list(range(worker.world_size))
    ranks = [int(r) for r in ranks]
    if worker.rank not in ranks:
        return Group(ranks, None)
    return Group(ranks, worker.new_group(ranks))


def get_rank(group: GroupArg = None) -> int:
    """This worker's rank in ``group`` (default: the world)."""
    return _group(group).rank()


def get_world_size(group: GroupArg = None) -> int:
    return _group(group).size()


class Work:
    """A collective started with ``async_op=True``."""

    def __init__(self, handle: _ferry.Work,
                 finish: Callable[[Any], Any] | None = None) -> None:
        self._handle = handle
        self._finish = finish
        self._done = False
        self._result: Any = None

    def wait(self, timeout: float | None = None) -> Any:
        """Finishes the op (at most ``timeout`` seconds; None: the op's own
        deadline): outputs are written, inputs free again. Returns True, or
        the op's result if it returns one. Raises the op's error."""
        if not self._done:
            r = self._handle.wait(timeout)
            self._result = self._finish(r) if self._finish else True
            self._done = True
        return self._result

    def is_completed(self) -> bool:
        return self._done or self._handle.is_completed()

    def is_success(self) -> bool:
        """True if the op is done and succeeded."""
        return self.is_completed() and self.exception() is None

    def exception(self) -> _errors.Error | None:
        """The op's error once it is done (None if it succeeded or runs)."""
        if not self.is_completed():
            return None
        try:
            self.wait(0)
        except _errors.Error as e:
            return e
        return None


def _run(handle: _ferry.Work, async_op: bool,
         finish: Callable[[Any], Any] | None = None) -> Any:
    # A Work if async_op, else its result.
    work = Work(handle, finish)
    return work if async_op else work.wait()


def _timeout(timeout: float | None) -> float:
    return float(timeout) if timeout is not None else _rpc._default_timeout


def _kind() -> TensorType:
    return _rpc._current().tensor_type


def _none_result(result: Any) -> Any:
    return None if result is True else result


def all_to_all(output_tensor_list: Sequence[Tensor],
               input_tensor_list: Sequence[TensorArg], group: GroupArg = None,
               async_op: bool = False,
               timeout: float | None = None) -> Work | None:
    """Sends input_tensor_list[i] to rank i; output_tensor_list[i] receives
    rank i's tensor for this rank. Shapes may differ per pair (uneven
    splits); one dtype, complex included."""
    g = _group(group)
    if not g.is_member():
        return None
    handle = _ferry.all_to_all(g._handle, input_tensor_list,
                               output_tensor_list, _timeout(timeout),
                               async_op, _kind())
    return _none_result(_run(handle, async_op))


def all_to_all_single(output: Tensor, input: TensorArg,
                      output_split_sizes: Sequence[int] | None = None,
                      input_split_sizes: Sequence[int] | None = None,
                      group: GroupArg = None, async_op: bool = False,
                      timeout: float | None = None) -> Work | None:
    """``input`` split on dim 0 by ``input_split_sizes`` (None: evenly) goes
    to the ranks; ``output`` receives the pieces, in rank order.
    ``output_split_sizes`` (None: whatever the ranks send) is checked."""
    g = _group(group)
    if not g.is_member():
        return None
    handle = _ferry.all_to_all_single(
        g._handle, input, output, list(output_split_sizes or []),
        list(input_split_sizes or []), _timeout(timeout), async_op, _kind())
    return _none_result(_run(handle, async_op))


def all_gather(tensor_list: Any = None, tensor: TensorArg | int | None = None,
               group: GroupArg = None, async_op: bool = False, *,
               value: Any = None, axis: int | None = None,
               options: object = None, timeout: float | None = None) -> Any:
    """torch's form ``all_gather(tensor_list, tensor)``: tensor_list[i]
    receives rank i's tensor (shapes may differ by rank); an empty list is
    filled with them instead.

    tf's form ``all_gather(value, axis)``: ``value`` is a tensor or a nested
    structure (dicts, lists, tuples) of tensors of rank >= 1, the same on
    every rank except along ``axis``; returns the same structure with every
    rank's tensors concatenated along ``axis``, in rank order. ``options``
    (tf's CommunicationOptions) is accepted and ignored.
    """
    del options
    if value is not None or axis is not None or isinstance(tensor, int):
        return _all_gather_axis(
            value if value is not None else tensor_list,
            axis if axis is not None else tensor, group, async_op, timeout)
    g = _group(group)
    if not g.is_member():
        return None
    fill = isinstance(tensor_list, list) and not tensor_list
    handle = _ferry.all_gather(g._handle, tensor,
                               None if fill else tensor_list,
                               _timeout(timeout), async_op, _kind())
    if fill:
        def finish(result: list[Tensor]) -> bool:
            tensor_list.extend(result)
            return True
        return _none_result(_run(handle, async_op, finish))
    return _none_result(_run(handle, async_op))


def _all_gather_axis(value: Any, axis: Any, group: GroupArg, async_op: bool,
                     timeout: float | None) -> Any:
    g = _group(group)
    if not g.is_member():
        return None
    handle = _ferry.all_gather_axis(g._handle, value, int(axis),
                                    _timeout(timeout), async_op, _kind())
    return _run(handle, async_op, lambda r: _nest.restore(value, r))


def all_reduce(tensor: Tensor, op: ReduceOpArg = ReduceOp.SUM,
               group: GroupArg = None, async_op: bool = False,
               timeout: float | None = None) -> Work | None:
    """Reduces ``tensor`` across the group, in place (sum, prod, min, max,
    avg; band/bor/bxor on integers)."""
    g = _group(group)
    if not g.is_member():
        return None
    handle = _ferry.all_reduce(g._handle, tensor, _reduce_op(op),
                               _timeout(timeout), async_op, _kind())
    return _none_result(_run(handle, async_op))


def reduce_scatter(output: Tensor, input_list: Sequence[TensorArg],
                   op: ReduceOpArg = ReduceOp.SUM, group: GroupArg = None,
                   async_op: bool = False,
                   timeout: float | None = None) -> Work | None:
    """``output`` receives the reduction over ranks of input_list[rank]."""
    g = _group(group)
    if not g.is_member():
        return None
    handle = _ferry.reduce_scatter(g._handle, output, input_list,
                                   _reduce_op(op), _timeout(timeout),
                                   async_op, _kind())
    return _none_result(_run(handle, async_op))


def broadcast(tensor: Tensor, src: int, group: GroupArg = None,
              async_op: bool = False,
              timeout: float | None = None) -> Work | None:
    """Rank ``src``'s ``tensor`` into every rank's ``tensor``."""
    g = _group(group)
    if not g.is_member():
        return None
    handle = _ferry.broadcast(g._handle, tensor, g.group_rank(src),
                              _timeout(timeout), async_op, _kind())
    return _none_result(_run(handle, async_op))


def scatter(tensor: Tensor, scatter_list: Sequence[TensorArg] | None = None,
            src: int = 0, group: GroupArg = None, async_op: bool = False,
            timeout: float | None = None) -> Work | None:
    """Rank ``src``'s scatter_list[i] into rank i's ``tensor``."""
    g = _group(group)
    if not g.is_member():
        return None
    src = g.group_rank(src)
    handle = _ferry.scatter(g._handle, tensor,
                            scatter_list if g.rank() == src else None, src,
                            _timeout(timeout), async_op, _kind())
    return _none_result(_run(handle, async_op))


def gather(tensor: TensorArg, gather_list: list[Any] | None = None,
           dst: int = 0, group: GroupArg = None, async_op: bool = False,
           timeout: float | None = None) -> Work | None:
    """Every rank's ``tensor`` into rank ``dst``'s gather_list (an empty
    list is filled)."""
    g = _group(group)
    if not g.is_member():
        return None
    dst = g.group_rank(dst)
    here = g.rank() == dst
    fill = here and isinstance(gather_list, list) and not gather_list
    outputs = gather_list if here and not fill else None
    handle = _ferry.gather(g._handle, tensor, outputs, dst, _timeout(timeout),
                           async_op, _kind())
    if fill:
        def finish(result: list[Tensor]) -> bool:
            gather_list.extend(result)  # type: ignore[union-attr]  # fill
            return True
        return _none_result(_run(handle, async_op, finish))
    return _none_result(_run(handle, async_op))


def reduce(tensor: Tensor, dst: int, op: ReduceOpArg = ReduceOp.SUM,
           group: GroupArg = None, async_op: bool = False,
           timeout: float | None = None) -> Work | None:
    """Reduces every rank's ``tensor`` into rank ``dst``'s, in place (the
    other ranks' are left as they are)."""
    g = _group(group)
    if not g.is_member():
        return None
    handle = _ferry.reduce(g._handle, tensor, g.group_rank(dst),
                           _reduce_op(op), _timeout(timeout), async_op,
                           _kind())
    return _none_result(_run(handle, async_op))


def send(tensor: TensorArg, dst: int, group: GroupArg = None, tag: int = 0,
         timeout: float | None = None) -> None:
    """Sends ``tensor`` to rank ``dst`` (a global rank), tagged. Returns once
    the message is at ``dst`` (its memory may then be reused); it need not
    wait for the receive. Messages to one rank with one tag are received in
    the order sent."""
    # On a non-member isend() is None, so this raises AttributeError (left
    # as it was; mypy sees it).
    isend(tensor, dst, group, tag, timeout).wait()  # type: ignore[union-attr]


def isend(tensor: TensorArg, dst: int, group: GroupArg = None, tag: int = 0,
          timeout: float | None = None) -> Work | None:
    """``send`` started: a ``Work``; do not modify ``tensor`` until its
    ``wait()`` returned."""
    g = _group(group)
    if not g.is_member():
        return None
    handle = _ferry.send(g._handle, tensor, g.group_rank(dst), int(tag),
                         _timeout(timeout), True, _kind())
    return Work(handle)


def recv(tensor: Tensor, src: int | None = None, group: GroupArg = None,
         tag: int = 0, timeout: float | None = None) -> int:
    """Receives the next message from rank ``src`` (a global rank; None: any
    rank) with ``tag`` into ``tensor`` (of the message's dtype and shape);
    returns the sender's global rank."""
    # On a non-member irecv() is None, so this raises AttributeError (left
    # as it was; mypy sees it).
    return irecv(tensor, src, group,  # type: ignore[union-attr]
                 tag, timeout).wait()


def irecv(tensor: Tensor, src: int | None = None, group: GroupArg = None,
          tag: int = 0, timeout: float | None = None) -> Work | None:
    """``recv`` started: a ``Work`` whose ``wait()`` returns the sender."""
    g = _group(group)
    if not g.is_member():
        return None
    handle = _ferry.recv(g._handle, tensor,
                         -1 if src is None else g.group_rank(src), int(tag),
                         _timeout(timeout), True, _kind())
    return Work(handle, lambda r: g.ranks[int(r)])


def barrier(group: GroupArg = None, async_op: bool = False,
            timeout: float | None = None) -> Work | None:
    """Returns once every member called it."""
    g = _group(group)
    if not g.is_member():
        return None
    handle = _ferry.barrier(g._handle, _timeout(timeout), async_op)
    return _none_result(_run(handle, async_op))


# ---- elastic groups (collectives/elastic/elastic.h) ----

def _member(g: Group, what: str) -> None:
    # Non-members have no handle: nothing to agree on, shrink or revoke.
    if not g.is_member():
        raise _errors.InvalidArgumentError(
            f"{what}: worker{_rpc._current().rank} is not a member of {g!r}")


def agree(flag: bool = True, group: GroupArg = None,
          timeout: float | None = None) -> tuple[bool, list[int]]:
    """A fault-tolerant agreement among the live members of ``group``
    (default: the world): returns ``(AND of the flags of the members that
    took part, their global ranks in group order)`` -- global ranks, as
    ``Group.ranks`` and ``src``/``dst`` everywhere, not group ranks. Every
    member that returns gets the same result, even while members die; a
    member counts as gone once the job's membership says so (a live but
    silent one is waited for). Works on a revoked group.

    Every live member calls it, in the same order as its other ops on the
    group. Raises DeadlineExceededError after ``timeout`` seconds (default
    ``init``'s) naming the members that neither voted nor are known gone,
    UnavailableError if the job's store cannot be reached, and
    FailedPreconditionError if the others decided without this worker
    (they counted it gone). InvalidArgumentError on a non-member."""
    g = _group(group)
    _member(g, "agree")
    return _ferry.agree(g._handle, bool(flag), _timeout(timeout))


def shrink_group(group: GroupArg = None,
                 timeout: float | None = None) -> Group:
    """A new group of the live members of ``group`` (default: the world),
    as ``agree`` decides them: a ``Group`` like ``new_group``'s, its ranks
    renumbered densely in the old order (``ranks`` lists their global
    ranks). Only the survivors call it (each live member, in the same order
    as its other ops on the group); nothing else is re-initialised. Works
    on a revoked group -- the way on after ``revoke_group``. Errors as
    ``agree``'s."""
    g = _group(group)
    _member(g, "shrink_group")
    handle = _ferry.shrink(g._handle, _timeout(timeout))
    return Group(handle.members, handle)


def grow_group(group: GroupArg = None,
               timeout: float | None = None) -> Group:
    """The group ``group`` was shrunk from, again, once replacements took
    the dead ranks' places: waits until all its ranks are live
    (DeadlineExceededError naming those still gone), agrees among them,
    and returns the successor -- the world group if it was shrunk from the
    world (which then works again with the newcomers), else a new group of
    the same ranks. Every one of them calls it: the survivors with the
    group they shrank to (``group``), a replacement with its world
    (``None``) or ``new_group`` of the same ranks. UnavailableError if a
    rank died meanwhile (shrink again)."""
    g = _group(group)
    _member(g, "grow_group")
    handle = _ferry.grow(g._handle, _timeout(timeout))
    if handle.name == "world":
        return _group(None)
    return Group(handle.members, handle)


def membership_events(timeout: float | None = None
                      ) -> Iterator[dict[str, Any]]:
    """This worker's membership events from now on, as they come: dicts
    ``{"seq", "event", "rank", "worker", "detail", "time"}`` (and
    ``"group"`` for a revocation); "event" is "died" or "left" (with the
    cause in "detail"), "replaced" (a new process took the rank), or
    "revoked". Ends after ``timeout`` seconds without one (None: never)."""
    stream = _ferry.EventStream(_rpc._current())
    try:
        while True:
            event = stream.next(timeout)
            if event is None:
                return
            yield event
    finally:
        stream.close()


def on_membership_change(callback: Callable[[dict[str, Any]], Any]
                         ) -> Callable[[], None]:
    """Calls ``callback(event)`` (``membership_events``' dicts) for each
    membership event from now on, on a thread of its own; returns a
    function that stops it. An exception in the callback is printed and
    the next event still comes."""
    stream = _ferry.EventStream(_rpc._current())

    def pump() -> None:
        while True:
            event = stream.next(None)
            if event is None:
                return
            try:
                callback(event)
            except Exception:  # noqa: BLE001 -- reported, not fatal
                traceback.print_exc()

    threading.Thread(target=pump, name="ferry-membership-events",
                     daemon=True).start()
    return stream.close


def revoke_group(group: GroupArg = None, reason: str = "") -> None:
    """Revokes ``group`` (default: the world) on every member: each pending
    and later op of the group fails at once there with AbortedError
    ("group G was revoked by workerR (rank r): reason"), this worker's
    included; only ``agree`` and ``shrink_group`` work on it from then on.
    One member calls it; returns once the group is revoked here and the
    others are being told (each member that hears of it tells the rest).
    InvalidArgumentError for a ``reason`` over 256 bytes or on a
    non-member."""
    g = _group(group)
    _member(g, "revoke_group")
    _ferry.revoke(g._handle, reason)
