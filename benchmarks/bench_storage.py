"""Storage benchmarks. Run:  uv run python benchmarks/bench_storage.py

Prints, in one run, for an in-process (``:memory:``) and a file SQLite database (in a temporary
folder):

- single-message appends through ``SqliteStorage.append_messages``, against raw ``sqlite3`` doing
  the same work on a connection set up the same way: serialize the message as the storage does
  (``dump_json``), then the same statements (``BEGIN IMMEDIATE``; the thread's existence and last
  ``seq``; ``INSERT``; ``COMMIT``). Target: <= 2x, on asyncio and on trio.

Times are medians over several rounds, with the configurations interleaved so that machine noise
hits them alike. Ratios compare configurations measured in this same run.
"""

from __future__ import annotations

import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

from pai.core import SqliteStorage, ThreadRecord, UserMessage, message_adapter

ROUNDS = 9
APPENDS_PER_ROUND = 1_000
TARGET = 2.0

# The statements SqliteStorage runs for one append (see pai.core._storage_sqlite).
_POSITION = (
    "SELECT EXISTS (SELECT 1 FROM threads WHERE id = ?),"
    " (SELECT COALESCE(MAX(seq), 0) FROM messages WHERE thread_id = ?)"
)
_INSERT = "INSERT INTO messages (thread_id, seq, json) VALUES (?, ?, ?)"


def _raw_connection(path: str) -> sqlite3.Connection:
    """A connection set up as SqliteStorage sets up its own, over a database it created."""
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA foreign_keys = ON")
    if path != ":memory:":
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA synchronous = NORMAL")
    return connection


def _raw_appends(connection: sqlite3.Connection, thread_id: str, n: int) -> float:
    """Seconds per append, raw sqlite3 (SQLite's own automatic checkpoints included)."""
    message = UserMessage(content="list the files in the workspace, please")
    start = time.perf_counter()
    for _ in range(n):
        raw = message_adapter.dump_json(message).decode()
        connection.execute("BEGIN IMMEDIATE")
        exists, last = connection.execute(_POSITION, (thread_id, thread_id)).fetchone()
        if not exists:
            raise LookupError(thread_id)
        connection.executemany(_INSERT, [(thread_id, last + 1, raw)])
        connection.execute("COMMIT")
    return (time.perf_counter() - start) / n


async def _storage_appends(storage: SqliteStorage, thread_id: str, n: int) -> float:
    """Seconds per append through SqliteStorage (its checkpoints included)."""
    batch = [UserMessage(content="list the files in the workspace, please")]
    start = time.perf_counter()
    for _ in range(n):
        await storage.append_messages(thread_id, batch)
    return (time.perf_counter() - start) / n


async def _compare(label: str, storage_path: str, raw_path: str) -> None:
    storage = SqliteStorage(storage_path)
    raw = _raw_connection(raw_path)
    _create_schema_like_storage(raw)
    await storage.create_thread(ThreadRecord(id="t1", scope_key="bench", agent_name="bench"))
    samples: dict[str, list[float]] = {"raw": [], "storage": []}
    try:
        _raw_appends(raw, "t1", 100)  # warm both up
        await _storage_appends(storage, "t1", 100)
        for _ in range(ROUNDS):
            samples["raw"].append(_raw_appends(raw, "t1", APPENDS_PER_ROUND))
            samples["storage"].append(await _storage_appends(storage, "t1", APPENDS_PER_ROUND))
        stored = len(await storage.get_messages("t1"))
        (raw_stored,) = raw.execute("SELECT COUNT(*) FROM messages").fetchone()
        assert stored == raw_stored, f"the storage holds {stored} messages, raw {raw_stored}"
    finally:
        raw.close()
        await storage.aclose()
    base = statistics.median(samples["raw"])
    ours = statistics.median(samples["storage"])
    ratio = ours / base
    verdict = "met" if ratio <= TARGET else "MISSED"
    print(
        f"  {label:<22} raw sqlite3 {base * 1e6:7.2f} us/append   SqliteStorage "
        f"{ours * 1e6:7.2f} us/append   {ratio:5.2f}x (target <= {TARGET}x: {verdict})"
    )


def _create_schema_like_storage(connection: sqlite3.Connection) -> None:
    """The schema SqliteStorage creates, and one thread, on the raw connection."""
    from pai.core._storage_sqlite import _SCHEMA

    for statement in _SCHEMA:
        connection.execute(statement)
    connection.execute(
        "INSERT INTO threads (id, scope_key, agent_name, parent_thread_id, created_at, seq)"
        " VALUES ('t1', 'bench', 'bench', NULL, '2024-01-01T00:00:00+00:00', 1)"
    )


async def bench_sqlite_appends() -> None:
    """SqliteStorage appends against raw sqlite3 doing the same statements (target <= 2x)."""
    backend = _backend_name()
    print(
        f"SqliteStorage: {APPENDS_PER_ROUND:,} single-message appends per round, median of "
        f"{ROUNDS} rounds ({backend})"
    )
    await _compare(":memory:", ":memory:", ":memory:")
    with tempfile.TemporaryDirectory() as folder:
        await _compare(
            "file (WAL, NORMAL)", str(Path(folder) / "storage.db"), str(Path(folder) / "raw.db")
        )


def _backend_name() -> str:
    import sniffio

    return sniffio.current_async_library()


if __name__ == "__main__":
    backends = sys.argv[1:] or ["asyncio", "trio"]
    for name in backends:
        anyio.run(bench_sqlite_appends, backend=name)
