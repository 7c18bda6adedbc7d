"""``pai sandbox exec|ls|rm|prune``: run commands in, list and remove sandboxes."""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import click

from pai.core.cli import echo_json, echo_table, fail, json_option, note, stdin_is_terminal
from pai.sandbox._cli._common import configured, run_async

if TYPE_CHECKING:
    from pai.sandbox._types import InstanceInfo

DEFAULT_KEY = "cli"
"""The instance key ``pai sandbox exec`` uses without ``--key``."""

EXIT_TIMEOUT = 124
"""``pai sandbox exec``'s exit status when the command timed out (as coreutils ``timeout``)."""

_IN_PROCESS_NOTE = (
    "provider {name!r} keeps sandboxes inside the process that made them, so a new `pai` process "
    "sees none of them"
)


# -- durations and ages -----------------------------------------------------------------------------

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION = re.compile(r"(?:\d+(?:\.\d+)?[smhdw])+")
_PART = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")


def parse_duration(text: str) -> timedelta:
    """``30s``, ``15m``, ``2h``, ``1d``, ``1w``, or combinations (``1h30m``) as a timedelta.

    Raises ``ValueError`` with the accepted forms for anything else.
    """
    compact = text.strip().lower()
    if not _DURATION.fullmatch(compact):
        raise ValueError(
            f"{text!r} is not a duration; use a number and a unit: 30s, 15m, 2h, 1d or 1w "
            "(combine them: 1h30m)"
        )
    return timedelta(
        seconds=sum(float(number) * _UNITS[unit] for number, unit in _PART.findall(compact))
    )


def _duration_option(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> timedelta | None:
    """Parse ``--older-than`` (a click callback: a bad value is a usage error naming the option)."""
    if value is None:
        return None
    try:
        return parse_duration(value)
    except ValueError as error:
        raise click.BadParameter(str(error), ctx=ctx, param=param) from error


def format_age(seconds: float) -> str:
    """A short age: ``42s``, ``5m``, ``2h13m``, ``3d4h``."""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, _ = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes}m" if minutes else f"{hours}h"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours}h" if hours else f"{days}d"


def _age(created_at: datetime, now: datetime) -> float:
    if created_at.tzinfo is None:
        created_at = created_at.replace(tzinfo=UTC)
    return (now - created_at).total_seconds()


def _instance_rows(instances: Sequence[InstanceInfo], now: datetime) -> list[dict[str, object]]:
    return [
        {
            "key": info.key,
            "provider": info.provider,
            "instance_id": info.instance_id,
            "created_at": info.created_at.isoformat(),
            "age_seconds": round(_age(info.created_at, now), 3),
            "age": format_age(_age(info.created_at, now)),
            "details": dict(info.details),
        }
        for info in sorted(instances, key=lambda i: (_age(i.created_at, now) * -1, i.key))
    ]


_INSTANCE_COLUMNS = [
    ("key", "Key"),
    ("provider", "Provider"),
    ("instance_id", "Instance"),
    ("age", "Age"),
]


def _json_instance(row: Mapping[str, object]) -> dict[str, object]:
    return {key: value for key, value in row.items() if key != "age"}


# -- pai sandbox ... --------------------------------------------------------------------------------


