"""``pai chat``: talk to your own agent in the terminal, streamed.

::

    pai chat myapp.agents:coder                    # the agent object `coder` of myapp/agents.py
    pai chat myapp.agents:coder --model openai:gpt-4.1-mini
    pai chat myapp.agents:coder --thread 4f0c...   # go on with a stored thread
    pai chat                                       # the agent [chat] configures

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

import importlib
import json
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import anyio
import click

from pai.core._agent import Agent
from pai.core._config import PYPROJECT, PaiConfig, did_you_mean, origin_of, source_folder
from pai.core._errors import ConfigError, PaiError, UserError
from pai.core._messages import ToolCall
from pai.core._model import TextDelta, ToolCallFinished
from pai.core._run_events import DelegatedRunEvent, RunEvent, RunFinished, ToolCallResult

if TYPE_CHECKING:
    from pai.core._admin import ThreadHandle

RESULT_PREVIEW = 300
"""How many characters of a tool result the chat shows."""


class ChatTargetError(UserError, ValueError):
    """``pai chat``'s agent cannot be found: the module, the attribute, or not an agent."""


CHAT_KEYS = ("agent",)
"""The keys of the ``[chat]`` table."""


def load_agent(
    target: str, *, configured_in: str | None = None, folder: Path | None = None
) -> Agent:
    """The agent ``"package.module:attribute"`` names (the working directory is importable).

    ``configured_in`` is where ``[chat] agent`` set ``target`` (a file, an environment
    variable), for the messages; ``folder`` is importable too (that file's folder).
    """
    subject = (
        f"agent {target!r}"
        if configured_in is None
        else f"chat.agent = {target!r} ({configured_in})"
    )
    module_name, colon, attribute = target.partition(":")
    if not colon or not module_name or not attribute:
        raise ChatTargetError(
            f"{subject} is not '<module>:<attribute>'; write, e.g., "
            + (
                "`pai chat myapp.agents:coder`"
                if configured_in is None
                else 'agent = "myapp.agents:coder"'
            )
            + " for the agent `coder` defined in myapp/agents.py"
        )
    for path in (Path.cwd(), folder):
        if path is not None and str(path) not in sys.path:
            sys.path.insert(0, str(path))
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name is not None and (
            module_name == error.name or module_name.startswith(error.name + ".")
        ):
            looked = "the working directory" + (
                f", {folder}" if folder is not None and folder != Path.cwd() else ""
            )
            raise ChatTargetError(
                f"{subject}: there is no module {module_name!r} (looked in {looked} and the "
                "installed packages); run pai chat from your project's folder, install your "
                "package, or fix the module name"
            ) from error
        raise _import_failed(subject, module_name, error) from error
    except Exception as error:  # the user's module raised while importing
        raise _import_failed(subject, module_name, error) from error
    found = getattr(module, attribute, None)
    if found is None:
        names = [name for name in vars(module) if not name.startswith("_")]
        hint = did_you_mean(attribute, names, before="; ", after="")
        raise ChatTargetError(
            f"{subject}: module {module_name!r} has no attribute {attribute!r}{hint}"
        )
    if not isinstance(found, Agent):
        raise ChatTargetError(
            f"{subject} is a {type(found).__name__}, not an agent; point it at the "
            "value define_agent(...) returned"
        )
    return found


def _import_failed(subject: str, module_name: str, error: Exception) -> ChatTargetError:
    return ChatTargetError(
        f"{subject}: importing module {module_name!r} failed with {type(error).__name__}: "
        f"{error}; fix that module (`python -c 'import {module_name}'` shows the traceback)"
    )


def _chat_toml(config: PaiConfig) -> str:
    """The ``[chat]`` table to add, for the file the configuration comes from."""
    target = config.files[0] if config.files else Path("pai.toml")
    prefix = "tool.pai." if target.name == PYPROJECT else ""
    return f'add to {target}:\n\n    [{prefix}chat]\n    agent = "myapp.agents:coder"\n\n'


def chat_agent_from_config(config: PaiConfig) -> tuple[str, str, Path | None] | None:
    """The agent ``[chat]`` configures as ``(target, source, folder)``, or ``None`` without one.

    ``source`` says where ``agent`` was set, for messages; ``folder`` is the folder of the file
    that set it (importable, like the working directory). An unknown key, a value that is not
    a ``"module:attribute"`` string, or a ``chat`` that is not a table is a
    :class:`~pai.core.ConfigError` naming where it was set.
    """
    table = config.data.get("chat")
    if table is None:
        return None
    if not isinstance(table, Mapping):
        raise ConfigError(
            f"chat = {table!r} ({origin_of(config, ('chat',))}) is not a table; write [chat] "
            'with agent = "myapp.agents:coder"'
        )
    section = cast("Mapping[str, Any]", table)
    for key in sorted(section):
        if key in CHAT_KEYS:
            continue
        raise ConfigError(
            f"unknown key chat.{key} ({origin_of(config, ('chat', key))}); "
            f"{did_you_mean(key, CHAT_KEYS)}[chat] takes: "
            f"{', '.join(CHAT_KEYS)}"
        )
    if "agent" not in section:
        return None
    value = section["agent"]
    source = config.sources.get(("chat", "agent"))
    where = origin_of(config, ("chat", "agent"))
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(
            f"chat.agent = {value!r} ({where}) must be a non-empty string naming your agent as "
            '"<module>:<attribute>", e.g. agent = "myapp.agents:coder"'
        )
    return value.strip(), where, source_folder(source)


def configured_agent(config: PaiConfig) -> Agent | None:
    """The agent ``[chat] agent`` names, imported (``None`` when none is configured); raises
    :class:`ChatTargetError` naming the key and the file when it cannot be imported or is
    not an agent."""
    found = chat_agent_from_config(config)
    if found is None:
        return None
    target, where, folder = found
    return load_agent(target, configured_in=where, folder=folder)


def no_agent_message(config: PaiConfig) -> str:
    """What ``pai chat`` says when neither an argument nor ``[chat] agent`` names an agent."""
    return (
        "no agent to chat with: name it as MODULE:AGENT, e.g. `pai chat myapp.agents:coder` for "
        "the agent `coder` defined in myapp/agents.py, or configure it once and run `pai chat`; "
        + _chat_toml(config)
        + "(or set PAI_CHAT__AGENT=myapp.agents:coder). `pai demo --model openai:NAME` runs the "
        "demo agent on a model"
    )


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
