"""SqliteStorage's blobs on a file: the migration that adds them to a version 2 database (run
leases, no blobs), and two processes sharing one file's blobs."""

from __future__ import annotations

import sqlite3
import sys
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest
from helpers import SCHEMA_1

from pai.core import SqliteStorage, UserMessage
from pai.core.ext import BlobStore

pytestmark = pytest.mark.anyio

SCHEMA_2 = (
    *SCHEMA_1[:-1],
    """CREATE TABLE run_leases (
        thread_id TEXT PRIMARY KEY NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
        token INTEGER NOT NULL,
        holder TEXT NOT NULL,
        expires_at REAL NOT NULL,
        released INTEGER NOT NULL
    ) WITHOUT ROWID""",
    """CREATE TABLE counters (
        name TEXT PRIMARY KEY NOT NULL,
        value INTEGER NOT NULL
    ) WITHOUT ROWID""",
    "INSERT INTO counters (name, value) VALUES ('run_lease_token', 7)",
    "PRAGMA user_version = 2",
)
"""What SqliteStorage made at schema version 2 (run leases, before blobs)."""


def version_2_database(path: Path) -> None:
    connection = sqlite3.connect(path, isolation_level=None)
    for statement in SCHEMA_2:
        connection.execute(statement)
    connection.execute("PRAGMA journal_mode = WAL")
    created_at = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC).isoformat()
    connection.execute(
        "INSERT INTO threads VALUES (?, ?, ?, ?, ?, ?)",
        ("t1", "acme", "helper", None, created_at, 1),
    )
    connection.execute(
        "INSERT INTO messages VALUES (?, ?, ?)", ("t1", 1, '{"role":"user","content":"old"}')
    )
    connection.execute("INSERT INTO run_leases VALUES ('t1', 7, 'old holder', 0, 1)")
    connection.close()


def schema_of(path: Path) -> tuple[int, list[str]]:
    with sqlite3.connect(path) as connection:
        (version,) = connection.execute("PRAGMA user_version").fetchone()
        tables = [
            name
            for (name,) in connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
            )
        ]
    connection.close()
    return version, tables


async def test_a_version_2_database_gains_blobs_and_keeps_its_threads_and_leases(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    version_2_database(path)

    store = SqliteStorage(path)
    try:
        assert isinstance(store, BlobStore)
        assert list(await store.get_messages("t1")) == [UserMessage(content="old")]
        lease = await store.acquire_run("t1", holder="after upgrade", ttl=30)
        assert lease is not None
        assert lease.token == 8, "the migration reset the run lease token counter"
        await store.put_blob("t1", "step/1", b"\x00new")
        await store.release_run(lease)
    finally:
        await store.aclose()

    assert schema_of(path) == (3, ["blobs", "counters", "messages", "run_leases", "threads"])
    again = SqliteStorage(path)  # opening the migrated file again changes nothing
    try:
        assert await again.get_blob("t1", "step/1") == b"\x00new"
        assert list(await again.delete_thread("t1")) == ["t1"]
        assert await again.get_blob("t1", "step/1") is None
    finally:
        await again.aclose()
    with sqlite3.connect(path) as connection:
        assert connection.execute("SELECT count(*) FROM blobs").fetchone() == (0,)
    connection.close()


async def test_stores_opening_a_version_2_file_at_once_migrate_it_once(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    version_2_database(path)
    stores = [SqliteStorage(path) for _ in range(4)]

    async def put(index: int, store: SqliteStorage) -> None:
        await store.put_blob("t1", f"k{index}", bytes([index]))

    try:
        async with anyio.create_task_group() as tg:
            for index, store in enumerate(stores):
                tg.start_soon(put, index, store)
        for index in range(len(stores)):
            assert await stores[0].get_blob("t1", f"k{index}") == bytes([index])
    finally:
        for store in stores:
            await store.aclose()
    assert schema_of(path)[0] == 3


WRITER = """
import sys, anyio
from pai.core import SqliteStorage

async def main():
    store = SqliteStorage(sys.argv[1])
    try:
        await store.put_blob("t1", "from/" + sys.argv[2], bytes(range(256)) * 4096)
    finally:
        await store.aclose()

anyio.run(main)
"""


async def test_blobs_another_process_wrote_read_here(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    version_2_database(path)
    for name in ("a", "b"):
        await anyio.run_process([sys.executable, "-c", WRITER, str(path), name])

    store = SqliteStorage(path)
    try:
        for name in ("a", "b"):
            assert await store.get_blob("t1", f"from/{name}") == bytes(range(256)) * 4096
        assert await store.delete_blobs("t1", "from/") == 2
    finally:
        await store.aclose()