@click.group("sandbox")
def sandbox_group() -> None:
    """Run commands in, list and remove sandboxes of the configured provider.

    The provider is the one [capabilities.sandbox] of pai.toml names (see `pai config`), or the
    embedded in-memory one when none is named. The in-memory provider keeps sandboxes inside the
    process that made them: every `pai` command starts with none, so `ls`, `rm` and `prune` only
    matter for providers that keep sandboxes elsewhere (docker, e2b).
    """


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _env_option(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> dict[str, str]:
    """Parse ``--env NAME=VALUE`` (repeatable; a later NAME wins), a usage error for a bad one."""
    env: dict[str, str] = {}
    for item in values:
        name, equals, value = item.partition("=")
        if not equals:
            raise click.BadParameter(
                f"{item!r} is not NAME=VALUE; give the value too (--env {name}=VALUE, or "
                f'--env {name}="${name}" to pass on your own)',
                ctx=ctx,
                param=param,
            )
        if not _ENV_NAME.fullmatch(name):
            raise click.BadParameter(
                f"{name!r} (in {item!r}) is not a variable name; use letters, digits and '_', "
                "not starting with a digit",
                ctx=ctx,
                param=param,
            )
        if "\x00" in value:
            raise click.BadParameter(
                f"the value of {name} contains a NUL byte, which no environment can hold",
                ctx=ctx,
                param=param,
            )
        env[name] = value
    return env


# Options end at the first argument that is not one (allow_interspersed_args=False), so the
# command's own options (`pai sandbox exec ls -la`) are the command's; an unknown option before
# the command is a usage error with click's "did you mean", never run as the command.
@sandbox_group.command("exec", context_settings={"allow_interspersed_args": False})
@click.option(
    "--key",
    default=DEFAULT_KEY,
    show_default=True,
    help="Instance key of the sandbox: the same key reaches the same sandbox again.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Seconds before the command is killed inside the sandbox "
    "[default: default_timeout of [capabilities.sandbox], 120].",
)
@click.option(
    "-i",
    "--stdin",
    "forward_stdin",
    is_flag=True,
    help="Read your standard input to its end and feed it to the command (like docker exec -i).",
)
@click.option(
    "-e",
    "--env",
    "env",
    multiple=True,
    metavar="NAME=VALUE",
    callback=_env_option,
    help="Set an environment variable for the command (repeatable).",
)
@click.option(
    "--cwd",
    metavar="DIR",
    default=None,
    help="Working directory in the sandbox, relative to /workspace or absolute "
    "[default: /workspace].",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the result (output, exit code, timed_out, ...) as one JSON object instead of "
    "the command's output.",
)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED, metavar="[--] CMD...")
@click.pass_context
def exec_command(
    ctx: click.Context,
    key: str,
    timeout: float | None,
    forward_stdin: bool,
    env: dict[str, str],
    cwd: str | None,
    as_json: bool,
    command: tuple[str, ...],
) -> None:
    """Run CMD in the sandbox of --key and pass its exit status through.

    The arguments are joined as a shell command line (each one quoted), so use
    `pai sandbox exec -- sh -c 'echo $HOME | wc -c'` for pipes and variables. stdout and stderr
    go to yours; a command that times out is killed inside the sandbox and exits with 124. The
    sandbox is kept afterwards (for providers that keep sandboxes outside this process, the next
    exec with the same --key finds it); remove it with `pai sandbox rm KEY`. With -i, your
    standard input is read to its end first and given to the command.

    Options go before CMD; everything from CMD on is the command's own (`pai sandbox exec ls
    -la`). Use -- before a CMD that starts with a dash. With --json, the result (stdout, stderr,
    exit_code, timed_out, truncated, environment_reset, duration) is printed as one JSON object
    instead of the output, and the exit status is still the command's.
    """
    line = shlex.join(command)
    data: bytes | None = sys.stdin.buffer.read() if forward_stdin else None

    async def run() -> int:
        from pai.sandbox._sandbox import create_sandbox
        from pai.sandbox._session import create_sandbox_session_manager
        from pai.sandbox._settings import facade_limits

        async with configured() as (provider, settings):
            sessions = create_sandbox_session_manager(provider=provider)
            streamed = {"out": False, "err": False}

            def on_stdout(text: str) -> None:
                streamed["out"] = True
                click.echo(text, nl=False)

            def on_stderr(text: str) -> None:
                streamed["err"] = True
                click.echo(text, nl=False, err=True)

            box = create_sandbox(sessions.handle(key), **facade_limits(settings))
            result = await box.run_command(
                line,
                cwd=cwd,
                env=env,
                stdin=data,
                timeout=timeout,
                on_stdout=None if as_json else on_stdout,
                on_stderr=None if as_json else on_stderr,
            )
            if as_json:
                echo_json({"key": key, "provider": provider.name, **asdict(result)})
                return EXIT_TIMEOUT if result.timed_out else result.exit_code
            # A provider that does not stream still returns the output: print what was not shown.
            if not streamed["out"] and result.stdout:
                click.echo(result.stdout, nl=False)
            if not streamed["err"] and result.stderr:
                click.echo(result.stderr, nl=False, err=True)
            if result.environment_reset:
                note(
                    f"the sandbox for key {key!r} had vanished; it was re-created for this command"
                )
            if result.truncated:
                note(
                    f"output was cut at {settings.output_limit} bytes per stream (output_limit "
                    "in [capabilities.sandbox])"
                )
            if result.timed_out:
                limit = timeout if timeout is not None else settings.default_timeout
                after = f" after {limit:g} s" if limit is not None else ""
                note(
                    f"the command timed out{after} and was killed inside the sandbox "
                    "(raise the limit with --timeout SECONDS)"
                )
                return EXIT_TIMEOUT
            return result.exit_code

    ctx.exit(run_async(run))


