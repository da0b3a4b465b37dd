"""ferry as torchft's process group: ``ProcessGroupFerry()`` where torchft
takes ``ProcessGroupGloo()``.

torchft's ``Manager`` runs a quorum of replica groups through its
lighthouse and, after every change of the quorum, reconfigures its
process group (``configure(store_addr, replica_id, rank, world_size,
...)``): a new group among the quorum's replicas, over a store the
quorum's first replica serves. ``ProcessGroupFerry`` makes that group a
ferry group (a ferry job of the quorum's replicas, started anew for each
quorum, the previous one stopped); torchft's ``abort()`` revokes it, so
every op pending on any replica fails at once::

    from torchft import Manager, DistributedDataParallel, OptimizerWrapper
    from ferry.torchft import ProcessGroupFerry

    manager = Manager(pg=ProcessGroupFerry(), min_replica_size=1, ...)
    model = DistributedDataParallel(manager, model)

A replica that dies fails the ops of the others naming it (as every ferry
op does), within the group's timeout; torchft's manager then leaves that
step uncommitted and the next quorum goes on without the dead replica.
"""

from __future__ import annotations

import datetime
from typing import Any

from torch.distributed import Store
from torchft.process_group import ProcessGroupWrapper

from . import distributed as _distributed

__all__ = ["ProcessGroupFerry"]


class ProcessGroupFerry(ProcessGroupWrapper):
    """A reconfigurable ferry group for torchft (see the module)."""

    def __init__(self, timeout: datetime.timedelta = datetime.timedelta(
            seconds=60)) -> None:
        super().__init__(timeout=timeout)

    def _create_pg(self, store: Store, rank: int,
                   world_size: int) -> Any:
        # As ferry's default group: a new quorum is a new ferry job (the
        # previous quorum's stopped first).
        # (torch 2.x's ProcessGroup over ferry's Backend: _torch_group.Group.)
        return _distributed._create(
            _distributed._Options(store, rank, world_size, self._timeout))

    def getBackendName(self) -> str:
        return "torchft-ferry"
