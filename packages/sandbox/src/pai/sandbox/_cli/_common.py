"""What the sandbox commands share: running a coroutine, the configured provider, JSON text."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, TypeVar

from pai.core.cli import note

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator

    from pai.sandbox._options import SandboxSettings
    from pai.sandbox._provider import SandboxProvider

T = TypeVar("T")


def run_async(fn: Callable[[], Awaitable[T]]) -> T:
    """Run ``fn`` to completion on a fresh event loop (each command is one ``anyio.run``)."""
    import anyio

    return anyio.run(fn)


@asynccontextmanager
async def configured() -> AsyncGenerator[tuple[SandboxProvider, SandboxSettings]]:
    """The configured provider (closed afterwards); says once when the default is used.

    The configuration is checked first, exactly as ``pai config --check`` checks it
    (:func:`pai.core.cli.load_checked_config`), so a misspelt table (``[capabilities.sandbx]``)
    is an error before anything runs, and the notice about the default provider is printed
    only once the configuration has been found valid.
    """
    import anyio.to_thread

    from pai.core.cli import load_checked_config
    from pai.sandbox._settings import DEFAULT_PROVIDER, configured_provider, told_default

    # The check builds every configured capability, the sandbox too; the notice below replaces
    # the binding's own warning about the default provider. The check runs its own event loop,
    # so it runs in a worker thread of this one.
    told_default(True)
    config = await anyio.to_thread.run_sync(load_checked_config)
    provider, settings = configured_provider(config)
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
