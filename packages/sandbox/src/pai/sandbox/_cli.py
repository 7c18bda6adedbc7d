"""The sandbox commands of the ``pai`` command line, added through pai-sandbox's ``pai_cli`` hook.

::

    pai providers [--json]                              installed sandbox providers and their options
    pai sandbox exec [--key K] [--timeout S] -- CMD...  run a command in the configured provider
    pai sandbox ls [--json]                             the provider's sandboxes
    pai sandbox rm KEY... [--json]                      destroy sandboxes by key (idempotent)
    pai sandbox prune [--older-than D] [--yes] [--json] destroy sandboxes (older than D)
    pai demo [--keep]                                   a worked example agent (scripted model)

Every command but ``providers`` uses the provider configuration selects
(:func:`~pai.sandbox._plugin.configured_provider`); when none is configured it says so on stderr
and uses the embedded default. Heavy imports (the provider, the agent runtime, rich) happen
inside the commands, so ``pai plugins`` stays fast.
"""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, fields, is_dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, TypeVar, cast

import click

from pai.core import cli as core_cli
from pai.core.cli import (
    echo_json,
    echo_table,
    fail,
    json_option,
    note,
    stdin_is_terminal,
)

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator

    from pydantic import BaseModel
    from rich.console import Console

    from pai.core import Agent, Message, Model
    from pai.core.testing import ScriptStep
    from pai.sandbox._plugin import SandboxProviderRegistration, SandboxSettings
    from pai.sandbox._provider import SandboxProvider
    from pai.sandbox._types import InstanceInfo

T = TypeVar("T")

DEFAULT_KEY = "cli"
"""The instance key ``pai sandbox exec`` uses without ``--key``."""

EXIT_TIMEOUT = 124
"""``pai sandbox exec``'s exit status when the command timed out (as coreutils ``timeout``)."""

_IN_PROCESS_NOTE = (
    "provider {name!r} keeps sandboxes inside the process that made them, so a new `pai` process "
    "sees none of them"
)


def _run(fn: Callable[[], Awaitable[T]]) -> T:
    import anyio

    return anyio.run(fn)


@asynccontextmanager
async def _configured() -> AsyncGenerator[tuple[SandboxProvider, SandboxSettings]]:
    """The configured provider (closed afterwards); says once when the default is used."""
    from pai.sandbox._plugin import DEFAULT_PROVIDER, configured_provider

    provider, settings = configured_provider()
    if settings.provider is None:
        note(
            f"no sandbox provider configured; using the embedded {DEFAULT_PROVIDER!r} provider "
            '(set provider = "<name>" in [capabilities.sandbox] of pai.toml to choose another; '
            "`pai providers` lists them)"
        )
    try:
        yield provider, settings
    finally:
        await provider.aclose()


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


# -- pai providers ----------------------------------------------------------------------------------


def _type_name(annotation: object) -> str:
    if annotation is None or annotation is type(None):
        return "None"
    if isinstance(annotation, type) and not getattr(annotation, "__args__", None):
        return annotation.__name__
    return repr(annotation).replace("typing.", "")


def _constraint(item: object) -> str:
    if is_dataclass(item) and not isinstance(item, type):
        return ", ".join(f"{f.name}={getattr(item, f.name)!r}" for f in fields(item))
    return repr(item)


@dataclass(frozen=True, slots=True)
class _Option:
    """One option of a provider's options model, for ``pai providers``."""

    name: str
    type: str
    required: bool
    default: object  # JSON
    constraints: list[str]
    description: str

    def type_text(self) -> str:
        return self.type + (f" ({'; '.join(self.constraints)})" if self.constraints else "")


def _options_of(model: type[BaseModel]) -> list[_Option]:
    from pydantic_core import to_jsonable_python

    options: list[_Option] = []
    for name, info in model.model_fields.items():
        required = info.is_required()
        default = None if required else info.get_default(call_default_factory=True)
        options.append(
            _Option(
                name=name,
                type=_type_name(info.annotation),
                required=required,
                default=to_jsonable_python(default, fallback=repr),
                constraints=[_constraint(item) for item in info.metadata],
                description=info.description or "",
            )
        )
    return options


