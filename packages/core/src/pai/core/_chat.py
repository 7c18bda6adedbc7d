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
result (a command's exit code and its stdout and stderr, as ``pai demo`` shows them). The agent
runs with what configuration gives it: its model (or ``--model``/``-m``, or ``[model]``), its
capabilities (``[capabilities.<id>]``, the sandbox among them) and its storage
(``[storage]``). Ctrl-C cancels the run in progress (the thread keeps every step completed
before it, and nothing of the interrupted answer); Ctrl-C at the prompt, or end of input
(Ctrl-D), ends the chat.

On a terminal the chat starts with a banner (agent, model, capabilities with their provider,
thread), lines are edited with ``readline`` and kept in :func:`history_path` (up-arrow recalls
them), answers render as Markdown, and a spinner runs while tools run; piped, it prints plain
text. ``/help``, ``/thread``, ``/new`` and ``/exit`` are commands (:data:`COMMANDS`).

``pai chat myapp.agents:coder -p "question"`` sends one message, prints the answer and exits.
A chat that is not interactive (``-p``, or piped input) stops at the first failed answer and
exits with status 1; an interactive one reports the error and goes on.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import click

from pai.core._chat_render import ChatView, PlainView, RunPrinter
from pai.core._chat_target import (
    CHAT_KEYS,
    ChatTargetError,
    chat_agent_from_config,
    configured_agent,
    load_agent,
    no_agent_message,
)
from pai.core._config import PaiConfig, capability_section, did_you_mean
from pai.core._errors import ConfigError, PaiError

if TYPE_CHECKING:
    from pai.core._admin import ThreadHandle
    from pai.core._agent import Agent

COMMANDS = {
    "help": "list these commands",
    "thread": "show this thread's id, to come back to it with --thread",
    "new": "start a new thread (the agent forgets this conversation)",
    "exit": "end the chat (so do Ctrl-D and /quit)",
}
"""The chat's commands: a line that is ``/`` and one of these words (``//`` sends a ``/``)."""

_COMMAND = re.compile(r"/([A-Za-z]+)")
_PROMPT = "\x01\x1b[1;36m\x02you>\x01\x1b[0m\x02 "
"""The prompt on a terminal (readline counts what is between \\x01 and \\x02 as zero-width)."""


@dataclass(slots=True)
class ChatOutcome:
    """How a chat went: answers completed, failed (an error), and cancelled (Ctrl-C)."""

    completed: int = 0
    failed: int = 0
    cancelled: int = 0
    thread_id: str | None = None
    """The thread the chat ended on (``/new`` switches)."""

    def exit_code(self) -> int:
        """The exit status of a chat that is not interactive: 1 after a failed answer (or a
        command that failed), else 0 (an answer cancelled with Ctrl-C is not a failure)."""
        return 1 if self.failed else 0


@dataclass(slots=True)
class _Chat:
    """One chat session's state: the run in progress, which Ctrl-C cancels."""

    current: anyio.CancelScope | None = None
    interrupted: bool = False
    left_at_prompt: bool = False


def _note(text: str) -> None:
    click.echo(text, err=True)
    sys.stderr.flush()


def history_path() -> Path:
    """Where ``pai chat`` keeps the lines typed: ``$XDG_STATE_HOME/pai/history``, by default
    ``~/.local/state/pai/history`` (a relative ``XDG_STATE_HOME`` is ignored, as the XDG
    specification says)."""
    state = os.environ.get("XDG_STATE_HOME", "")
    base = Path(state) if state and Path(state).is_absolute() else Path.home() / ".local" / "state"
    return base / "pai" / "history"


class _LineEditing:
    """Line editing and history for a terminal (stdlib ``readline``), the history in
    :func:`history_path`, readable by its owner only; the terminal's modes restored at the end
    (a prompt left waiting at Ctrl-C must not leave it raw)."""

    HISTORY_LENGTH = 1000

    def __init__(self) -> None:
        self.path = history_path()
        self._readline: Any = None
        self._terminal: Any = None
        try:
            import termios

            self._terminal = (termios, termios.tcgetattr(sys.stdin.fileno()))
        except (ImportError, OSError, ValueError):  # not a POSIX terminal
            self._terminal = None
        try:
            import readline
        except ImportError:
            _note("pai: no line editing or history: this Python has no readline module")
            return
        self._readline = readline
        readline.set_history_length(self.HISTORY_LENGTH)
        if self.path.exists():
            try:
                readline.read_history_file(str(self.path))
            except OSError as error:
                _note(f"pai: the chat history at {self.path} could not be read ({error})")

    def save(self) -> None:
        """Write the history back (creating its folder), and restore the terminal."""
        if self._terminal is not None:
            termios, attributes = self._terminal
            with contextlib.suppress(OSError, ValueError):
                termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, attributes)
        if self._readline is None:
            return
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            # Created readable by its owner only before a line is written (lines may be secret).
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600))
            self.path.chmod(0o600)
            self._readline.write_history_file(str(self.path))
        except OSError as error:
            _note(
                f"pai: the chat history was not saved to {self.path} ({error}); set "
                "XDG_STATE_HOME to a folder you can write"
            )


