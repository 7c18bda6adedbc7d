"""The embedded default :class:`~pai.core._storage.Storage`: one SQLite database, stdlib only.

Every call runs in a worker thread (``anyio.to_thread.run_sync``), so the event loop never blocks
on disk, and works under asyncio and trio alike. One connection serves all calls; a lock lets one
call use it at a time, and each write is one transaction.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Final, TypeVar

import anyio.to_thread

from pai.core._errors import ThreadExistsError, ThreadNotFoundError
from pai.core._storage import ThreadRecord
from pai.core._storage_codec import decode_message, encode_message, from_sql_text, to_sql_text
from pai.core._storage_memory import parent_first, thread_exists_message

if TYPE_CHECKING:
    from collections.abc import Callable, Generator, Sequence

    from pai.core._messages import Message

__all__ = ["SqliteStorage"]

_T = TypeVar("_T")

_SCHEMA_VERSION: Final = 1

_SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS threads (
        id TEXT PRIMARY KEY NOT NULL,
        scope_key TEXT NOT NULL,
        agent_name TEXT NOT NULL,
        parent_thread_id TEXT,
        created_at TEXT NOT NULL,
        seq INTEGER NOT NULL UNIQUE
    )""",
    "CREATE INDEX IF NOT EXISTS threads_by_scope ON threads (scope_key, parent_thread_id, seq)",
    "CREATE INDEX IF NOT EXISTS threads_by_parent ON threads (parent_thread_id)",
    """CREATE TABLE IF NOT EXISTS messages (
        thread_id TEXT NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        json TEXT NOT NULL,
        PRIMARY KEY (thread_id, seq)
    ) WITHOUT ROWID""",
    f"PRAGMA user_version = {_SCHEMA_VERSION}",
)

_SUBTREE: Final = """
WITH RECURSIVE subtree (id) AS (
    SELECT id FROM threads WHERE id = ?
    UNION
    SELECT threads.id FROM threads JOIN subtree ON threads.parent_thread_id = subtree.id
)
SELECT threads.id, threads.parent_thread_id, threads.seq
FROM threads JOIN subtree ON threads.id = subtree.id
"""


_Text = str | bytes
"""A string column as SQLite returns it (see :mod:`pai.core._storage_codec`)."""


def _record(row: tuple[_Text, _Text, _Text, _Text | None, str]) -> ThreadRecord:
    thread_id, scope_key, agent_name, parent_thread_id, created_at = row
    return ThreadRecord(
        id=from_sql_text(thread_id),
        scope_key=from_sql_text(scope_key),
        agent_name=from_sql_text(agent_name),
        parent_thread_id=None if parent_thread_id is None else from_sql_text(parent_thread_id),
        created_at=datetime.fromisoformat(created_at),
    )


def _optional_text(value: str | None) -> _Text | None:
    return None if value is None else to_sql_text(value)


