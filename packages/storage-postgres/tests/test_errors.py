"""Each way of failing to reach the database is one clear error against the real server: what
went wrong, the URL with its password masked, and the fix; the password appears in no message
and no log line."""

from __future__ import annotations

import logging
import socket
from urllib.parse import SplitResult, urlsplit, urlunsplit

import psycopg
import pytest

from pai.core import StorageAccessError, StorageSchemaError, UserMessage
from pai.core.ext import ThreadRecord
from pai.storage_postgres import LATEST_VERSION, PostgresStorage
from pai.storage_postgres.testing import TestSchemas

pytestmark = pytest.mark.anyio


def _parts(url: str) -> SplitResult:
    return urlsplit(url)


def _password(url: str) -> str:
    password = _parts(url).password
    assert password, "the test server's URL carries a password (scripts/with-postgres.sh)"
    return password


def _replace(
    url: str, *, password: str | None = "", user: str = "", path: str = "", port: int = 0
) -> str:
    parts = _parts(url)
    name = user or parts.username or ""
    host = parts.hostname or ""
    number = port or parts.port
    secret = parts.password if password == "" else password
    userinfo = name if secret is None else f"{name}:{secret}"
    netloc = f"{userinfo}@{host}" + (f":{number}" if number else "")
    return urlunsplit((parts.scheme, netloc, path or parts.path, parts.query, ""))


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def _first_call(storage: PostgresStorage) -> None:
    try:
        await storage.get_thread("t1")
    finally:
        await storage.aclose()


