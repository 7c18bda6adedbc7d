"""Shared fixtures: async tests run on asyncio and on trio; a test server per test."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from pai.core import RetryPolicy

# anyio_backend: every anyio test on asyncio and on trio (one fixture for every package).
from pai.core.testing.pytest_plugin import anyio_backend as anyio_backend
from pai.model_openai import OpenAIModel
from pai.model_openai.testing import OpenAITestServer

# The fixture is imported, not enabled with ``pytest_plugins``: pytest refuses ``pytest_plugins``
# in a conftest below the rootdir, and ``pytest`` from the repository root collects this folder.
from pai.model_openai.testing.pytest_plugin import openai_server

__all__ = ["openai_server"]

FAST_RETRIES = RetryPolicy(max_attempts=3, initial_delay=0.0, jitter=0.0)
"""Retries without pauses (the server's retry-after still applies)."""


@pytest.fixture
async def model(openai_server: OpenAITestServer) -> AsyncIterator[OpenAIModel]:
    """An OpenAIModel pointed at the test server, retrying without pauses, closed after the test."""
    async with OpenAIModel(
        "test-model", base_url=openai_server.base_url, api_key="test-key", retry=FAST_RETRIES
    ) as built:
        yield built
