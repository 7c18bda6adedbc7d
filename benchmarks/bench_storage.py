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


async def _raw_connection(path: str, folder: Path) -> sqlite3.Connection:
    """A raw connection set up as SqliteStorage sets up its own, over the schema it creates (a
    storage creates it in a scratch file, copied into an in-process database when ``path`` is
    ``":memory:"``), holding one thread."""
    scratch = folder / "schema.db"
    creator = SqliteStorage(path if path != ":memory:" else scratch)
    await creator.create_thread(ThreadRecord(id="t1", scope_key="bench", agent_name="bench"))
    await creator.aclose()
    connection = sqlite3.connect(path, isolation_level=None)
    if path == ":memory:":
        source = sqlite3.connect(scratch)
        source.backup(connection)
        source.close()
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


async def _compare(label: str, storage_path: str, raw_path: str, folder: Path) -> None:
    storage = SqliteStorage(storage_path)
    raw = await _raw_connection(raw_path, folder)
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


async def bench_sqlite_appends(backend: str) -> None:
    """SqliteStorage appends against raw sqlite3 doing the same statements (target <= 2x)."""
    print(
        f"SqliteStorage: {APPENDS_PER_ROUND:,} single-message appends per round, median of "
        f"{ROUNDS} rounds ({backend})"
    )
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        await _compare(":memory:", ":memory:", ":memory:", folder)
        await _compare(
            "file (WAL, NORMAL)", str(folder / "storage.db"), str(folder / "raw.db"), folder
        )


if __name__ == "__main__":
    backends = sys.argv[1:] or ["asyncio", "trio"]
    for name in backends:
        anyio.run(bench_sqlite_appends, name, backend=name)
