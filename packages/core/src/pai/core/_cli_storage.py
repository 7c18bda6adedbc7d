"""``pai storage check`` and ``pai storage migrate``: where the configured storage's schema
stands, and bringing it up to date.

The storage is the one ``[storage] url`` (or ``PAI_STORAGE__URL``) configures. A backend with a
versioned schema of its own (pai-storage-postgres) implements :class:`MigratableStorage`
(``schema_status()`` and ``migrate()``), and the commands call it. SQLite keeps its version in
the file (``PRAGMA user_version``) and migrates itself whenever it is opened: ``check`` reads
that version without opening the database for writing, and ``migrate`` opens it. An in-process
store keeps nothing and has nothing to migrate; another backend without the methods manages its
own schema, and the commands say so.

Exit status: 0 when the schema is current (or there is nothing to migrate), 1 when migrations
are pending (``check``) or the storage cannot be reached or migrated (the reason on stderr), 2
for a configuration mistake.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, Protocol, TypeVar, runtime_checkable

import click

from pai.core.cli import echo_json, json_option

if TYPE_CHECKING:
    from pai.core._config import PaiConfig
    from pai.core._storage import Storage

_R = TypeVar("_R")

EXIT_PENDING = 1
"""The exit status of ``pai storage check`` when migrations are pending or the storage cannot be
reached, and of ``pai storage migrate`` when it failed."""


class SchemaReport(Protocol):
    """Where a storage's schema stands, as a backend reports it."""

    @property
    def location(self) -> str:
        """The storage (its URL, password masked)."""
        ...

    @property
    def schema(self) -> str:
        """The schema (namespace) the tables live in."""
        ...

    @property
    def current(self) -> int:
        """The version the storage is at (0: no tables yet)."""
        ...

    @property
    def latest(self) -> int:
        """The version this code brings it to."""
        ...

    @property
    def applied(self) -> Sequence[str]:
        """The migrations applied, oldest first (``"1: threads, messages and run leases"``)."""
        ...

    @property
    def pending(self) -> Sequence[str]:
        """The migrations not applied yet, in the order they will be."""
        ...

    @property
    def just_applied(self) -> Sequence[str]:
        """The migrations the ``migrate()`` call that returned this report applied."""
        ...


@runtime_checkable
class MigratableStorage(Protocol):
    """A storage with a versioned schema that ``pai storage check`` and ``migrate`` drive.

    Example::

        class MyStorage:
            async def schema_status(self) -> SchemaReport: ...  # changes nothing
            async def migrate(self) -> SchemaReport: ...  # applies what is pending
    """

    async def schema_status(self) -> SchemaReport:
        """Where the schema stands, read without changing anything."""
        ...

    async def migrate(self) -> SchemaReport:
        """Apply the pending migrations (safe when several processes call it at once)."""
        ...


@dataclass(frozen=True, slots=True)
class _Report:
    """A :class:`SchemaReport` for the built-in SQLite storage."""

    location: str
    schema: str
    current: int
    latest: int
    applied: tuple[str, ...]
    pending: tuple[str, ...]
    just_applied: tuple[str, ...] = ()


def _sqlite_report(path: str, *, just_applied: bool = False) -> _Report:
    """The SQLite file's version, read-only (a missing file is version 0)."""
    import sqlite3

    from pai.core._errors import StorageAccessError
    from pai.core._storage_sqlite import (
        _SCHEMA_VERSION,  # pyright: ignore[reportPrivateUsage]
    )

    file = Path(path)
    version = 0
    if file.exists():
        try:
            connection = sqlite3.connect(f"{file.resolve().as_uri()}?mode=ro", uri=True)
            try:
                (version,) = connection.execute("PRAGMA user_version").fetchone()
            finally:
                connection.close()
        except sqlite3.Error as error:
            raise StorageAccessError(
                f"cannot read the SQLite database at {path!r}: {error}; check the file and its "
                "permissions",
                path=path,
            ) from error
    names = [
        f"{number}: SQLite schema version {number}" for number in range(1, _SCHEMA_VERSION + 1)
    ]
    return _Report(
        location=f"sqlite file {path}",
        schema="main",
        current=int(version),
        latest=_SCHEMA_VERSION,
        applied=tuple(names[: int(version)]),
        pending=tuple(names[int(version) :]),
        just_applied=tuple(names) if just_applied else (),
    )


def _open(config: PaiConfig) -> Storage | None:
    from pai.core._storage_config import storage_from_config

    return storage_from_config(config)


def _describe_other(storage: Storage) -> str:
    from pai.core._chat_target import is_process_local

    if is_process_local(storage):
        return (
            f"the configured storage ({type(storage).__name__}) lives in this process only: it "
            "keeps nothing between runs, so there is no schema to check or migrate"
        )
    return (
        f"the configured storage ({type(storage).__name__}) does not report a schema version "
        "(it has no schema_status() and migrate()); it manages its own tables"
    )


def _report_json(report: SchemaReport, status: str) -> dict[str, object]:
    return {
        "status": status,
        "storage": report.location,
        "schema": report.schema,
        "current": report.current,
        "latest": report.latest,
        "applied": list(report.applied),
        "pending": list(report.pending),
        "just_applied": list(report.just_applied),
    }


