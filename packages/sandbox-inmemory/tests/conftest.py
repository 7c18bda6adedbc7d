"""Shared fixtures: every async test runs once on asyncio and once on trio."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from inmemory_helpers import MakeProvider
from just_bash import ExecutionLimits

# anyio_backend: every anyio test on asyncio and on trio (one fixture for every package).
from pai.core.testing.pytest_plugin import anyio_backend as anyio_backend
from pai.sandbox_inmemory import (
    DEFAULT_MEMORY_BUDGET,
    InMemorySandboxInstance,
    InMemorySandboxProvider,
    create_in_memory_sandbox_provider,
)


@pytest.fixture
async def make_provider() -> AsyncIterator[MakeProvider]:
    """Providers with the options a test gives, each closed (its worker processes stopped)
    after the test."""
    created: list[InMemorySandboxProvider] = []

    def make(
        *, limits: ExecutionLimits | None = None, memory_budget: int = DEFAULT_MEMORY_BUDGET
    ) -> InMemorySandboxProvider:
        provider = create_in_memory_sandbox_provider(limits=limits, memory_budget=memory_budget)
        created.append(provider)
        return provider

    try:
        yield make
    finally:
        for provider in created:
            await provider.aclose()


@pytest.fixture
async def provider(make_provider: MakeProvider) -> InMemorySandboxProvider:
    """A fresh provider with the default options, closed after the test."""
    return make_provider()


@pytest.fixture
async def instance(provider: InMemorySandboxProvider) -> InMemorySandboxInstance:
    """An instance of ``provider`` whose worker is already running (so that timings measure
    commands only)."""
    created = await provider.create("k")
    warm = await created.run(
        "true", cwd="/workspace", env={}, stdin=None, timeout=30, output_limit=1024
    )
    assert warm.exit_code == 0
    return created
