"""Migrations: applied once however many processes open a fresh schema at the same moment; the
schema option keeps two apps on one database apart; status and migrate report versions."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import psycopg
import pytest

from pai.core import UserMessage
from pai.core.ext import ThreadRecord
from pai.storage_postgres import LATEST_VERSION, PostgresStorage
from pai.storage_postgres.testing import TestSchemas

pytestmark = pytest.mark.anyio

OPENER = textwrap.dedent(
    """
    import os, sys, time
    import anyio
    from pai.storage_postgres import PostgresStorage

    url, schema, go = sys.argv[1], sys.argv[2], sys.argv[3]

    async def main():
        storage = PostgresStorage(url, schema=schema)
        try:
            await storage.get_thread("t1")  # the first call migrates
        finally:
            await storage.aclose()

    while not os.path.exists(go):
        time.sleep(0.005)
    anyio.run(main)
    print("opened")
    """
)


def _ledger(url: str, schema: str) -> list[tuple[int, str]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            f'SELECT version, name FROM "{schema}".pai_schema_migrations ORDER BY version'.encode()
        ).fetchall()
    return [(int(version), str(name)) for version, name in rows]


def test_ten_processes_opening_a_fresh_schema_at_once_migrate_it_once(
    postgres_url: str, schemas: TestSchemas, tmp_path: Path
) -> None:
    schema = schemas.fresh()
    script = tmp_path / "opener.py"
    script.write_text(OPENER)
    go = tmp_path / "go"
    processes = [
        subprocess.Popen(
            [sys.executable, str(script), postgres_url, schema, str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )
        for _ in range(10)
    ]
    go.touch()  # every process is started and waiting: they open together
    outcomes = [process.communicate(timeout=120) for process in processes]
    for process, (out, err) in zip(processes, outcomes, strict=True):
        assert process.returncode == 0, f"an opener failed: {err}"
        assert out.strip() == "opened"
    ledger = _ledger(postgres_url, schema)
    assert [version for version, _ in ledger] == list(range(1, LATEST_VERSION + 1)), (
        f"ten concurrent opens recorded {ledger}: each migration must be applied exactly once"
    )


async def test_the_schema_option_keeps_two_apps_apart(
    postgres_url: str, schemas: TestSchemas
) -> None:
    first = PostgresStorage(postgres_url, schema=schemas.fresh("app_one"))
    second = PostgresStorage(postgres_url, schema=schemas.fresh("app_two"))
    try:
        for storage, name in ((first, "one"), (second, "two")):
            await storage.create_thread(ThreadRecord(id="t1", scope_key="acme", agent_name=name))
            await storage.append_messages("t1", [UserMessage(content=f"to {name}")])
        one, two = await first.get_thread("t1"), await second.get_thread("t1")
        assert one is not None
        assert one.agent_name == "one"
        assert two is not None
        assert two.agent_name == "two"
        assert list(await first.get_messages("t1")) == [UserMessage(content="to one")]
        assert list(await first.delete_thread("t1")) == ["t1"]
        assert await second.get_thread("t1") is not None, "deleting in one schema reached the other"
        assert list(await second.get_messages("t1")) == [UserMessage(content="to two")]
    finally:
        await first.aclose()
        await second.aclose()


async def test_a_schema_name_that_needs_quoting_works(
    postgres_url: str, schemas: TestSchemas
) -> None:
    storage = PostgresStorage(postgres_url, schema=schemas.fresh('Odd "Name"; DROP'))
    try:
        await storage.create_thread(ThreadRecord(id="t1", scope_key="acme", agent_name="a"))
        assert await storage.get_thread("t1") is not None
        status = await storage.schema_status()
        assert status.current == LATEST_VERSION
    finally:
        await storage.aclose()


async def test_status_reports_pending_then_migrate_applies_once(
    postgres_url: str, schemas: TestSchemas
) -> None:
    schema = schemas.fresh()
    storage = PostgresStorage(postgres_url, schema=schema, migrate=False)
    try:
        before = await storage.schema_status()
        assert (before.exists, before.current, before.latest) == (False, 0, LATEST_VERSION)
        assert len(before.pending) == LATEST_VERSION
        assert before.applied == ()
        assert before.location == storage.url
        assert "***" in before.location

        done = await storage.migrate()
        assert done.just_applied == before.pending
        assert (done.current, done.pending) == (LATEST_VERSION, ())

        again = await storage.migrate()
        assert again.just_applied == (), "a second migrate applied something again"
        # migrate=False storages work once the schema is current.
        await storage.create_thread(ThreadRecord(id="t1", scope_key="acme", agent_name="a"))
        assert await storage.get_thread("t1") is not None
    finally:
        await storage.aclose()
    assert len(_ledger(postgres_url, schema)) == LATEST_VERSION


async def test_opening_needs_no_lock_once_the_schema_is_current(
    postgres_url: str, schemas: TestSchemas
) -> None:
    schema = schemas.fresh()
    first = PostgresStorage(postgres_url, schema=schema)
    await first.get_thread("t1")
    await first.aclose()
    # Hold the migration lock in another session: a current schema opens all the same.
    with psycopg.connect(postgres_url, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", (0x70616900, schema))
        second = PostgresStorage(postgres_url, schema=schema, connect_timeout=3)
        try:
            assert await second.get_thread("t1") is None
        finally:
            await second.aclose()


async def test_a_schema_at_version_1_is_upgraded_on_open(
    postgres_url: str, schemas: TestSchemas
) -> None:
    # A database made by a release that knew only migration 1 (threads, messages, leases).
    from pai.storage_postgres._schema import _LEDGER, MIGRATIONS

    schema = schemas.fresh()
    quoted = f'"{schema}"'
    with psycopg.connect(postgres_url, autocommit=True) as conn, conn.transaction():
        conn.execute(f"CREATE SCHEMA {quoted}".encode())
        conn.execute(_LEDGER.replace("{schema}", quoted).encode())
        for statement in MIGRATIONS[0].statements:
            conn.execute(statement.replace("{schema}", quoted).encode())
        conn.execute(
            f"INSERT INTO {quoted}.pai_schema_migrations (version, name) VALUES (1, %s)".encode(),
            (MIGRATIONS[0].name,),
        )
    old = PostgresStorage(postgres_url, schema=schema, migrate=False)
    try:
        status = await old.schema_status()
        assert (status.current, len(status.pending)) == (1, LATEST_VERSION - 1)
    finally:
        await old.aclose()
    storage = PostgresStorage(postgres_url, schema=schema)
    try:
        await storage.create_thread(ThreadRecord(id="t1", scope_key="acme", agent_name="a"))
        await storage.append_messages("t1", [UserMessage(content="hi")])
        assert [v for v, _ in _ledger(postgres_url, schema)] == list(range(1, LATEST_VERSION + 1))
        assert [m.content for m in await storage.get_messages("t1")] == ["hi"]  # type: ignore[union-attr]
    finally:
        await storage.aclose()


async def test_a_version_2_schema_gains_blobs_and_keeps_its_threads(
    postgres_url: str, schemas: TestSchemas, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pai.storage_postgres import _schema

    schema = schemas.fresh()
    with monkeypatch.context() as before_blobs:  # the code as it was at schema version 2
        before_blobs.setattr(_schema, "MIGRATIONS", _schema.MIGRATIONS[:2])
        before_blobs.setattr(_schema, "LATEST_VERSION", 2)
        old = PostgresStorage(postgres_url, schema=schema)
        try:
            await old.create_thread(ThreadRecord(id="t1", scope_key="acme", agent_name="a"))
            await old.append_messages("t1", [UserMessage(content="old")])
        finally:
            await old.aclose()
    assert [version for version, _ in _ledger(postgres_url, schema)] == [1, 2]

    storage = PostgresStorage(postgres_url, schema=schema)
    try:
        assert list(await storage.get_messages("t1")) == [UserMessage(content="old")]
        await storage.put_blob("t1", "step/1", b"\x00new")
        assert await storage.get_blob("t1", "step/1") == b"\x00new"
        assert list(await storage.delete_thread("t1")) == ["t1"]
        assert await storage.get_blob("t1", "step/1") is None
    finally:
        await storage.aclose()
    assert _ledger(postgres_url, schema)[-1] == (3, "blobs kept with a thread")
    assert LATEST_VERSION == 3
