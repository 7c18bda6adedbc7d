"""SqliteStorage given a file that is not its healthy database: damaged, truncated, not a
database, another program's, a newer version's, locked or read-only.

Each is a :class:`StorageError` subclass naming the path and what to do, raised where the file is
opened and where a later read or write finds the damage; the file is never changed.
"""

from __future__ import annotations

import os
import random
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from pai.core import (
    StorageAccessError,
    StorageCorruptError,
    StorageError,
    StorageFileError,
    StorageSchemaError,
    UserMessage,
)
from pai.core._storage import ThreadRecord
from pai.core._storage_sqlite import SqliteStorage

pytestmark = pytest.mark.anyio

PAGE = 4096

Call = Callable[[SqliteStorage], Awaitable[object]]

CALLS: dict[str, Call] = {
    "get_thread": lambda store: store.get_thread("t1"),
    "create_thread": lambda store: store.create_thread(
        ThreadRecord(id="new", scope_key="acme", agent_name="helper")
    ),
    "list_threads": lambda store: store.list_threads("acme"),
    "append_messages": lambda store: store.append_messages("t1", [UserMessage(content="hi")]),
    "get_messages": lambda store: store.get_messages("t1"),
    "delete_thread": lambda store: store.delete_thread("t1"),
}


async def make_database(path: Path, messages: int = 0) -> None:
    """A healthy database of this storage: thread ``t1`` with ``messages`` messages of about
    half a page each."""
    store = SqliteStorage(path)
    await store.create_thread(ThreadRecord(id="t1", scope_key="acme", agent_name="helper"))
    for n in range(messages):
        await store.append_messages("t1", [UserMessage(content=f"{n} " + "x" * 2000)])
    await store.aclose()


def random_bytes(path: Path, size: int = 8 * PAGE) -> None:
    path.write_bytes(random.Random(7).randbytes(size))


def text_file(path: Path) -> None:
    path.write_text("threads:\n  - t1\n" * 500, encoding="utf-8")


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: PAGE + 500])  # the header promises pages that are not there


