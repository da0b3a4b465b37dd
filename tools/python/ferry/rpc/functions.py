"""torch.distributed.rpc.functions: ``async_execution``."""

from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

__all__ = ["async_execution"]

_F = TypeVar("_F", bound=Callable[..., Any])


def async_execution(fn: _F) -> _F:
    """Marks ``fn`` as returning a future (a ``torch.futures.Future``, or a
    ``concurrent.futures.Future``) of its result: the callee answers the
    call when that future completes, holding no thread meanwhile (torch's
    decorator; put it innermost, under ``@staticmethod``/``@classmethod``).
    The function stays what it was for the allow rules: it is called by
    the name it was defined with."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    # torch's mark, so torch's own decorated functions count too.
    wrapper._wrapped_async_rpc_function = fn  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]
