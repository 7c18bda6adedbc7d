"""Shared fixtures: every async test runs once on asyncio and once on trio; ``fresh_plugins``
for the tests of configuration."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from pai.core import reset_plugins


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """The event loop ``pytest.mark.anyio`` tests run on: both of them, one after the other."""
    return request.param


@pytest.fixture
def fresh_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No test sees another's plugins, or the developer's PAI_* configuration variables."""
    for name in list(os.environ):
        if name.startswith("PAI_"):
            monkeypatch.delenv(name)
    reset_plugins()
    yield
    reset_plugins()