def _provider_json(registration: SandboxProviderRegistration, default: str) -> dict[str, object]:
    return {
        "name": registration.name,
        "distribution": registration.distribution,
        "description": registration.description,
        "install_hint": registration.install_hint,
        "default": registration.name == default,
        "options": [asdict(option) for option in _options_of(registration.options)],
    }


@click.command("providers")
@json_option
def providers_command(as_json: bool) -> None:
    """List installed sandbox providers and their options.

    Each provider's options go in a sub-table named after it, [capabilities.sandbox.<name>] of
    pai.toml; choose the provider with provider = "<name>" in [capabilities.sandbox].
    """
    from pai.sandbox._plugin import DEFAULT_PROVIDER, sandbox_providers

    registrations = [registration for _, registration in sorted(sandbox_providers().items())]
    if as_json:
        echo_json(
            {
                "default": DEFAULT_PROVIDER,
                "providers": [_provider_json(r, DEFAULT_PROVIDER) for r in registrations],
            }
        )
        return
    if not registrations:
        click.echo(
            "no sandbox providers installed; install one: pip install pai-sandbox-inmemory "
            "(in-process, the default), pai-sandbox-docker or pai-sandbox-e2b"
        )
        return
    echo_table(
        [
            {
                "name": r.name + (" (default)" if r.name == DEFAULT_PROVIDER else ""),
                "distribution": r.distribution,
                "description": r.description,
            }
            for r in registrations
        ],
        [("name", "Provider"), ("distribution", "Distribution"), ("description", "Description")],
    )
    for registration in registrations:
        click.echo("")
        options = _options_of(registration.options)
        title = f"options of {registration.name!r}: [capabilities.sandbox.{registration.name}]"
        if not options:
            click.echo(f"{title}: none")
            continue
        echo_table(
            [
                {
                    "name": option.name,
                    "type": option.type_text(),
                    "default": "(required)" if option.required else _json_text(option.default),
                    "description": option.description or None,
                }
                for option in options
            ],
            [
                ("name", "Option"),
                ("type", "Type"),
                ("default", "Default"),
                ("description", "Description"),
            ],
            title=title,
        )


def _json_text(value: object) -> str:
    import json

    return json.dumps(value, ensure_ascii=False, default=str)


# -- pai sandbox ... --------------------------------------------------------------------------------


@click.group("sandbox")
def sandbox_group() -> None:
    """Run commands in, list and remove sandboxes of the configured provider.

    The provider is the one [capabilities.sandbox] of pai.toml names (see `pai config`), or the
    embedded in-memory one when none is named. The in-memory provider keeps sandboxes inside the
    process that made them: every `pai` command starts with none, so `ls`, `rm` and `prune` only
    matter for providers that keep sandboxes elsewhere (docker, e2b).
    """


@sandbox_group.command(
    "exec",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
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
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED, metavar="-- CMD...")
@click.pass_context
def exec_command(
    ctx: click.Context,
    key: str,
    timeout: float | None,
    forward_stdin: bool,
    command: tuple[str, ...],
) -> None:
    """Run CMD in the sandbox of --key and pass its exit status through.

    The arguments are joined as a shell command line (each one quoted), so use
    `pai sandbox exec -- sh -c 'echo $HOME | wc -c'` for pipes and variables. stdout and stderr
    go to yours; a command that times out is killed inside the sandbox and exits with 124. The
    sandbox is kept afterwards (for providers that keep sandboxes outside this process, the next
    exec with the same --key finds it); remove it with `pai sandbox rm KEY`. With -i, your
    standard input is read to its end first and given to the command.
    """
    line = shlex.join(command)
    data: bytes | None = sys.stdin.buffer.read() if forward_stdin else None

    async def run() -> int:
        from pai.sandbox._sandbox import create_sandbox
        from pai.sandbox._session import create_sandbox_session_manager

        async with _configured() as (provider, settings):
            sessions = create_sandbox_session_manager(provider=provider)
            streamed = {"out": False, "err": False}

            def on_stdout(text: str) -> None:
                streamed["out"] = True
                click.echo(text, nl=False)

            def on_stderr(text: str) -> None:
                streamed["err"] = True
                click.echo(text, nl=False, err=True)

            box = create_sandbox(
                sessions.handle(key),
                default_timeout=settings.default_timeout,
                output_limit=settings.output_limit,
            )
            result = await box.run_command(
                line, stdin=data, timeout=timeout, on_stdout=on_stdout, on_stderr=on_stderr
            )
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

    ctx.exit(_run(run))


