"""Shared fixtures: the test server (skip without one, fail with ``PAI_REQUIRE_POSTGRES=1``), a
fresh schema per test, and every async test on asyncio and on trio."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

# anyio_backend: every anyio test on asyncio and on trio (one fixture for every package).
from pai.core.testing.pytest_plugin import anyio_backend as anyio_backend
from pai.storage_postgres.testing import TestSchemas, postgres_test_url


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """The test server's URL (``PAI_TEST_POSTGRES_URL``), password included."""
    return postgres_test_url()


@pytest.fixture
def schemas(postgres_url: str) -> Iterator[TestSchemas]:
    """Fresh schema names for one test, dropped after it."""
    with TestSchemas(postgres_url) as made:
        yield made
