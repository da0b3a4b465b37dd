"""Python objects an owner keeps for RRefs (torch's ``remote(to, Class)``).

An RRef's value travels as a ferry value; a Python object that is not one
(an instance of a user's class) stays on its owner: the RRef's value is
then a *box*, ``{"ferry.rpc.object": token, "class": "module.Class",
"keep": <a 1-byte array>}``, and the object is kept here by the token for
as long as the box lives. The box's array is sent without a copy, so the
value ferry keeps for the RRef holds that very array; when ferry drops the
value (the RRef's last reference went away) the array dies, and a
finalizer drops the object. The token is random and never shown to users
(``to_here`` of a box raises), so a box cannot be forged from outside.
"""

from __future__ import annotations

import secrets
import sys
import threading
import weakref
from typing import Any

__all__ = ["box", "unbox", "is_box", "is_value", "describe"]

KEY = "ferry.rpc.object"

_lock = threading.Lock()
_objects: dict[str, Any] = {}


def _drop(token: str) -> None:
    with _lock:
        _objects.pop(token, None)


def box(obj: Any) -> dict[str, Any]:
    """A box for ``obj``, which stays here while the box lives."""
    import numpy
    token = secrets.token_hex(16)
    keep = numpy.zeros(1, numpy.uint8)
    with _lock:
        _objects[token] = obj
    weakref.finalize(keep, _drop, token)
    cls = type(obj)
    return {KEY: token, "class": f"{cls.__module__}.{cls.__qualname__}",
            "keep": keep}


def is_box(value: Any) -> bool:
    return type(value) is dict and KEY in value


def describe(value: dict[str, Any]) -> str:
    """"a module.Class object", for messages."""
    return f"a {value.get('class', '?')} object"


def unbox(value: Any) -> Any:
    """The object a box stands for (the value itself if not a box);
    LookupError if it is gone."""
    if not is_box(value):
        return value
    with _lock:
        obj = _objects.get(value[KEY], _objects)
    if obj is _objects:
        raise LookupError(f"{describe(value)} is no longer kept here")
    return obj


def live() -> int:
    """How many objects are kept (for tests)."""
    with _lock:
        return len(_objects)


_SCALARS = (type(None), bool, int, float, complex, str, bytes, bytearray)


def is_value(x: Any) -> bool:
    """Whether ferry sends ``x`` as a value (else it is an object)."""
    if type(x) in _SCALARS:
        return True
    if isinstance(x, (list, tuple)):
        return all(is_value(item) for item in x)
    if isinstance(x, dict):
        return all(type(k) is str and is_value(v) for k, v in x.items())
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        return True
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(x, (numpy.ndarray, numpy.generic)):
        return True
    from .. import _rpc
    return isinstance(x, (_rpc.RRef, _rpc.BFloat16))
