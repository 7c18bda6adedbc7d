"""SqliteStorage's run leases on a file: the migration that adds them to an older database, and
two real processes racing for one thread's lease."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from helpers import SCHEMA_1

from pai.core import SqliteStorage, UserMessage
from pai.core.ext import ThreadRecord

pytestmark = pytest.mark.anyio


def old_database(path: Path) -> None:
    connection = sqlite3.connect(path, isolation_level=None)
    for statement in SCHEMA_1:
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


async def test_a_version_1_database_gains_run_leases_and_keeps_its_threads(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    old_database(path)

    store = SqliteStorage(path)
    try:
        assert list(await store.get_messages("t1")) == [UserMessage(content="old")]
        lease = await store.acquire_run("t1", holder="after upgrade", ttl=30)
        assert lease is not None
        await store.append_messages("t1", [UserMessage(content="new")], lease=lease)
        await store.release_run(lease)
    finally:
        await store.aclose()

    assert schema_of(path) == (3, ["blobs", "counters", "messages", "run_leases", "threads"])
    again = SqliteStorage(path)  # opening the migrated file again changes nothing
    try:
        lease = await again.acquire_run("t1", holder="second open", ttl=30)
        assert lease is not None
        assert list(await again.get_messages("t1")) == [
            UserMessage(content="old"),
            UserMessage(content="new"),
        ]
    finally:
        await again.aclose()


async def test_two_stores_opening_a_version_1_file_at_once_migrate_it_once(tmp_path: Path) -> None:
    import anyio

    path = tmp_path / "old.db"
    old_database(path)
    stores = [SqliteStorage(path) for _ in range(4)]
    leases: list[object] = []

    async def take(store: SqliteStorage) -> None:
        leases.append(await store.acquire_run("t1", holder="racer", ttl=30))

    try:
        async with anyio.create_task_group() as tg:
            for store in stores:
                tg.start_soon(take, store)
    finally:
        for store in stores:
            await store.aclose()

    assert sum(lease is not None for lease in leases) == 1
    assert schema_of(path)[0] == 3


async def test_deleting_a_thread_removes_its_lease_row(tmp_path: Path) -> None:
    path = tmp_path / "threads.db"
    store = SqliteStorage(path)
    try:
        await store.create_thread(ThreadRecord(id="p", scope_key="acme", agent_name="a"))
        await store.create_thread(
            ThreadRecord(id="c", scope_key="acme", agent_name="a", parent_thread_id="p")
        )
        for thread_id in ("p", "c"):
            assert await store.acquire_run(thread_id, holder="x", ttl=30) is not None
        await store.delete_thread("p")
    finally:
        await store.aclose()

    with sqlite3.connect(path) as connection:
        assert connection.execute("SELECT COUNT(*) FROM run_leases").fetchone() == (0,)
        assert connection.execute("PRAGMA foreign_key_check").fetchall() == []
    connection.close()


RACER = """
import os
import sys
import time

import anyio

from pai.core import SqliteStorage

path, name, attempts, log = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]


async def main():
    store = SqliteStorage(path, busy_timeout=30)
    out = os.open(log, os.O_WRONLY | os.O_APPEND)
    await store.get_thread("t1")  # open the database before the start
    print("ready", flush=True)
    while not os.path.exists(path + ".go"):
        time.sleep(0.001)
    won = 0
    for _ in range(attempts):
        lease = await store.acquire_run("t1", holder=name, ttl=30)
        if lease is None:
            await anyio.sleep(0.0002)
            continue
        won += 1
        os.write(out, f"enter {name} {lease.token}\\n".encode())
        await anyio.sleep(0.0005)  # the other process tries meanwhile
        os.write(out, f"leave {name} {lease.token}\\n".encode())
        await store.release_run(lease)
        await anyio.sleep(0.0005)  # a window for the other process to take it
    await store.aclose()
    print(won)


anyio.run(main)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="O_APPEND writes are atomic on POSIX")
def test_two_processes_racing_for_one_lease_never_hold_it_together(tmp_path: Path) -> None:
    import anyio

    path = tmp_path / "threads.db"

    async def setup() -> None:
        store = SqliteStorage(path)
        await store.create_thread(ThreadRecord(id="t1", scope_key="acme", agent_name="a"))
        await store.aclose()

    anyio.run(setup)
    (tmp_path / "racer.py").write_text(RACER)
    log = tmp_path / "holders.log"
    log.touch()
    racers = [
        subprocess.Popen(
            [sys.executable, "racer.py", str(path), name, "200", str(log)],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("left", "right")
    ]
    for racer in racers:  # both have opened the database and wait for the start
        assert racer.stdout is not None
        assert racer.stdout.readline() == "ready\n"
    Path(str(path) + ".go").touch()
    won = []
    for racer in racers:
        stdout, stderr = racer.communicate(timeout=120)
        assert racer.returncode == 0, stderr
        won.append(int(stdout.split()[-1]))

    lines = log.read_text().splitlines()
    assert len(lines) == 2 * sum(won)
    tokens: list[int] = []
    for enter, leave in zip(lines[::2], lines[1::2], strict=True):
        kind, name, token = enter.split()
        assert kind == "enter", lines
        assert leave == f"leave {name} {token}", (
            f"another holder entered while {name} held the lease: {enter!r} then {leave!r}"
        )
        tokens.append(int(token))
    assert tokens == sorted(tokens), "tokens did not grow with each lease taken"
    assert len(set(tokens)) == len(tokens)
    assert all(count > 0 for count in won), f"one process never got the lease: {won}"
