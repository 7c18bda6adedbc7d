"""Shared fixtures: every async test runs once on asyncio and once on trio."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from pai.sandbox_inmemory import InMemorySandboxProvider, _loop, create_in_memory_sandbox_provider


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """The event loop ``pytest.mark.anyio`` tests run on: both of them, one after the other."""
    return request.param


@pytest.fixture
async def provider() -> AsyncIterator[InMemorySandboxProvider]:
    """A fresh provider, closed (its background loop stopped) after the test."""
    created = create_in_memory_sandbox_provider()
    try:
        yield created
    finally:
        await created.aclose()


@pytest.fixture(params=["call_async", "worker_thread"])
def loop_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways into the provider's loop: anyio >= 4.16's ``call_async``, and the worker-thread
    fallback used with older anyio."""
    if request.param == "call_async" and not getattr(_loop, "_HAS_CALL_ASYNC"):  # noqa: B009
        pytest.skip("this anyio has no BlockingPortal.call_async (4.16+)")
    monkeypatch.setattr(_loop, "_HAS_CALL_ASYNC", request.param == "call_async")
    return request.param
