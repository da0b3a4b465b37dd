"""torch's fault-tolerance Backend API on ferry's elastic groups.

torch 2.x releases from 2026 ask a Backend for ``get_error()``,
``abort()`` (with abort hooks), ``shrink()``, ``split()`` / ``merge()``
and ``get_reconfigure_handle()`` / ``reconfigure()``; gloo leaves ``abort`` a
no-op and ``get_error`` always SUCCESS. ferry answers them from what its
groups already do: every failure names its kind and rank, ``abort`` is
ferry's revoke (every pending and future op of the group fails on every
member), ``shrink``, ``split``, ``merge`` and ``reconfigure`` make the
group of the ranks torch names, alike on every member, without restarting
anything.

``FaultTolerance`` is a mixin of ``ProcessGroupFerry`` (distributed.py):
it reads and replaces the group's ``_handle``, ``_ranks``,
``_group_rank``, ``_size`` and ``_ferry_group``. On a torch without the
API nothing calls it; ``ferry.distributed.shrink_group`` and friends do the
same there."""

from __future__ import annotations

import datetime
import re
import secrets
import threading
from typing import Any, Callable, Sequence

import torch
from torch._C import _distributed_c10d as _c10d

from . import _collectives
from . import _errors
from . import _ferry
from . import _rpc
from . import _torch_group

# torch's names for an error's kind (c10d::ErrorType), where torch has them.
_ERROR_TYPE: Any = getattr(_c10d, "ErrorType", None)
SUCCESS, TIMEOUT, COMM_ERROR, REMOTE_ERROR = (
    "SUCCESS", "TIMEOUT", "COMM_ERROR", "REMOTE_ERROR")

# torch's Backend (the type checker reads torch 1.13's, which has none).
_BACKEND: Any = getattr(_c10d, "Backend", None)
# torch's shrink flag that aborts the parent's pending ops first.
_SHRINK_ABORT = 0x01
# Instances of a reconfigured group (torch's uuid), as Worker::InstanceGroup
# takes them.
_MAX_INSTANCE = 1 << 62
# "rank 3 (worker3)": how ferry's op errors name a group rank and its
# worker; "revoked by worker1 (rank 1)": a revocation's origin (global).
_NAMED_RANK = re.compile(r"\brank (\d+) \(worker(\d+)\)")
_REVOKED_BY = re.compile(r"revoked by worker(\d+) \(rank \d+\)")


