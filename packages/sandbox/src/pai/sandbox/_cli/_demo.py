"""``pai demo``: a worked example agent (a scripted model, real tools and sandbox)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, cast

import click

from pai.core import cli as core_cli
from pai.core.cli import note
from pai.sandbox._cli._common import configured, json_text, run_async

if TYPE_CHECKING:
    from rich.console import Console

    from pai.core import Agent, Message, Model
    from pai.core.testing import ScriptStep

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
                args = ", ".join(f"{k}={json_text(v)}" for k, v in inline.items())
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


class _Unavailable(Exception):
    """The provider's probe failed: the demo stops before its first step."""

    def __init__(self, provider: str, reason: str) -> None:
        super().__init__(provider, reason)
        self.provider = provider
        self.reason = reason


def _multiline(value: object) -> bool:
    return isinstance(value, str) and "\n" in value


@click.command("demo")
@click.option(
    "--keep",
    is_flag=True,
    help="Keep the demo's sandbox afterwards (and print its key) instead of removing it.",
)
@click.option(
    "--model",
    "model_name",
    metavar="PROVIDER:NAME",
    help="Run the demo agent on this real model (e.g. openai:gpt-4.1-mini; options from "
    "[model.<provider>]) instead of the scripted stand-in.",
)
@click.pass_context
def demo_command(ctx: click.Context, keep: bool, model_name: str | None) -> None:
    """Run a worked example agent in the configured sandbox.

    The agent's model is a SCRIPTED stand-in (pai.core.testing.ScriptedModel) that replays a
    fixed list of answers; it is not a language model. With --model openai:NAME the same agent
    runs on that model instead (pai-model-openai installed, OPENAI_API_KEY set, and any options in
    [model.openai] of pai.toml). What is real: the tools, the sandbox
    capability bound from your configured provider, and the agent runtime that runs them. The
    agent writes a shell script into the sandbox, runs it, lists the workspace and reads a file
    back; the conversation and each tool call are printed. The demo's sandbox is removed at the
    end unless --keep is given.
    """
    printer = _Printer()

    async def run() -> tuple[int, list[str]]:
        from pai.core import create_agent_runtime, load_config, resolve_model
        from pai.core.testing import ScriptedModel
        from pai.sandbox._capability import create_sandbox_service
        from pai.sandbox._errors import SandboxError
        from pai.sandbox._provider import probe_provider
        from pai.sandbox._settings import facade_limits

        async with configured() as (provider, settings):  # checks the configuration first
            try:
                # Before the first step: a provider that cannot work is one line, not every
                # step failing in turn.
                await probe_provider(provider)
            except SandboxError as error:
                raise _Unavailable(provider.name, str(error)) from None
            real = resolve_model(model_name, config=load_config()) if model_name else None
            scripted = ScriptedModel(_demo_script())
            model = real if real is not None else scripted
            agent = _demo_agent(model)
            service = create_sandbox_service(
                provider=provider, scope="thread", **facade_limits(settings)
            )
            printer.rule("PAI demo: a worked example agent")
            if real is None:
                printer.line(
                    "model:    ScriptedModel, a SCRIPTED stand-in that replays fixed answers "
                    "(not a language model)",
                    "bold yellow",
                )
            else:
                printer.line(f"model:    {model_name} ({real!r})", "bold yellow")
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
            steps = 0
            async with runtime:
                thread = await runtime.admin(identity=None).create_thread()
                try:
                    steps = (await thread.send(_DEMO_TASK)).steps
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
                        try:
                            await provider.destroy(key)
                        except Exception as error:  # the backend failed: say so, never "removed"
                            problems.append(f"cleanup: {error}")
                            printer.line(
                                f"could NOT remove the demo's sandbox (key {key!r}): {error}; "
                                f"remove it with `pai sandbox rm {key}` once the provider works",
                                "bold red",
                            )
                        else:
                            await thread.delete()  # its sandbox is gone already: nothing fails
                            printer.line("removed the demo's sandbox (pass --keep to keep it)")
            aclose = getattr(real, "aclose", None)
            if callable(aclose):
                await cast("Callable[[], Awaitable[object]]", aclose)()
            kind = "scripted" if real is None else model_name
            printer.line(
                f"done: {steps} model steps ({kind}), {calls} tool calls, provider "
                f"{provider.name!r}"
            )
            if real is not None:
                # A real model may take another path than the script; only errors count.
                problems = [p for p in problems if not p.startswith("run: exit")]
            return calls, problems

    try:
        _, problems = run_async(run)
    except _Unavailable as unavailable:
        click.echo(
            f"Error: the demo cannot run: sandbox provider {unavailable.provider!r}: "
            f"{unavailable.reason}",
            err=True,
        )
        ctx.exit(1)
    if problems:
        note("the demo did not go as scripted: " + "; ".join(problems))
        ctx.exit(1)
