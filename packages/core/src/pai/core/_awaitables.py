"""Helpers for values that may or may not be awaitable (sync or async user hooks)."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable
from types import GeneratorType
from typing import TypeVar, cast

T = TypeVar("T")


def maybe_await(value: T | Awaitable[T]) -> Awaitable[T] | None:
    """``value`` if it is awaitable, else ``None``."""
    # A class-level lookup is several times cheaper than inspect.isawaitable's ABC check, and
    # this runs for every app function's result and every acquire; generator-based coroutines
    # still go through inspect.
    if hasattr(type(value), "__await__") or (
        isinstance(value, GeneratorType) and inspect.isawaitable(cast(object, value))
    ):
        return cast("Awaitable[T]", value)
    return None


async def resolve(value: T | Awaitable[T]) -> T:
    """Await ``value`` if it is awaitable; return it otherwise."""
    if hasattr(type(value), "__await__") or (
        isinstance(value, GeneratorType) and inspect.isawaitable(cast(object, value))
    ):
        return await cast("Awaitable[T]", value)
    return cast("T", value)
