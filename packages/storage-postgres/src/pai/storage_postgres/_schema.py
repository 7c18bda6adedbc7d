"""The tables, as versioned migrations, and applying them once however many processes start.

Each migration is a list of statements run in one transaction together with the row recording
it in ``pai_schema_migrations`` (version, name, when). :func:`migrate` holds a transaction-level
advisory lock keyed by the schema name while it reads the version and applies what is pending,
so ten processes opening a fresh database at once apply each migration exactly once: the first
applies them, the others wait for it and then find nothing to do. Opening a storage whose schema
is already current takes no lock (:func:`schema_version` reads the version first).

A schema newer than this code knows (a later pai-storage-postgres migrated it) is refused with a
:class:`~pai.core.StorageSchemaError`, and so is a schema holding tables of the same names that
no migration made (another program's); nothing is changed in either case.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from pai.core import StorageSchemaError
from pai.storage_postgres._options import quote_identifier

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = [
    "LATEST_VERSION",
    "MIGRATIONS",
    "Migration",
    "SchemaStatus",
    "migrate",
    "schema_status",
]


@dataclass(frozen=True, slots=True)
class Migration:
    """One step of the schema: its version, a name saying what it does, and its statements
    (``{schema}`` stands for the quoted schema name)."""

    version: int
    name: str
    statements: tuple[str, ...]


MIGRATIONS: Final = (
    Migration(
        1,
        "threads, messages and run leases",
        (
            # Strings are bytea (see _codec): text cannot hold NUL or lone surrogates.
            """CREATE TABLE {schema}.threads (
                id bytea PRIMARY KEY,
                scope_key bytea NOT NULL,
                agent_name bytea NOT NULL,
                parent_thread_id bytea,
                created_at text NOT NULL,
                seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
                message_count bigint NOT NULL DEFAULT 0
            )""",
            "CREATE INDEX threads_by_scope ON {schema}.threads (scope_key, parent_thread_id, seq)",
            "CREATE INDEX threads_by_parent ON {schema}.threads (parent_thread_id)",
            """CREATE TABLE {schema}.messages (
                thread_id bytea NOT NULL REFERENCES {schema}.threads (id) ON DELETE CASCADE,
                position bigint NOT NULL,
                body bytea NOT NULL,
                PRIMARY KEY (thread_id, position)
            )""",
            "CREATE SEQUENCE {schema}.run_lease_tokens AS bigint",
            """CREATE TABLE {schema}.run_leases (
                thread_id bytea PRIMARY KEY REFERENCES {schema}.threads (id) ON DELETE CASCADE,
                token bigint NOT NULL,
                holder bytea NOT NULL,
                expires_at timestamptz NOT NULL,
                released boolean NOT NULL DEFAULT false,
                interrupted bytea
            )""",
        ),
    ),
    Migration(
        2,
        "runs and their frames (the run channel)",
        (
            """CREATE TABLE {schema}.runs (
                run_id bytea PRIMARY KEY,
                thread_id bytea NOT NULL,
                scope_key bytea NOT NULL,
                agent bytea NOT NULL,
                protocol bytea NOT NULL,
                limit_key bytea NOT NULL,
                frame_count bigint NOT NULL DEFAULT 0,
                alive_at timestamptz NOT NULL DEFAULT clock_timestamp(),
                read_at timestamptz,
                finished_at timestamptz,
                cancel_reason bytea
            )""",
            # One live run per thread: two processes beginning runs on a thread let one win.
            "CREATE UNIQUE INDEX runs_live_by_thread ON {schema}.runs (thread_id)"
            " WHERE finished_at IS NULL",
            "CREATE INDEX runs_live_by_key ON {schema}.runs (limit_key) WHERE finished_at IS NULL",
            "CREATE INDEX runs_live_by_alive ON {schema}.runs (alive_at) WHERE finished_at IS NULL",
            "CREATE INDEX runs_by_finish ON {schema}.runs (finished_at)"
            " WHERE finished_at IS NOT NULL",
            """CREATE TABLE {schema}.run_frames (
                run_id bytea NOT NULL REFERENCES {schema}.runs (run_id) ON DELETE CASCADE,
                position bigint NOT NULL,
                body bytea NOT NULL,
                PRIMARY KEY (run_id, position)
            )""",
        ),
    ),
    Migration(
        3,
        "blobs kept with a thread",
        (
            # key is bytea like every string, so it compares bytewise: a prefix is a key range.
            """CREATE TABLE {schema}.blobs (
                thread_id bytea NOT NULL REFERENCES {schema}.threads (id) ON DELETE CASCADE,
                key bytea NOT NULL,
                data bytea NOT NULL,
                PRIMARY KEY (thread_id, key)
            )""",
        ),
    ),
)
"""Every migration, oldest first. Append new ones; never change a released one."""

LATEST_VERSION: Final = MIGRATIONS[-1].version

_TABLES: Final = (
    "threads",
    "messages",
    "run_leases",
    "run_lease_tokens",
    "runs",
    "run_frames",
    "blobs",
)
"""What the migrations create: a schema at version 0 holding one of these is another program's."""

_LOCK_CLASS: Final = 0x70616900
"""The first key of the advisory lock (``pai\\0``); the second is the schema name's hash."""

