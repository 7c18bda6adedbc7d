"""Configuration and connection mistakes are one clear error each, in bounded time.

asyncio only: the e2b SDK is asyncio-only.
"""

from __future__ import annotations

import socket
import time

import pytest

from pai.sandbox.provider import SandboxProviderError
from pai.sandbox_e2b import E2BApiKeyMissingError, E2BError, E2BSandboxProvider, E2BUnreachableError
from pai.sandbox_e2b.testing import E2BEmulator

pytestmark = pytest.mark.anyio


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_no_api_key_anywhere_names_e2b_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("E2B_API_KEY", raising=False)
    with pytest.raises(E2BApiKeyMissingError) as raised:
        E2BSandboxProvider(api_url="http://127.0.0.1:9")
    assert "E2B_API_KEY" in str(raised.value)
    assert "api_key=" in str(raised.value)


async def test_an_unreachable_api_names_its_url_within_the_request_timeout() -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    provider = E2BSandboxProvider(
        api_key="e2b_key", api_url=url, sandbox_url=url, request_timeout=2
    )
    started = time.monotonic()
    with pytest.raises(E2BUnreachableError) as raised:
        await provider.create("k")
    assert url in str(raised.value)
    assert time.monotonic() - started < 2 + 5


async def test_a_wrong_api_key_is_refused_with_what_to_set(emulator: E2BEmulator) -> None:
    provider = E2BSandboxProvider(
        api_key="e2b_wrong", api_url=emulator.url, sandbox_url=emulator.url
    )
    with pytest.raises(E2BError) as raised:
        await provider.list_instances()
    assert "E2B_API_KEY" in str(raised.value)
    assert emulator.url in str(raised.value)


def test_under_trio_the_provider_says_it_needs_asyncio(emulator: E2BEmulator) -> None:
    import anyio

    provider = E2BSandboxProvider(
        api_key=emulator.api_key, api_url=emulator.url, sandbox_url=emulator.url
    )
    with pytest.raises(SandboxProviderError, match="asyncio"):
        anyio.run(provider.list_instances, backend="trio")
