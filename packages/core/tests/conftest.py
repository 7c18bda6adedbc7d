"""Shared fixtures: every async test runs once on asyncio and once on trio; ``fresh_plugins``
for the tests of configuration."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from pai.core.testing import reset_plugins

# anyio_backend: every anyio test on asyncio and on trio (one fixture for every package).
from pai.core.testing.pytest_plugin import anyio_backend as anyio_backend


@pytest.fixture
def fresh_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No test sees another's plugins, or the developer's PAI_* configuration variables."""
    for name in list(os.environ):
        if name.startswith("PAI_"):
            monkeypatch.delenv(name)
    reset_plugins()
    yield
    reset_plugins()
