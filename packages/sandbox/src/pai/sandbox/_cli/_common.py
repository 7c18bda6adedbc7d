"""What the sandbox commands share: running a coroutine, the configured provider, JSON text."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, TypeVar

from pai.core.cli import note

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator

    from pai.sandbox._plugin import SandboxSettings
    from pai.sandbox._provider import SandboxProvider

T = TypeVar("T")


def run_async(fn: Callable[[], Awaitable[T]]) -> T:
    """Run ``fn`` to completion on a fresh event loop (each command is one ``anyio.run``)."""
    import anyio

    return anyio.run(fn)


@asynccontextmanager
async def configured() -> AsyncGenerator[tuple[SandboxProvider, SandboxSettings]]:
    """The configured provider (closed afterwards); says once when the default is used."""
    from pai.sandbox._plugin import DEFAULT_PROVIDER, configured_provider

    provider, settings = configured_provider()
    if settings.provider is None:
        note(
            f"no sandbox provider configured; using the embedded {DEFAULT_PROVIDER!r} provider "
            '(set provider = "<name>" in [capabilities.sandbox] of pai.toml to choose another; '
            "`pai providers` lists them)"
        )
    try:
        yield provider, settings
    finally:
        await provider.aclose()


def json_text(value: object) -> str:
    """``value`` as one line of JSON (non-JSON values as their ``str``)."""
    import json

    return json.dumps(value, ensure_ascii=False, default=str)