@sandbox_group.command("ls")
@json_option
def ls_command(as_json: bool) -> None:
    """List the configured provider's sandboxes: key, provider, instance id and age.

    Providers that keep sandboxes outside this process (docker, e2b) list every sandbox they own,
    whichever process made it. The in-memory provider keeps sandboxes inside the process that made
    them, so a new `pai` process lists none.
    """

    async def run() -> tuple[str, bool, list[dict[str, object]]]:
        async with _configured() as (provider, _):
            instances = await provider.list_instances()
            return (
                provider.name,
                provider.features.cross_process,
                _instance_rows(instances, datetime.now(UTC)),
            )

    name, cross_process, rows = _run(run)
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
@json_option
def rm_command(keys: tuple[str, ...], as_json: bool) -> None:
    """Destroy the sandboxes of KEY... (their files and processes).

    Idempotent: a key with no sandbox is reported as "not found" and is not an error; the exit
    status is 0 either way.
    """

    async def run() -> tuple[list[str], list[str]]:
        removed: list[str] = []
        missing: list[str] = []
        async with _configured() as (provider, _):
            for key in dict.fromkeys(keys):
                if await provider.find(key) is None:
                    missing.append(key)
                    continue
                await provider.destroy(key)
                removed.append(key)
        return removed, missing

    removed, missing = _run(run)
    if as_json:
        echo_json({"removed": removed, "not_found": missing})
        return
    for key in keys:
        if key in removed:
            click.echo(f"removed {key}")
        elif key in missing:
            click.echo(f"not found: {key}")
            missing.remove(key)  # report a repeated key once


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

        async with _configured() as (provider, _):
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

    name, rows, removed = _run(run)
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


# -- pai demo ---------------------------------------------------------------------------------------

_GREET_SH = """\
#!/bin/sh
# greet.sh: greet someone and keep a log of everyone greeted
name="${1:-world}"
echo "Hello, $name!"
echo "$name" >> greeted.txt
count=$(wc -l < greeted.txt)
echo "greeted $count time(s) so far"
"""

_DEMO_TASK = "Write a small shell script that greets people, run it, and show me the workspace."


def _demo_script() -> list[ScriptStep]:
    """The scripted model's answers: write a script, run it, list the workspace, read, answer."""
    from pydantic import JsonValue

    from pai.core import AssistantMessage, ModelRequest, ToolCall, ToolResultMessage

    def step(
        say: str, call_id: str, tool: str, arguments: dict[str, JsonValue]
    ) -> AssistantMessage:
        return AssistantMessage(
            content=say, tool_calls=(ToolCall(id=call_id, name=tool, arguments=arguments),)
        )

    def answer(request: ModelRequest) -> AssistantMessage:
        results = [m for m in request.messages if isinstance(m, ToolResultMessage)]
        failed = [m.tool_name for m in results if m.is_error]
        if failed:
            return AssistantMessage(
                content=f"Something went wrong: the {', '.join(failed)} call(s) failed (see above)."
            )
        log = results[-1].output if results else None
        names = [line for line in str(log or "").splitlines() if line]
        return AssistantMessage(
            content=(
                "Done. I wrote greet.sh into the sandbox's /workspace, ran it for "
                f"{' and '.join(names) or 'nobody'}, and it kept its log in greeted.txt "
                f"({len(names)} line(s)). Both files are in the workspace listing above."
            )
        )

    return [
        step(
            "I'll write a small shell script that greets someone and keeps a log.",
            "call-1",
            "write_file",
            {"path": "greet.sh", "content": _GREET_SH, "executable": True},
        ),
        step(
            "Now I'll run it twice.",
            "call-2",
            "run",
            {"command": "sh greet.sh PAI && sh greet.sh sandbox"},
        ),
        step("Let's see what is in the workspace.", "call-3", "run", {"command": "ls -l"}),
        step(
            "And read back the log the script kept.", "call-4", "read_file", {"path": "greeted.txt"}
        ),
        answer,
    ]


