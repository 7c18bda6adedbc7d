"""SqliteStorage append cost against raw sqlite3. Run:  uv run python benchmarks/bench_storage.py

Prints, in one run, for a ``":memory:"`` database and a file database in a temporary folder:

- the cost of one ``append_messages`` of one message through :class:`SqliteStorage`;
- the cost of the same SQL statements through raw ``sqlite3`` on the same kind of database (same
  pragmas: WAL and ``synchronous = NORMAL`` for a file), one ``BEGIN IMMEDIATE`` transaction per
  append as SqliteStorage runs them;
- their ratio (target <= 2x);

and the cost of one ``get_messages(start=n)`` read of the newest message on InMemoryStorage.

Times are medians over several rounds, with the configurations interleaved so that machine noise
hits them alike. Ratios compare configurations measured in this same run.
"""

from __future__ import annotations

import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

import anyio

from pai.core import InMemoryStorage, SqliteStorage, ThreadRecord, UserMessage, message_adapter

ROUNDS = 9
APPENDS_PER_ROUND = 1_000
TARGET = 2.0

_SCHEMA = (
    """CREATE TABLE threads (
        id TEXT PRIMARY KEY NOT NULL, scope_key TEXT NOT NULL, agent_name TEXT NOT NULL,
        parent_thread_id TEXT, created_at TEXT NOT NULL, seq INTEGER NOT NULL UNIQUE)""",
    """CREATE TABLE messages (
        thread_id TEXT NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
        seq INTEGER NOT NULL, json TEXT NOT NULL, PRIMARY KEY (thread_id, seq)) WITHOUT ROWID""",
)
_POSITION = (
    "SELECT EXISTS (SELECT 1 FROM threads WHERE id = ?),"
    " (SELECT COALESCE(MAX(seq), 0) FROM messages WHERE thread_id = ?)"
)


def _raw_connection(path: str) -> sqlite3.Connection:
    connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    connection.execute("PRAGMA foreign_keys = ON")
    if path != ":memory:":
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA synchronous = NORMAL")
    for statement in _SCHEMA:
        connection.execute(statement)
    connection.execute(
        "INSERT INTO threads VALUES ('t1', 'acme', 'helper', NULL, '2024-01-01T00:00:00', 1)"
    )
    return connection


def _time_raw(path: str, n: int) -> float:
    """Seconds per append: the statements SqliteStorage runs, serialization included."""
    connection = _raw_connection(path)
    message = UserMessage(content="hello there")
    try:
        began = time.perf_counter()
        for _ in range(n):
            encoded = [message_adapter.dump_json(message).decode()]
            connection.execute("BEGIN IMMEDIATE")
            exists, last = connection.execute(_POSITION, ("t1", "t1")).fetchone()
            assert exists
            connection.executemany(
                "INSERT INTO messages (thread_id, seq, json) VALUES (?, ?, ?)",
                [("t1", last + offset, raw) for offset, raw in enumerate(encoded, start=1)],
            )
            connection.execute("COMMIT")
        return (time.perf_counter() - began) / n
    finally:
        connection.close()


async def _time_storage(path: str, n: int) -> float:
    storage = SqliteStorage(path)
    message = UserMessage(content="hello there")
    try:
        await storage.create_thread(ThreadRecord(id="t1", scope_key="acme", agent_name="helper"))
        began = time.perf_counter()
        for _ in range(n):
            await storage.append_messages("t1", [message])
        return (time.perf_counter() - began) / n
    finally:
        await storage.aclose()


async def bench_appends(kind: str) -> None:
    raw: list[float] = []
    ours: list[float] = []
    with tempfile.TemporaryDirectory() as folder:
        for round_ in range(ROUNDS):

            def path(name: str, round_: int = round_) -> str:
                if kind == ":memory:":
                    return ":memory:"
                return str(Path(folder) / f"{name}-{round_}.db")

            raw.append(_time_raw(path("raw"), APPENDS_PER_ROUND))
            ours.append(await _time_storage(path("ours"), APPENDS_PER_ROUND))
    raw_us = statistics.median(raw) * 1e6
    ours_us = statistics.median(ours) * 1e6
    ratio = ours_us / raw_us
    verdict = "met" if ratio <= TARGET else "MISSED"
    print(
        f"  {kind:<9} raw sqlite3 {raw_us:7.1f} us/append   SqliteStorage {ours_us:7.1f} "
        f"us/append   {ratio:4.2f}x (target <= {TARGET}x: {verdict})"
    )


async def bench_in_memory_reads(length: int = 1_000) -> None:
    storage = InMemoryStorage()
    await storage.create_thread(ThreadRecord(id="t1", scope_key="acme", agent_name="helper"))
    await storage.append_messages("t1", [UserMessage(content=f"m{i}") for i in range(length)])
    samples: list[float] = []
    for _ in range(ROUNDS):
        began = time.perf_counter()
        for _ in range(APPENDS_PER_ROUND):
            await storage.get_messages("t1", start=length - 1)
        samples.append((time.perf_counter() - began) / APPENDS_PER_ROUND)
    full: list[float] = []
    for _ in range(ROUNDS):
        began = time.perf_counter()
        await storage.get_messages("t1")
        full.append(time.perf_counter() - began)
    print(
        f"  InMemoryStorage, {length}-message thread: newest message "
        f"{statistics.median(samples) * 1e6:.1f} us, whole thread "
        f"{statistics.median(full) * 1e6:.0f} us"
    )


async def main() -> None:
    print(f"{APPENDS_PER_ROUND:,} single-message appends, median of {ROUNDS} interleaved rounds:")
    await bench_appends(":memory:")
    await bench_appends("file")
    print("reads:")
    await bench_in_memory_reads()


if __name__ == "__main__":
    anyio.run(main)
