"""ferry's errors as torch.distributed.rpc users meet them.

torch re-raises a remote function's exception as its own type, and raises
RuntimeError for the RPC layer's failures (timeouts, dead peers, shutdown).
ferry.rpc raises, for a ``ferry.Error`` ``e``:

- an exception the remote function raised, named a Python builtin
  (``ValueError: ...``): a class that is that builtin *and* ``type(e)``;
- anything else (or a builtin ``type(e)`` already is): a class that is
  ``RuntimeError`` *and* ``type(e)`` -- ``DeadlineExceededError`` (a
  timeout), ``UnavailableError`` (a worker died or stopped),
  ``PermissionDeniedError`` (a function the callee does not allow; also
  ``PermissionError``), ``InvalidArgumentError`` (a ``ValueError`` raised
  there; also ``ValueError``) keep their codes.

The message is ferry's, with the function's name where ferry.rpc's own
dispatcher stood ("worker1: __main__:f: ValueError: bad").
"""

from __future__ import annotations

import builtins
import re
import threading
from typing import cast

from .. import _errors

__all__ = ["translate", "DISPATCHERS"]

# ferry.rpc's functions on every worker (their names stand in messages
# where the called function's belongs).
DISPATCHERS = ("ferry.rpc.call", "ferry.rpc.remote_call",
               "ferry.rpc.method", "ferry.rpc.remote_method")

_lock = threading.Lock()
_combined: dict[tuple[type, type], type[_errors.Error]] = {}
# "<worker>: <function>: <ExceptionClass>: " at the message's start.
_REMOTE = re.compile(r"^[^:]+: [^:]+(?::[^:]+)?: ([A-Za-z_][A-Za-z0-9_]*): ")
# An argument ferry refused on the caller: "args[2]…", "kwargs['w']…".
_ARG = re.compile(r"^(?:args\[(\d+)\]|kwargs\[)")


def _combine(python: type, ferry: type[_errors.Error]
             ) -> type[_errors.Error]:
    """A class that is both (cached)."""
    key = (python, ferry)
    with _lock:
        cls = _combined.get(key)
        if cls is None:
            cls = ferry if issubclass(ferry, python) else cast(
                "type[_errors.Error]",
                type(ferry.__name__, (ferry, python),
                     {"__module__": "ferry.rpc"}))
            _combined[key] = cls
        return cls


def _builtin(name: str) -> type | None:
    cls = getattr(builtins, name, None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        return cls
    return None


def translate(error: _errors.Error, shown: str | None = None,
              shift: int = 0) -> BaseException:
    """The exception a torch user expects for ``error``. ``shown``: the
    called function's name, for the dispatcher's in the message;
    ``shift``: how many arguments ferry.rpc put before the caller's (an
    "args[i]" in the message is renumbered)."""
    message = str(error)
    if shown is not None:
        for name in DISPATCHERS:
            at = message.find(f": {name}: ")
            if at >= 0:
                message = (message[:at] + f": {shown}: "
                           + message[at + len(name) + 4:])
                break
    python: type = RuntimeError
    arg = _ARG.match(message)
    if arg is not None:
        # Refused on this side before sending: an argument ferry cannot
        # send (torch would have pickled it).
        where = (f"args[{int(arg.group(1)) - shift}]" if arg.group(1)
                 else arg.group(0))
        message = (where + message[arg.end():]
                   + "; ferry.rpc never pickles arguments: send tensors, "
                   "numbers, strings, bytes, lists, tuples, dicts and RRefs")
        python = TypeError
    else:
        remote = _REMOTE.match(message)
        named = _builtin(remote.group(1)) if remote is not None else None
        if named is not None and not isinstance(error, named):
            python = named
    cls = _combine(python, type(error))
    try:
        return cls(message, error.code)
    except TypeError:  # A builtin whose constructor wants more.
        return _combine(RuntimeError, type(error))(message, error.code)
