"""Helpers for tests against a real PostgreSQL server (for this package's tests and yours).

The server is the one ``PAI_TEST_POSTGRES_URL`` names (``bash scripts/with-postgres.sh CMD``
starts a private one and sets it). Without it, :func:`postgres_test_url` skips the test saying
why, or fails it when ``PAI_REQUIRE_POSTGRES=1`` (CI sets it). Each test works in a schema of its
own (:class:`TestSchemas`), dropped afterwards, so tests never see each other's threads and the
database is left as it was.

Example (a ``conftest.py``)::

    import pytest
    from pai.storage_postgres.testing import TestSchemas, postgres_test_url

    @pytest.fixture(scope="session")
    def postgres_url() -> str:
        return postgres_test_url()

    @pytest.fixture
    def schemas(postgres_url: str):
        with TestSchemas(postgres_url) as made:
            yield made

    def test_something(schemas):
        storage = PostgresStorage(schemas.url, schema=schemas.fresh())

Importing this module imports neither pytest nor psycopg; the functions that need them import
them when called.
"""

from __future__ import annotations

import os
import uuid
from types import TracebackType
from typing import Final, NoReturn

from pai.storage_postgres._options import mask_url, quote_identifier

__all__ = [
    "REQUIRE_VARIABLE",
    "URL_VARIABLE",
    "TestSchemas",
    "drop_schema",
    "postgres_test_url",
    "unavailable",
]

URL_VARIABLE: Final = "PAI_TEST_POSTGRES_URL"
"""The environment variable naming the test server (a libpq URL, password included)."""

REQUIRE_VARIABLE: Final = "PAI_REQUIRE_POSTGRES"
"""Set to ``1`` to fail, not skip, tests that find no server."""

_checked: dict[str, str | None] = {}
"""URL -> why it cannot be used (``None``: it answers), so each URL is tried once per process."""


def unavailable(reason: str) -> NoReturn:
    """Skip the calling test with ``reason``, or fail it under ``PAI_REQUIRE_POSTGRES=1``."""
    import pytest

    if os.environ.get(REQUIRE_VARIABLE) == "1":
        pytest.fail(f"{REQUIRE_VARIABLE}=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def postgres_test_url() -> str:
    """The test server's URL, once it is known to answer; skips (or fails) otherwise."""
    url = os.environ.get(URL_VARIABLE, "")
    if not url:
        unavailable(
            f"{URL_VARIABLE} is not set, so there is no PostgreSQL server to test against; run "
            "the tests under `bash scripts/with-postgres.sh ...`, or set it to a server's URL"
        )
    if url not in _checked:
        import psycopg

        try:
            psycopg.connect(url, connect_timeout=5).close()
            _checked[url] = None
        except psycopg.Error as error:
            _checked[url] = (
                f"the PostgreSQL server at {mask_url(url)} ({URL_VARIABLE}) does not answer: "
                f"{mask_url(' '.join(str(error).split()))}"
            )
    reason = _checked[url]
    if reason is not None:
        unavailable(reason)
    return url


def drop_schema(url: str, schema: str) -> None:
    """Drop ``schema`` and everything in it (nothing when it does not exist)."""
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {quote_identifier(schema)} CASCADE".encode())


class TestSchemas:
    """Fresh schema names on the server at ``url``, each dropped by :meth:`drop_all` (or on
    leaving the ``with`` block). A name is only reserved: the storage creates the schema when it
    first migrates."""

    __test__ = False  # not a test class, whatever its name

    def __init__(self, url: str) -> None:
        self.url = url
        self.made: list[str] = []

    def fresh(self, prefix: str = "pai_test") -> str:
        """A schema name no other test uses."""
        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        self.made.append(name)
        return name

    def drop_all(self) -> None:
        """Drop every schema :meth:`fresh` named."""
        while self.made:
            drop_schema(self.url, self.made.pop())

    def __enter__(self) -> TestSchemas:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.drop_all()