def _is_terminal(stream: object) -> bool:
    try:
        return bool(getattr(stream, "isatty", lambda: False)())
    except ValueError:  # a closed stream
        return False


async def _read_line(prompt: str | None) -> str | None:
    """The next line of input (``None`` at its end), read in a daemon thread: a prompt still
    waiting when the chat ends (Ctrl-C) must not keep the process alive."""
    done = anyio.Event()
    box: list[str | None] = []
    errors: list[BaseException] = []
    token = anyio.lowlevel.current_token()

    def read() -> None:
        try:
            if prompt is None:
                box.append(sys.stdin.readline() or None)
            else:
                try:
                    box.append(input(prompt))
                except EOFError:
                    box.append(None)
        except BaseException as error:  # handed to the chat, which raises it
            errors.append(error)
        with contextlib.suppress(Exception):  # the chat has ended meanwhile
            anyio.from_thread.run_sync(done.set, token=token)

    threading.Thread(target=read, name="pai-chat-input", daemon=True).start()
    await done.wait()
    if errors:
        raise errors[0]
    return box[0]


async def chat(
    thread: ThreadHandle,
    *,
    interactive: bool,
    messages: Sequence[str] | None = None,
    new_thread: Callable[[], Awaitable[ThreadHandle]] | None = None,
    view: ChatView | None = None,
    banner: str | None = None,
    outcome: ChatOutcome | None = None,
) -> ChatOutcome:
    """Chat on ``thread``: each message streamed to ``view``, its answer shown as it comes.

    The messages are ``messages`` when given (``pai chat -p``), else the lines of stdin: typed
    at a prompt with line editing and history when ``interactive``, piped otherwise. A failed
    answer is reported on stderr; an interactive chat goes on, any other stops there (its
    :meth:`ChatOutcome.exit_code` is then 1). Ctrl-C cancels the answer in progress and the
    chat goes on, in either. ``new_thread`` makes the thread ``/new``
    switches to; ``banner`` is printed on stderr first. ``outcome`` is filled as the chat goes
    (pass one to read it after a failure).
    """
    state = _Chat()
    outcome = outcome if outcome is not None else ChatOutcome()
    outcome.thread_id = thread.id
    view = view if view is not None else PlainView()
    typed = interactive and messages is None
    # readline edits a line only when stdout is the terminal too; with stdout piped to a
    # file, the prompt goes to stderr, plain, and the file gets the answers alone.
    editing = _LineEditing() if typed and _is_terminal(sys.stdout) else None
    pending = list(messages) if messages is not None else None
    stopped: str | None = None
    if banner:
        _note(banner)

    async def next_message() -> str | None:
        if pending is not None:
            return pending.pop(0) if pending else None
        if editing is not None:
            return await _read_line(_PROMPT)
        if typed:
            click.echo("you> ", nl=False, err=True)
            sys.stderr.flush()
        return await _read_line(None)

    async def watch_interrupts(scope: anyio.CancelScope) -> None:
        with anyio.open_signal_receiver(signal.SIGINT) as signals:
            async for _ in signals:
                if state.current is not None:
                    state.interrupted = True
                    state.current.cancel()
                else:
                    state.left_at_prompt = True
                    scope.cancel()  # Ctrl-C at the prompt: the chat ends
                    return

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch_interrupts, tg.cancel_scope)
            while True:
                line = await next_message()
                if line is None:
                    state.left_at_prompt = True  # Ctrl-D
                    break
                text = line.strip()
                if not text:
                    continue
                command = _COMMAND.fullmatch(text.split(maxsplit=1)[0])
                if command is not None:
                    name = command.group(1).lower()
                    if name in ("exit", "quit"):
                        break
                    switched = await _command(name, text, thread, new_thread)
                    if switched is not None:
                        thread = switched
                        outcome.thread_id = thread.id
                    elif not interactive:  # a script with a wrong command stops there
                        outcome.failed += 1
                        stopped = "at the failed command"
                        break
                    continue
                if text.startswith("//"):
                    text = text[1:]
                printer = RunPrinter(view)
                with anyio.CancelScope() as scope:
                    state.current = scope
                    try:
                        async for event in thread.stream(text):
                            printer.show(event)
                    except PaiError as error:  # a model or tool failure: say it
                        printer.finish()
                        _note(f"Error: {error}")
                        outcome.failed += 1
                        if interactive:
                            continue
                        stopped = "at the failed answer"
                        break
                    finally:
                        state.current = None
                if scope.cancelled_caught or state.interrupted:
                    state.interrupted = False
                    printer.finish()
                    _note("pai: cancelled; the thread keeps what was said before this answer")
                    outcome.cancelled += 1
                    continue
                outcome.completed += 1
            tg.cancel_scope.cancel()
    finally:
        if editing is not None:
            if state.left_at_prompt:
                click.echo("")  # the shell's prompt on a line of its own
            editing.save()
    if stopped is not None and pending is None:  # piped input: say what was left unread
        _note(f"pai: stopped {stopped}; the messages after it were not sent")
    return outcome