@sandbox_group.command("ls")
@json_option
def ls_command(as_json: bool) -> None:
    """List the configured provider's sandboxes: key, provider, instance id and age.

    Providers that keep sandboxes outside this process (docker, e2b) list every sandbox they own,
    whichever process made it. The in-memory provider keeps sandboxes inside the process that made
    them, so a new `pai` process lists none.
    """

    async def run() -> tuple[str, bool, list[dict[str, object]]]:
        async with configured() as (provider, _):
            instances = await provider.list_instances()
            return (
                provider.name,
                provider.features.cross_process,
                _instance_rows(instances, datetime.now(UTC)),
            )

    name, cross_process, rows = run_async(run)
    if as_json:
        echo_json(
            {
                "provider": name,
                "cross_process": cross_process,
                "instances": [_json_instance(row) for row in rows],
            }
        )
        return
    if not cross_process:
        note(_IN_PROCESS_NOTE.format(name=name))
    if not rows:
        click.echo(f"no sandboxes (provider {name!r})")
        return
    echo_table(rows, _INSTANCE_COLUMNS)


@sandbox_group.command("rm")
@click.argument("keys", nargs=-1, required=True)
@click.option(
    "-f",
    "--force",
    is_flag=True,
    help="A key with no sandbox is not an error (exit 0 either way), for scripts that clean up.",
)
@json_option
@click.pass_context
def rm_command(ctx: click.Context, keys: tuple[str, ...], force: bool, as_json: bool) -> None:
    """Destroy the sandboxes of KEY... (their files and processes).

    As `docker rm`: every key that has a sandbox is removed, and a key with none is reported
    ("no such sandbox") and makes the exit status 1, unless --force is given.
    """

    async def run() -> tuple[str, list[str], list[str]]:
        removed: list[str] = []
        missing: list[str] = []
        async with configured() as (provider, _):
            for key in dict.fromkeys(keys):
                if await provider.find(key) is None:
                    missing.append(key)
                    continue
                await provider.destroy(key)
                removed.append(key)
            return provider.name, removed, missing

    name, removed, missing = run_async(run)
    if as_json:
        echo_json({"removed": removed, "not_found": missing})
    else:
        for key in dict.fromkeys(keys):
            if key in removed:
                click.echo(f"removed {key}")
        for key in missing:
            click.echo(
                f"no such sandbox: {key!r} (provider {name!r}; `pai sandbox ls` lists them)",
                err=True,
            )
    if missing and not force:
        ctx.exit(1)


@sandbox_group.command("prune")
@click.option(
    "--older-than",
    metavar="DURATION",
    callback=_duration_option,
    default=None,
    help="Only sandboxes at least this old: 30m, 2h, 1d, 1w, 1h30m [default: all of them].",
)
@click.option("--yes", "-y", is_flag=True, help="Remove without asking.")
@json_option
@click.pass_context
def prune_command(
    ctx: click.Context, older_than: timedelta | None, yes: bool, as_json: bool
) -> None:
    """Destroy the configured provider's sandboxes (older than DURATION), to reclaim leaks.

    Lists what it would remove and asks first; without a terminal to ask on it refuses unless
    --yes is given. The in-memory provider keeps sandboxes inside the process that made them, so
    for it a new `pai` process has nothing to prune.
    """

    async def run() -> tuple[str, list[dict[str, object]], list[str] | None]:
        import anyio.to_thread

        async with configured() as (provider, _):
            now = datetime.now(UTC)
            instances = [
                info
                for info in await provider.list_instances()
                if older_than is None or _age(info.created_at, now) >= older_than.total_seconds()
            ]
            rows = _instance_rows(instances, now)
            if not rows:
                return provider.name, rows, []
            if not as_json:
                what = f" older than {format_age(older_than.total_seconds())}" if older_than else ""
                echo_table(rows, _INSTANCE_COLUMNS, title=f"sandboxes to remove{what}:")
            if not yes:
                if not stdin_is_terminal():
                    fail(
                        f"refusing to remove {len(rows)} sandbox(es) without confirmation: "
                        "there is no terminal to ask on. Pass --yes to remove them"
                    )
                confirmed = await anyio.to_thread.run_sync(
                    lambda: click.confirm(f"Remove {len(rows)} sandbox(es)?", default=False)
                )
                if not confirmed:
                    return provider.name, rows, None
            removed: list[str] = []
            for info in instances:
                await provider.destroy(info.key)
                removed.append(info.key)
            return provider.name, rows, removed

    name, rows, removed = run_async(run)
    if removed is None:
        note("nothing removed")
        ctx.exit(1)
    if as_json:
        echo_json(
            {"provider": name, "removed": removed, "instances": [_json_instance(r) for r in rows]}
        )
        return
    if not rows:
        click.echo(f"nothing to prune (provider {name!r})")
        return
    for key in removed:
        click.echo(f"removed {key}")