def _demo_agent(model: Model) -> Agent:
    from pydantic import BaseModel, Field

    from pai.core import ToolContext, define_agent, define_tool
    from pai.sandbox._capability import sandbox
    from pai.sandbox._types import CommandResult

    class RunInput(BaseModel):
        command: str = Field(description="A shell command line, run in /workspace.")

    class WriteFileInput(BaseModel):
        path: str = Field(description="Where to write, relative to /workspace.")
        content: str
        executable: bool = False

    class ReadFileInput(BaseModel):
        path: str

    async def run(ctx: ToolContext[RunInput]) -> CommandResult:
        return await ctx.capabilities[sandbox].run_command(ctx.input.command, timeout=30)

    async def write_file(ctx: ToolContext[WriteFileInput]) -> dict[str, object]:
        await ctx.capabilities[sandbox].write_file(
            ctx.input.path, ctx.input.content, executable=ctx.input.executable
        )
        return {"path": ctx.input.path, "bytes": len(ctx.input.content.encode())}

    async def read_file(ctx: ToolContext[ReadFileInput]) -> str:
        return await ctx.capabilities[sandbox].read_text(ctx.input.path)

    tools = {
        "run": define_tool(
            id="run",
            description="Run a shell command in this conversation's sandbox.",
            input_schema=RunInput,
            capabilities={"sandbox": sandbox},
            execute=run,
        ),
        "write_file": define_tool(
            id="write_file",
            description="Write a text file into the sandbox.",
            input_schema=WriteFileInput,
            capabilities={"sandbox": sandbox},
            execute=write_file,
        ),
        "read_file": define_tool(
            id="read_file",
            description="Read a text file from the sandbox.",
            input_schema=ReadFileInput,
            capabilities={"sandbox": sandbox},
            execute=read_file,
        ),
    }
    return define_agent(
        name="demo",
        model=model,
        instructions="You write and run small shell scripts in your sandbox.",
        tools=tools,
    )


class _Printer:
    """Prints the demo: rich when stdout is a terminal, plain text otherwise."""

    def __init__(self) -> None:
        self._console: Console | None = None
        if core_cli.stdout_is_terminal():  # looked up at call time, so tests can fake a tty
            import sys

            from rich.console import Console

            self._console = Console(file=sys.stdout, highlight=False)

    def rule(self, title: str) -> None:
        if self._console is not None:
            self._console.rule(f"[bold]{_escape(title)}")
        else:
            click.echo(f"== {title} ==")

    def line(self, text: str, style: str = "") -> None:
        if self._console is not None:
            self._console.print(_escape(text), style=style or None)
        else:
            click.echo(text)

    def said(self, who: str, text: str, style: str) -> None:
        if self._console is not None:
            self._console.print(f"[{style}]{who}[/]  {_escape(text)}")
        else:
            click.echo(f"{who}> {text}")

    def block(self, text: str, title: str = "", style: str = "dim") -> None:
        if not text:
            return
        if self._console is not None:
            from rich.panel import Panel
            from rich.text import Text

            self._console.print(
                Panel(
                    Text(text.rstrip("\n"), style=style),
                    title=_escape(title) or None,
                    title_align="left",
                    expand=False,
                    padding=(0, 1),
                )
            )
        else:
            if title:
                click.echo(f"     {title}:")
            for line in text.rstrip("\n").splitlines():
                click.echo(f"     | {line}")


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def _show_messages(printer: _Printer, messages: Sequence[Message]) -> tuple[int, list[str]]:
    """Print the conversation; return the number of tool calls and what failed."""
    calls = 0
    problems: list[str] = []
    for message in messages:
        if message.role == "user":
            printer.said("user", message.content, "bold cyan")
        elif message.role == "assistant":
            if message.content:
                printer.said("assistant", message.content, "bold magenta")
            for call in message.tool_calls:
                calls += 1
                inline = {k: v for k, v in call.arguments.items() if not _multiline(v)}
                args = ", ".join(f"{k}={_json_text(v)}" for k, v in inline.items())
                printer.line(f"  -> {call.name}({args})", "yellow")
                for name, value in call.arguments.items():
                    if _multiline(value):
                        printer.block(str(value), title=name, style="")
        elif message.role == "tool":
            if message.is_error:
                problems.append(f"{message.tool_name}: {message.content}")
                printer.line(f"  <- {message.tool_name} failed: {message.content}", "bold red")
                continue
            output = message.output
            if message.tool_name == "run" and isinstance(output, dict):
                ran = cast("dict[str, object]", output)
                exit_code, timed_out = ran.get("exit_code"), bool(ran.get("timed_out"))
                flags = " (timed out)" if timed_out else ""
                printer.line(
                    f"  <- run: exit {exit_code}{flags}", "green" if exit_code == 0 else "red"
                )
                printer.block(str(ran.get("stdout") or ""), title="stdout")
                printer.block(str(ran.get("stderr") or ""), title="stderr", style="red")
                if exit_code != 0 or timed_out:
                    problems.append(f"run: exit {exit_code}{flags}")
            elif isinstance(output, str):
                printer.line(f"  <- {message.tool_name}:", "green")
                printer.block(output)
            else:
                printer.line(f"  <- {message.tool_name}: {message.content}", "green")
        else:
            problems.append(f"{message.source}: {message.message}")
            printer.line(f"error ({message.source}): {message.message}", "bold red")
    return calls, problems


