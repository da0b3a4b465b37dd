"""torchrun's rendezvous on etcd v3, through ferry: no process of the job
is special, and no TCPStore is made.

torchelastic's own etcd rendezvous speaks etcd's v2 API, which etcd 3.6
removed; its ``c10d`` rendezvous keeps its state in a TCPStore on one node
(and the workers' env:// store is a TCPStore on rank 0's node): kill that
node and the job cannot restart. Here torchelastic's own dynamic
rendezvous (min/max nodes, ``--max-restarts``, nodes leaving and joining,
its heartbeats) keeps its state in etcd through ferry's etcd client
(``ferry.store.FerryStore``, compare-and-set on etcd's v3 API), and the
workers' store is in etcd too::

    torchrun --nnodes=1:4 --nproc-per-node=2 --max-restarts=3 \\
        --rdzv-backend=ferry-etcd --rdzv-id=train1 \\
        --rdzv-endpoint=etcd://10.0.0.1:2379,10.0.0.2:2379 train.py

``ferry-etcd`` reaches torch 2.x's ``torchrun`` through the package's
``torchrun.handlers`` entry point; ``python -m ferry.torchrun ARGS`` is
torchrun with the handler registered (any torch, 1.13 included).
``--rdzv-conf`` takes torchelastic's keys (``join_timeout``,
``last_call_timeout``, ``keep_alive_interval``, ...) and etcd's TLS and
user: ``etcd_ca``, ``etcd_cert``, ``etcd_key``, ``etcd_user``,
``etcd_password_file`` (or the ``FERRY_ETCD_*`` environment).

The workers' ``init_process_group()`` (env://) finds its store in etcd as
long as the worker imports ferry (``ferry.distributed`` or
``ferry.store``) before it: the agent hands the etcd URL down in
``FERRY_TORCHRUN_STORE``. A worker that does not import ferry gets torch's
env:// store, a TCPStore on rank 0's node.
"""

from __future__ import annotations

import datetime
import os
import sys
from typing import Any, Callable
from urllib.parse import urlencode

from torch.distributed.elastic.rendezvous import (RendezvousHandler,
                                                  RendezvousParameters)

__all__ = ["BACKEND", "create_handler", "handlers", "main", "register"]

# torchrun's --rdzv-backend name.
BACKEND = "ferry-etcd"
# The workers' store, from the agent to its workers: etcd's URL, and the
# rendezvous round the workers' keys are under.
STORE_ENV = "FERRY_TORCHRUN_STORE"
ROUND_ENV = "FERRY_TORCHRUN_ROUND"

_ETCD_KEYS = ("etcd_ca", "etcd_cert", "etcd_key", "etcd_user",
              "etcd_password_file")


def _store_url(params: RendezvousParameters) -> str:
    """``etcd://ENDPOINTS/RUN_ID[?etcd options]`` from torchrun's
    ``--rdzv-endpoint`` (``[etcd://]HOST:PORT[,HOST:PORT...]``),
    ``--rdzv-id`` and ``--rdzv-conf``."""
    endpoint = params.endpoint.strip()
    if endpoint.startswith("etcd://"):
        endpoint = endpoint[len("etcd://"):]
    endpoint = endpoint.rstrip("/")
    if not endpoint or "/" in endpoint:
        raise ValueError(
            f"--rdzv-endpoint={params.endpoint!r}: {BACKEND} takes etcd's "
            "endpoints, [etcd://]HOST:PORT[,HOST:PORT...]")
    options = {k: params.get(k) for k in _ETCD_KEYS if params.get(k)}
    query = f"?{urlencode(options)}" if options else ""
    return f"etcd://{endpoint}/{params.run_id}{query}"


def create_handler(params: RendezvousParameters) -> RendezvousHandler:
    """torchelastic's dynamic rendezvous with its state, and the store it
    hands out, in etcd (the module says how)."""
    from torch.distributed.elastic.rendezvous import dynamic_rendezvous
    from torch.distributed.elastic.rendezvous.c10d_rendezvous_backend import \
        C10dRendezvousBackend

    from .store import FerryStore

    url = _store_url(params)
    read_timeout = params.get_as_int("read_timeout", 60) or 60
    store = FerryStore(url, datetime.timedelta(seconds=read_timeout))
    backend = C10dRendezvousBackend(store, params.run_id)
    # torch 2.x's dynamic rendezvous would start a TCPStore on the rank 0
    # node for the workers (its "shared" store) unless told not to; the
    # workers use etcd instead. Both are read in this agent process and
    # inherited by the workers it starts.
    os.environ["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
    os.environ[STORE_ENV] = url
    return _Handler(dynamic_rendezvous.create_handler(store, backend, params))


class _Handler(RendezvousHandler):
    """torchelastic's dynamic rendezvous, telling the workers it starts
    next which round's keys their store holds."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def next_rendezvous(self) -> Any:
        info = self._inner.next_rendezvous()
        # Every round (a restart, a node joining or leaving) starts the
        # workers anew, so their keys (ferry's token and master among
        # them) must be the round's own. torch keeps the round there only.
        os.environ[ROUND_ENV] = str(self._inner._state_holder.state.round)
        return info

    def get_backend(self) -> str:
        return BACKEND

    def get_run_id(self) -> str:
        return str(self._inner.get_run_id())

    def is_closed(self) -> bool:
        return bool(self._inner.is_closed())

    def set_closed(self) -> None:
        self._inner.set_closed()

    def num_nodes_waiting(self) -> int:
        return int(self._inner.num_nodes_waiting())

    def shutdown(self) -> bool:
        return bool(self._inner.shutdown())

    @property
    def use_agent_store(self) -> bool:
        return False  # The workers' store is etcd, not the agent's.

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)  # What a torch release adds.


def handlers() -> Callable[[RendezvousParameters], RendezvousHandler]:
    """The ``torchrun.handlers`` entry point: torch calls it for the
    creator it registers under the entry point's name."""
    return create_handler


def register() -> None:
    """Registers ``ferry-etcd`` with torchelastic (once)."""
    from torch.distributed.elastic.rendezvous import \
        rendezvous_handler_registry as registry
    try:
        registry.register(BACKEND, create_handler)
    except ValueError:
        pass  # Registered already (the entry point, or a second call).


def main(argv: list[str] | None = None) -> Any:
    """``python -m ferry.torchrun ARGS``: torchrun with ``ferry-etcd``."""
    register()
    from torch.distributed import run
    return run.main(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    main()
