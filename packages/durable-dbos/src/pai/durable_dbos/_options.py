"""Options of :class:`~pai.durable_dbos.DbosEngine`, validated before DBOS is imported.

Every message that shows the system database's URL shows it through :func:`mask_url`: the
password of ``user:password@`` (and a ``password=`` query parameter) is replaced by ``***``.
"""

from __future__ import annotations

import math
import os
import re
import socket
from typing import Annotated, Any, ClassVar, Final

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "DEFAULT_APPLICATION_VERSION",
    "EXECUTOR_VARIABLE",
    "DbosOptions",
    "default_executor_id",
    "mask_url",
]

DEFAULT_APPLICATION_VERSION: Final = "pai-durable-1"
"""The application version PAI's workflows are recorded under. It names the layout of PAI's
steps (the workflow's name, its input, the step names of ``pai.core``'s durable runs), not a
release of your code: it changes only when a release of PAI records runs that an older one
cannot replay, or the reverse. DBOS recovers only the workflows of its own application version,
so a version derived from the source (DBOS's default) would strand every run in flight at each
deploy."""

EXECUTOR_VARIABLE: Final = "PAI_DURABLE_EXECUTOR"
"""The environment variable that tells processes on one machine apart in the default executor
id (``worker-1``, ``worker-2``, ...)."""

_SCHEMES: Final = ("sqlite", "postgresql", "postgres", "postgresql+psycopg")
_USERINFO: Final = re.compile(
    r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^:/?#@]*):[^@/?#]*@"
)
_QUERY_SECRET: Final = re.compile(r"(?P<key>[?&](?:password|sslpassword)=)[^&#]*", re.IGNORECASE)
_APP_NAME: Final = re.compile(r"[a-z0-9_-]{3,256}")
_SCHEMA: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_EXECUTOR_ID: Final = re.compile(r"[A-Za-z0-9_.:@/+-]{1,128}")


def mask_url(url: str) -> str:
    """``url`` as it may be printed: the password of ``user:password@`` and a ``password=``
    query parameter replaced by ``***``.

    Example::

        mask_url("postgresql://app:s3cret@db/runs") == "postgresql://app:***@db/runs"
    """
    masked = _USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:***@", url, count=1)
    return _QUERY_SECRET.sub(lambda m: f"{m['key']}***", masked)


def default_executor_id() -> str:
    """``pai:<host name>``, or ``pai:<host name>:<PAI_DURABLE_EXECUTOR>`` when that variable is
    set: the same after a restart of the process on the same machine (so the restarted process
    resumes the runs its predecessor left), different on every machine."""
    host = socket.gethostname() or "localhost"
    extra = os.environ.get(EXECUTOR_VARIABLE, "").strip()
    return f"pai:{host}:{extra}" if extra else f"pai:{host}"