@contextmanager
def _transaction(connection: sqlite3.Connection) -> Generator[None, None, None]:
    """One write transaction: committed if the block finishes, rolled back if it raises."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


class SqliteStorage:
    """Threads and messages in a SQLite database: a file path, or ``":memory:"`` (the default).

    A file database keeps its data across processes and survives a new ``SqliteStorage`` on the
    same path; it runs in WAL mode. A ``":memory:"`` database lives only until :meth:`aclose`.
    The connection opens on first use. ``reads`` counts :meth:`get_thread` calls, for tests and
    benchmarks that measure how often a runtime reads thread records.

    Example::

        storage = SqliteStorage("pai.db")
        try:
            await storage.create_thread(ThreadRecord(id="t1", scope_key="acme", agent_name="helper"))
            await storage.append_messages("t1", [UserMessage(content="hi")])
            assert await storage.get_messages("t1") == (UserMessage(content="hi"),)
        finally:
            await storage.aclose()
    """

    def __init__(self, path: str | os.PathLike[str] = ":memory:") -> None:
        self.path: str = os.fspath(path)
        """Where the database lives, as given (``":memory:"`` for an in-process one)."""
        self.reads: int = 0
        """How many times :meth:`get_thread` has been called."""
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None
        self._closed = False

    # -- the worker-thread side ------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        try:
            connection = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        except sqlite3.Error as error:
            raise RuntimeError(
                f"cannot open the SQLite database at {self.path!r}: {error}; check that the "
                "directory exists and is writable, or pass another path to SqliteStorage"
            ) from error
        try:
            connection.execute("PRAGMA foreign_keys = ON")
            if self.path not in (":memory:", ""):
                connection.execute("PRAGMA journal_mode = WAL")
            (version,) = connection.execute("PRAGMA user_version").fetchone()
            if version > _SCHEMA_VERSION:
                raise RuntimeError(
                    f"the SQLite database at {self.path!r} has schema version {version}, newer "
                    f"than this version of pai-core understands ({_SCHEMA_VERSION}); upgrade "
                    "pai-core, or use another path"
                )
            if version < _SCHEMA_VERSION:
                with _transaction(connection):
                    for statement in _SCHEMA:
                        connection.execute(statement)
        except BaseException:
            connection.close()
            raise
        return connection

    def _run(self, operation: Callable[[sqlite3.Connection], _T]) -> _T:
        with self._lock:
            if self._closed:
                raise RuntimeError(
                    f"SqliteStorage is closed; create a new SqliteStorage({self.path!r}) to keep "
                    "working (a file database keeps its data, a ':memory:' one does not)"
                )
            if self._connection is None:
                self._connection = self._open()
            return operation(self._connection)

    def _close(self) -> None:
        with self._lock:
            self._closed = True
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    async def _call(self, operation: Callable[[sqlite3.Connection], _T]) -> _T:
        return await anyio.to_thread.run_sync(self._run, operation)

    # -- the Storage protocol --------------------------------------------------------------

    async def create_thread(self, record: ThreadRecord) -> None:
        """Store a new thread. Raises :class:`ThreadExistsError` if ``record.id`` is taken."""

        def create(connection: sqlite3.Connection) -> None:
            with _transaction(connection):
                thread_id = to_sql_text(record.id)
                taken = connection.execute("SELECT 1 FROM threads WHERE id = ?", (thread_id,))
                if taken.fetchone() is not None:
                    raise ThreadExistsError(thread_exists_message(record.id))
                connection.execute(
                    "INSERT INTO threads"
                    " (id, scope_key, agent_name, parent_thread_id, created_at, seq)"
                    " VALUES (?, ?, ?, ?, ?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM threads))",
                    (
                        thread_id,
                        to_sql_text(record.scope_key),
                        to_sql_text(record.agent_name),
                        _optional_text(record.parent_thread_id),
                        record.created_at.isoformat(),
                    ),
                )

        await self._call(create)

    async def get_thread(self, thread_id: str) -> ThreadRecord | None:
        """The thread with this id, or ``None``. Counts one read in :attr:`reads`."""
        self.reads += 1

        def get(connection: sqlite3.Connection) -> ThreadRecord | None:
            row: tuple[_Text, _Text, _Text, _Text | None, str] | None = connection.execute(
                "SELECT id, scope_key, agent_name, parent_thread_id, created_at"
                " FROM threads WHERE id = ?",
                (to_sql_text(thread_id),),
            ).fetchone()
            return None if row is None else _record(row)

        return await self._call(get)

    async def delete_thread(self, thread_id: str) -> Sequence[str]:
        """Delete the thread, its descendants and their messages; return the ids, parent first.

        One transaction; an unknown id deletes nothing and returns ``()``.
        """

        def delete(connection: sqlite3.Connection) -> tuple[str, ...]:
            with _transaction(connection):
                rows: list[tuple[_Text, _Text | None, int]] = connection.execute(
                    _SUBTREE, (to_sql_text(thread_id),)
                ).fetchall()
                if not rows:
                    return ()
                subtree = [
                    (from_sql_text(i), None if p is None else from_sql_text(p), seq)
                    for i, p, seq in rows
                ]
                doomed = parent_first(thread_id, subtree)
                keys = [(to_sql_text(doomed_id),) for doomed_id in doomed]
                connection.executemany("DELETE FROM messages WHERE thread_id = ?", keys)
                connection.executemany("DELETE FROM threads WHERE id = ?", keys)
            return tuple(doomed)

        return await self._call(delete)

    async def list_threads(
        self, scope_key: str, *, parent_thread_id: str | None = None
    ) -> Sequence[ThreadRecord]:
        """Threads of a scope, oldest first: top-level ones, or the children of a parent."""

        def select(connection: sqlite3.Connection) -> tuple[ThreadRecord, ...]:
            rows: list[tuple[_Text, _Text, _Text, _Text | None, str]] = connection.execute(
                "SELECT id, scope_key, agent_name, parent_thread_id, created_at FROM threads"
                " WHERE scope_key = ? AND parent_thread_id IS ? ORDER BY seq",
                (to_sql_text(scope_key), _optional_text(parent_thread_id)),
            ).fetchall()
            return tuple(_record(row) for row in rows)

        return await self._call(select)

    async def append_messages(self, thread_id: str, messages: Sequence[Message]) -> None:
        """Append all of ``messages`` to the thread in one transaction: all are stored, or none.

        Raises :class:`ThreadNotFoundError` if the thread does not exist.
        """
        batch = list(messages)
        key = to_sql_text(thread_id)

        def append(connection: sqlite3.Connection) -> None:
            with _transaction(connection):
                exists = connection.execute("SELECT 1 FROM threads WHERE id = ?", (key,))
                if exists.fetchone() is None:
                    raise ThreadNotFoundError(thread_id)
                (last,) = connection.execute(
                    "SELECT COALESCE(MAX(seq), 0) FROM messages WHERE thread_id = ?", (key,)
                ).fetchone()
                # Serialized row by row inside the transaction: a message that fails to
                # serialize rolls back the rows before it.
                connection.executemany(
                    "INSERT INTO messages (thread_id, seq, json) VALUES (?, ?, ?)",
                    (
                        (key, last + offset, encode_message(message))
                        for offset, message in enumerate(batch, start=1)
                    ),
                )

        await self._call(append)

    async def get_messages(self, thread_id: str, *, start: int = 0) -> Sequence[Message]:
        """The thread's messages from index ``start`` on, in the order appended; ``()`` for an
        unknown thread."""
        if start < 0:
            raise ValueError(
                f"get_messages(start={start!r}): start is a count of messages already read and "
                "must be >= 0; pass 0 to read the whole thread"
            )

        def select(connection: sqlite3.Connection) -> list[tuple[_Text]]:
            # seq is 1-based and dense per thread, so index `start` is seq `start + 1`.
            return connection.execute(
                "SELECT json FROM messages WHERE thread_id = ? AND seq > ? ORDER BY seq",
                (to_sql_text(thread_id), start),
            ).fetchall()

        rows = await self._call(select)
        return tuple(decode_message(raw) for (raw,) in rows)

    async def aclose(self) -> None:
        """Close the connection. Calling it again does nothing; any other call then raises."""
        await anyio.to_thread.run_sync(self._close)
