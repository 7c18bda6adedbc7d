"""psycopg's errors as pai-core's :class:`~pai.core.StorageError` family, each message naming the
server (the URL, password masked), what went wrong, and what to do.

================================  ==========================================================
what happened                     raised
================================  ==========================================================
nothing listens, unknown host,    :class:`~pai.core.StorageAccessError` (``path`` is the
no answer in time, bad password,  masked URL)
no such database or role, no
permission, no free connection
the tables are missing, another   :class:`~pai.core.StorageSchemaError`
program's, or newer
the connection was lost and a     :class:`ConnectionLostError` (a
write's outcome is unknown        :class:`~pai.core.StorageAccessError`)
anything else                     :class:`~pai.core.StorageError`
================================  ==========================================================

A libpq message never holds the password (libpq does not echo it); every message is still
passed through :func:`~pai.storage_postgres._options.mask_url`.
"""

from __future__ import annotations

from typing import Final

import psycopg
from psycopg import errors as pg_errors

from pai.core import StorageAccessError, StorageError, StorageSchemaError
from pai.storage_postgres._options import mask_url

__all__ = [
    "ConnectionLostError",
    "connection_failure",
    "is_connection_error",
    "query_failure",
]

_CONNECTION_CLASS: Final = "08"
"""SQLSTATE class of connection exceptions."""
_RESTARTING: Final = frozenset({"57P01", "57P02", "57P03", "57P05"})
"""admin_shutdown, crash_shutdown, cannot_connect_now, idle_session_timeout: the server ended
the session or is starting; a new connection may work."""


class ConnectionLostError(StorageAccessError):
    """The connection to PostgreSQL broke while a write was being committed, and whether it was
    committed cannot be learnt (the server did not come back within ``connect_timeout``). Read
    the thread to see what it holds before writing again."""


def _libpq_text(error: BaseException) -> str:
    """psycopg's message without its ``connection failed:`` prefix, on one line, masked."""
    text = str(error).strip().removeprefix("connection failed:").strip()
    text = " ".join(part.strip() for part in text.splitlines() if part.strip())
    return mask_url(text) or type(error).__name__


def is_connection_error(error: BaseException) -> bool:
    """Whether ``error`` says the connection (not the statement) failed: a new connection, or
    the same statement on one, may succeed."""
    if isinstance(error, psycopg.OperationalError | psycopg.InterfaceError):
        sqlstate = getattr(error, "sqlstate", None)
        if sqlstate is None or sqlstate.startswith(_CONNECTION_CLASS) or sqlstate in _RESTARTING:
            return True
    return False


def connection_failure(error: BaseException, display: str, *, timeout: float) -> StorageError:
    """The error for a connection PostgreSQL refused or never made (bad host, password, ...)."""
    text = _libpq_text(error)
    lowered = text.lower()
    where = f"cannot connect to PostgreSQL at {display}"
    if "password authentication failed" in lowered or "authentication failed" in lowered:
        fix = (
            "the password or the user is wrong; fix the password (in the URL's user:password@, "
            "PGPASSWORD, or the variable password_env names) or the user"
        )
    elif "no password supplied" in lowered:
        fix = (
            "the server asks for a password and none was given; put it in PGPASSWORD, in a "
            "variable that password_env names (?password_env=PAI_DB_PASSWORD), or in the URL"
        )
    elif "database" in lowered and "does not exist" in lowered:
        fix = (
            "no such database on that server; create it (createdb, or CREATE DATABASE) or fix "
            "the database name at the end of the URL"
        )
    elif "role" in lowered and "does not exist" in lowered:
        fix = (
            "no such user (role) on that server; create it (CREATE ROLE ... LOGIN) or fix the user"
        )
    elif "connection refused" in lowered:
        fix = (
            "nothing listens at that host and port; start the server, or fix the host and port "
            "in the URL"
        )
    elif "could not translate host name" in lowered or "name or service not known" in lowered:
        fix = "the host name is unknown; fix the host in the URL"
    elif "timeout expired" in lowered or "timed out" in lowered:
        fix = (
            f"no answer within {timeout:g} s (connect_timeout); check that the server is up "
            "and reachable, or raise connect_timeout"
        )
    elif "too many clients" in lowered or "remaining connection slots" in lowered:
        fix = (
            "the server has no free connection slot; lower pool_max_size (each process keeps "
            "up to that many) or raise the server's max_connections"
        )
    elif "no pg_hba.conf entry" in lowered:
        fix = "the server's pg_hba.conf does not let this user in from here; add an entry for it"
    elif "starting up" in lowered or "shutting down" in lowered or "in recovery" in lowered:
        fix = f"the server is not accepting connections yet; it did not within {timeout:g} s"
    else:
        fix = "check the URL and that the server is up"
    return StorageAccessError(f"{where}: {text}; {fix}", path=display)


def query_failure(error: BaseException, display: str, *, schema: str, doing: str) -> StorageError:
    """The error for a statement PostgreSQL refused while ``doing`` something."""
    text = _libpq_text(error)
    sqlstate = getattr(error, "sqlstate", None) or ""
    where = f"PostgreSQL at {display}"
    if isinstance(
        error, pg_errors.UndefinedTable | pg_errors.InvalidSchemaName | pg_errors.UndefinedColumn
    ):
        return StorageSchemaError(
            f"{where} lacks the tables of pai-storage-postgres in schema {schema!r} ({text}) "
            f"while {doing}; run `pai storage migrate` (or open the storage with migrate=true), "
            "or check the schema option",
            path=display,
        )
    if isinstance(error, pg_errors.InsufficientPrivilege):
        return StorageAccessError(
            f"{where} refused {doing}: {text}; grant this user the rights on schema "
            f"{schema!r} and its tables (or its CREATE right for migrations), or connect as "
            "their owner",
            path=display,
        )
    if isinstance(error, pg_errors.ReadOnlySqlTransaction):
        return StorageAccessError(
            f"{where} is read-only ({text}) while {doing}; point the URL at the primary "
            "(target_session_attrs=read-write picks it among several hosts)",
            path=display,
        )
    if isinstance(
        error, pg_errors.DiskFull | pg_errors.OutOfMemory | pg_errors.ProgramLimitExceeded
    ):
        return StorageAccessError(
            f"{where} could not finish {doing}: {text}; free space on the server, or store "
            "smaller messages",
            path=display,
        )
    if is_connection_error(error):
        return StorageAccessError(
            f"the connection to {where} broke while {doing} ({text}) and did not come back; "
            "check the server, then try again",
            path=display,
        )
    code = f" [{sqlstate}]" if sqlstate else ""
    return StorageError(f"{where} failed while {doing}: {type(error).__name__}{code}: {text}")
