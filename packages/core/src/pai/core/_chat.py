"""``pai chat``: talk to your own agent in the terminal, streamed.

::

    pai chat myapp.agents:coder                    # the agent object `coder` of myapp/agents.py
    pai chat myapp.agents:coder --model openai:gpt-4.1-mini
    pai chat myapp.agents:coder --thread 4f0c...   # go on with a stored thread
    pai chat myapp.agents:coder --continue         # go on with its latest thread
    pai chat myapp.server:make_app --agent coder   # an agent of a create_pai(...) app
    pai chat                                       # the agent [chat] configures

The target may be an agent, a ``create_pai(...)`` app, a runtime, or a function returning one
(:mod:`pai.core._chat_target` builds it); ``pai threads`` lists, shows and removes the threads.

Without an agent argument, ``pai chat`` takes the agent the configuration names::

    # pai.toml (or [tool.pai.chat] in pyproject.toml; or PAI_CHAT__AGENT=myapp.agents:coder)
    [chat]
    agent = "myapp.agents:coder"

An argument wins over the configuration. The module is imported from the working directory, the
folder of the configuration file, or the installed packages.

Each line you type is one message; the answer streams as it comes, with each tool call and its
result. The agent runs with what configuration gives it: its model (or ``--model``, or
``[model]``), its capabilities (``[capabilities.<id>]``, the sandbox among them) and its storage
(``[storage]``). Ctrl-C cancels the run in progress (the thread keeps every step completed
before it, and nothing of the interrupted answer); Ctrl-C at the prompt, or end of input
(Ctrl-D), ends the chat.
"""

from __future__ import annotations

import json
import signal
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import click

from pai.core._chat_target import (
    CHAT_KEYS,
    ChatTargetError,
    chat_agent_from_config,
    configured_agent,
    load_agent,
    no_agent_message,
)
from pai.core._errors import PaiError
from pai.core._messages import ToolCall
from pai.core._model import TextDelta, ToolCallFinished
from pai.core._run_events import DelegatedRunEvent, RunEvent, RunFinished, ToolCallResult

if TYPE_CHECKING:
    from pai.core._admin import ThreadHandle

RESULT_PREVIEW = 300
"""How many characters of a tool result the chat shows."""


@dataclass(slots=True)
class _Chat:
    """One chat session's state: the run in progress, which Ctrl-C cancels."""

    current: anyio.CancelScope | None = None
    interrupted: bool = False


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


__all__ = [
    "CHAT_KEYS",
    "ChatTargetError",
    "chat",
    "chat_agent_from_config",
    "configured_agent",
    "load_agent",
    "no_agent_message",
]
