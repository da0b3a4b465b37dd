"""ferry from Python: workers, clients, RRefs and collectives, torch- and
numpy-native, over ferry's C++ runtime.

    import ferry, torch
    ferry.init()                    # RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
    x = ferry.rpc_sync("worker1", "add", args=(torch.ones(2), 3))
    r = ferry.remote("worker1", "ones", args=([2],))
    t = torch.arange(4.) ; ferry.all_reduce(t)
    ferry.shutdown()

The pieces (each module's docstring has the contracts):
  _rpc          init, connect, register, rpc_sync/rpc_async/remote, RRef
  _future       Future (concurrent.futures + asyncio + torch's wait/then)
  _collectives  all_to_all, all_gather (torch and tf forms), all_reduce, ...;
                elastic groups: agree, shrink_group, grow_group,
                revoke_group, membership_events, on_membership_change
  _kjt          KeyedJaggedTensor, SparseFeaturesAllToAll
  _errors       Error and its subclasses per status code
  _version      __version__
  _types        the type aliases of the annotations (type checkers only;
                _ferry.pyi types the extension)

The GIL is released whenever ferry waits or moves bytes; registered Python
functions and future callbacks run on ferry's threads with the GIL taken.
"""

# (`from M import X as X` re-exports X to type checkers, --strict too.)
from . import _ferry
from ._version import __version__ as __version__  # noqa: F401
from ._collectives import *  # noqa: F401,F403
from ._errors import *  # noqa: F401,F403
from ._future import Future as Future  # noqa: F401
from ._future import event_loop as event_loop  # noqa: F401
from ._kjt import *  # noqa: F401,F403
from ._rpc import *  # noqa: F401,F403
from . import _errors as _errors_module
from . import _rpc as _rpc_module

_ferry._set_error_classes(_errors_module.BY_CODE, _errors_module.Error)
_ferry._set_classes(_rpc_module.RRef, _rpc_module.RRef._from_handle,
                    _rpc_module.BFloat16)
