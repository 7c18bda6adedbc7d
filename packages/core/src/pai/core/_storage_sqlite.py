"""The embedded default :class:`~pai.core._storage.Storage`: one SQLite database, stdlib only.

How a call runs. One connection serves every call, and a ``threading.Lock`` lets one call use it
at a time. A call first tries to run *inline*, on the event loop's own thread: when the lock is
free it takes it without waiting and runs its statements at once, with SQLite's ``busy_timeout``
at 0, so a lock held by another connection or process makes SQLite answer ``SQLITE_BUSY`` at
once instead of waiting. Then (and whenever the lock is held, the connection is not open yet, or
a checkpoint is due) the call runs in a worker thread (``anyio.to_thread.run_sync``), which waits
for the lock there and runs with a ``busy_timeout`` (``busy_timeout=`` seconds, 5 by default).
So the event loop never waits on a lock, neither this process's nor another's; an inline call
completes without yielding to the event loop (as :class:`~pai.core.InMemoryStorage`'s calls do),
which is what makes each call atomic with respect to other tasks; and asyncio and trio behave
alike. An uncontended call costs its statements plus a few microseconds, not a thread hop
(measured by ``benchmarks/bench_storage.py``).

Each write is one ``BEGIN IMMEDIATE`` transaction, so a busy database is refused before anything
is written and the call is safely run again in the worker; messages are serialized before the
transaction starts, so a message that cannot be serialized writes nothing.

Run leases live in the ``run_leases`` table (a row per thread, deleted with it) and take their
tokens from a counter row, each call one ``BEGIN IMMEDIATE`` transaction, so every process on the
file sees one order of acquisitions. Their clock is the machine's (``time.time()``), which every
process on a local file shares. A database of schema version 1 (before leases) gains the tables
the first time it is opened.

Blobs (:class:`~pai.core.ext.BlobStore`) live in the ``blobs`` table (schema version 3; an older
database gains it the first time it is opened), keyed by ``(thread_id, key)`` and deleted with
their thread. A key is stored as its UTF-8 bytes (lone surrogates kept), always a ``BLOB``, which
SQLite compares bytewise: the keys starting with a prefix are one range of the primary key. A
write of a large blob to a file goes to a worker thread (its pages count towards the next
checkpoint).

Durability. A file database runs in WAL mode with ``synchronous = NORMAL``: a committed append
survives the process crashing or being killed; after a power loss or an operating-system crash
the last commits before it may be rolled back, never corrupting the database (SQLite's guarantee
for WAL with NORMAL). An inline commit writes to the WAL file through the operating system's page
cache and never calls ``fsync``: the connection's automatic checkpoint is off, and this storage
checkpoints (the step that syncs) in a worker thread itself, about as often as SQLite would (after
roughly 1,000 pages of writes), and when it is closed. A cold read of a large database can still
wait on the disk inline; reads of what a runtime just wrote come from the page cache.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sqlite3
import threading
import time
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final, TypeVar

import anyio.to_thread

from pai.core._errors import (
    RunLeaseLostError,
    StorageAccessError,
    StorageCorruptError,
    StorageError,
    StorageSchemaError,
    ThreadExistsError,
    ThreadNotFoundError,
)
from pai.core._storage import (
    RunLease,
    ThreadRecord,
    check_blob_data,
    check_blob_key,
    check_blob_prefix,
    check_ttl,
    run_lease_lost_message,
)
from pai.core._storage_codec import decode_message, encode_message, from_sql_text, to_sql_text
from pai.core._storage_memory import parent_first, thread_exists_message

if TYPE_CHECKING:
    from collections.abc import Callable, Generator, Sequence

    from pai.core._messages import Message

__all__ = ["SqliteStorage"]

_T = TypeVar("_T")
_log = logging.getLogger("pai.core.storage")

_SCHEMA_VERSION: Final = 3

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
    # Version 2: run leases. expires_at is Unix time in seconds, by the clock of the machine
    # (every process on one SQLite file shares it).
    """CREATE TABLE IF NOT EXISTS run_leases (
        thread_id TEXT PRIMARY KEY NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
        token INTEGER NOT NULL,
        holder TEXT NOT NULL,
        expires_at REAL NOT NULL,
        released INTEGER NOT NULL
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS counters (
        name TEXT PRIMARY KEY NOT NULL,
        value INTEGER NOT NULL
    ) WITHOUT ROWID""",
    "INSERT OR IGNORE INTO counters (name, value) VALUES ('run_lease_token', 0)",
    # Version 3: blobs kept with a thread. key is the key's UTF-8 bytes (surrogatepass), always
    # a BLOB, so keys compare bytewise and a prefix is a range. A rowid table: its rows are large.
    """CREATE TABLE IF NOT EXISTS blobs (
        thread_id TEXT NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
        key BLOB NOT NULL,
        data BLOB NOT NULL,
        PRIMARY KEY (thread_id, key)
    )""",
    f"PRAGMA user_version = {_SCHEMA_VERSION}",
)
"""Every statement makes what is missing and keeps what is there, so the same list creates a new
database and migrates one of an older version (in one ``BEGIN IMMEDIATE`` transaction: of two
processes opening an old file at once, the second finds the work done)."""

_COLUMNS: Final = {
    1: {
        "threads": ("id", "scope_key", "agent_name", "parent_thread_id", "created_at", "seq"),
        "messages": ("thread_id", "seq", "json"),
    },
    2: {
        "threads": ("id", "scope_key", "agent_name", "parent_thread_id", "created_at", "seq"),
        "messages": ("thread_id", "seq", "json"),
        "run_leases": ("thread_id", "token", "holder", "expires_at", "released"),
        "counters": ("name", "value"),
    },
    3: {
        "threads": ("id", "scope_key", "agent_name", "parent_thread_id", "created_at", "seq"),
        "messages": ("thread_id", "seq", "json"),
        "run_leases": ("thread_id", "token", "holder", "expires_at", "released"),
        "counters": ("name", "value"),
        "blobs": ("thread_id", "key", "data"),
    },
}
"""Per schema version, its tables and their columns: a database of that version has them."""

_SUBTREE: Final = """
WITH RECURSIVE subtree (id) AS (
    SELECT id FROM threads WHERE id = ?
    UNION
    SELECT threads.id FROM threads JOIN subtree ON threads.parent_thread_id = subtree.id
)
SELECT threads.id, threads.parent_thread_id, threads.seq
FROM threads JOIN subtree ON threads.id = subtree.id
"""


_APPEND_POSITION: Final = (
    "SELECT EXISTS (SELECT 1 FROM threads WHERE id = ?),"
    " (SELECT COALESCE(MAX(seq), 0) FROM messages WHERE thread_id = ?)"
)
"""Whether the thread exists, and the ``seq`` of its last message (0 for none)."""

_LEASED_APPEND_POSITION: Final = (
    _APPEND_POSITION
    + ", EXISTS (SELECT 1 FROM run_leases WHERE thread_id = ? AND token = ? AND released = 0)"
)
"""As ``_APPEND_POSITION``, and whether a token is the thread's current run lease."""

_NEXT_TOKEN: Final = "UPDATE counters SET value = value + 1 WHERE name = 'run_lease_token'"
_TOKEN: Final = "SELECT value FROM counters WHERE name = 'run_lease_token'"

_Text = str | bytes


def _blob_key_range(prefix: str) -> tuple[bytes, bytes | None]:
    """The stored keys starting with ``prefix``, as a range of bytes: ``low <= key < high``
    (no ``high`` for ``""``: every key). A key is stored as its UTF-8 (surrogatepass), which
    never holds a 0xFF byte, so the prefix with its last byte raised by one is the least key past
    every key starting with it."""
    low = prefix.encode("utf-8", "surrogatepass")
    if not low:
        return low, None
    return low, low[:-1] + bytes([low[-1] + 1])


def _blob_key(key: str) -> bytes:
    return key.encode("utf-8", "surrogatepass")


"""A string column as SQLite returns it (see :mod:`pai.core._storage_codec`)."""


def _record(row: tuple[_Text, _Text, _Text, _Text | None, str]) -> ThreadRecord:
    """The record of a ``threads`` row; a :class:`ValueError` (or :class:`TypeError`) when the
    row holds what this storage never writes."""
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
    """One write transaction: committed if the block finishes, rolled back if it (or the commit)
    raises. ``BEGIN IMMEDIATE`` takes the write lock first, so a busy database fails here."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise


def _is_busy(error: sqlite3.Error) -> bool:
    """Whether SQLite refused because another connection holds a lock (``SQLITE_BUSY`` or
    ``SQLITE_LOCKED``, extended codes included)."""
    code = getattr(error, "sqlite_errorcode", None)
    if code is None:  # pragma: no cover - Python built without error codes
        return "locked" in str(error) or "busy" in str(error)
    return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


_CORRUPT: Final = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_FORMAT})
"""Result codes saying the file is damaged or not a database."""
_NOT_WRITABLE: Final = frozenset(
    {sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_AUTH}
)
"""Result codes saying this process may not open or write the file."""
_IO: Final = frozenset({sqlite3.SQLITE_IOERR, sqlite3.SQLITE_FULL, sqlite3.SQLITE_NOLFS})
"""Result codes saying the disk failed or is full."""

_ELSEWHERE: Final = (
    "give SqliteStorage another path (or the storage URL: [storage] url, PAI_STORAGE__URL)"
)
_UNTOUCHED: Final = "The file was left as it was: nothing was deleted, repaired or overwritten."


_CHECKPOINT_PAGES: Final = 1_000
"""Roughly how many pages of writes go to the WAL between two checkpoints (SQLite's default)."""
_PAGE_BYTES: Final = 4_096


class SqliteStorage:
    """Threads and messages in a SQLite database: a file path, or ``":memory:"`` (the default).

    A file database keeps its data across processes and survives a new ``SqliteStorage`` on the
    same path; it runs in WAL mode with ``synchronous = NORMAL`` (a committed append survives a
    crash of the process; see the module documentation for power loss). A ``":memory:"``
    database lives only until :meth:`aclose`. The connection opens on first use. Uncontended
    calls run inline on the event loop without waiting on any lock; a call that would wait (on
    another task's worker call, or on another process holding the database) runs in a worker
    thread instead, waiting up to ``busy_timeout`` seconds for the database. ``reads`` counts
    :meth:`get_thread` calls, for tests and benchmarks that measure how often a runtime reads
    thread records.

    A file that is not a healthy database of this storage is never changed: a damaged one raises
    :class:`~pai.core.StorageCorruptError` (on opening, or on the read or write that finds the
    damage), another program's or a newer one :class:`~pai.core.StorageSchemaError`, a locked or
    read-only one :class:`~pai.core.StorageAccessError`; each names the path and what to do.

    Example::

        storage = SqliteStorage("pai.db")
        try:
            await storage.create_thread(ThreadRecord(id="t1", scope_key="acme", agent_name="helper"))
            await storage.append_messages("t1", [UserMessage(content="hi")])
            assert await storage.get_messages("t1") == (UserMessage(content="hi"),)
        finally:
            await storage.aclose()
    """

    def __init__(
        self, path: str | os.PathLike[str] = ":memory:", *, busy_timeout: float = 5.0
    ) -> None:
        if busy_timeout < 0:
            raise ValueError(
                f"SqliteStorage(busy_timeout={busy_timeout!r}): the time to wait for another "
                "connection's lock must be >= 0 seconds"
            )
        self.path: str = os.fspath(path)
        """Where the database lives, as given (``":memory:"`` for an in-process one)."""
        self.busy_timeout: float = busy_timeout
        """How long a call waits (in a worker thread) for another connection's lock, in seconds."""
        self.reads: int = 0
        """How many times :meth:`get_thread` has been called."""
        self._file = self.path not in (":memory:", "")
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None
        """Set (under the lock) once open; ``None`` before that and after :meth:`aclose`."""
        self._closed = False
        self._unsynced_pages = 0
        """Pages written to the WAL since the last checkpoint (an estimate)."""

    # -- running a call ------------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        try:
            connection = sqlite3.connect(
                self.path, timeout=self.busy_timeout, check_same_thread=False, isolation_level=None
            )
        except sqlite3.Error as error:
            raise StorageAccessError(
                f"cannot open the SQLite database at {self.path!r}: {error}; check that the "
                "directory exists and is writable, or pass another path to SqliteStorage",
                path=self.path,
            ) from error
        try:
            connection.execute("PRAGMA foreign_keys = ON")
            # Read what the file holds before anything writes to it (WAL mode rewrites the
            # header): a file that is not this storage's database is left byte for byte.
            version = self._check_schema(connection)
            if self._file:
                connection.execute("PRAGMA journal_mode = WAL")
                connection.execute("PRAGMA synchronous = NORMAL")
                # Checkpoints (the only step that syncs) run in a worker: see _checkpoint.
                connection.execute("PRAGMA wal_autocheckpoint = 0")
            if version < _SCHEMA_VERSION:
                with _transaction(connection):
                    for statement in _SCHEMA:
                        connection.execute(statement)
            connection.execute("PRAGMA busy_timeout = 0")  # inline calls never wait
        except sqlite3.Error as error:
            connection.close()
            raise self._failure(error) from error
        except BaseException:
            connection.close()
            raise
        return connection

    def _check_schema(self, connection: sqlite3.Connection) -> int:
        """The database's schema version, once its tables are known to be this storage's.

        A new database (version 0) has no tables yet; one of this version has the tables and
        columns of ``_SCHEMA``. Anything else is another program's database, or a newer one.
        """
        (version,) = connection.execute("PRAGMA user_version").fetchone()
        where = f"the SQLite database at {self.path!r}"
        if version > _SCHEMA_VERSION:
            raise StorageSchemaError(
                f"{where} has schema version {version}, newer than this version of pai-core "
                f"understands ({_SCHEMA_VERSION}); upgrade pai-core, or {_ELSEWHERE}. "
                f"{_UNTOUCHED}",
                path=self.path,
            )
        tables: list[str] = [
            name
            for (name,) in connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'"
                " AND name NOT LIKE 'sqlite!_%' ESCAPE '!' ORDER BY name"
            )
        ]
        if version == 0 and tables:
            shown = ", ".join(repr(name) for name in tables[:5])
            raise StorageSchemaError(
                f"{where} holds tables pai-core did not make ({shown}"
                f"{', ...' if len(tables) > 5 else ''}): it is another program's database, not "
                f"a thread store. Keep pai-core's threads in a file of their own: {_ELSEWHERE}. "
                f"{_UNTOUCHED}",
                path=self.path,
            )
        if version == 0:
            return version
        for table, columns in _COLUMNS[version].items():
            found = {
                row[1] for row in connection.execute("SELECT * FROM pragma_table_info(?)", (table,))
            }
            missing = [column for column in columns if column not in found]
            if missing:
                what = "no table" if not found else f"no column {', '.join(missing)} in the table"
                raise StorageSchemaError(
                    f"{where} says it has schema version {version}, but it has {what} "
                    f"{table!r}: it is another program's database, or was changed by one. Move "
                    f"it aside (keep it: its threads may be recovered from it), or {_ELSEWHERE}. "
                    f"{_UNTOUCHED}",
                    path=self.path,
                )
        return version

    def _failure(self, error: sqlite3.Error) -> StorageError:
        """The :class:`StorageError` for an error SQLite raised on this database."""
        code = (getattr(error, "sqlite_errorcode", None) or 0) & 0xFF
        where = f"the SQLite database at {self.path!r}"
        text = str(error)
        if code in _CORRUPT or "malformed" in text or "not a database" in text:
            return StorageCorruptError(
                f"{where} is damaged or is not a SQLite database ({text}). Move it aside "
                "(keep it: the sqlite3 shell's .recover may save its threads) so a new database "
                f"starts at that path, or {_ELSEWHERE}. {_UNTOUCHED}",
                path=self.path,
            )
        if _is_busy(error):
            return StorageAccessError(
                f"another connection kept {where} locked for over {self.busy_timeout} s "
                "(SqliteStorage busy_timeout); find the process holding it, or pass a longer "
                "busy_timeout (?busy_timeout=30 in a storage URL)",
                path=self.path,
            )
        if code in _NOT_WRITABLE:
            return StorageAccessError(
                f"{where} cannot be opened or written by this process ({text}); make the file "
                "and its folder writable (SQLite writes -wal and -shm files next to it), "
                f"or {_ELSEWHERE}",
                path=self.path,
            )
        if code in _IO:
            return StorageAccessError(
                f"reading or writing {where} failed ({text}); check the disk (free space, "
                f"errors), then try again, or {_ELSEWHERE}",
                path=self.path,
            )
        if "no such table" in text or "no such column" in text:
            return StorageSchemaError(
                f"{where} lacks what this storage needs ({text}): another program changed its "
                f"tables. Move it aside, or {_ELSEWHERE}. {_UNTOUCHED}",
                path=self.path,
            )
        return StorageError(
            f"{where} failed: {type(error).__name__}: {text}; check the file, or {_ELSEWHERE}"
        )

    def _unreadable(self, what: str, error: Exception) -> StorageCorruptError:
        """The error for a row holding what this storage never writes."""
        return StorageCorruptError(
            f"{what} in the SQLite database at {self.path!r} cannot be read "
            f"({type(error).__name__}: {error}); the database is damaged, or another program "
            f"wrote to it. Move it aside (keep it: other threads in it may be readable), "
            f"or {_ELSEWHERE}. {_UNTOUCHED}",
            path=self.path,
        )

    def _record(self, row: tuple[_Text, _Text, _Text, _Text | None, str]) -> ThreadRecord:
        try:
            return _record(row)
        except (ValueError, TypeError) as error:
            raise self._unreadable(f"the thread record {row[0]!r}", error) from error

    def _closed_error(self) -> StorageError:
        return StorageError(
            f"SqliteStorage is closed; create a new SqliteStorage({self.path!r}) to keep "
            "working (a file database keeps its data, a ':memory:' one does not)"
        )

    def _run_in_worker(self, operation: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``operation`` in this (worker) thread, waiting for the lock and for the database."""
        with self._lock:
            if self._closed:
                raise self._closed_error()
            connection = self._connection
            if connection is None:
                connection = self._connection = self._open()
            try:
                if not self._file:  # nothing else can hold an in-process database
                    return operation(connection)
                connection.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
                try:
                    result = operation(connection)
                finally:
                    connection.execute("PRAGMA busy_timeout = 0")
            except sqlite3.Error as error:
                raise self._failure(error) from error
            if self._unsynced_pages >= _CHECKPOINT_PAGES:
                self._checkpoint(connection)
            return result

    def _checkpoint(self, connection: sqlite3.Connection) -> None:
        """Copy the WAL into the database and sync it (PASSIVE: never waits for readers).

        The call that triggered it has committed already, so a failure here is logged, not
        raised, and the checkpoint is tried again after as many pages more.
        """
        self._unsynced_pages = 0
        try:
            connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.Error as error:
            _log.warning(
                "checkpointing the SQLite database at %r failed (%s: %s); its WAL file keeps "
                "growing until a checkpoint succeeds. Check the disk and the file's permissions",
                self.path,
                type(error).__name__,
                error,
            )

    async def _call(self, operation: Callable[[sqlite3.Connection], _T], *, pages: int = 0) -> _T:
        """Run ``operation`` inline when that cannot wait on a lock, else in a worker thread.

        ``pages`` estimates how many pages a write adds to the WAL, to schedule checkpoints.
        """
        if self._file:
            self._unsynced_pages += pages
        connection = self._connection
        if (
            connection is not None
            and self._unsynced_pages < _CHECKPOINT_PAGES
            and self._lock.acquire(blocking=False)
        ):
            try:
                return operation(connection)
            except sqlite3.Error as error:
                if not _is_busy(error):
                    raise self._failure(error) from error
                # Another connection holds a lock: wait for it in a worker thread instead.
            finally:
                self._lock.release()
        return await anyio.to_thread.run_sync(self._run_in_worker, operation)

    def _close(self) -> None:
        with self._lock:
            self._closed = True
            if self._connection is not None:
                self._connection.close()  # the last connection checkpoints the WAL
                self._connection = None

    # -- the Storage protocol --------------------------------------------------------------

    async def create_thread(self, record: ThreadRecord) -> None:
        """Store a new thread. Raises :class:`ThreadExistsError` if ``record.id`` is taken."""

        thread_id = to_sql_text(record.id)
        values = (
            thread_id,
            to_sql_text(record.scope_key),
            to_sql_text(record.agent_name),
            _optional_text(record.parent_thread_id),
            record.created_at.isoformat(),
        )

        def create(connection: sqlite3.Connection) -> None:
            with _transaction(connection):
                taken = connection.execute("SELECT 1 FROM threads WHERE id = ?", (thread_id,))
                if taken.fetchone() is not None:
                    raise ThreadExistsError(thread_exists_message(record.id))
                connection.execute(
                    "INSERT INTO threads"
                    " (id, scope_key, agent_name, parent_thread_id, created_at, seq)"
                    " VALUES (?, ?, ?, ?, ?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM threads))",
                    values,
                )

        await self._call(create, pages=3)

    async def get_thread(self, thread_id: str) -> ThreadRecord | None:
        """The thread with this id, or ``None``. Counts one read in :attr:`reads`."""
        self.reads += 1

        key = (to_sql_text(thread_id),)

        def get(connection: sqlite3.Connection) -> ThreadRecord | None:
            row: tuple[_Text, _Text, _Text, _Text | None, str] | None = connection.execute(
                "SELECT id, scope_key, agent_name, parent_thread_id, created_at"
                " FROM threads WHERE id = ?",
                key,
            ).fetchone()
            return None if row is None else self._record(row)

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
                connection.executemany("DELETE FROM run_leases WHERE thread_id = ?", keys)
                connection.executemany("DELETE FROM blobs WHERE thread_id = ?", keys)
                connection.executemany("DELETE FROM threads WHERE id = ?", keys)
            return tuple(doomed)

        return await self._call(delete, pages=3)

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
            return tuple(self._record(row) for row in rows)

        return await self._call(select)

    async def append_messages(
        self, thread_id: str, messages: Sequence[Message], *, lease: RunLease | None = None
    ) -> None:
        """Append all of ``messages`` to the thread in one transaction: all are stored, or none.

        Raises :class:`ThreadNotFoundError` if the thread does not exist, and
        :class:`~pai.core.RunLeaseLostError` if ``lease`` is given and is not the thread's
        current run lease (checked in the same transaction).
        """
        # Serialized before the transaction: a message that cannot be serialized writes nothing.
        encoded = [encode_message(message) for message in messages]
        key = to_sql_text(thread_id)

        def append(connection: sqlite3.Connection) -> None:
            with _transaction(connection):
                if lease is None:
                    exists, last = connection.execute(_APPEND_POSITION, (key, key)).fetchone()
                    current = True
                else:
                    exists, last, current = connection.execute(
                        _LEASED_APPEND_POSITION, (key, key, key, lease.token)
                    ).fetchone()
                if not exists:
                    raise ThreadNotFoundError(thread_id)
                if not current:
                    assert lease is not None
                    raise RunLeaseLostError(run_lease_lost_message(lease))
                connection.executemany(
                    "INSERT INTO messages (thread_id, seq, json) VALUES (?, ?, ?)",
                    [(key, last + offset, raw) for offset, raw in enumerate(encoded, start=1)],
                )

        await self._call(append, pages=1 + sum(map(len, encoded)) // _PAGE_BYTES)

    async def get_messages(self, thread_id: str, *, start: int = 0) -> Sequence[Message]:
        """The thread's messages from index ``start`` on, in the order appended; ``()`` for an
        unknown thread."""
        if start < 0:
            raise ValueError(
                f"get_messages(start={start!r}): start is a count of messages already read and "
                "must be >= 0; pass 0 to read the whole thread"
            )

        def select(connection: sqlite3.Connection) -> list[tuple[int, _Text]]:
            # seq is 1-based and dense per thread, so index `start` is seq `start + 1`.
            return connection.execute(
                "SELECT seq, json FROM messages WHERE thread_id = ? AND seq > ? ORDER BY seq",
                (to_sql_text(thread_id), start),
            ).fetchall()

        rows = await self._call(select)
        try:
            return tuple(decode_message(raw) for _, raw in rows)
        except (ValueError, TypeError):
            for seq, raw in rows:  # find the row, for the message (an error path only)
                try:
                    decode_message(raw)
                except (ValueError, TypeError) as error:
                    what = f"message {seq - 1} (0-based) of thread {thread_id!r}"
                    raise self._unreadable(what, error) from error
            raise

    async def acquire_run(
        self, thread_id: str, *, holder: str, ttl: float, reclaim: bool = False
    ) -> RunLease | None:
        """Take the thread's run lease for ``ttl`` seconds, or ``None`` while another is live.

        With ``reclaim=True`` a live lease of the same ``holder`` is taken over too, with a new
        token and ``interrupted=None``: for resuming a run under the same holder after its
        process died. One transaction, so processes sharing the file never both hold a thread's
        lease (and concurrent reclaims are ordered, the later one's token the greater). Raises
        :class:`ThreadNotFoundError` for an unknown thread, :class:`ValueError` for a ``ttl``
        that is not a number of seconds > 0.
        """
        seconds = check_ttl(ttl, "acquire_run")
        key = to_sql_text(thread_id)
        stored_holder = to_sql_text(holder)

        def acquire(connection: sqlite3.Connection) -> RunLease | None:
            with _transaction(connection):
                if (
                    connection.execute("SELECT 1 FROM threads WHERE id = ?", (key,)).fetchone()
                    is None
                ):
                    raise ThreadNotFoundError(thread_id)
                held: tuple[_Text, float, int] | None = connection.execute(
                    "SELECT holder, expires_at, released FROM run_leases WHERE thread_id = ?",
                    (key,),
                ).fetchone()
                # Read under the write lock: every process's acquisitions are ordered by it.
                now = time.time()
                interrupted: str | None = None
                if held is not None and not held[2]:
                    what = f"the run lease of thread {thread_id!r}"
                    if held[1] > now:
                        if not (reclaim and self._text(held[0], what) == holder):
                            return None
                    else:
                        interrupted = self._text(held[0], what)
                connection.execute(_NEXT_TOKEN)
                (token,) = connection.execute(_TOKEN).fetchone()
                connection.execute(
                    "INSERT OR REPLACE INTO run_leases"
                    " (thread_id, token, holder, expires_at, released) VALUES (?, ?, ?, ?, 0)",
                    (key, token, stored_holder, now + seconds),
                )
            return RunLease(
                thread_id,
                token,
                holder,
                datetime.fromtimestamp(now + seconds, UTC),
                interrupted,
            )

        return await self._call(acquire, pages=2)

    async def renew_run(self, lease: RunLease, *, ttl: float) -> RunLease:
        """Extend ``lease`` to now + ``ttl`` while it is the thread's current lease.

        Raises :class:`ThreadNotFoundError` when the thread is gone and
        :class:`~pai.core.RunLeaseLostError` when the lease was released or taken over.
        """
        seconds = check_ttl(ttl, "renew_run")
        key = to_sql_text(lease.thread_id)

        def renew(connection: sqlite3.Connection) -> RunLease:
            with _transaction(connection):
                if (
                    connection.execute("SELECT 1 FROM threads WHERE id = ?", (key,)).fetchone()
                    is None
                ):
                    raise ThreadNotFoundError(lease.thread_id)
                expires = time.time() + seconds
                renewed = connection.execute(
                    "UPDATE run_leases SET expires_at = ?"
                    " WHERE thread_id = ? AND token = ? AND released = 0",
                    (expires, key, lease.token),
                ).rowcount
                if not renewed:
                    raise RunLeaseLostError(run_lease_lost_message(lease))
            return dataclasses.replace(lease, expires_at=datetime.fromtimestamp(expires, UTC))

        return await self._call(renew, pages=1)

    async def release_run(self, lease: RunLease) -> None:
        """Release ``lease`` if it is the thread's current lease; otherwise do nothing."""
        key = to_sql_text(lease.thread_id)

        def release(connection: sqlite3.Connection) -> None:
            with _transaction(connection):
                connection.execute(
                    "UPDATE run_leases SET released = 1"
                    " WHERE thread_id = ? AND token = ? AND released = 0",
                    (key, lease.token),
                )

        await self._call(release, pages=1)

    # -- blobs ---------------------------------------------------------------------------------

    async def put_blob(self, thread_id: str, key: str, data: bytes) -> None:
        """Store ``data`` under ``key`` in the thread, replacing what was there (one
        transaction).

        Raises :class:`ThreadNotFoundError` for an unknown thread and :class:`ValueError` for
        a key or data over the limits (:data:`~pai.core.ext.MAX_BLOB_KEY_LENGTH`,
        :data:`~pai.core.ext.MAX_BLOB_BYTES`).
        """
        check_blob_key(key, "put_blob")
        data = check_blob_data(data, "put_blob")
        values = (to_sql_text(thread_id), _blob_key(key), data)

        def put(connection: sqlite3.Connection) -> None:
            with _transaction(connection):
                if (
                    connection.execute("SELECT 1 FROM threads WHERE id = ?", values[:1]).fetchone()
                    is None
                ):
                    raise ThreadNotFoundError(thread_id)
                connection.execute(
                    "INSERT INTO blobs (thread_id, key, data) VALUES (?, ?, ?)"
                    " ON CONFLICT (thread_id, key) DO UPDATE SET data = excluded.data",
                    values,
                )

        await self._call(put, pages=2 + len(data) // _PAGE_BYTES)

    async def get_blob(self, thread_id: str, key: str) -> bytes | None:
        """The bytes under ``key`` in the thread; ``None`` when absent (or no such thread)."""
        check_blob_key(key, "get_blob")
        values = (to_sql_text(thread_id), _blob_key(key))

        def get(connection: sqlite3.Connection) -> object:
            row = connection.execute(
                "SELECT data FROM blobs WHERE thread_id = ? AND key = ?", values
            ).fetchone()
            return None if row is None else row[0]

        data = await self._call(get)
        if data is None or type(data) is bytes:
            return data
        error = TypeError(f"a {type(data).__name__} where bytes were stored")
        raise self._unreadable(f"the blob {key!r} of thread {thread_id!r}", error)

    async def delete_blobs(self, thread_id: str, prefix: str) -> int:
        """Delete the thread's blobs whose key starts with ``prefix`` (``""``: all); how many."""
        check_blob_prefix(prefix, "delete_blobs")
        low, high = _blob_key_range(prefix)
        thread_key = to_sql_text(thread_id)

        def delete(connection: sqlite3.Connection) -> int:
            with _transaction(connection):
                if high is None:
                    cursor = connection.execute(
                        "DELETE FROM blobs WHERE thread_id = ?", (thread_key,)
                    )
                else:
                    cursor = connection.execute(
                        "DELETE FROM blobs WHERE thread_id = ? AND key >= ? AND key < ?",
                        (thread_key, low, high),
                    )
                return cursor.rowcount

        return await self._call(delete, pages=2)

    def _text(self, value: _Text, what: str) -> str:
        try:
            return from_sql_text(value)
        except (ValueError, TypeError) as error:
            raise self._unreadable(what, error) from error

    async def aclose(self) -> None:
        """Close the connection. Calling it again does nothing; any other call then raises."""
        await anyio.to_thread.run_sync(self._close)
