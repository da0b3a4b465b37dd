"""torch.distributed.rpc's API on ferry: the same program with one import
changed, and nothing but named, allowed functions ever run.

    import ferry.rpc as rpc          # was: import torch.distributed.rpc as rpc
    rpc.init_rpc("worker0", rank=0, world_size=2)
    rref = rpc.remote("worker1", torch.add, args=(torch.ones(2), 3))
    x = rref.to_here()
    rpc.shutdown()

The functions and classes of torch's names behave as torch documents them:
``init_rpc`` (env://, tcp://, file:// as torch reads them;
``TensorPipeRpcBackendOptions``' ``rpc_timeout``, ``init_method``,
``num_worker_threads``), ``rpc_sync``, ``rpc_async`` (a
``torch.futures.Future``), ``remote``, ``shutdown(graceful, timeout)``
(all workers' barrier), ``get_worker_info`` (``WorkerInfo(name, id)``),
``functions.async_execution``, ``RRef`` (``to_here``, ``owner``,
``owner_name``, ``is_owner``, ``confirmed_by_owner``, ``local_value``, and
the proxies ``rref.rpc_sync().method(...)`` that run a method of the
owner's object), ``_set_rpc_timeout``/``get_rpc_timeout``. Timeouts are
seconds: 60 by default, 0 none, -1 (``UNSET_RPC_TIMEOUT``) the default.

What differs, by design:

- **Callables by reference, never by pickle.** ``func`` travels as its
  qualified name; the callee runs it only if it is allowed there
  (``_refs``' docstring: registered with ferry, defined in the callee's
  ``__main__``, in a module it allows with ``allow_module``, or one of
  ``TORCH_BUILTINS`` and ``PYTHON_BUILTINS``). Anything else is refused, before anything runs, with
  ``PermissionError`` naming the function and how to allow it. A lambda or
  a function defined inside another is refused on the caller.
- **Arguments and results are ferry values**: None, bool, int, float,
  complex, str, bytes, lists, tuples, dicts with str keys, tensors, RRefs.
  Anything else is refused on the caller with ``TypeError`` naming the
  argument (``args[1]['w']``). A ``remote()`` result or ``RRef(obj)`` that
  is an object stays on its owner; its methods run through the proxies,
  only if its class is allowed there as functions are.
- Errors are torch's kinds: a remote exception as its builtin type
  (``ValueError``), the RPC layer's (timeouts, dead workers) as
  ``RuntimeError``; each is also the ``ferry.Error`` of its code.
- CPU tensors only (``device_maps`` are refused); no distributed autograd
  (``torch.distributed.autograd``) nor distributed optimizer.
"""

from ._api import (RRef, WorkerInfo, _get_rpc_timeout, _set_rpc_timeout,
                   _wait_all, get_rpc_timeout, get_worker_info, init_rpc,
                   is_available, remote, rpc_async, rpc_sync, shutdown)
from ._options import (BackendType, RpcBackendOptions,
                       TensorPipeRpcBackendOptions)
from ._refs import (PYTHON_BUILTINS, TORCH_BUILTINS, allow_module,
                    allowed_modules)
from . import constants, functions
from .constants import (DEFAULT_RPC_TIMEOUT_SEC, DEFAULT_SHUTDOWN_TIMEOUT,
                        UNSET_RPC_TIMEOUT)

__all__ = [
    "BackendType", "DEFAULT_RPC_TIMEOUT_SEC", "DEFAULT_SHUTDOWN_TIMEOUT",
    "PYTHON_BUILTINS", "RRef", "RpcBackendOptions", "TORCH_BUILTINS",
    "TensorPipeRpcBackendOptions", "UNSET_RPC_TIMEOUT", "WorkerInfo",
    "allow_module", "allowed_modules", "constants", "functions",
    "get_rpc_timeout", "get_worker_info", "init_rpc", "is_available",
    "remote", "rpc_async", "rpc_sync", "shutdown", "_get_rpc_timeout",
    "_set_rpc_timeout", "_wait_all",
]