def _echo_report(report: SchemaReport) -> None:
    click.echo(f"storage: {report.location}")
    click.echo(f"schema: {report.schema}")
    click.echo(f"version: {report.current} (this code: {report.latest})")
    if report.pending:
        click.echo("pending:")
        for name in report.pending:
            click.echo(f"  {name}")
    else:
        click.echo("pending: none")


def _failed(error: Exception, as_json: bool) -> NoReturn:
    """Report a storage that cannot be reached or migrated, and exit with status 1."""
    from pai.core.cli import _masked_message  # pyright: ignore[reportPrivateUsage]

    message = _masked_message(str(error))
    if as_json:
        echo_json({"status": "failed", "error": {"message": message, "type": type(error).__name__}})
    else:
        click.echo(f"Error: {message}", err=True)
    raise SystemExit(EXIT_PENDING)


def _run_async(body: Callable[[], Awaitable[_R]]) -> _R:
    import anyio

    return anyio.run(body)


@click.group("storage")
def storage_group() -> None:
    """Check and migrate the schema of the configured storage ([storage] url).

    A storage with a versioned schema (PostgreSQL) is migrated by `pai storage migrate`, or
    when it is opened (unless its URL says migrate=false); `pai storage check` prints the
    version and what is pending. SQLite migrates itself whenever it is opened.
    """


@storage_group.command("check")
@json_option
def storage_check(as_json: bool) -> None:
    """Print the storage (password masked), its schema version and the pending migrations.

    Exit status 1 when migrations are pending or the storage cannot be reached (the reason on
    stderr), 0 when the schema is current.
    """
    from pai.core._errors import StorageError
    from pai.core._storage_sqlite import SqliteStorage
    from pai.core.cli import load_checked_config

    config = load_checked_config()
    storage = _open(config)
    if storage is None:
        _nothing(
            "no [storage] is configured: each run keeps its threads in an in-process SQLite "
            "database, so there is no schema to check",
            as_json,
        )
        return

    async def status() -> SchemaReport | None:
        try:
            if isinstance(storage, MigratableStorage):
                return await storage.schema_status()
            if isinstance(storage, SqliteStorage) and storage.path not in (":memory:", ""):
                return _sqlite_report(storage.path)
            return None
        finally:
            await storage.aclose()

    try:
        report = _run_async(status)
    except StorageError as error:
        _failed(error, as_json)
    if report is None:
        _nothing(_describe_other(storage), as_json)
        return
    checked = report
    state = "pending" if checked.pending else "ok"
    sqlite_note = " (SQLite also applies them when it is next opened)"
    if as_json:
        echo_json(_report_json(checked, state))
    else:
        _echo_report(checked)
        if checked.pending:
            click.echo(
                f"Error: {len(checked.pending)} migration(s) pending; run `pai storage migrate`"
                + (sqlite_note if isinstance(storage, SqliteStorage) else ""),
                err=True,
            )
    if checked.pending:
        raise SystemExit(EXIT_PENDING)


@storage_group.command("migrate")
@json_option
def storage_migrate(as_json: bool) -> None:
    """Apply the pending migrations of the configured storage and print the versions.

    Safe to run while other processes use the storage, and from several places at once: each
    migration is applied once. Exit status 1 when the storage cannot be reached or migrated.
    """
    from pai.core._errors import StorageError
    from pai.core._storage_sqlite import SqliteStorage
    from pai.core.cli import load_checked_config

    config = load_checked_config()
    storage = _open(config)
    if storage is None:
        _nothing(
            "no [storage] is configured: each run keeps its threads in an in-process SQLite "
            "database, so there is nothing to migrate",
            as_json,
        )
        return

    async def migrate() -> SchemaReport | None:
        try:
            if isinstance(storage, MigratableStorage):
                return await storage.migrate()
            if isinstance(storage, SqliteStorage) and storage.path not in (":memory:", ""):
                before = _sqlite_report(storage.path)
                await storage.get_thread("")  # opening the file migrates it
                after = _sqlite_report(storage.path)
                return _Report(
                    location=after.location,
                    schema=after.schema,
                    current=after.current,
                    latest=after.latest,
                    applied=after.applied,
                    pending=after.pending,
                    just_applied=tuple(
                        name for name in after.applied if name not in before.applied
                    ),
                )
            return None
        finally:
            await storage.aclose()

    try:
        report = _run_async(migrate)
    except StorageError as error:
        _failed(error, as_json)
    if report is None:
        _nothing(_describe_other(storage), as_json)
        return
    done = report
    if as_json:
        echo_json(_report_json(done, "pending" if done.pending else "ok"))
        return
    click.echo(f"storage: {done.location}")
    click.echo(f"schema: {done.schema}")
    if done.just_applied:
        click.echo("applied:")
        for name in done.just_applied:
            click.echo(f"  {name}")
    else:
        click.echo("applied: nothing (the schema was already current)")
    click.echo(f"version: {done.current} (this code: {done.latest})")


def _nothing(message: str, as_json: bool) -> None:
    if as_json:
        echo_json({"status": "nothing to do", "message": message})
    else:
        click.echo(message)


__all__ = ["MigratableStorage", "SchemaReport", "storage_group"]
