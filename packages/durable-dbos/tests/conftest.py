"""Async tests run on asyncio: DBOS runs its workflows on asyncio only (the trio test picks trio
itself)."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:  # asyncio only: DBOS runs its workflows on asyncio only
    return "asyncio"
