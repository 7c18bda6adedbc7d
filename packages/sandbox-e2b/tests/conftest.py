"""Shared fixtures: the E2B emulator (one per session) and a fresh namespace per test.

The ``e2b`` SDK is asyncio-only (it runs its own asyncio tasks and timers), so the async tests of
this package run on asyncio only.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
from e2b import AsyncSandbox
from e2b_helpers import options

from pai.sandbox import Sandbox, create_sandbox, create_sandbox_session_manager
from pai.sandbox_e2b import E2BSandboxProvider
from pai.sandbox_e2b.testing import E2BEmulator, e2b_emulator

__all__ = ["e2b_emulator"]


@pytest.fixture
def anyio_backend() -> str:
    """asyncio only: the e2b SDK does not run on trio."""
    return "asyncio"


@pytest.fixture
def namespace() -> str:
    """A namespace of its own for one test."""
    return f"pai-test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def emulator(e2b_emulator: E2BEmulator) -> E2BEmulator:
    """The session's E2B emulator."""
    return e2b_emulator


@pytest.fixture
def provider(emulator: E2BEmulator, namespace: str) -> E2BSandboxProvider:
    """A provider on the emulator, in the test's namespace."""
    return E2BSandboxProvider(
        api_key=emulator.api_key,
        api_url=emulator.url,
        sandbox_url=emulator.url,
        namespace=namespace,
    )


@pytest.fixture
async def sandbox(provider: E2BSandboxProvider) -> AsyncIterator[Sandbox]:
    """A sandbox facade on the provider, under a fresh key, destroyed after the test."""
    key = uuid.uuid4().hex
    yield create_sandbox(create_sandbox_session_manager(provider=provider).handle(key))
    await provider.destroy(key)


@pytest.fixture
async def raw(emulator: E2BEmulator) -> AsyncIterator[AsyncSandbox]:
    """A sandbox made with the SDK alone, killed after the test."""
    sandbox = await AsyncSandbox.create(timeout=120, **options(emulator))
    try:
        yield sandbox
    finally:
        await sandbox.kill()


@pytest.fixture
def no_fault_left(emulator: E2BEmulator) -> Iterator[None]:
    """The emulator is shared by the session: a fault armed in a test must not outlive it."""
    emulator.faults.clear()
    yield
    emulator.faults.clear()
