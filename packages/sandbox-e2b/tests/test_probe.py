"""``probe()``: the E2B API answers and accepts the key, checked without creating a sandbox."""

from __future__ import annotations

import socket

import pytest

from pai.sandbox import probe_provider
from pai.sandbox_e2b import E2BError, E2BSandboxProvider, E2BUnreachableError
from pai.sandbox_e2b.testing import E2BEmulator

pytestmark = pytest.mark.anyio


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_probe_passes_on_a_working_api_and_creates_nothing(
    provider: E2BSandboxProvider, emulator: E2BEmulator, namespace: str
) -> None:
    assert await probe_provider(provider) is True
    assert emulator.find(**{"pai.namespace": namespace}) == []


async def test_probe_names_a_refused_key_and_what_to_set(emulator: E2BEmulator) -> None:
    provider = E2BSandboxProvider(
        api_key="e2b_wrong_key_0", api_url=emulator.url, sandbox_url=emulator.url
    )

    with pytest.raises(E2BError) as raised:
        await probe_provider(provider)

    message = str(raised.value)
    assert "refused the API key" in message
    assert "E2B_API_KEY" in message
    assert emulator.url in message
    assert "e2b_wrong_key_0" not in message  # never the key itself


async def test_probe_names_an_api_that_does_not_answer() -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    provider = E2BSandboxProvider(api_key="e2b_key", api_url=url, sandbox_url=url)

    with pytest.raises(E2BUnreachableError) as raised:
        await probe_provider(provider)

    assert f"could not reach the E2B API at {url}" in str(raised.value)