_LEDGER: Final = """CREATE TABLE IF NOT EXISTS {schema}.pai_schema_migrations (
    version integer PRIMARY KEY,
    name text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)"""


@dataclass(frozen=True, slots=True)
class SchemaStatus:
    """Where a storage's schema stands: ``current`` (0 for none yet) against ``latest``, and
    the names of the migrations ``applied`` and ``pending``. ``location`` names the database
    (the URL, password masked) and ``schema`` the schema.

    Example::

        status = await storage.schema_status()
        if status.pending:
            print(f"{len(status.pending)} migration(s) pending; run pai storage migrate")
    """

    location: str
    schema: str
    current: int
    latest: int
    applied: tuple[str, ...]
    pending: tuple[str, ...]
    exists: bool
    """Whether the schema itself exists (``False``: not created yet; migrating creates it)."""
    just_applied: tuple[str, ...] = ()
    """The migrations the :meth:`~pai.storage_postgres.PostgresStorage.migrate` call that
    returned this status applied (``()``: none were pending, or another process applied them)."""


def _sql(template: str, schema: str) -> bytes:
    return template.replace("{schema}", quote_identifier(schema)).encode()


async def _read(conn: AsyncConnection, schema: str, location: str) -> tuple[bool, int, list[int]]:
    """Whether the schema exists, and the versions its ledger records (none: ``[]``)."""
    cur = await conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = %s),"
        " to_regclass(%s) IS NOT NULL",
        (schema, f"{quote_identifier(schema)}.pai_schema_migrations"),
    )
    row = await cur.fetchone()
    assert row is not None
    exists, has_ledger = bool(row[0]), bool(row[1])
    if not has_ledger:
        if exists:
            cur = await conn.execute(
                "SELECT relname FROM pg_class JOIN pg_namespace ON pg_namespace.oid = relnamespace"
                " WHERE nspname = %s AND relname = ANY(%s) ORDER BY relname",
                (schema, list(_TABLES)),
            )
            foreign = [str(name) for (name,) in await cur.fetchall()]
            if foreign:
                raise StorageSchemaError(
                    f"schema {schema!r} of PostgreSQL at {location} holds "
                    f"{', '.join(repr(name) for name in foreign)} but no pai_schema_migrations "
                    "table: those are another program's tables, not pai-storage-postgres's. "
                    "Keep the threads in a schema of their own (the schema option, e.g. "
                    "?schema=pai); nothing was changed",
                    path=location,
                )
        return exists, 0, []
    cur = await conn.execute(
        _sql("SELECT version FROM {schema}.pai_schema_migrations ORDER BY version", schema)
    )
    versions = [int(version) for (version,) in await cur.fetchall()]
    if versions and versions[-1] > LATEST_VERSION:
        raise StorageSchemaError(
            f"schema {schema!r} of PostgreSQL at {location} is at version {versions[-1]}, newer "
            f"than this pai-storage-postgres knows ({LATEST_VERSION}); upgrade "
            "pai-storage-postgres in every process that uses it, or use another schema (the "
            "schema option); nothing was changed",
            path=location,
        )
    return exists, (versions[-1] if versions else 0), versions


def _status(
    location: str, schema: str, exists: bool, versions: list[int], applied: tuple[str, ...] = ()
) -> SchemaStatus:
    done = set(versions)
    return SchemaStatus(
        location=location,
        schema=schema,
        current=max(done, default=0),
        latest=LATEST_VERSION,
        applied=tuple(f"{m.version}: {m.name}" for m in MIGRATIONS if m.version in done),
        pending=tuple(f"{m.version}: {m.name}" for m in MIGRATIONS if m.version not in done),
        exists=exists,
        just_applied=applied,
    )


async def schema_status(conn: AsyncConnection, schema: str, location: str) -> SchemaStatus:
    """Where ``schema`` stands, read without changing anything (no lock taken)."""
    exists, _, versions = await _read(conn, schema, location)
    return _status(location, schema, exists, versions)


async def migrate(conn: AsyncConnection, schema: str, location: str) -> SchemaStatus:
    """Apply the pending migrations of ``schema`` (creating it when missing), under an advisory
    lock so that concurrent callers apply each one once. Returns the status after, with the
    migrations this call applied (``()`` when another process had)."""
    exists, current, versions = await _read(conn, schema, location)
    if current == LATEST_VERSION:
        return _status(location, schema, exists, versions)
    applied: list[str] = []
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_LOCK_CLASS, schema))
        # Read again under the lock: another process may have migrated meanwhile.
        exists, current, versions = await _read(conn, schema, location)
        if not exists:
            await conn.execute(_sql("CREATE SCHEMA {schema}", schema))
        await conn.execute(_sql(_LEDGER, schema))
        for migration in MIGRATIONS:
            if migration.version in versions:
                continue
            for statement in migration.statements:
                await conn.execute(_sql(statement, schema))
            await conn.execute(
                _sql(
                    "INSERT INTO {schema}.pai_schema_migrations (version, name) VALUES (%s, %s)",
                    schema,
                ),
                (migration.version, migration.name),
            )
            applied.append(f"{migration.version}: {migration.name}")
            versions.append(migration.version)
    return _status(location, schema, True, versions, tuple(applied))
