"""One live process per executor id: a lock file per (system database, executor id).

DBOS resumes, at launch, every unfinished run recorded under its executor id. Two live
processes sharing an id would each resume the other's runs while they run, so the engine takes
an exclusive ``flock`` on a file named after the database and the id before it launches DBOS,
and keeps it until it closes. The kernel releases the lock when the process dies, however it
dies (``kill -9`` included), so a restarted process takes it at once.

The guard covers processes on one machine (the default executor id already differs between
machines: it holds the host name). On a system without ``fcntl`` (Windows) there is no guard.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import IO
from urllib.parse import urlsplit

from pai.durable_dbos._errors import DbosEngineError
from pai.durable_dbos._options import EXECUTOR_VARIABLE, DbosOptions

__all__ = ["ExecutorLock", "database_identity"]


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


class _Held(DbosEngineError):
    """The executor id is held by another live process."""


def _user() -> str:
    getuid = getattr(os, "getuid", None)
    return str(getuid()) if getuid is not None else "user"
