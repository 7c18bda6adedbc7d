"""Shared fixtures: every async test runs once on asyncio and once on trio."""

from __future__ import annotations

import pytest
from fakes import FakeProvider

# anyio_backend: every anyio test on asyncio and on trio (one fixture for every package).
from pai.core.testing.pytest_plugin import anyio_backend as anyio_backend


@pytest.fixture
def provider() -> FakeProvider:
    """A fresh fake provider (a test double; see ``fakes.py``)."""
    return FakeProvider()