def _fnv62(text: str) -> int:
    """A number every member derives alike from ``text`` (FNV-1a)."""
    n = 14695981039346656037
    for byte in text.encode():
        n = ((n ^ byte) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return n & (_MAX_INSTANCE - 1)


def _handle_prefix() -> str:
    """What every handle of this ferry job begins with: its master's
    address (a handle of another job is refused, not followed)."""
    return f"ferry:{_rpc._current().master_address}:"


class Failure:
    """The first failure a group met since it was (re)configured: its kind
    (torch's ErrorType name), the group rank it names (None where none),
    and the error's message."""

    __slots__ = ("kind", "rank", "message")

    def __init__(self, kind: str, rank: int | None, message: str) -> None:
        self.kind, self.rank, self.message = kind, rank, message

    def __repr__(self) -> str:
        return f"Failure({self.kind}, rank={self.rank}, {self.message!r})"


class FaultTolerance:
    """The fault-tolerance methods of ``ProcessGroupFerry``."""

    # Set by the group's constructor and by reconfigure.
    _handle: _ferry.Group
    _ranks: list[int]
    _group_rank: int
    _size: int
    _timeout: float
    _torch_ranks: list[int]  # torch's global rank of each member
    _ferry_group: _collectives.Group
    _reconfigurable: bool
    # ProcessGroupFerry's: starts ferry ops, returns their Work.
    _run: Callable[..., Any]

    def _ft_init(self) -> None:
        self._ft_lock = threading.Lock()
        self._failure: Failure | None = None
        self._abort_hooks: dict[int, Callable[[], None]] = {}
        self._instances_used: set[int] = set()
        self._shrinks = 0
        self._splits = 0

    # -- getError --

    def _note_failure(self, error: BaseException) -> None:
        """Records ``error`` (a ferry error an op of this group raised) as
        the group's failure unless one is recorded already."""
        failure = self._classify(error)
        with self._ft_lock:
            if self._failure is None:
                self._failure = failure

    def _classify(self, error: BaseException) -> Failure:
        code = getattr(error, "code", "")
        text = str(error)
        own = _rpc.rank()
        if code == "DEADLINE_EXCEEDED":
            return Failure(TIMEOUT, self._named_rank(text, own), text)
        if code == "ABORTED":
            by = _REVOKED_BY.search(text)
            if by is not None and int(by.group(1)) != own:
                global_rank = int(by.group(1))
                rank = (self._ranks.index(global_rank)
                        if global_rank in self._ranks else None)
                return Failure(REMOTE_ERROR, rank, text)
            return Failure(COMM_ERROR, None, text)
        rank = self._named_rank(text, own)
        if code == "UNAVAILABLE" and rank is not None:
            return Failure(REMOTE_ERROR, rank, text)
        return Failure(COMM_ERROR, rank, text)

    def _named_rank(self, text: str, own: int) -> int | None:
        """The first group rank ``text`` names that is not this worker."""
        for m in _NAMED_RANK.finditer(text):
            if int(m.group(2)) != own:
                return int(m.group(1))
        return None

    def get_error(self) -> Any:
        """torch's ErrorType of the first failure since the group was
        (re)configured: TIMEOUT, REMOTE_ERROR (a member died, left, or
        revoked the group), COMM_ERROR (anything else, this rank's abort
        included); SUCCESS if none."""
        failure = self.failure()
        kind = failure.kind if failure is not None else SUCCESS
        return getattr(_ERROR_TYPE, kind) if _ERROR_TYPE is not None \
            else kind

    def failure(self) -> Failure | None:
        """The failure get_error() tells the kind of, with the rank it
        names and its message (None if none)."""
        with self._ft_lock:
            return self._failure

    # -- abort --

    def registerAbortHook(self, hook_id: int,
                          hook: Callable[[], None]) -> None:
        """``hook()`` runs when this rank aborts the group, before ferry
        revokes it (torch's ``register_abort_hook``; same id: replaced)."""
        with self._ft_lock:
            self._abort_hooks[int(hook_id)] = hook

    def unregisterAbortHook(self, hook_id: int) -> None:
        with self._ft_lock:
            self._abort_hooks.pop(int(hook_id), None)

    def abort(self) -> None:
        """Runs the abort hooks, then revokes the group on every member:
        each pending and future op of it fails at once, here
        (COMM_ERROR) and on the others (REMOTE_ERROR naming this rank).
        Only reconfigure (or shrink) makes a working group again."""
        with self._ft_lock:
            hooks = list(self._abort_hooks.values())
        for hook in hooks:  # Never under the lock: they are the user's.
            hook()
        reason = f"aborted by group rank {self._group_rank}"
        try:
            _ferry.revoke(self._handle, reason)
            failure = Failure(COMM_ERROR, None, reason)
        except _errors.Error as e:
            # Revoked here or not, this rank is done with the group; what
            # went wrong telling the others is what get_error says.
            failure = Failure(COMM_ERROR, None, f"{reason}: {e}")
        with self._ft_lock:
            if self._failure is None:
                self._failure = failure

    # -- shrink --

    supports_shrinking = property(lambda self: True)

    def shrink(self, ranks_to_exclude: Sequence[int], shrink_flags: int = 0,
               opts_override: Any = None) -> Any:
        """A new group of this group's ranks but ``ranks_to_exclude``
        (group ranks; torch checked them), renumbered densely in the old
        order, named alike on every survivor (each calls it, with the same
        ranks, in the same order): torch's ``shrink_group``. With
        SHRINK_ABORT this group is aborted first. Nobody re-initialises;
        the excluded ranks may be dead or alive."""
        del opts_override  # ferry's groups have no per-group options.
        excluded = {int(r) for r in ranks_to_exclude}
        kept = [g for i, g in enumerate(self._ranks) if i not in excluded]
        if shrink_flags & _SHRINK_ABORT:
            self.abort()
        with self._ft_lock:
            self._shrinks += 1
            n = self._shrinks
        instance = _fnv62(f"{self._handle.name}/shrink#{n}/"
                          f"{','.join(map(str, kept))}")
        return self._derived(self._instance_group(kept, instance, "shrink"),
                             kept)

    # -- split / merge --

    supports_splitting = property(lambda self: True)
    # Read by torch's split_group / merge_remote_group (and, undefined
    # here, its C++ property would recurse into this Python subclass).
    options = property(lambda self: _BACKEND.Options(
        "ferry", datetime.timedelta(seconds=self._timeout)))

    def split(self, store: Any, ranks: Sequence[int], opts: Any) -> Any:
        """torch's ``ProcessGroup.split_group(ranks)``: a new group of
        ``ranks`` (torch's global ranks, members of this group, this rank
        among them), made on every member of this group (each calls it,
        with its own new group's ranks, in the same order as the others)."""
        del store, opts  # ferry names the group; no per-group options.
        wanted = [int(r) for r in ranks]
        if (not wanted or len(set(wanted)) != len(wanted)
                or not set(wanted) <= set(self._torch_ranks)):
            raise ValueError(
                f"[ferry] split: ranks {wanted[:64]} are not distinct "
                f"ranks of this group ({self._torch_ranks[:64]})")
        mine = self._torch_ranks[self._group_rank]
        if mine not in wanted:
            # (torch would take None for a group: refused, not crashed.)
            raise ValueError(
                f"[ferry] split: ranks {wanted[:64]} leave out this "
                f"rank ({mine})")
        with self._ft_lock:
            self._splits += 1
            n = self._splits
        kept = [self._ranks[self._torch_ranks.index(r)] for r in wanted]
        instance = _fnv62(f"{self._handle.name}/split#{n}/"
                          f"{','.join(map(str, kept))}")
        split = self._derived(self._instance_group(kept, instance, "split"),
                              kept)
        split._torch_ranks = wanted
        return split

    def merge(self, store: Any, opts: Any, rank: int, size: int) -> Any:
        """torch's ``ProcessGroup.merge_remote_group(store, size)``: the
        group of ``size`` ranks that call it with the same ``store`` (this
        process as rank ``rank``), groups of this ferry job all (a rank of
        another ferry job is refused, naming it). The store is the merge's
        own: its keys name the new group."""
        del opts
        handle = self.get_reconfigure_handle()
        store.set(f"ferry/merge/{rank}", handle)
        if rank == 0:  # The new group's name, for everyone.
            store.set("ferry/merge/instance",
                      str(secrets.randbelow(_MAX_INSTANCE)))
        # (The store's gets wait, within its timeout.)
        handles = [store.get(f"ferry/merge/{r}") for r in range(size)]
        ranks = self._ranks_of(handles)
        instance = int(store.get("ferry/merge/instance"))
        return self._derived(self._instance_group(ranks, instance, "merge"),
                             ranks)

    def _derived(self, group: _ferry.Group, ranks: list[int]) -> Any:
        make: Any = type(self)  # ProcessGroupFerry
        return make(group.rank, group.size, group, ranks,
                    datetime.timedelta(seconds=self._timeout))

    def _instance_group(self, ranks: list[int], instance: int,
                        what: str) -> _ferry.Group:
        try:
            return _rpc._current().instance_group(ranks, instance)
        except _errors.Error as e:
            raise _torch_error(e, f"{what} on rank {self._group_rank}")

    # -- reconfigure --

    # Only a group made with enable_reconfigure=True: torch's own
    # ProcessGroup over any other keeps the rank and size it was made with.
    supports_reconfigure = property(lambda self: self._reconfigurable)

    def get_reconfigure_handle(self) -> str:
        """This process's handle: ``ferry:<master>:<ferry rank>``, the
        same for the life of its worker; peers exchange handles out of
        band and pass them to reconfigure."""
        return f"{_handle_prefix()}{_rpc.rank()}"

    def reconfigure(self, opts: Any) -> Any:
        """Makes this group the group of the workers ``opts.handles``
        names (a list: in that order; a set: in ferry rank order), for the
        instance ``opts.uuid`` (0 <= uuid < 2^62, new to this rank), from
        now on: a smaller one after a death, a larger one after a join, no
        ``destroy_process_group``. Every member calls it with the same
        uuid and handles; the Work returned is a barrier of the new group
        (failing within ``opts.timeout`` or the group's timeout, naming
        who did not come). The group's error is cleared."""
        if not self._reconfigurable:
            raise RuntimeError(
                "[ferry] reconfigure: this group was not made with "
                "init_process_group(..., enable_reconfigure=True)")
        uuid = int(opts.uuid)
        if not 0 <= uuid < _MAX_INSTANCE:
            raise ValueError(
                f"[ferry] reconfigure: uuid {uuid} out of range "
                f"(0 to 2^62 - 1)")
        ranks = self._ranks_of(opts.handles)
        own = _rpc.rank()
        if own not in ranks:
            raise ValueError(
                f"[ferry] reconfigure: this rank's handle "
                f"{self.get_reconfigure_handle()!r} is not among the "
                f"{len(ranks)} handles")
        with self._ft_lock:
            if uuid in self._instances_used:
                raise RuntimeError(
                    f"[ferry] reconfigure: uuid {uuid} already used on "
                    f"this rank")
            self._instances_used.add(uuid)
        group = self._instance_group(ranks, uuid, "reconfigure")
        self._adopt(group, ranks)
        seconds = self._timeout
        if getattr(opts, "timeout", None) is not None:
            seconds = max(opts.timeout.total_seconds(), 0.001)
        return self._run(
            "reconfigure", None, None,
            lambda: [_ferry.barrier(group, seconds, True)],
            what=f"reconfigure to {len(ranks)} ranks (uuid {uuid})")

    def _ranks_of(self, handles: Any) -> list[int]:
        """The ferry ranks ``handles`` name: a list in order, a set
        sorted. ValueError naming a handle that is not one of this job's,
        or named twice."""
        prefix = _handle_prefix()
        world = _rpc._current().world_size
        ranks: list[int] = []
        for h in handles:
            text = h.decode() if isinstance(h, bytes) else str(h)
            tail = text[len(prefix):] if text.startswith(prefix) else ""
            if not tail.isdigit() or not 0 <= int(tail) < world:
                raise ValueError(
                    f"[ferry] reconfigure: handle {text[:200]!r} is not "
                    f"one of this ferry job's ({prefix}<rank below "
                    f"{world}>)")
            if int(tail) in ranks:
                raise ValueError(
                    f"[ferry] reconfigure: handle {text!r} given twice")
            ranks.append(int(tail))
        if isinstance(handles, (set, frozenset)):
            ranks.sort()
        if not ranks:
            raise ValueError("[ferry] reconfigure: no handles")
        return ranks

    def _adopt(self, group: _ferry.Group, ranks: list[int]) -> None:
        """This object is ``group`` (of ``ranks``) from now on."""
        self._handle = group
        self._ranks = list(ranks)
        self._group_rank = group.rank
        self._size = group.size
        self._ferry_group = _collectives.Group(ranks, group)
        with self._ft_lock:
            self._failure = None



def _torch_error(e: BaseException, what: str) -> RuntimeError:
    # (distributed.py imports this module: its converter is looked up when
    # needed.)
    from .distributed import _torch_error as convert
    return convert(e, what)


class ReconfigurableGroup(_torch_group.Group):
    """torch's ProcessGroup over a ferry backend made with
    ``enable_reconfigure=True``: its rank and size are the backend's as
    reconfigure changes them (torch reads a Backend's from fields a Python
    backend cannot set; a Python ProcessGroup answers them itself)."""

    def getRank(self) -> int:
        return int(self._ferry_backend.rank())

    def getSize(self) -> int:
        return int(self._ferry_backend.size())
