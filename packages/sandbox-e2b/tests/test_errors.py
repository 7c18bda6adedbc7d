"""Configuration and connection mistakes are one clear error each, in bounded time.

asyncio only: the e2b SDK is asyncio-only.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from pai.sandbox import SandboxInputError, SandboxProviderError
from pai.sandbox_e2b import (
    E2BApiKeyMissingError,
    E2BAuthenticationError,
    E2BSandboxProvider,
    E2BUnreachableError,
)
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
    with pytest.raises(E2BAuthenticationError) as raised:
        await provider.list_instances()
    assert "E2B_API_KEY" in str(raised.value)
    assert emulator.url in str(raised.value)
    assert "e2b_wrong" not in str(raised.value)


def test_under_trio_the_provider_says_it_needs_asyncio(emulator: E2BEmulator) -> None:
    import anyio

    provider = E2BSandboxProvider(
        api_key=emulator.api_key, api_url=emulator.url, sandbox_url=emulator.url
    )
    with pytest.raises(SandboxProviderError, match="asyncio"):
        anyio.run(provider.list_instances, backend="trio")


@pytest.fixture
def silent_url() -> Iterator[str]:
    """``http://127.0.0.1:PORT`` of a server that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    accepted: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                accepted.append(server.accept()[0])
            except OSError:  # closed: the test is over
                return

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        server.close()
        for connection in accepted:
            connection.close()
        thread.join(5)


async def test_an_api_that_never_answers_names_its_url_within_the_request_timeout(
    silent_url: str,
) -> None:
    provider = E2BSandboxProvider(
        api_key="e2b_key", api_url=silent_url, sandbox_url=silent_url, request_timeout=1
    )
    started = time.monotonic()
    with pytest.raises(E2BUnreachableError) as raised:
        await provider.find("k")
    assert silent_url in str(raised.value)
    assert time.monotonic() - started < 1 + 5 + 1


async def test_a_command_in_a_sandbox_that_never_answers_fails_naming_its_url_in_bounded_time(
    emulator: E2BEmulator, silent_url: str
) -> None:
    reachable = E2BSandboxProvider(
        api_key=emulator.api_key, api_url=emulator.url, sandbox_url=emulator.url
    )
    key = f"unreachable-{time.monotonic_ns()}"
    await reachable.create(key)
    cut_off = E2BSandboxProvider(
        api_key=emulator.api_key, api_url=emulator.url, sandbox_url=silent_url, request_timeout=1
    )
    try:
        instance = await cut_off.find(key)
        assert instance is not None
        started = time.monotonic()
        with pytest.raises(E2BUnreachableError) as raised:
            await instance.run("true", cwd="/", env={}, stdin=None, timeout=None, output_limit=1024)
        assert silent_url in str(raised.value)
        assert time.monotonic() - started < 1 + 2
        with pytest.raises(E2BUnreachableError, match="sandbox_url"):
            await instance.read_file("/etc/hostname", max_bytes=1024)
    finally:
        await reachable.destroy(key)


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("timeout", "5"),
        ("timeout", 5.0),
        ("timeout", True),
        ("timeout", 86_401),
        ("request_timeout", "30"),
        ("request_timeout", float("nan")),
        ("template", 5),
        ("template", ""),
        ("namespace", ""),
        ("user", None),
        ("api_key", ""),
        ("api_url", "127.0.0.1:8000"),
        ("sandbox_url", "ftp://127.0.0.1"),
        ("metadata", {"team": 1}),
        ("env", {"DEBUG": True}),
        ("allow_internet_access", "no"),
    ],
)
def test_a_bad_option_is_refused_when_the_provider_is_built_naming_it(
    option: str, value: object
) -> None:
    with pytest.raises(SandboxInputError, match=option):
        E2BSandboxProvider(**{"api_key": "e2b_key", option: value})


def test_metadata_may_not_override_the_providers_own_keys() -> None:
    with pytest.raises(SandboxInputError, match=r"pai\.namespace"):
        E2BSandboxProvider(api_key="e2b_key", metadata={"pai.namespace": "elsewhere"})


def test_an_api_on_this_machine_without_a_sandbox_url_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("E2B_SANDBOX_URL", raising=False)
    with pytest.raises(SandboxInputError, match="sandbox_url"):
        E2BSandboxProvider(api_key="e2b_key", api_url="http://127.0.0.1:8000")