def _multiline(value: object) -> bool:
    return isinstance(value, str) and "\n" in value


@click.command("demo")
@click.option(
    "--keep",
    is_flag=True,
    help="Keep the demo's sandbox afterwards (and print its key) instead of removing it.",
)
@click.pass_context
def demo_command(ctx: click.Context, keep: bool) -> None:
    """Run a worked example agent in the configured sandbox.

    The agent's model is a SCRIPTED stand-in (pai.core.testing.ScriptedModel) that replays a
    fixed list of answers; it is not a language model. What is real: the tools, the sandbox
    capability bound from your configured provider, and the agent runtime that runs them. The
    agent writes a shell script into the sandbox, runs it, lists the workspace and reads a file
    back; the conversation and each tool call are printed. The demo's sandbox is removed at the
    end unless --keep is given.
    """
    printer = _Printer()

    async def run() -> tuple[int, list[str]]:
        from pai.core import create_agent_runtime
        from pai.core.testing import ScriptedModel
        from pai.sandbox._capability import create_sandbox_service

        async with _configured() as (provider, settings):
            model = ScriptedModel(_demo_script())
            agent = _demo_agent(model)
            service = create_sandbox_service(
                provider=provider,
                scope="thread",
                default_timeout=settings.default_timeout,
                output_limit=settings.output_limit,
            )
            printer.rule("PAI demo: a worked example agent")
            printer.line(
                "model:    ScriptedModel, a SCRIPTED stand-in that replays fixed answers "
                "(not a language model)",
                "bold yellow",
            )
            printer.line(
                f"sandbox:  provider {provider.name!r}, one sandbox for this conversation "
                "(scope 'thread')"
            )
            printer.line("tools:    write_file, run, read_file (each runs in the sandbox)")
            printer.line("")
            runtime = create_agent_runtime(
                agent=agent,
                scope_key=lambda _identity: "demo",
                capabilities={"sandbox": service.binding},
            )
            async with runtime:
                thread = await runtime.admin(identity=None).create_thread()
                try:
                    await thread.send(_DEMO_TASK)
                finally:
                    calls, problems = _show_messages(printer, await thread.messages())
                    printer.line("")
                    key = service.acquire(scope_key="demo", thread_id=thread.id).key
                    if keep:
                        where = (
                            f"`pai sandbox exec --key '{key}' -- ls -l` gets into it"
                            if provider.features.cross_process
                            else "it ends with this process (in-memory provider)"
                        )
                        printer.line(f"kept the sandbox: key {key!r}; {where}")
                    else:
                        await thread.delete()
                        printer.line("removed the demo's sandbox (pass --keep to keep it)")
            steps = len(model.requests)
            printer.line(
                f"done: {steps} model steps (scripted), {calls} tool calls, provider "
                f"{provider.name!r}"
            )
            return calls, problems

    _, problems = _run(run)
    if problems:
        note("the demo did not go as scripted: " + "; ".join(problems))
        ctx.exit(1)


def add_commands(cli: click.Group) -> None:
    """Add the sandbox commands to the ``pai`` group (pai-sandbox's ``pai_cli`` hook)."""
    cli.add_command(providers_command)
    cli.add_command(sandbox_group)
    cli.add_command(demo_command)
