""":class:`PostgresStorage`: the :class:`~pai.core.ext.Storage` protocol on PostgreSQL.

Tables (see :mod:`pai.storage_postgres._schema`): ``threads`` (the records, a creation ``seq``
for listing order, and ``message_count``), ``messages`` (one row per message at its 0-based
``position`` in the thread), ``run_leases`` (one row per thread that ever ran) and the sequence
``run_lease_tokens``, and ``blobs`` (:class:`~pai.core.ext.BlobStore`: one row per
``(thread_id, key)``, removed with its thread by the foreign key's cascade). Every string is
``bytea`` (see :mod:`pai.storage_postgres._codec`), blob keys too, so they compare bytewise and
the keys starting with a prefix are one range of the primary key.

How each call keeps the contract across processes:

- an append locks its thread's row (``FOR NO KEY UPDATE``), reads ``message_count`` (and, with a
  lease, checks under ``FOR SHARE`` that the lease is current), then inserts the batch at the
  positions after it and moves ``message_count``, in one transaction: concurrent appends to a
  thread queue on the row lock, so each batch is whole and contiguous, and a deleted thread or a
  lost lease stores nothing;
- a create with a parent holds the parent's row (``FOR KEY SHARE``) until it commits, and a
  delete removes the subtree (a recursive query) and then, in the same transaction, any child
  whose create it waited for, so no delegated thread outlives its deleted parent;
- locks are always taken thread row first, lease row second, so appends, deletes and lease
  calls never deadlock one another;
- a lease's expiry is compared with the server's clock (``clock_timestamp()``), never a
  client's, and its tokens come from one sequence: increasing, never reused.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from psycopg import errors as pg_errors

from pai.core import (
    Message,
    RunLeaseLostError,
    StorageCorruptError,
    ThreadExistsError,
    ThreadNotFoundError,
)
from pai.core.ext import MAX_BLOB_BYTES, MAX_BLOB_KEY_LENGTH, RunLease, ThreadRecord
from pai.storage_postgres._codec import decode_message, decode_text, encode_message, encode_text
from pai.storage_postgres._options import ConnectionSettings, parse_url, quote_identifier
from pai.storage_postgres._pool import Abort, Conn, Connector

if TYPE_CHECKING:
    from pai.storage_postgres._channel import PostgresRunChannel
    from pai.storage_postgres._options import PostgresOptions
    from pai.storage_postgres._schema import SchemaStatus

__all__ = ["PostgresStorage"]

_COLUMNS: Final = "id, scope_key, agent_name, parent_thread_id, created_at"

_STATEMENTS: Final = {
    "get_thread": f"SELECT {_COLUMNS} FROM {{s}}.threads WHERE id = %s",
    "thread_exists": "SELECT EXISTS (SELECT 1 FROM {s}.threads WHERE id = %s)",
    "list_top": f"SELECT {_COLUMNS} FROM {{s}}.threads"
    " WHERE scope_key = %s AND parent_thread_id IS NULL ORDER BY seq",
    "list_children": f"SELECT {_COLUMNS} FROM {{s}}.threads"
    " WHERE scope_key = %s AND parent_thread_id = %s ORDER BY seq",
    "create": "INSERT INTO {s}.threads (id, scope_key, agent_name, parent_thread_id, created_at)"
    " VALUES (%s, %s, %s, NULL, %s) ON CONFLICT (id) DO NOTHING RETURNING seq",
    # The parent's row is held until this commits, so a delete of the parent waits for it and
    # then removes this child too (see delete_more).
    "create_child": "WITH parent AS (SELECT 1 FROM {s}.threads WHERE id = %s FOR KEY SHARE)"
    " INSERT INTO {s}.threads (id, scope_key, agent_name, parent_thread_id, created_at)"
    " SELECT %s, %s, %s, %s, %s FROM (SELECT count(*) FROM parent) AS held"
    " ON CONFLICT (id) DO NOTHING RETURNING seq",
    "delete": """WITH RECURSIVE subtree (id) AS (
            SELECT id FROM {s}.threads WHERE id = %s
            UNION
            SELECT child.id FROM {s}.threads AS child JOIN subtree
                ON child.parent_thread_id = subtree.id
        )
        DELETE FROM {s}.threads AS doomed USING subtree WHERE doomed.id = subtree.id
        RETURNING doomed.id, doomed.parent_thread_id, doomed.seq""",
    "delete_more": """WITH RECURSIVE subtree (id) AS (
            SELECT id FROM {s}.threads WHERE parent_thread_id = ANY(%s)
            UNION
            SELECT child.id FROM {s}.threads AS child JOIN subtree
                ON child.parent_thread_id = subtree.id
        )
        DELETE FROM {s}.threads AS doomed USING subtree WHERE doomed.id = subtree.id
        RETURNING doomed.id, doomed.parent_thread_id, doomed.seq""",
    "append_position": "SELECT message_count FROM {s}.threads WHERE id = %s FOR NO KEY UPDATE",
    # Thread row first, lease row second (the order every call takes them in).
    "append_position_leased": """WITH thread AS (
            SELECT id, message_count FROM {s}.threads WHERE id = %s FOR NO KEY UPDATE
        ), lease AS (
            SELECT lease.token FROM {s}.run_leases AS lease JOIN thread
                ON lease.thread_id = thread.id
            WHERE lease.token = %s AND NOT lease.released FOR SHARE OF lease
        )
        SELECT thread.message_count, EXISTS (SELECT 1 FROM lease) FROM thread""",
    "append": """WITH stored AS (
            INSERT INTO {s}.messages (thread_id, position, body)
            SELECT %s, %s + batch.ord - 1, batch.body
            FROM unnest(%s::bytea[]) WITH ORDINALITY AS batch (body, ord)
        )
        UPDATE {s}.threads SET message_count = %s WHERE id = %s""",
    "lease_current": "SELECT EXISTS (SELECT 1 FROM {s}.run_leases"
    " WHERE thread_id = %s AND token = %s AND NOT released)",
    "messages": "SELECT body FROM {s}.messages"
    " WHERE thread_id = %s AND position >= %s ORDER BY position",
    # One statement for a thread never leased, a released lease and an expired one; a live
    # lease leaves the row as it is and returns nothing. The update draws its token again under
    # the row lock: the one drawn in the SELECT may be older than a token another acquire took
    # and released while this one waited, and a token must be greater than every one before it.
    "acquire": """INSERT INTO {s}.run_leases AS lease
            (thread_id, token, holder, expires_at, released, interrupted)
        SELECT thread.id, nextval({seq}), %s, clock_timestamp() + make_interval(secs => %s),
            false, NULL
        FROM {s}.threads AS thread WHERE thread.id = %s
        ON CONFLICT (thread_id) DO UPDATE SET
            token = nextval({seq}),
            holder = excluded.holder,
            expires_at = excluded.expires_at,
            released = false,
            interrupted = CASE WHEN lease.released THEN NULL ELSE lease.holder END
        WHERE lease.released OR lease.expires_at <= clock_timestamp()
        RETURNING lease.token, lease.expires_at, lease.interrupted""",
    # "acquire" that also takes a live lease of the same holder (a run resumed after its process
    # died). The update draws its token under the row lock, so of concurrent reclaims by one
    # holder (each of which passes the WHERE) the one that updates last has the greatest token;
    # a live lease of the same holder is not interrupted.
    "reclaim": """INSERT INTO {s}.run_leases AS lease
            (thread_id, token, holder, expires_at, released, interrupted)
        SELECT thread.id, nextval({seq}), %s, clock_timestamp() + make_interval(secs => %s),
            false, NULL
        FROM {s}.threads AS thread WHERE thread.id = %s
        ON CONFLICT (thread_id) DO UPDATE SET
            token = nextval({seq}),
            holder = excluded.holder,
            expires_at = excluded.expires_at,
            released = false,
            interrupted = CASE
                WHEN lease.released THEN NULL
                WHEN lease.holder = excluded.holder AND lease.expires_at > clock_timestamp()
                    THEN NULL
                ELSE lease.holder
            END
        WHERE lease.released OR lease.expires_at <= clock_timestamp()
            OR lease.holder = excluded.holder
        RETURNING lease.token, lease.expires_at, lease.interrupted""",
    "renew": "UPDATE {s}.run_leases SET expires_at = clock_timestamp() + make_interval(secs => %s)"
    " WHERE thread_id = %s AND token = %s AND NOT released RETURNING expires_at",
    "release": "UPDATE {s}.run_leases SET released = true"
    " WHERE thread_id = %s AND token = %s AND NOT released",
    # Inserted from the thread's row: no row for an unknown thread; a thread deleted meanwhile
    # is a foreign key violation.
    "put_blob": "INSERT INTO {s}.blobs (thread_id, key, data)"
    " SELECT thread.id, %s, %s FROM {s}.threads AS thread WHERE thread.id = %s"
    " ON CONFLICT (thread_id, key) DO UPDATE SET data = excluded.data RETURNING true",
    "get_blob": "SELECT data FROM {s}.blobs WHERE thread_id = %s AND key = %s",
    "delete_blobs": "WITH gone AS (DELETE FROM {s}.blobs"
    " WHERE thread_id = %s AND key >= %s AND key < %s RETURNING 1) SELECT count(*) FROM gone",
    "delete_all_blobs": "WITH gone AS (DELETE FROM {s}.blobs WHERE thread_id = %s RETURNING 1)"
    " SELECT count(*) FROM gone",
}


def _sql_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _check_ttl(ttl: float, where: str) -> float:
    number = isinstance(ttl, int | float) and not isinstance(ttl, bool)  # pyright: ignore[reportUnnecessaryIsInstance]
    if not number or not math.isfinite(ttl) or ttl <= 0:
        raise ValueError(
            f"{where}(ttl={ttl!r}): a run lease lasts a finite number of seconds > 0, e.g. ttl=30"
        )
    return float(ttl)


def _check_blob_key(key: str, where: str) -> bytes:
    """The stored form of a blob key; a :class:`ValueError` for one outside the limits."""
    if not isinstance(key, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"{where}(key={key!r}): a blob key is a str, e.g. 'step/3/output'")
    if not key or len(key) > MAX_BLOB_KEY_LENGTH:
        raise ValueError(
            f"{where}(key of {len(key)} characters): a blob key is a non-empty str of at most "
            f"{MAX_BLOB_KEY_LENGTH} characters (MAX_BLOB_KEY_LENGTH)"
        )
    return encode_text(key)


def _check_blob_data(data: bytes, where: str) -> bytes:
    if not isinstance(data, bytes):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(
            f"{where}(data of type {type(data).__name__}): a blob is bytes; pass bytes(data)"
        )
    if len(data) > MAX_BLOB_BYTES:
        raise ValueError(
            f"{where}(data of {len(data)} bytes): a blob holds at most {MAX_BLOB_BYTES} bytes "
            "(64 MiB, MAX_BLOB_BYTES); split it over several keys, or keep it elsewhere and "
            "store a reference"
        )
    return data if type(data) is bytes else bytes(data)


def _key_range(prefix: str) -> tuple[bytes, bytes | None]:
    """The stored keys starting with ``prefix`` as a range, ``low <= key < high`` (no ``high``
    for ``""``). UTF-8 never holds a 0xFF byte, so the prefix with its last byte raised by one
    is the least key past every key starting with it."""
    low = encode_text(prefix)
    if not low:
        return low, None
    return low, low[:-1] + bytes([low[-1] + 1])


def _lease_lost(lease: RunLease) -> RunLeaseLostError:
    return RunLeaseLostError(
        f"the run lease {lease.token} of {lease.holder!r} on thread {lease.thread_id!r} is no "
        "longer the thread's current lease (it was released, or taken over after it expired); "
        "nothing was written with it. Acquire the thread's lease again before writing"
    )


def _parent_first(root: bytes, rows: Sequence[tuple[bytes, bytes | None, int]]) -> list[bytes]:
    """The deleted ids, breadth first from ``root`` (each level oldest first)."""
    children: dict[bytes, list[tuple[int, bytes]]] = {}
    ids = {row[0] for row in rows}
    for thread_id, parent_id, seq in rows:
        if parent_id is not None and thread_id != root:
            children.setdefault(parent_id, []).append((seq, thread_id))
    order = [root] if root in ids else []
    seen = set(order)
    index = 0
    while index < len(order):
        for _, child in sorted(children.get(order[index], ())):
            if child not in seen:
                seen.add(child)
                order.append(child)
        index += 1
    # Rows not reached from the root (none, unless the tree changed while deleting) go last.
    order += [row[0] for row in sorted(rows, key=lambda row: row[2]) if row[0] not in seen]
    return order


class PostgresStorage:
    """Threads and messages in PostgreSQL, shared by every process that opens the same database
    and schema.

    ``url`` is a libpq URL, ``postgresql://user:password@host:port/dbname`` (or
    ``postgres://``), whose query may hold this storage's options and libpq's connection
    parameters; the keyword arguments set the same options. Nothing connects until the first
    call, which also creates the tables (or applies pending migrations) unless
    ``migrate=False``. The password comes from the URL, from the environment variable
    ``password_env`` names, or from libpq's own ``PGPASSWORD`` and password file; it never
    appears in a message, a log line or the repr.

    ``source`` says where the URL came from (``"storage.url, pai.toml"``), for messages.
    Works on asyncio and on trio: every call runs on a helper asyncio loop in a thread of the
    storage's own, which holds the pool. Close it with :meth:`aclose` (or ``async with``).

    Example::

        storage = PostgresStorage("postgresql://app@127.0.0.1:5432/app", schema="tenant1")
        runtime = create_agent_runtime(agent=agent, storage=storage, scope_key=...)
    """

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        pool_min_size: int | None = None,
        pool_max_size: int | None = None,
        connect_timeout: float | None = None,
        password_env: str | None = None,
        migrate: bool | None = None,
        source: str = "code",
    ) -> None:
        settings = parse_url(
            url,
            source=source,
            schema=schema,
            pool_min_size=pool_min_size,
            pool_max_size=pool_max_size,
            connect_timeout=connect_timeout,
            password_env=password_env,
            migrate=migrate,
        )
        self._settings: ConnectionSettings = settings
        self._connector = Connector(settings)
        quoted = quote_identifier(settings.options.schema)
        sequence = _sql_literal(f"{quoted}.run_lease_tokens")
        self._sql: dict[str, bytes] = {
            name: template.replace("{s}", quoted).replace("{seq}", sequence).encode()
            for name, template in _STATEMENTS.items()
        }

    @property
    def url(self) -> str:
        """The URL, its password masked (safe to print)."""
        return self._settings.display

    @property
    def options(self) -> PostgresOptions:
        """The options in force (no secret among them)."""
        return self._settings.options

    def __repr__(self) -> str:
        return f"PostgresStorage({self.url!r}, schema={self.options.schema!r})"

    async def __aenter__(self) -> PostgresStorage:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- helpers ---------------------------------------------------------------------------------

    def _record(self, row: tuple[Any, ...]) -> ThreadRecord:
        thread_id, scope_key, agent_name, parent, created_at = row
        try:
            return ThreadRecord(
                id=decode_text(thread_id),
                scope_key=decode_text(scope_key),
                agent_name=decode_text(agent_name),
                parent_thread_id=None if parent is None else decode_text(parent),
                created_at=datetime.fromisoformat(created_at),
            )
        except (ValueError, TypeError) as error:
            raise self._corrupt(f"the thread record {bytes(thread_id)!r}", error) from error

    def _corrupt(self, what: str, error: BaseException) -> StorageCorruptError:
        return StorageCorruptError(
            f"{what} in schema {self.options.schema!r} of PostgreSQL at {self.url} cannot be "
            f"read ({type(error).__name__}: {error}); another program wrote to these tables. "
            "Fix or remove that row; nothing was changed",
            path=self.url,
        )

    async def _fetch(
        self, conn: Conn, name: str, params: Sequence[object], *, binary: bool = False
    ) -> list[tuple[Any, ...]]:
        cursor = conn.cursor(binary=binary)
        await cursor.execute(self._sql[name], params)
        return await cursor.fetchall()

    async def _fetch_one(
        self, conn: Conn, name: str, params: Sequence[object]
    ) -> tuple[Any, ...] | None:
        cursor = await conn.execute(self._sql[name], params)
        return await cursor.fetchone()

    # -- threads ---------------------------------------------------------------------------------

    async def create_thread(self, record: ThreadRecord) -> None:
        """Store a new thread. Raises :class:`~pai.core.ThreadExistsError` if ``record.id`` is
        taken."""
        values = (
            encode_text(record.id),
            encode_text(record.scope_key),
            encode_text(record.agent_name),
        )
        created = record.created_at.isoformat()

        async def create(conn: Conn) -> None:
            if record.parent_thread_id is None:
                row = await self._fetch_one(conn, "create", (*values, created))
            else:
                parent = encode_text(record.parent_thread_id)
                row = await self._fetch_one(
                    conn, "create_child", (parent, *values, parent, created)
                )
            if row is None:
                raise Abort(
                    ThreadExistsError(
                        f"thread {record.id!r} already exists; create the thread with a new "
                        "id, or delete the existing thread first"
                    )
                )

        await self._connector.write(create, doing=f"creating thread {record.id!r}")

    async def get_thread(self, thread_id: str) -> ThreadRecord | None:
        """The thread with this id, or ``None``."""
        key = encode_text(thread_id)

        async def get(conn: Conn) -> tuple[Any, ...] | None:
            return await self._fetch_one(conn, "get_thread", (key,))

        row = await self._connector.read(get, doing=f"reading thread {thread_id!r}")
        return None if row is None else self._record(row)

    async def list_threads(
        self, scope_key: str, *, parent_thread_id: str | None = None
    ) -> Sequence[ThreadRecord]:
        """Threads of a scope, oldest first: top-level ones, or the children of a parent."""
        if parent_thread_id is None:
            name, params = "list_top", (encode_text(scope_key),)
        else:
            name, params = "list_children", (encode_text(scope_key), encode_text(parent_thread_id))

        async def select(conn: Conn) -> list[tuple[Any, ...]]:
            return await self._fetch(conn, name, params)

        rows = await self._connector.read(select, doing=f"listing the threads of {scope_key!r}")
        return tuple(self._record(row) for row in rows)

    async def delete_thread(self, thread_id: str) -> Sequence[str]:
        """Delete the thread, its descendants at any depth, their messages and run leases, in
        one transaction; return the deleted ids, parent first (``()`` for an unknown id)."""
        root = encode_text(thread_id)

        async def delete(conn: Conn) -> list[bytes]:
            rows: list[tuple[bytes, bytes | None, int]] = [
                (bytes(i), None if p is None else bytes(p), int(seq))
                for i, p, seq in await self._fetch(conn, "delete", (root,))
            ]
            found = [row[0] for row in rows]
            while found:
                # Children whose create this delete waited for (see create_child).
                more = [
                    (bytes(i), None if p is None else bytes(p), int(seq))
                    for i, p, seq in await self._fetch(conn, "delete_more", (found,))
                ]
                rows += more
                found = [row[0] for row in more]
            return _parent_first(root, rows)

        deleted = await self._connector.write(delete, doing=f"deleting thread {thread_id!r}")
        return tuple(decode_text(raw) for raw in deleted)

    # -- messages --------------------------------------------------------------------------------

    async def append_messages(
        self, thread_id: str, messages: Sequence[Message], *, lease: RunLease | None = None
    ) -> None:
        """Append all of ``messages`` to the thread in one transaction: all are stored, in
        order and contiguous, or none.

        Raises :class:`~pai.core.ThreadNotFoundError` for an unknown or deleted thread, and,
        with ``lease``, :class:`~pai.core.RunLeaseLostError` when it is not the thread's
        current run lease (nothing is stored then).
        """
        # Serialized before any I/O: a message that cannot be serialized writes nothing.
        bodies = [encode_message(message) for message in messages]
        key = encode_text(thread_id)
        if not bodies:
            await self._check_append(thread_id, key, lease)
            return

        async def append(conn: Conn) -> None:
            if lease is None:
                row = await self._fetch_one(conn, "append_position", (key,))
                current = True
            else:
                row = await self._fetch_one(conn, "append_position_leased", (key, lease.token))
                current = row is not None and bool(row[1])
            if row is None:
                raise Abort(ThreadNotFoundError(thread_id))
            if not current:
                assert lease is not None
                raise Abort(_lease_lost(lease))
            count = int(row[0])
            # Not fetched: it goes with COMMIT in one round trip.
            await conn.execute(self._sql["append"], (key, count, bodies, count + len(bodies), key))

        await self._connector.write(
            append, doing=f"appending {len(bodies)} message(s) to thread {thread_id!r}"
        )

    async def _check_append(self, thread_id: str, key: bytes, lease: RunLease | None) -> None:
        """An empty append: the thread must exist and the lease be current all the same."""

        async def check(conn: Conn) -> tuple[bool, bool]:
            exists = await self._fetch_one(conn, "thread_exists", (key,))
            if lease is None:
                return bool(exists and exists[0]), True
            current = await self._fetch_one(conn, "lease_current", (key, lease.token))
            return bool(exists and exists[0]), bool(current and current[0])

        exists, current = await self._connector.read(check, doing=f"checking thread {thread_id!r}")
        if not exists:
            raise ThreadNotFoundError(thread_id)
        if not current:
            assert lease is not None
            raise _lease_lost(lease)

    async def get_messages(self, thread_id: str, *, start: int = 0) -> Sequence[Message]:
        """The thread's messages from index ``start`` on (0-based), in the order appended;
        ``()`` for an unknown thread. A negative ``start`` is a :class:`ValueError`."""
        if start < 0:
            raise ValueError(
                f"get_messages(start={start!r}): start is a count of messages already read and "
                "must be >= 0; pass 0 to read the whole thread"
            )
        key = encode_text(thread_id)

        async def select(conn: Conn) -> list[tuple[Any, ...]]:
            return await self._fetch(conn, "messages", (key, start), binary=True)

        rows = await self._connector.read(select, doing=f"reading thread {thread_id!r}")
        messages: list[Message] = []
        for index, (body,) in enumerate(rows, start=start):
            try:
                messages.append(decode_message(bytes(body)))
            except ValueError as error:
                raise self._corrupt(
                    f"message {index} (0-based) of thread {thread_id!r}", error
                ) from error
        return tuple(messages)

    # -- run leases ------------------------------------------------------------------------------

    async def acquire_run(
        self, thread_id: str, *, holder: str, ttl: float, reclaim: bool = False
    ) -> RunLease | None:
        """Take the thread's run lease for ``ttl`` seconds (by the server's clock), or return
        ``None`` while another lease is live. See :class:`~pai.core.ext.RunLease`.

        With ``reclaim=True`` a live lease of the same ``holder`` is taken over too, with a new
        token and ``interrupted=None``: for resuming a run under the same holder after its
        process died. One statement either way; concurrent reclaims by one holder queue on the
        lease row, and the one that takes it last gets the greatest token."""
        seconds = _check_ttl(ttl, "acquire_run")
        key = encode_text(thread_id)
        statement = "reclaim" if reclaim else "acquire"

        async def acquire(conn: Conn) -> RunLease | None:
            try:
                row = await self._fetch_one(conn, statement, (encode_text(holder), seconds, key))
            except pg_errors.ForeignKeyViolation:  # the thread was deleted meanwhile
                raise Abort(ThreadNotFoundError(thread_id)) from None
            if row is not None:
                token, expires_at, interrupted = row
                return RunLease(
                    thread_id=thread_id,
                    token=int(token),
                    holder=holder,
                    expires_at=expires_at.astimezone(UTC),
                    interrupted=None if interrupted is None else decode_text(interrupted),
                )
            exists = await self._fetch_one(conn, "thread_exists", (key,))
            if not (exists and exists[0]):
                raise Abort(ThreadNotFoundError(thread_id))
            return None

        return await self._connector.write(acquire, doing=f"acquiring thread {thread_id!r}")

    async def renew_run(self, lease: RunLease, *, ttl: float) -> RunLease:
        """Extend ``lease`` to now + ``ttl`` while it is the thread's current lease, expired or
        not; :class:`~pai.core.RunLeaseLostError` when it is not,
        :class:`~pai.core.ThreadNotFoundError` when the thread is gone."""
        seconds = _check_ttl(ttl, "renew_run")
        key = encode_text(lease.thread_id)

        async def renew(conn: Conn) -> tuple[datetime | None, bool]:
            row = await self._fetch_one(conn, "renew", (seconds, key, lease.token))
            if row is not None:
                return row[0], True
            exists = await self._fetch_one(conn, "thread_exists", (key,))
            return None, bool(exists and exists[0])

        # Renewing twice is harmless, so a renewal whose connection broke is simply run again.
        expires_at, exists = await self._connector.read(
            renew, doing=f"renewing the run lease on thread {lease.thread_id!r}"
        )
        if expires_at is None:
            if not exists:
                raise ThreadNotFoundError(lease.thread_id)
            raise _lease_lost(lease)
        return RunLease(
            thread_id=lease.thread_id,
            token=lease.token,
            holder=lease.holder,
            expires_at=expires_at.astimezone(UTC),
            interrupted=lease.interrupted,
        )

    async def release_run(self, lease: RunLease) -> None:
        """Mark ``lease`` released if it is current; otherwise do nothing (idempotent)."""
        key = encode_text(lease.thread_id)

        async def release(conn: Conn) -> None:
            await conn.execute(self._sql["release"], (key, lease.token))

        await self._connector.read(
            release, doing=f"releasing the run lease on thread {lease.thread_id!r}"
        )

    # -- blobs -----------------------------------------------------------------------------------

    async def put_blob(self, thread_id: str, key: str, data: bytes) -> None:
        """Store ``data`` under ``key`` in the thread, replacing what was there (one statement).

        Raises :class:`~pai.core.ThreadNotFoundError` for an unknown or deleted thread and
        :class:`ValueError` for a key or data over the limits
        (:data:`~pai.core.ext.MAX_BLOB_KEY_LENGTH`, :data:`~pai.core.ext.MAX_BLOB_BYTES`).
        """
        stored_key = _check_blob_key(key, "put_blob")
        data = _check_blob_data(data, "put_blob")
        thread_key = encode_text(thread_id)

        async def put(conn: Conn) -> None:
            try:
                row = await self._fetch_one(conn, "put_blob", (stored_key, data, thread_key))
            except pg_errors.ForeignKeyViolation:  # the thread was deleted meanwhile
                raise Abort(ThreadNotFoundError(thread_id)) from None
            if row is None:
                raise Abort(ThreadNotFoundError(thread_id))

        await self._connector.write(
            put, doing=f"storing blob {key!r} ({len(data)} bytes) in thread {thread_id!r}"
        )

    async def get_blob(self, thread_id: str, key: str) -> bytes | None:
        """The bytes under ``key`` in the thread; ``None`` when absent (or no such thread)."""
        params = (encode_text(thread_id), _check_blob_key(key, "get_blob"))

        async def get(conn: Conn) -> list[tuple[Any, ...]]:
            return await self._fetch(conn, "get_blob", params, binary=True)

        rows = await self._connector.read(
            get, doing=f"reading blob {key!r} of thread {thread_id!r}"
        )
        return bytes(rows[0][0]) if rows else None

    async def delete_blobs(self, thread_id: str, prefix: str) -> int:
        """Delete the thread's blobs whose key starts with ``prefix`` (``""``: all); how many."""
        if not isinstance(prefix, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(
                f"delete_blobs(prefix={prefix!r}): a key prefix is a str ('' for every key)"
            )
        low, high = _key_range(prefix)
        thread_key = encode_text(thread_id)
        if high is None:
            name, params = "delete_all_blobs", (thread_key,)
        else:
            name, params = "delete_blobs", (thread_key, low, high)

        async def delete(conn: Conn) -> int:
            row = await self._fetch_one(conn, name, params)
            return 0 if row is None else int(row[0])

        return await self._connector.write(
            delete, doing=f"deleting blobs {prefix!r}* of thread {thread_id!r}"
        )

    # -- schema ----------------------------------------------------------------------------------

    def run_channel(self, *, retain_finished: float = 300.0) -> PostgresRunChannel:
        """A run channel over this database (:class:`~pai.core.ext.RunChannel`): served runs are
        read, resumed and cancelled from every process that opens it. It uses this storage's
        connections; ended runs are kept ``retain_finished`` seconds."""
        from pai.storage_postgres._channel import PostgresRunChannel

        return PostgresRunChannel(self._connector, retain_finished=retain_finished)

    async def schema_status(self) -> SchemaStatus:
        """Where this storage's schema stands (version, applied and pending migrations), read
        without changing anything. ``pai storage check`` prints it."""
        return await self._connector.schema_status()

    async def migrate(self) -> SchemaStatus:
        """Apply the pending migrations (creating the schema when missing), once however many
        processes call it at the same time; ``pai storage migrate`` runs it."""
        return await self._connector.migrate()

    async def aclose(self) -> None:
        """Close the connection pools. Calling it again does nothing; any other call then
        raises :class:`~pai.core.StorageError`."""
        await self._connector.aclose()