def chat_view(*, terminal: bool) -> ChatView:
    """How the chat shows answers: Markdown and a spinner on a terminal, plain text otherwise."""
    if terminal:
        from pai.core._chat_render import RichView

        return RichView()
    return PlainView()


def model_label(model: object, model_name: str | None = None) -> str:
    """The model as the banner names it: ``--model``'s value, else its class and name."""
    if model_name:
        return model_name
    if model is None:
        return "none"
    if isinstance(model, str):
        return model
    name = getattr(model, "name", None)
    kind = type(model).__name__
    return f"{kind} {name!r}" if isinstance(name, str) and name else kind


def capability_labels(agent: Agent, config: PaiConfig | None) -> list[str]:
    """Each capability the agent needs, with the provider configuration names for it."""
    labels: list[str] = []
    for cap_id in sorted(agent.requirements):
        provider: object = None
        if config is not None:
            with contextlib.suppress(ConfigError):  # the runtime already checked it
                found = capability_section(config, cap_id)
                if found is not None:
                    provider = found[1].get("provider")
        labels.append(f"{cap_id} {provider!r}" if isinstance(provider, str) else cap_id)
    return labels


def chat_banner(
    agent: Agent,
    model_name: str | None,
    config: PaiConfig | None,
    thread_id: str,
    interactive: bool,
) -> str | None:
    """The lines an interactive chat starts with: the agent, its model, its capabilities (the
    sandbox's provider), the thread, and how to get help; ``None`` when not interactive."""
    if not interactive:
        return None
    parts = [f"agent {agent.name!r}", f"model {model_label(agent.model, model_name)}"]
    capabilities = capability_labels(agent, config)
    if capabilities:
        parts.append("capabilities: " + ", ".join(capabilities))
    parts.append(f"thread {thread_id}")
    return (
        "pai chat: "
        + " · ".join(parts)
        + "\n/help lists the commands; Ctrl-C cancels an answer, Ctrl-D or /exit ends the chat"
    )


async def _command(
    name: str,
    text: str,
    thread: ThreadHandle,
    new_thread: Callable[[], Awaitable[ThreadHandle]] | None,
) -> ThreadHandle | None:
    """Run the chat command ``name``: the thread to go on with, ``None`` when it failed."""
    if name == "help":
        width = max(len(each) for each in COMMANDS) + 1
        lines = [f"  /{each:<{width}} {what}" for each, what in COMMANDS.items()]
        _note(
            "commands:\n"
            + "\n".join(lines)
            + "\n  (a line starting with // is sent as a message starting with /)"
        )
        return thread
    if name == "thread":
        _note(f"pai: thread {thread.id} (come back to it with --thread {thread.id})")
        return thread
    if name == "new":
        if new_thread is None:
            _note("pai: /new is not available here")
            return None
        fresh = await new_thread()
        _note(
            f"pai: new thread {fresh.id}; the previous one was {thread.id} (come back to it "
            f"with --thread {thread.id})"
        )
        return fresh
    hint = did_you_mean(name, [*COMMANDS, "quit"], show=lambda each: f"'/{each}'")
    _note(
        f"pai: unknown command {text.split()[0]!r}; {hint}/help lists the commands (start the "
        "line with // to send it as a message)"
    )
    return None


__all__ = [
    "CHAT_KEYS",
    "COMMANDS",
    "ChatOutcome",
    "ChatTargetError",
    "capability_labels",
    "chat",
    "chat_agent_from_config",
    "chat_banner",
    "chat_view",
    "configured_agent",
    "history_path",
    "load_agent",
    "model_label",
    "no_agent_message",
]
