"""``pai runs ls|cancel|resume``: the durable runs the configured engine recorded, and acting on
one of them.

The engine is the one ``[durability]`` configures (``engine = "dbos"`` and its options). The
commands use its :class:`~pai.core.ext.DurableRunAdmin` side: a connection of their own to the
engine's records, which starts nothing and resumes nothing (starting an engine resumes the runs
its process left; a command that lists them must not). An engine without that side is named.

Exit status: 0 on success; 1 when the run named does not exist, cannot be cancelled or resumed
(it finished), or the engine's records cannot be reached (the reason on stderr); 2 for a
configuration mistake (no ``[durability]``, say).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING, NoReturn, TypeVar

import click

from pai.core._durability import DURABLE_RUN_STATUSES
from pai.core.cli import echo_json, echo_table, fail, json_option, note

if TYPE_CHECKING:
    from pai.core._durability import DurableRunAdmin, DurableRunInfo

_R = TypeVar("_R")

EXIT_FAILED = 1
"""The exit status when the run named does not exist or cannot be acted on, or the engine's
records cannot be reached."""

DEFAULT_LIMIT = 50
"""How many runs ``pai runs ls`` shows without ``--limit`` (the newest)."""

ERROR_WIDTH = 60
"""How many characters of a failed run's error the table shows (``--json`` has all of it)."""

NO_DURABILITY = (
    "no [durability] is configured, so runs are not durable and no engine records them: there "
    "are no durable runs {what}. To make runs durable, set in pai.toml (pip install "
    'pai-durable-dbos):\n\n    [durability]\n    engine = "dbos"\n    system_database_url = '
    '"sqlite:///pai-runs.sqlite"\n'
)

_STYLES = {
    "status": {
        "failed": "red",
        "cancelled": "yellow",
        "succeeded": "green",
        "running": "cyan",
        "pending": "cyan",
    }
}


def _admin(what: str) -> DurableRunAdmin:
    """The configured engine's admin side; fails (exit 2) without ``[durability]`` or when the
    engine has none. Building the engine does no I/O."""
    from pai.core._durability import DurableRunAdmin
    from pai.core._durability_config import durability_from_config
    from pai.core.cli import load_checked_config

    config = load_checked_config()
    engine = durability_from_config(config)
    if engine is None:
        fail(NO_DURABILITY.format(what=what))
    if not isinstance(engine, DurableRunAdmin):
        fail(
            f"the durability engine {engine.name!r} ({type(engine).__module__}."
            f"{type(engine).__qualname__}) cannot list, cancel or resume runs: it does not "
            "implement pai.core.ext.DurableRunAdmin; use the engine's own tools"
        )
    return engine


def _with_admin(what: str, body: Callable[[DurableRunAdmin], Awaitable[_R]]) -> _R:
    """``body`` run with the engine's admin side, closed after; a
    :class:`~pai.core.DurabilityError` is reported on stderr with exit status 1."""
    import anyio

    from pai.core._errors import DurabilityError

    admin = _admin(what)

    async def run() -> _R:
        try:
            return await body(admin)
        finally:
            await admin.aclose_admin()

    try:
        return anyio.run(run)
    except DurabilityError as error:
        _failed(error)


def _failed(error: Exception) -> NoReturn:
    from pai.core.cli import _masked_message  # pyright: ignore[reportPrivateUsage]

    click.echo(f"Error: {_masked_message(str(error))}", err=True)
    raise SystemExit(EXIT_FAILED)


def _when(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat(sep=" ", timespec="seconds")


def _short(text: str | None) -> str | None:
    if text is None:
        return None
    line = " ".join(text.split())
    return line if len(line) <= ERROR_WIDTH else line[: ERROR_WIDTH - 3] + "..."


def _masker() -> Callable[[str | None], str | None]:
    """Masks secrets in what a run recorded (a failed run's error may quote a URL or a key)."""
    from pai.core._config import load_config
    from pai.core._errors import PaiError
    from pai.core._secrets import config_secrets, mask_text

    try:
        secrets = config_secrets(load_config().data)
    except (PaiError, OSError):
        secrets = []

    def mask(text: str | None) -> str | None:
        return None if text is None else mask_text(text, secrets)

    return mask


def _row(run: DurableRunInfo, mask: Callable[[str | None], str | None]) -> dict[str, object]:
    return {
        "id": run.run_id,
        "status": run.status,
        "thread": run.thread_id,
        "agent": run.agent_name,
        "created_at": _when(run.created_at),
        "updated_at": _when(run.updated_at),
        "executor": run.executor,
        "error": _short(mask(run.error)),
    }


@click.group("runs")
def runs_group() -> None:
    """List, cancel and resume durable runs ([durability] in pai.toml).

    The runs are those the configured engine recorded (engine = "dbos": its system database).
    These commands connect to the engine's records only: they start no engine and resume
    nothing by themselves.

    A run's status is pending (waiting for the engine to start or resume it), running (started
    and not finished, or interrupted and waiting for its process to restart), succeeded,
    failed or cancelled.
    """


@runs_group.command("ls")
@click.option(
    "--status",
    type=click.Choice(DURABLE_RUN_STATUSES),
    help="Only the runs of this status.",
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=DEFAULT_LIMIT,
    show_default=True,
    help="At most this many runs, the newest.",
)
@json_option
def runs_ls(status: str | None, limit: int, as_json: bool) -> None:
    """List the durable runs, newest first."""

    async def body(admin: DurableRunAdmin) -> list[DurableRunInfo]:
        return list(await admin.list_runs(status=status, limit=limit))

    runs = _with_admin("to list", body)
    mask = _masker()
    if as_json:
        echo_json({"runs": [{**run.to_json(), "error": mask(run.error)} for run in runs]})
        return
    if not runs:
        note(f"no {status + ' ' if status else ''}durable runs recorded")
        return
    echo_table(
        [_row(run, mask) for run in runs],
        [
            ("id", "Run"),
            ("status", "Status"),
            ("thread", "Thread"),
            ("agent", "Agent"),
            ("created_at", "Created"),
            ("updated_at", "Updated"),
            ("executor", "Executor"),
            ("error", "Error"),
        ],
        styles=_STYLES,
    )


@runs_group.command("cancel")
@click.argument("run_id", metavar="ID")
@json_option
def runs_cancel(run_id: str, as_json: bool) -> None:
    """Cancel durable run ID: it takes no further step and is not resumed.

    A process running it stops at its next step (the step running now finishes). Exit status 1
    when there is no such run or it already finished.
    """

    async def body(admin: DurableRunAdmin) -> None:
        await admin.cancel_run(run_id)

    _with_admin("to cancel", body)
    if as_json:
        echo_json({"id": run_id, "status": "cancelled"})
        return
    click.echo(run_id)
    note(f"cancelled run {run_id}; `pai runs resume {run_id}` resumes it")


@runs_group.command("resume")
@click.argument("run_id", metavar="ID")
@json_option
def runs_resume(run_id: str, as_json: bool) -> None:
    """Resume durable run ID (a cancelled or stuck one) from its last recorded step.

    The run is handed back to the engine: a process of the app that runs the engine takes it
    (at once if one is running, else when one starts). Exit status 1 when there is no such run
    or it already finished.
    """

    async def body(admin: DurableRunAdmin) -> None:
        await admin.resume_run(run_id)

    _with_admin("to resume", body)
    if as_json:
        echo_json({"id": run_id, "status": "pending"})
        return
    click.echo(run_id)
    note(
        f"run {run_id} is pending: a process of your app running the engine resumes it from its "
        "last recorded step"
    )


__all__ = ["EXIT_FAILED", "runs_group"]
