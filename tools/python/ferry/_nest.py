"""Nested structures (tf.nest's shapes): lists, tuples and dicts."""

from __future__ import annotations

from typing import Any


def restore(like: Any, value: Any) -> Any:
    """``value`` (lists and dicts, as ferry returns them) rebuilt with the
    container types of ``like`` (tuples stay tuples)."""
    if isinstance(like, tuple) and isinstance(value, list):
        items = [restore(a, b) for a, b in zip(like, value)]
        return type(like)(*items) if hasattr(like, "_fields") else tuple(items)
    if isinstance(like, list) and isinstance(value, list):
        return [restore(a, b) for a, b in zip(like, value)]
    if isinstance(like, dict) and isinstance(value, dict):
        return {k: restore(like[k], value[k]) for k in like}
    return value
