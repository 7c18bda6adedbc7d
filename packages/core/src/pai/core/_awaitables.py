"""Helpers for values that may or may not be awaitable (sync or async user hooks)."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable
from types import CoroutineType, GeneratorType
from typing import Any, TypeGuard, TypeVar, cast

T = TypeVar("T")

_AWAITABLE_TYPES: dict[type, bool] = {CoroutineType: True, bool: False, dict: False, str: False}
"""Whether instances of a type are awaitable, by type: a dict lookup, where ``hasattr`` of a
missing ``__await__`` costs an exception raised and caught inside CPython (about 0.4 us, on every
app function's result and every acquire). Bounded: types past the first 1,024 are not kept."""
_MAX_KNOWN_TYPES = 1024


def is_awaitable(value: object) -> TypeGuard[Awaitable[Any]]:
    """Whether ``value`` is awaitable (decided by its type, from a cache)."""
    cls = type(value)
    known = _AWAITABLE_TYPES.get(cls)
    if known is None:
        known = hasattr(cls, "__await__")
        if len(_AWAITABLE_TYPES) < _MAX_KNOWN_TYPES:
            _AWAITABLE_TYPES[cls] = known
    # A generator-based coroutine (``types.coroutine``) is awaitable by a code flag, not a type.
    return known or (cls is GeneratorType and inspect.isawaitable(value))


def maybe_await(value: T | Awaitable[T]) -> Awaitable[T] | None:
    """``value`` if it is awaitable, else ``None``."""
    return cast("Awaitable[T]", value) if is_awaitable(value) else None


async def resolve(value: T | Awaitable[T]) -> T:
    """Await ``value`` if it is awaitable; return it otherwise."""
    if is_awaitable(value):
        return await cast("Awaitable[T]", value)
    return cast("T", value)
