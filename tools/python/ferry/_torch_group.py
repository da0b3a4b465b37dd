"""torch 2.x's ProcessGroup over ferry's Backend (distributed.py).

torch 2.x makes each group a C++ ProcessGroup that calls its Backends; a
Backend written in Python loses, on that path, what torch's own Backends
have:

- the Work it returns reaches Python inside torch's holder, which hands
  ``wait()`` and ``get_future()`` to it but answers ``is_completed()``
  itself, from a flag only torch's C++ Backends set: an ``isend``'s Work
  says False even after ``wait()`` (a program polling it never ends), and
  ``source_rank()`` of a receive from any source is the holder's (torch's
  test_isend, test_irecv, test_send_recv_any_source);
- ``monitored_barrier`` is a Backend method only gloo's C++ has;
- the group's name, as C++ asks it (DDP's logging data), is "custom".

``Group`` is that ProcessGroup as a Python subclass: point-to-point ops
(FORWARDED) and ``monitored_barrier`` go straight to ferry's Backend, whose
Work Python then holds itself, as torch 1.13 held ferry's; collectives,
and whatever calls by C++ names (functional collectives, DeviceMesh, the
fault-tolerance API), find the Backend registered as the group's CPU
backend; and C++ asks the group its name here. torch takes a
ProcessGroup a backend's creator returns as the group itself (and does not
wrap it in its debug checker either: TORCH_DISTRIBUTED_DEBUG=DETAIL).
"""

from __future__ import annotations

from typing import Any

import torch
from torch._C import _distributed_c10d as _c10d

# (Any to type checkers: torch 1.13's stubs lack 2.x's ProcessGroup API.)
_PROCESS_GROUP: Any = _c10d.ProcessGroup


class Group(_PROCESS_GROUP):
    """torch's ProcessGroup whose CPU Backend is ferry's ``backend``."""

    def __init__(self, backend: Any, store: Any = None) -> None:
        # torch's split_group and merge_remote_group clone the group's store
        # (a group made without one crashed there); ferry's own groups need
        # none: a store of nothing where the caller has none.
        super().__init__(store if store is not None else _c10d.HashStore(),
                         backend.rank(), backend.size())
        self._ferry_backend = backend
        kind = _PROCESS_GROUP.BackendType.CUSTOM
        self._register_backend(torch.device("cpu"), kind, backend)
        self._set_default_backend(kind)

    def getBackendName(self) -> str:
        return str(self._ferry_backend.getBackendName())

    def name(self) -> str:
        return self.getBackendName()

    def monitored_barrier(self, timeout: Any = None,
                          wait_all_ranks: bool = False) -> None:
        self._ferry_backend.monitored_barrier(timeout, wait_all_ranks)


# The ops torch's Python API calls on a group by these names, as ferry's
# Backend defines them: straight to it, their Work then Python's own (not
# torch's holder). Collectives keep torch's C++ path: torch runs a group's
# hooks there (register_hooks: torch's fault-tolerance API), and DDP under
# Join waits on their Work through it.
FORWARDED = ("send", "recv", "recv_anysource")


def _forward(name: str) -> Any:
    def method(self: Group, *args: Any, **kwargs: Any) -> Any:
        return getattr(self._ferry_backend, name)(*args, **kwargs)
    method.__name__ = method.__qualname__ = name
    return method


for _name in FORWARDED:
    setattr(Group, _name, _forward(_name))