class DbosOptions(BaseModel):
    """How :class:`~pai.durable_dbos.DbosEngine` runs DBOS.

    ``system_database_url`` is where DBOS records workflows and their steps:
    ``sqlite:///runs.sqlite`` (a file; one machine) or ``postgresql://user@host:5432/db`` (many
    processes and machines). It is the only thing DBOS needs in production: no server of its own.

    ``executor_id`` names this process to DBOS. When a process starts, DBOS resumes the
    unfinished runs recorded under its executor id (and only those), so the id must be the same
    when a process restarts and different for every process alive at the same time: two live
    processes sharing one id would each resume the other's runs while they are running. The
    default, ``pai:<host name>`` (see :func:`default_executor_id`), is the same for one process on
    a machine restarting; with several processes on one machine give each its own stable name in
    ``PAI_DURABLE_EXECUTOR`` (``worker-1``, ``worker-2``: it is appended to the default) or set
    ``executor_id``. The engine refuses to start while another live process on this machine holds
    the same id on the same database (a lock file, released when that process dies, even by
    ``kill -9``).

    ``takeover_after`` is how long (seconds) a process may go silent before a live process of
    the same application version resumes its unfinished runs: every engine writes a heartbeat
    into the system database every ``takeover_after / 5`` seconds, and claims the runs of an
    executor whose last heartbeat is older than ``takeover_after`` (one live process claims
    each). A process restarting within that time resumes its own runs. Set it above the longest
    pause a live process may have (and the clock difference between machines); ``None``
    (``false`` in ``pai.toml``) turns takeover off for this process (it neither heartbeats nor takes over): then runs of a process
    that never comes back are resumed by ``pai runs resume`` or a process with its executor id.

    ``application_version`` is the version DBOS records runs under; DBOS resumes only runs of
    its own version. Leave the default (:data:`DEFAULT_APPLICATION_VERSION`): it changes only
    when PAI's step layout does, so runs in flight survive deploys of your code.

    ``recovery_interval`` is how often (seconds) DBOS looks for runs to resume: after a restart,
    the first resumed step starts within about this long. Lower costs a cheap query per poll.

    ``standby=True`` makes a second process with the same executor id wait for the first to
    die (its lock is released by the kernel, ``kill -9`` included) and then resume its runs: a
    restart without the seconds a new process spends importing.

    ``app_name`` is the application name DBOS records with each run (its dashboards and
    ``dbos workflow list`` filter by it). ``system_schema`` is the PostgreSQL schema holding
    DBOS's tables (two apps on one database use two schemas; ignored on SQLite).

    Example::

        DbosOptions(system_database_url="sqlite:///runs.sqlite", recovery_interval=0.25)
    """

    model_config: ClassVar[ConfigDict] = ConfigDict(
        frozen=True, extra="forbid", hide_input_in_errors=True
    )

    system_database_url: Annotated[str, Field(repr=False)]
    """Where DBOS records runs: ``sqlite:///path`` or ``postgresql://...`` (password included:
    shown only through :attr:`display_url`)."""
    app_name: str = "pai"
    """The application name DBOS records with each run."""
    application_version: str = DEFAULT_APPLICATION_VERSION
    """The version runs are recorded (and resumed) under: keep the default."""
    executor_id: str = Field(default_factory=default_executor_id)
    """This process's name to DBOS: stable across restarts, unique among live processes."""
    recovery_interval: float = 1.0
    """Seconds between DBOS's polls for runs to resume (DBOS's own default is 1)."""
    system_schema: str = "dbos"
    """The PostgreSQL schema of DBOS's tables (DBOS's default; ignored on SQLite)."""
    takeover_after: float | None = 30.0
    """Seconds of silence after which another executor's unfinished runs are taken over by a
    live process (``None``, or ``false`` in ``pai.toml``: no heartbeat, no takeover)."""
    standby: bool = False
    """Wait in :meth:`~pai.durable_dbos.DbosEngine.start` while another live process on this
    machine holds the executor id, instead of refusing to start: a warm standby (DBOS already
    imported) that takes over the moment that process dies and resumes its runs at once."""

    @property
    def display_url(self) -> str:
        """:attr:`system_database_url` with its password masked, for messages."""
        return mask_url(self.system_database_url)

    @property
    def is_sqlite(self) -> bool:
        """Whether the system database is a SQLite file."""
        return self.system_database_url.startswith("sqlite:")

    def __repr_args__(self) -> Any:
        yield "system_database_url", self.display_url
        yield from super().__repr_args__()

    @field_validator("system_database_url")
    @classmethod
    def _check_url(cls, url: str) -> str:
        shown = mask_url(url)
        scheme, sep, rest = url.partition("://")
        if not sep or scheme.lower() not in _SCHEMES:
            raise ValueError(
                f"system_database_url {shown!r} is neither sqlite:///<path> nor "
                "postgresql://<user>@<host>:<port>/<database>"
            )
        if scheme.lower() == "sqlite":
            path = rest[1:] if rest.startswith("/") else ""
            if not path or path.startswith(":memory:") or "mode=memory" in path:
                raise ValueError(
                    f"system_database_url {shown!r} names no file: write sqlite:///runs.sqlite "
                    "(relative) or sqlite:////var/lib/app/runs.sqlite (absolute): an in-memory "
                    "database dies with the process, and a durable run must outlive it"
                )
        elif not rest.split("?", 1)[0].strip("/"):
            raise ValueError(f"system_database_url {shown!r} names no server")
        return url

    @field_validator("app_name")
    @classmethod
    def _check_app_name(cls, value: str) -> str:
        if not _APP_NAME.fullmatch(value):
            raise ValueError(
                f"app_name {value!r} must be 3 to 256 lowercase letters, digits, - or _ (DBOS's "
                "rule for application names), e.g. my-app"
            )
        return value

    @field_validator("application_version")
    @classmethod
    def _check_version(cls, value: str) -> str:
        if not value.strip() or len(value) > 128:
            raise ValueError(
                "application_version must be a non-empty name of at most 128 characters"
            )
        return value

    @field_validator("system_schema")
    @classmethod
    def _check_schema(cls, value: str) -> str:
        if not _SCHEMA.fullmatch(value) or value.lower().startswith("pg_"):
            raise ValueError(
                f"system_schema {value!r} must be a plain PostgreSQL name: a letter or _, then "
                "up to 62 letters, digits or _ (not starting with pg_)"
            )
        return value

    @field_validator("executor_id")
    @classmethod
    def _check_executor(cls, value: str) -> str:
        if not _EXECUTOR_ID.fullmatch(value):
            raise ValueError(
                f"executor_id {value!r} must be 1 to 128 letters, digits or _.:@/+- (for "
                "example pai:web-1)"
            )
        return value

    @field_validator("takeover_after", mode="before")
    @classmethod
    def _takeover_off(cls, value: object) -> object:
        # TOML has no null: `takeover_after = false` turns takeover off.
        return None if value is False else value

    @field_validator("takeover_after")
    @classmethod
    def _check_takeover(cls, value: float | None) -> float | None:
        if value is not None and (not math.isfinite(value) or not 0.5 <= value <= 86_400):
            raise ValueError(
                f"takeover_after={value!r} must be from 0.5 to 86400 seconds, or None to turn "
                "takeover off"
            )
        return value

    @field_validator("recovery_interval")
    @classmethod
    def _check_interval(cls, value: float) -> float:
        if not math.isfinite(value) or not 0.01 <= value <= 60:
            raise ValueError(f"recovery_interval={value!r} must be from 0.01 to 60 seconds")
        return value
