"""Shared fixtures: every async test runs once on asyncio and once on trio."""

from __future__ import annotations

import pytest
from fakes import FakeProvider


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """The event loop ``pytest.mark.anyio`` tests run on: both of them, one after the other."""
    return request.param


@pytest.fixture
def provider() -> FakeProvider:
    """A fresh fake provider (a test double; see ``fakes.py``)."""
    return FakeProvider()
