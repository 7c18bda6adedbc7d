"""Shared fixtures: every async test runs once on asyncio and once on trio."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """The event loop ``pytest.mark.anyio`` tests run on: both of them, one after the other."""
    return request.param
