"""Executors: one live process per executor id (a lock file per system database and id), and
the heartbeats by which live processes take over the runs of dead ones.

DBOS resumes, at launch, every unfinished run recorded under its executor id. Two live
processes sharing an id would each resume the other's runs while they run, so the engine takes
an exclusive ``flock`` on a file named after the database and the id before it launches DBOS,
and keeps it until it closes. The kernel releases the lock when the process dies, however it
dies (``kill -9`` included), so a restarted process takes it at once.

The guard covers processes on one machine (the default executor id already differs between
machines: it holds the host name). On a system without ``fcntl`` (Windows) there is no guard.

DBOS records no liveness: a run whose process died stays ``PENDING`` under that process's
executor id until a process with the same id starts. So each engine with ``takeover_after`` set
writes a heartbeat (its executor id, application version and the time) into the table
``pai_executors`` of the system database, and looks for executors of its application version
silent for longer than ``takeover_after``. It claims a silent one by deleting its row (one
``DELETE`` that only one live process can win), then has DBOS resume that executor's unfinished
runs, which any live process's queue then takes.
"""

from __future__ import annotations

import hashlib
import os
import socket
import tempfile
from pathlib import Path
from typing import IO, TYPE_CHECKING, Final
from urllib.parse import urlsplit

from pai.durable_dbos._errors import DbosEngineError
from pai.durable_dbos._options import EXECUTOR_VARIABLE, DbosOptions

if TYPE_CHECKING:
    from sqlalchemy import Engine

__all__ = ["TABLE", "ExecutorLock", "Heartbeats", "database_identity"]

TABLE: Final = "pai_executors"
"""The table of executors' heartbeats, beside DBOS's tables (in ``system_schema`` on
PostgreSQL)."""


def database_identity(options: DbosOptions) -> str:
    """What names the system database whatever the spelling of its URL: a SQLite file's absolute
    path, or a server's ``postgresql://user@host:port/database#schema`` (no password, no query)."""
    url = options.system_database_url
    if options.is_sqlite:
        path = url.split("://", 1)[1][1:].split("?", 1)[0]
        return "sqlite:" + os.path.realpath(path)
    split = urlsplit(url)
    host = split.netloc.rpartition("@")[2]
    user = split.username or ""
    return f"postgresql://{user}@{host}{split.path}#{options.system_schema}"


class ExecutorLock:
    """The lock that makes this process the only live holder of ``options.executor_id`` on its
    system database (on this machine)."""

    def __init__(self, options: DbosOptions) -> None:
        self.options: DbosOptions = options
        key = f"{database_identity(options)}\0{options.executor_id}".encode()
        folder = Path(tempfile.gettempdir()) / f"pai-durable-dbos-{_user()}"
        self.path: Path = folder / f"{hashlib.sha256(key).hexdigest()[:32]}.lock"
        """The lock file (its content: the holder's process id, for messages)."""
        self._file: IO[str] | None = None

    def try_acquire(self) -> bool:
        """Take the lock if it is free: ``True``; ``False`` while a live process holds it."""
        try:
            self.acquire()
        except _Held:
            return False
        return True

    def acquire(self) -> None:
        """Take the lock, or raise :class:`DbosEngineError` naming the live holder."""
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: no guard
            return
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        handle = self.path.open("a+")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise _Held(
                f"executor id {self.options.executor_id!r} is held by another live process "
                f"(pid {holder}) on this machine for the DBOS database "
                f"{self.options.display_url}: two live processes with one executor id would "
                f"resume each other's runs. Give each process its own stable id: set "
                f"{EXECUTOR_VARIABLE}=worker-2 (appended to the default id) or "
                "DbosEngine(executor_id=...); or, for a warm standby that takes over when that "
                "process dies, standby=True"
            ) from None
        except BaseException:
            handle.close()
            raise
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        self._file = handle

    def release(self) -> None:
        """Give the lock up (closing the file releases it)."""
        if self._file is not None:
            self._file.close()
            self._file = None


class Heartbeats:
    """The heartbeats of the executors on one system database (blocking calls: run them in a
    thread). Opened on first use; :meth:`close` lets its connection go."""

    def __init__(self, options: DbosOptions) -> None:
        self.options: DbosOptions = options
        self._engine: Engine | None = None
        self._table = TABLE if options.is_sqlite else f'"{options.system_schema}".{TABLE}'

    def _connect(self) -> Engine:
        if self._engine is None:
            import sqlalchemy as sa

            url = sa.make_url(self.options.system_database_url)
            if not self.options.is_sqlite:
                url = url.set(drivername="postgresql+psycopg")
            engine = sa.create_engine(url, pool_size=1, max_overflow=0, pool_pre_ping=True)
            with engine.begin() as connection:
                connection.execute(
                    sa.text(
                        f"CREATE TABLE IF NOT EXISTS {self._table} (executor_id TEXT PRIMARY "
                        "KEY, application_version TEXT NOT NULL, heartbeat_at DOUBLE PRECISION "
                        "NOT NULL, host TEXT NOT NULL, pid INTEGER NOT NULL)"
                    )
                )
            self._engine = engine
        return self._engine

    def beat(self, now: float) -> None:
        """Record that this executor is alive at ``now`` (seconds since the epoch)."""
        import sqlalchemy as sa

        options = self.options
        with self._connect().begin() as connection:
            connection.execute(
                sa.text(
                    f"INSERT INTO {self._table} (executor_id, application_version, "
                    "heartbeat_at, host, pid) VALUES (:id, :version, :now, :host, :pid) "
                    "ON CONFLICT (executor_id) DO UPDATE SET application_version = "
                    "excluded.application_version, heartbeat_at = excluded.heartbeat_at, "
                    "host = excluded.host, pid = excluded.pid"
                ),
                {
                    "id": options.executor_id,
                    "version": options.application_version,
                    "now": now,
                    "host": socket.gethostname()[:255],
                    "pid": os.getpid(),
                },
            )

    def claim_silent(self, now: float, after: float) -> list[str]:
        """The executors of this application version (not this one) silent since before
        ``now - after``, each claimed by this process: its row deleted, so no other process
        claims it too."""
        import sqlalchemy as sa

        options = self.options
        cutoff = now - after
        claimed: list[str] = []
        with self._connect().begin() as connection:
            silent = connection.execute(
                sa.text(
                    f"SELECT executor_id FROM {self._table} WHERE heartbeat_at < :cutoff AND "
                    "application_version = :version AND executor_id <> :id"
                ),
                {
                    "cutoff": cutoff,
                    "version": options.application_version,
                    "id": options.executor_id,
                },
            ).scalars()
            candidates = [str(value) for value in silent]
        for executor in candidates:
            with self._connect().begin() as connection:
                deleted = connection.execute(
                    sa.text(
                        f"DELETE FROM {self._table} WHERE executor_id = :id AND "
                        "heartbeat_at < :cutoff"
                    ),
                    {"id": executor, "cutoff": cutoff},
                )
                if deleted.rowcount == 1:
                    claimed.append(executor)
        return claimed

    def close(self) -> None:
        engine, self._engine = self._engine, None
        if engine is not None:
            engine.dispose()


class _Held(DbosEngineError):
    """The executor id is held by another live process."""


def _user() -> str:
    getuid = getattr(os, "getuid", None)
    return str(getuid()) if getuid is not None else "user"