@pytest.fixture
def no_ambient_password(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """libpq finds no password but the one a test gives (no PGPASSWORD, no password file)."""
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGPASSFILE", str(tmp_path_factory.mktemp("nopass") / "none"))


async def test_connection_refused_names_the_url_and_says_start_the_server(
    postgres_url: str,
) -> None:
    url = _replace(postgres_url, port=_closed_port())
    with pytest.raises(StorageAccessError) as raised:
        await _first_call(PostgresStorage(url, connect_timeout=2))
    message = str(raised.value)
    assert _password(postgres_url) not in message
    assert _replace(url, password="***") in message
    assert "Connection refused" in message
    assert "start the server, or fix the host and port" in message
    assert raised.value.path == _replace(url, password="***")


async def test_a_wrong_password_says_which_user_and_where_the_password_comes_from(
    postgres_url: str,
) -> None:
    url = _replace(postgres_url, password="not-the-password")
    with pytest.raises(StorageAccessError) as raised:
        await _first_call(PostgresStorage(url))
    message = str(raised.value)
    assert "not-the-password" not in message
    assert 'password authentication failed for user "pai_test"' in message
    assert "PGPASSWORD, or the variable password_env names" in message


async def test_no_password_at_all_says_how_to_give_one(
    postgres_url: str, no_ambient_password: None
) -> None:
    with pytest.raises(StorageAccessError) as raised:
        await _first_call(PostgresStorage(_replace(postgres_url, password=None)))
    assert "none was given; put it in PGPASSWORD, in a variable that password_env names" in str(
        raised.value
    )


async def test_a_missing_database_says_create_it(postgres_url: str) -> None:
    url = _replace(postgres_url, path="/no_such_database")
    with pytest.raises(StorageAccessError) as raised:
        await _first_call(PostgresStorage(url))
    message = str(raised.value)
    assert 'database "no_such_database" does not exist' in message
    assert "create it (createdb, or CREATE DATABASE)" in message
    assert _password(postgres_url) not in message


async def test_an_unknown_user_is_named(postgres_url: str) -> None:
    url = _replace(postgres_url, user="no_such_role")
    with pytest.raises(StorageAccessError) as raised:
        await _first_call(PostgresStorage(url))
    # PostgreSQL answers an unknown role with the password failure (it does not tell them apart).
    assert 'user "no_such_role"' in str(raised.value)


async def test_the_password_may_come_from_password_env(
    postgres_url: str,
    schemas: TestSchemas,
    monkeypatch: pytest.MonkeyPatch,
    no_ambient_password: None,
) -> None:
    monkeypatch.setenv("PAI_TEST_DB_PASSWORD", _password(postgres_url))
    storage = PostgresStorage(
        _replace(postgres_url, password=None),
        password_env="PAI_TEST_DB_PASSWORD",
        schema=schemas.fresh(),
    )
    try:
        await storage.create_thread(ThreadRecord(id="t1", scope_key="s", agent_name="a"))
        assert await storage.get_thread("t1") is not None
    finally:
        await storage.aclose()


async def test_the_password_may_come_from_pgpassword(
    postgres_url: str, schemas: TestSchemas, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PGPASSWORD", _password(postgres_url))
    storage = PostgresStorage(_replace(postgres_url, password=None), schema=schemas.fresh())
    try:
        assert await storage.get_thread("t1") is None
    finally:
        await storage.aclose()


async def test_a_schema_not_migrated_with_migrate_off_says_run_pai_storage_migrate(
    postgres_url: str, schemas: TestSchemas
) -> None:
    storage = PostgresStorage(postgres_url, schema=schemas.fresh(), migrate=False)
    with pytest.raises(StorageSchemaError) as raised:
        await _first_call(storage)
    message = str(raised.value)
    assert f"{LATEST_VERSION} migration(s) are pending" in message
    assert "run `pai storage migrate`" in message
    assert _password(postgres_url) not in message


async def test_a_schema_newer_than_the_code_is_refused_and_left_alone(
    postgres_url: str, schemas: TestSchemas
) -> None:
    schema = schemas.fresh()
    storage = PostgresStorage(postgres_url, schema=schema)
    await _first_call(storage)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(
            f'INSERT INTO "{schema}".pai_schema_migrations (version, name) VALUES (99, %s)'.encode(),
            ("from the future",),
        )
    with pytest.raises(
        StorageSchemaError, match="at version 99, newer than this pai-storage-postgres knows"
    ):
        await _first_call(PostgresStorage(postgres_url, schema=schema))
    with psycopg.connect(postgres_url) as conn:
        rows = conn.execute(
            f'SELECT version FROM "{schema}".pai_schema_migrations ORDER BY 1'.encode()
        ).fetchall()
    assert rows == [*((v,) for v in range(1, LATEST_VERSION + 1)), (99,)], (
        "refusing the schema changed it"
    )


async def test_another_programs_tables_are_refused_and_left_alone(
    postgres_url: str, schemas: TestSchemas
) -> None:
    schema = schemas.fresh()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"'.encode())
        conn.execute(f'CREATE TABLE "{schema}".threads (name text)'.encode())
    with pytest.raises(StorageSchemaError) as raised:
        await _first_call(PostgresStorage(postgres_url, schema=schema))
    assert "another program's tables" in str(raised.value)
    assert "?schema=pai" in str(raised.value)
    with psycopg.connect(postgres_url) as conn:
        columns = conn.execute(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_schema = %s AND table_name = 'threads'",
            (schema,),
        ).fetchall()
    assert columns == [("name",)]


async def test_a_closed_storage_says_so(postgres_url: str, schemas: TestSchemas) -> None:
    storage = PostgresStorage(postgres_url, schema=schemas.fresh())
    await storage.get_thread("t1")
    await storage.aclose()
    with pytest.raises(Exception, match="is closed; create a new one") as raised:
        await storage.get_thread("t1")
    assert _password(postgres_url) not in str(raised.value)


async def test_no_log_line_holds_the_password(
    postgres_url: str, schemas: TestSchemas, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    good = PostgresStorage(postgres_url, schema=schemas.fresh())
    try:
        await good.create_thread(ThreadRecord(id="t1", scope_key="s", agent_name="a"))
        await good.append_messages("t1", [UserMessage(content="hi")])
        assert len(await good.get_messages("t1")) == 1
    finally:
        await good.aclose()
    with pytest.raises(StorageAccessError):
        await _first_call(PostgresStorage(_replace(postgres_url, password="wrong-and-secret")))
    logged = "\n".join(f"{record.getMessage()} {record.args!r}" for record in caplog.records)
    assert _password(postgres_url) not in logged
    assert "wrong-and-secret" not in logged
