"""Shared fixtures: every async test runs once on asyncio and once on trio."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from pai.sandbox_inmemory import InMemorySandboxProvider, create_in_memory_sandbox_provider


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """The event loop ``pytest.mark.anyio`` tests run on: both of them, one after the other."""
    return request.param


@pytest.fixture
async def provider() -> AsyncIterator[InMemorySandboxProvider]:
    """A fresh provider, closed (its worker processes stopped) after the test."""
    created = create_in_memory_sandbox_provider()
    try:
        yield created
    finally:
        await created.aclose()
