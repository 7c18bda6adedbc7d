"""How ``pai chat`` shows a run: plain text when stdout is piped, rich on a terminal.

Both views show the same things in the same order: the answer's text as it streams, a line
per tool call (``-> run({"command": "ls"})``), and per result a headline and its blocks, as
``pai demo`` shows them. A result shaped like a sandbox command's (``exit_code``, ``stdout``,
``stderr``) says ``exit N`` (red when not 0, or timed out) with its stdout and stderr blocks;
text is one block; a failed call says ``failed`` with its error. A result never reads ``ok``
over a failed command.

On a terminal the answer is rendered as Markdown as it streams (re-drawn in place), a spinner
runs while tools run, and text from the model or a tool has its control characters escaped
(an escape sequence in a tool's output must not drive the terminal). Rich is imported only by
the terminal view.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast

import click

from pai.core._messages import ToolCall, ToolResultMessage
from pai.core._model import ResponseFinished, TextDelta, ToolCallFinished
from pai.core._run_events import DelegatedRunEvent, RunEvent, RunFinished, ToolCallResult

if TYPE_CHECKING:
    from rich.console import Console
    from rich.live import Live
    from rich.status import Status

MAX_BLOCK_LINES = 40
"""How many lines of one output block the chat shows (the rest are counted, not shown)."""

MAX_BLOCK_CHARS = 4000
"""How many characters of one output block the chat shows."""

MAX_ARGUMENT_CHARS = 300
"""How many characters of a tool call's arguments the call line shows."""

_CONTROLS = {
    code: f"\\x{code:02x}"
    for code in (*range(0x20), 0x7F, *range(0x80, 0xA0))
    if code not in (9, 10)
}


def escape_controls(text: str) -> str:
    """``text`` with its control characters (ESC among them) written out, tab and newline kept."""
    return text.translate(_CONTROLS)


@dataclass(frozen=True, slots=True)
class Block:
    """One block of a tool result: ``text`` under ``title`` (``stdout``, ``stderr``, or none)."""

    text: str
    title: str = ""
    error: bool = False


@dataclass(frozen=True, slots=True)
class ResultView:
    """A tool result as the chat shows it: a headline, whether it went well, and its blocks."""

    headline: str
    ok: bool
    blocks: tuple[Block, ...] = ()


def call_line(call: ToolCall, prefix: str = "") -> str:
    """``-> name({...})`` for a tool call, its arguments as JSON (cut when long)."""
    arguments = json.dumps(dict(call.arguments), ensure_ascii=False)
    if len(arguments) > MAX_ARGUMENT_CHARS:
        arguments = arguments[: MAX_ARGUMENT_CHARS - 3] + "..."
    return escape_controls(f"{prefix}-> {call.name}({arguments})")


def describe_result(result: ToolResultMessage, prefix: str = "") -> ResultView:
    """What the chat shows of ``result``: a command's exit code and streams, text as a block,
    a failure as ``failed`` with its error."""
    name = escape_controls(f"{prefix}<- {result.tool_name}")
    if result.is_error:
        return ResultView(f"{name} failed", ok=False, blocks=_blocks(result.content, error=True))
    output = result.output
    command = _command_result(output)
    if command is not None:
        exit_code, stdout, stderr, flags = command
        ok = exit_code == 0 and "timed out" not in flags
        suffix = f" ({', '.join(flags)})" if flags else ""
        return ResultView(
            f"{name}: exit {exit_code}{suffix}",
            ok=ok,
            blocks=(
                *_blocks(stdout, title="stdout"),
                *_blocks(stderr, title="stderr", error=True),
            ),
        )
    blocks = _blocks(output if isinstance(output, str) else result.content)
    return ResultView(f"{name}:" if blocks else f"{name}: (nothing)", ok=True, blocks=blocks)


def _command_result(output: object) -> tuple[object, str, str, list[str]] | None:
    """``(exit_code, stdout, stderr, flags)`` of an output shaped like a command's result."""
    if not isinstance(output, Mapping):
        return None
    fields = cast("Mapping[str, object]", output)
    exit_code, stdout, stderr = fields.get("exit_code"), fields.get("stdout"), fields.get("stderr")
    if not isinstance(exit_code, int) or isinstance(exit_code, bool):
        return None
    if not isinstance(stdout, str) or not isinstance(stderr, str):
        return None
    flags = [
        label
        for key, label in (
            ("timed_out", "timed out"),
            ("truncated", "output truncated"),
            ("environment_reset", "sandbox was re-created"),
        )
        if fields.get(key) is True
    ]
    return exit_code, stdout, stderr, flags


def _blocks(text: str, *, title: str = "", error: bool = False) -> tuple[Block, ...]:
    text = text.rstrip("\n")
    if not text.strip():
        return ()
    return (Block(_clip(text), title=title, error=error),)


def _clip(text: str) -> str:
    cut = ""
    if len(text) > MAX_BLOCK_CHARS:
        cut = f"{len(text) - MAX_BLOCK_CHARS} more characters"
        text = text[:MAX_BLOCK_CHARS]
    lines = text.split("\n")
    if len(lines) > MAX_BLOCK_LINES:
        cut = f"{len(lines) - MAX_BLOCK_LINES} more lines" + (f", {cut}" if cut else "")
        lines = lines[:MAX_BLOCK_LINES]
    shown = escape_controls("\n".join(lines))
    return f"{shown}\n[... {cut} not shown]" if cut else shown


