"""``pai chat``: talk to your own agent in the terminal, streamed.

::

    pai chat myapp.agents:coder                    # the agent object `coder` of myapp/agents.py
    pai chat myapp.agents:coder --model openai:gpt-4.1-mini
    pai chat myapp.agents:coder --thread 4f0c...   # go on with a stored thread

Each line you type is one message; the answer streams as it comes, with each tool call and its
result. The agent runs with what configuration gives it: its model (or ``--model``, or
``[model]``), its capabilities (``[capabilities.<id>]``, the sandbox among them) and its storage
(``[storage]``). Ctrl-C cancels the run in progress (the thread keeps every step completed
before it, and nothing of the interrupted answer); Ctrl-C at the prompt, or end of input
(Ctrl-D), ends the chat.
"""

from __future__ import annotations

import difflib
import importlib
import json
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import click

from pai.core._agent import Agent
from pai.core._errors import PaiError, UserError
from pai.core._messages import ToolCall
from pai.core._model import TextDelta, ToolCallFinished
from pai.core._run_events import DelegatedRunEvent, RunEvent, RunFinished, ToolCallResult

if TYPE_CHECKING:
    from pai.core._admin import ThreadHandle

RESULT_PREVIEW = 300
"""How many characters of a tool result the chat shows."""


class ChatTargetError(UserError, ValueError):
    """``pai chat``'s agent cannot be found: the module, the attribute, or not an agent."""


def load_agent(target: str) -> Agent:
    """The agent ``"package.module:attribute"`` names (the working directory is importable)."""
    module_name, colon, attribute = target.partition(":")
    if not colon or not module_name or not attribute:
        raise ChatTargetError(
            f"agent {target!r} is not '<module>:<attribute>'; write, e.g., "
            "`pai chat myapp.agents:coder` for the agent `coder` defined in myapp/agents.py"
        )
    cwd = str(Path.cwd())
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name is not None and module_name.startswith(error.name):
            raise ChatTargetError(
                f"agent {target!r}: there is no module {module_name!r} (looked in the working "
                "directory and the installed packages); run pai chat from your project's folder "
                "or install your package"
            ) from error
        raise
    found = getattr(module, attribute, None)
    if found is None:
        names = [name for name in vars(module) if not name.startswith("_")]
        close = difflib.get_close_matches(attribute, names, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ChatTargetError(
            f"agent {target!r}: module {module_name!r} has no attribute {attribute!r}{hint}"
        )
    if not isinstance(found, Agent):
        raise ChatTargetError(
            f"agent {target!r} is a {type(found).__name__}, not an agent; point it at the "
            "value define_agent(...) returned"
        )
    return found


@dataclass(slots=True)
class _Chat:
    """One chat session's state: the run in progress, which Ctrl-C cancels."""

    current: anyio.CancelScope | None = None
    interrupted: bool = False
    out: list[str] = field(default_factory=list[str])


def _say(text: str, *, newline: bool = False, err: bool = False) -> None:
    click.echo(text, nl=newline, err=err)
    (sys.stderr if err else sys.stdout).flush()


def _call_text(call: ToolCall, prefix: str) -> str:
    arguments = json.dumps(dict(call.arguments), ensure_ascii=False)
    return f"{prefix}-> {call.name}({arguments})"


def _preview(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= RESULT_PREVIEW else line[: RESULT_PREVIEW - 3] + "..."


class _Renderer:
    """Prints a run's events: text as it streams, a line per tool call and per result."""

    def __init__(self) -> None:
        self.mid_line = False

    def _line(self, text: str) -> None:
        if self.mid_line:
            _say("", newline=True)
            self.mid_line = False
        _say(text, newline=True)

    def show(self, event: RunEvent, prefix: str = "") -> None:
        match event:
            case TextDelta(text=piece) if not prefix:
                _say(piece)
                self.mid_line = not piece.endswith("\n")
            case ToolCallFinished(call=call):
                self._line(_call_text(call, "  " + prefix))
            case ToolCallResult(result=result):
                mark = "error" if result.is_error else "ok"
                self._line(f"  {prefix}<- {result.tool_name} [{mark}]: {_preview(result.content)}")
            case DelegatedRunEvent(agent_name=name, event=inner):
                self.show(inner, f"{prefix}[{name}] ")
            case RunFinished() if not prefix:
                if self.mid_line:
                    _say("", newline=True)
                    self.mid_line = False
            case _:
                pass


async def chat(thread: ThreadHandle, *, prompt: bool) -> int:
    """Read messages from stdin until end of input, streaming each answer; returns the number
    of runs that completed."""
    state = _Chat()
    completed = 0

    async def watch_interrupts(scope: anyio.CancelScope) -> None:
        with anyio.open_signal_receiver(signal.SIGINT) as signals:
            async for _ in signals:
                if state.current is not None:
                    state.interrupted = True
                    state.current.cancel()
                else:
                    scope.cancel()  # Ctrl-C at the prompt: the chat ends
                    return

    async with anyio.create_task_group() as tg:
        tg.start_soon(watch_interrupts, tg.cancel_scope)
        while True:
            if prompt:
                _say("you> ")
            line = await anyio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
            if not line:
                break
            text = line.strip()
            if not text:
                continue
            renderer = _Renderer()
            with anyio.CancelScope() as scope:
                state.current = scope
                try:
                    async for event in thread.stream(text):
                        renderer.show(event)
                except PaiError as error:  # a model or tool failure: say it, keep chatting
                    if renderer.mid_line:
                        _say("", newline=True)
                    _say(f"Error: {error}", newline=True, err=True)
                    continue
                finally:
                    state.current = None
            if scope.cancelled_caught or state.interrupted:
                state.interrupted = False
                if renderer.mid_line:
                    _say("", newline=True)
                _say(
                    "pai: cancelled; the thread keeps what was said before this answer",
                    newline=True,
                    err=True,
                )
                continue
            completed += 1
        tg.cancel_scope.cancel()
    return completed


__all__ = ["ChatTargetError", "chat", "load_agent"]
