"""torch.distributed.rpc's backend options and constants, for ferry.

``TensorPipeRpcBackendOptions`` takes torch's fields; ferry reads
``rpc_timeout``, ``init_method`` and ``num_worker_threads`` (the threads
that run calls here) and refuses ``device_maps``/``devices`` (ferry sends
CPU tensors). ``allow`` (ferry's own) lists modules whose functions and
classes callers may run here, as ``ferry.rpc.allow_module`` does.
"""

from __future__ import annotations

import enum
import types
from typing import Any, Iterable, Mapping

from .constants import (DEFAULT_INIT_METHOD, DEFAULT_NUM_WORKER_THREADS,
                        DEFAULT_RPC_TIMEOUT_SEC)

__all__ = ["BackendType", "RpcBackendOptions", "TensorPipeRpcBackendOptions"]


class BackendType(enum.Enum):
    """torch's backend names; every one runs on ferry."""

    TENSORPIPE = "TENSORPIPE"
    FERRY = "FERRY"


def _no_devices(what: str) -> ValueError:
    return ValueError(
        f"{what}: ferry.rpc sends CPU tensors only and places no tensor on "
        "a device (TensorPipe's device maps are not supported); move "
        "tensors to the CPU before sending them")


class RpcBackendOptions:
    """torch's base options: ``rpc_timeout`` (seconds, the default of every
    call; 0: none) and ``init_method`` ("env://", "tcp://HOST:PORT" or
    "file://PATH")."""

    def __init__(self, rpc_timeout: float = DEFAULT_RPC_TIMEOUT_SEC,
                 init_method: str = DEFAULT_INIT_METHOD) -> None:
        self.rpc_timeout = float(rpc_timeout)
        self.init_method = init_method


class TensorPipeRpcBackendOptions(RpcBackendOptions):
    """torch's TensorPipe options, run by ferry (see the module's
    docstring). ``allow``: modules (or their names) whose functions and
    classes callers may run on this worker."""

    def __init__(self, *, num_worker_threads: int = DEFAULT_NUM_WORKER_THREADS,
                 rpc_timeout: float = DEFAULT_RPC_TIMEOUT_SEC,
                 init_method: str = DEFAULT_INIT_METHOD,
                 device_maps: Mapping[str, Mapping[Any, Any]] | None = None,
                 devices: Iterable[Any] | None = None,
                 _transports: Iterable[Any] | None = None,
                 _channels: Iterable[Any] | None = None,
                 allow: Iterable[types.ModuleType | str] = ()) -> None:
        super().__init__(rpc_timeout, init_method)
        if device_maps:
            raise _no_devices("device_maps")
        if devices:
            raise _no_devices("devices")
        if int(num_worker_threads) < 1:
            raise ValueError(f"num_worker_threads: {num_worker_threads} is "
                             "not a positive number of threads")
        self.num_worker_threads = int(num_worker_threads)
        self.device_maps: dict[str, dict[Any, Any]] = {}
        self.devices: list[Any] = []
        self.allow = list(allow)

    def set_device_map(self, to: str, device_map: Mapping[Any, Any]) -> None:
        """Refused: ferry.rpc places no tensor on a device."""
        raise _no_devices(f"set_device_map({to!r})")

    def set_devices(self, devices: Iterable[Any]) -> None:
        """Refused: ferry.rpc places no tensor on a device."""
        raise _no_devices("set_devices")