class ChatView(Protocol):
    """Where a chat's output goes (plain text, or rich on a terminal)."""

    def text(self, piece: str) -> None:
        """The next piece of the answer's text."""
        ...

    def end_text(self) -> None:
        """The text streamed so far is complete (a tool call or the end of the run follows)."""
        ...

    def line(self, text: str, style: str = "") -> None:
        """A line of its own (a tool call, a note on stdout)."""
        ...

    def result(self, view: ResultView) -> None:
        """A tool result."""
        ...

    def tools_running(self, calls: Sequence[ToolCall]) -> None:
        """``calls`` run now (a spinner on a terminal)."""
        ...

    def tools_done(self) -> None:
        """The tools that ran have results (the spinner stops)."""
        ...


class PlainView:
    """Plain text on stdout: the answer's text as it comes, tool calls and results as lines."""

    def __init__(self) -> None:
        self.mid_line = False

    def _say(self, text: str, *, newline: bool = False) -> None:
        click.echo(text, nl=newline)
        sys.stdout.flush()

    def text(self, piece: str) -> None:
        self._say(piece)
        self.mid_line = not piece.endswith("\n")

    def end_text(self) -> None:
        if self.mid_line:
            self._say("", newline=True)
            self.mid_line = False

    def line(self, text: str, style: str = "") -> None:
        self.end_text()
        self._say(text, newline=True)

    def result(self, view: ResultView) -> None:
        self.line(view.headline)
        for block in view.blocks:
            if block.title:
                self._say(f"     {block.title}:", newline=True)
            for text in block.text.split("\n"):
                self._say(f"     | {text}", newline=True)

    def tools_running(self, calls: Sequence[ToolCall]) -> None:
        pass

    def tools_done(self) -> None:
        pass


class RichView:
    """Rich on a terminal: Markdown re-drawn as the answer streams, panels for output blocks,
    a spinner while tools run."""

    REDRAW_EVERY = 0.05
    """Seconds between two re-draws of the streaming answer."""

    def __init__(self, console: Console | None = None) -> None:
        from rich.console import Console

        self.console = console if console is not None else Console(highlight=False)
        self._buffer = ""
        self._live: Live | None = None
        self._drawn_at = 0.0
        self._status: Status | None = None

    def _markdown(self) -> Any:
        from rich.markdown import Markdown

        return Markdown(escape_controls(self._buffer))

    def text(self, piece: str) -> None:
        self.tools_done()
        self._buffer += piece
        if self._live is None:
            from rich.live import Live

            self._live = Live(
                self._markdown(),
                console=self.console,
                auto_refresh=False,
                vertical_overflow="ellipsis",
            )
            self._live.start()
            self._drawn_at = time.monotonic()
            self._live.refresh()
            return
        now = time.monotonic()
        if now - self._drawn_at >= self.REDRAW_EVERY:
            self._drawn_at = now
            self._live.update(self._markdown(), refresh=True)

    def end_text(self) -> None:
        live, self._live = self._live, None
        if live is not None:
            live.update(self._markdown())
            live.stop()
        self._buffer = ""

    def line(self, text: str, style: str = "") -> None:
        from rich.text import Text

        self.end_text()
        self.tools_done()
        self.console.print(Text(text, style=style or ""))

    def result(self, view: ResultView) -> None:
        from rich.padding import Padding
        from rich.panel import Panel
        from rich.text import Text

        self.line(view.headline, "green" if view.ok else "bold red")
        for block in view.blocks:
            panel = Panel(
                Text(block.text, style="red" if block.error else "dim"),
                title=block.title or None,
                title_align="left",
                expand=False,
                padding=(0, 1),
            )
            self.console.print(Padding(panel, (0, 0, 0, 5)))  # under the result's line

    def tools_running(self, calls: Sequence[ToolCall]) -> None:
        self.end_text()
        if self._status is None and calls:
            names = ", ".join(dict.fromkeys(escape_controls(call.name) for call in calls))
            self._status = self.console.status(f"running {names} ...", spinner="dots")
            self._status.start()

    def tools_done(self) -> None:
        status, self._status = self._status, None
        if status is not None:
            status.stop()


class RunPrinter:
    """Shows one run's events through a view."""

    def __init__(self, view: ChatView) -> None:
        self.view = view
        self._calls: list[ToolCall] = []

    def show(self, event: RunEvent, prefix: str = "") -> None:
        view = self.view
        match event:
            case TextDelta(text=piece) if not prefix:
                view.text(piece)
            case ToolCallFinished(call=call):
                view.line(call_line(call, "  " + prefix), "yellow")
                if not prefix:
                    self._calls.append(call)
            case ResponseFinished() if not prefix:
                view.end_text()
                if self._calls:
                    view.tools_running(self._calls)
                    self._calls = []
            case ToolCallResult(result=result):
                view.tools_done()
                view.result(describe_result(result, "  " + prefix))
            case DelegatedRunEvent(agent_name=name, event=inner):
                view.tools_done()
                self.show(inner, f"{prefix}[{name}] ")
            case RunFinished() if not prefix:
                self.finish()
            case _:
                pass

    def finish(self) -> None:
        """End the output of a run (also after a failure or a cancel)."""
        self.view.end_text()
        self.view.tools_done()
        self._calls = []


__all__ = [
    "Block",
    "ChatView",
    "PlainView",
    "ResultView",
    "RichView",
    "RunPrinter",
    "call_line",
    "describe_result",
    "escape_controls",
]
