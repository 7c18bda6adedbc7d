"""Helpers for values that may or may not be awaitable (sync or async user hooks)."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable
from types import GeneratorType
from typing import TypeVar, cast

T = TypeVar("T")


def _is_awaitable(value: object) -> bool:
    # A class-level lookup is several times cheaper than inspect.isawaitable's ABC check, and this
    # runs on every acquire; generator-based coroutines still go through inspect.
    return hasattr(type(value), "__await__") or (
        isinstance(value, GeneratorType) and inspect.isawaitable(cast(object, value))
    )


def maybe_await(value: T | Awaitable[T]) -> Awaitable[T] | None:
    """``value`` if it is awaitable, else ``None``."""
    return cast("Awaitable[T]", value) if _is_awaitable(value) else None


async def resolve(value: T | Awaitable[T]) -> T:
    """Await ``value`` if it is awaitable; return it otherwise."""
    if _is_awaitable(value):
        return await cast("Awaitable[T]", value)
    return cast("T", value)