def damage_header(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[:16] = b"not SQLite, no!\x00"
    path.write_bytes(bytes(data))


async def damaged_file(kind: str, path: Path) -> None:
    if kind == "random bytes":
        random_bytes(path)
    elif kind == "a text file":
        text_file(path)
    elif kind == "truncated":
        await make_database(path, messages=40)
        truncate(path)
    else:
        await make_database(path)
        damage_header(path)


def leftovers(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir() if p.name != path.name)


def assert_says_what_to_do(error: StorageFileError, path: Path) -> None:
    message = str(error)
    assert repr(str(path)) in message
    assert error.path == str(path)
    assert "Move it aside" in message or "another path" in message
    assert "nothing was deleted, repaired or overwritten" in message
    assert isinstance(error, StorageError)


@pytest.mark.parametrize("kind", ["random bytes", "a text file", "truncated", "header damaged"])
@pytest.mark.parametrize("call", sorted(CALLS))
async def test_a_damaged_file_is_a_storage_corrupt_error_and_stays_as_it_was(
    kind: str, call: str, tmp_path: Path
) -> None:
    path = tmp_path / "threads.db"
    await damaged_file(kind, path)
    before = path.read_bytes()
    store = SqliteStorage(path)

    with pytest.raises(StorageCorruptError) as raised:
        await CALLS[call](store)
    with pytest.raises(StorageCorruptError):  # and again: nothing was "repaired" in between
        await CALLS[call](store)
    await store.aclose()

    assert_says_what_to_do(raised.value, path)
    assert "damaged or is not a SQLite database" in str(raised.value)
    assert isinstance(raised.value.__cause__, sqlite3.DatabaseError)
    assert path.read_bytes() == before
    assert leftovers(path) == []


def corrupt_after_page(path: Path, page: int) -> None:
    """Overwrite every page of ``path`` from ``page`` (1-based) on with random bytes."""
    data = bytearray(path.read_bytes())
    start = (page - 1) * PAGE
    assert len(data) > start + 4 * PAGE
    data[start:] = random.Random(3).randbytes(len(data) - start)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("opened", ["by this call (in a worker)", "before (inline)"])
@pytest.mark.parametrize("call", ["get_messages", "append_messages"])
async def test_damage_found_only_by_a_later_read_or_write_is_a_storage_corrupt_error(
    opened: str, call: str, tmp_path: Path
) -> None:
    path = tmp_path / "threads.db"
    await make_database(path, messages=60)
    corrupt_after_page(path, 10)  # the schema and the threads are in the first pages
    before = path.read_bytes()
    store = SqliteStorage(path)
    if opened.startswith("before"):
        assert await store.get_thread("t1") is not None  # opens: the damage is not seen yet

    with pytest.raises(StorageCorruptError) as raised:
        await CALLS[call](store)
    await store.aclose()

    assert_says_what_to_do(raised.value, path)
    assert path.read_bytes() == before
    assert leftovers(path) == []


async def test_a_row_holding_what_this_storage_never_writes_is_a_storage_corrupt_error(
    tmp_path: Path,
) -> None:
    path = tmp_path / "threads.db"
    await make_database(path, messages=3)
    with sqlite3.connect(path) as connection:
        connection.execute('UPDATE messages SET json = \'{"role": "robot"}\' WHERE seq = 2')
        connection.execute("UPDATE threads SET created_at = 'yesterday'")
    connection.close()
    store = SqliteStorage(path)

    with pytest.raises(StorageCorruptError, match=r"message 1 \(0-based\) of thread 't1'") as got:
        await store.get_messages("t1")
    assert_says_what_to_do(got.value, path)
    with pytest.raises(StorageCorruptError, match=r"the thread record 't1'.*yesterday"):
        await store.get_thread("t1")
    with pytest.raises(StorageCorruptError, match="the thread record 't1'"):
        await store.list_threads("acme")
    (last,) = await store.get_messages("t1", start=2)
    assert last == UserMessage(content="2 " + "x" * 2000)
    await store.aclose()


def foreign_database(path: Path, *statements: str) -> None:
    with sqlite3.connect(path) as connection:
        for statement in statements:
            connection.execute(statement)
    connection.close()


FOREIGN = {
    "another program's tables": ("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)",),
    "a table of the same name": ("CREATE TABLE threads (name TEXT)",),
    "version 1 without our columns": (
        "CREATE TABLE threads (id TEXT)",
        "CREATE TABLE messages (thread_id TEXT, seq INTEGER, json TEXT)",
        "PRAGMA user_version = 1",
    ),
    "version 1 without a messages table": (
        "CREATE TABLE threads (id, scope_key, agent_name, parent_thread_id, created_at, seq)",
        "PRAGMA user_version = 1",
    ),
    "a newer version": ("CREATE TABLE threads (id TEXT)", "PRAGMA user_version = 999"),
}


@pytest.mark.parametrize("kind", sorted(FOREIGN))
async def test_another_programs_or_a_newer_database_is_a_storage_schema_error_left_as_it_was(
    kind: str, tmp_path: Path
) -> None:
    path = tmp_path / "app.db"
    foreign_database(path, *FOREIGN[kind])
    before = path.read_bytes()
    store = SqliteStorage(path)

    with pytest.raises(StorageSchemaError) as raised:
        await store.create_thread(ThreadRecord(id="t1", scope_key="acme", agent_name="helper"))
    await store.aclose()

    assert_says_what_to_do(raised.value, path)
    if kind == "a newer version":
        assert "schema version 999, newer" in str(raised.value)
    else:
        assert "another program's database" in str(raised.value)
    assert path.read_bytes() == before  # no tables added, not switched to WAL
    assert leftovers(path) == []


async def test_a_database_another_process_locks_while_it_opens_is_a_storage_access_error(
    tmp_path: Path,
) -> None:
    path = tmp_path / "threads.db"
    await make_database(path)
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA journal_mode = DELETE")  # so a writer locks readers out
    connection.close()
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    store = SqliteStorage(path, busy_timeout=0)
    try:
        with pytest.raises(StorageAccessError, match=r"locked for over 0 s.*longer busy_timeout"):
            await store.get_thread("t1")
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert await store.get_thread("t1") is not None  # usable once the lock is gone
    await store.aclose()


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root may write a read-only file"
)
async def test_a_read_only_database_is_a_storage_access_error(tmp_path: Path) -> None:
    path = tmp_path / "threads.db"
    await make_database(path)
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA journal_mode = DELETE")
    connection.close()
    before = path.read_bytes()
    os.chmod(path, 0o444)
    os.chmod(tmp_path, 0o555)
    try:
        store = SqliteStorage(path)
        with pytest.raises(StorageAccessError) as raised:
            await store.append_messages("t1", [UserMessage(content="hi")])
        await store.aclose()
    finally:
        os.chmod(tmp_path, 0o755)
        os.chmod(path, 0o644)
    assert "writable" in str(raised.value)
    assert path.read_bytes() == before
