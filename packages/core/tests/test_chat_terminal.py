"""``pai chat`` on a real terminal: the process runs on a pty, keys are typed into it, and the
screen is read back through the pyte terminal emulator, as a person would see it.

Checked: the banner, an answer streamed and rendered as Markdown, a tool result block with its
exit code, an error that leaves an interactive chat running, up-arrow recalling the line typed
before (and the answer to it sent again), and the history file written at Ctrl-D.
"""

from __future__ import annotations

import fcntl
import os
import select
import signal
import struct
import subprocess
import sys
import termios
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pyte = pytest.importorskip("pyte", reason="pyte is in pai-core's test group: uv sync --group test")

COLUMNS, LINES = 100, 50

AGENT_MODULE = """
import asyncio

from pydantic import BaseModel

from pai.core import AssistantMessage, ModelNotFoundError, ToolCall, ToolResultMessage, define_agent, define_tool
from pai.core.ext import ResponseFinished, TextDelta, response_events
from pai.core.testing import FunctionModel


class RunInput(BaseModel):
    command: str


async def run(ctx):
    await asyncio.sleep(0.3)  # long enough for the spinner to show
    return {"stdout": "alpha.txt\\nbeta.txt\\n", "stderr": "", "exit_code": 0, "timed_out": False}


async def answer(request):
    last = request.messages[-1]
    if isinstance(last, ToolResultMessage):
        for piece in ("Listed ", "**two** ", "files:\\n\\n", "- alpha\\n", "- beta\\n"):
            await asyncio.sleep(0.05)
            yield TextDelta(piece)
        yield ResponseFinished("stop")
        return
    said = last.content
    if said == "list files":
        call = ToolCall(id="c1", name="run", arguments={"command": "ls"})
        for event in response_events(AssistantMessage(content=None, tool_calls=(call,))):
            yield event
        return
    if said == "wait":
        yield TextDelta("Thinking")
        await asyncio.sleep(60)
    if said == "break it":
        raise ModelNotFoundError("no such model 'broken-model'", model="broken-model")
    yield TextDelta("You said: ")
    yield TextDelta(said)
    yield ResponseFinished("stop")


coder = define_agent(
    name="coder",
    model=FunctionModel(stream_fn=answer),
    tools={
        "run": define_tool(
            id="run", description="Run a command.", input_schema=RunInput, execute=run
        )
    },
)
"""

UP = "\x1b[A"


def _take_terminal() -> None:
    """In the child, a session leader: make the pty on stdin its controlling terminal."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Terminal:
    """A process on a pty of COLUMNS x LINES, and the screen pyte draws from its output."""

    def __init__(
        self, args: list[str], cwd: Path, env: dict[str, str], stdout: int | None = None
    ) -> None:
        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", LINES, COLUMNS, 0, 0))
        self.process = subprocess.Popen(
            args,
            stdin=slave,
            stdout=slave if stdout is None else stdout,
            stderr=slave,
            cwd=cwd,
            env=env,
            start_new_session=True,
            preexec_fn=_take_terminal,  # Ctrl-C typed on the pty sends SIGINT, as on a terminal
        )
        os.close(slave)
        self.screen = pyte.Screen(COLUMNS, LINES)
        self.stream = pyte.ByteStream(self.screen)
        self.raw = b""

    def pump(self, timeout: float) -> None:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if ready:
            try:
                data = os.read(self.master, 65536)
            except OSError:  # the process ended and the pty closed
                return
            self.raw += data
            self.stream.feed(data)

    def text(self) -> str:
        return "\n".join(line.rstrip() for line in self.screen.display)

    def wait_for(self, check: Callable[[str], bool], what: str, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.pump(0.05)
            shown = self.text()
            if check(shown):
                return shown
        raise AssertionError(f"the screen never showed {what}; it shows:\n{self.text()}")

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def cursor_line(self) -> str:
        return self.screen.display[self.screen.cursor.y].rstrip()

    def close(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
        os.close(self.master)


CHAT = [sys.executable, "-m", "pai.core", "chat", "ttyagents:coder"]


def chat_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a chat in ``tmp_path``: its own history, no user settings."""
    (tmp_path / "ttyagents.py").write_text(textwrap.dedent(AGENT_MODULE), encoding="utf-8")
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PAI_", "OPENAI_", "COLUMNS", "LINES"))
    }
    env.update(
        TERM="xterm-256color",
        PAI_LOAD_PLUGINS="",
        XDG_STATE_HOME=str(tmp_path / "state"),
        HOME=str(tmp_path),
        INPUTRC=os.devnull,  # the user's key bindings must not change what the keys do
    )
    env.pop("NO_COLOR", None)
    return env


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Terminal]:
    shown = Terminal(CHAT, tmp_path, chat_env(tmp_path))
    try:
        yield shown
    finally:
        shown.close()


def prompt_ready(shown: str, count: int) -> bool:
    return shown.count("you>") >= count


def test_a_chat_on_a_terminal(terminal: Terminal, tmp_path: Path) -> None:
    shown = terminal.wait_for(lambda s: prompt_ready(s, 1), "the first prompt")
    assert "pai chat: agent 'coder' · model FunctionModel · thread " in shown
    assert "/help lists the commands" in shown

    # A tool call, its result block, then an answer streamed as Markdown.
    terminal.type("list files\r")
    shown = terminal.wait_for(lambda s: prompt_ready(s, 2), "the answer to 'list files'")
    assert '-> run({"command": "ls"})' in shown
    assert "<- run: exit 0" in shown
    assert "stdout" in shown
    assert "alpha.txt" in shown
    assert "beta.txt" in shown
    assert "Listed two files:" in shown  # **two** rendered bold, not as asterisks
    assert "**" not in shown
    assert "• alpha" in shown  # a Markdown list
    assert "[ok]" not in shown
    assert b"\x1b[1m" in terminal.raw  # bold: Markdown rendered on a terminal

    # A failed answer is reported and the chat goes on.
    terminal.type("break it\r")
    shown = terminal.wait_for(lambda s: prompt_ready(s, 3), "a prompt after the error")
    assert "Error: no such model 'broken-model'" in shown

    terminal.type("hello there\r")
    shown = terminal.wait_for(lambda s: prompt_ready(s, 4), "the answer to 'hello there'")
    assert shown.count("You said: hello there") == 1

    # Up-arrow recalls the line typed before; Enter sends it again.
    terminal.type(UP)
    terminal.wait_for(
        lambda _: terminal.cursor_line().endswith("you> hello there"), "the recalled line"
    )
    terminal.type(UP)
    terminal.wait_for(
        lambda _: terminal.cursor_line().endswith("you> break it"), "the line before it"
    )
    terminal.type("\x1b[B")  # down again
    terminal.wait_for(
        lambda _: terminal.cursor_line().endswith("you> hello there"), "the line after it"
    )
    terminal.type("\r")
    shown = terminal.wait_for(lambda s: prompt_ready(s, 5), "the answer to the recalled line")
    assert shown.count("You said: hello there") == 2

    # Ctrl-D ends the chat and saves the history.
    terminal.type("\x04")
    deadline = time.monotonic() + 30
    while terminal.process.poll() is None and time.monotonic() < deadline:
        terminal.pump(0.05)
    assert terminal.process.returncode == 0, terminal.text()
    terminal.pump(0.2)
    assert terminal.screen.cursor.x == 0  # the shell's prompt comes on a line of its own
    history = (tmp_path / "state" / "pai" / "history").read_text(encoding="utf-8")
    # readline keeps a line typed again right after itself once
    assert history.splitlines() == ["list files", "break it", "hello there"]
    assert (tmp_path / "state" / "pai" / "history").stat().st_mode & 0o077 == 0


def test_the_spinner_runs_while_a_tool_runs(terminal: Terminal) -> None:
    terminal.wait_for(lambda s: prompt_ready(s, 1), "the first prompt")
    terminal.type("list files\r")
    # Read from the bytes written: on a busy machine the spinner may be drawn and erased
    # between two reads of the screen.
    terminal.wait_for(lambda _: b"running run ..." in terminal.raw, "the spinner")
    shown = terminal.wait_for(lambda s: prompt_ready(s, 2), "the answer")
    assert "running run ..." not in shown  # gone once the result came


def test_ctrl_c_cancels_an_answer_then_ends_the_chat_at_the_prompt(terminal: Terminal) -> None:
    terminal.wait_for(lambda s: prompt_ready(s, 1), "the first prompt")
    terminal.type("wait\r")
    terminal.wait_for(lambda s: "Thinking" in s, "the answer starting")
    terminal.type("\x03")
    shown = terminal.wait_for(lambda s: prompt_ready(s, 2), "a prompt after Ctrl-C")
    assert "pai: cancelled; the thread keeps what was said before this answer" in shown
    terminal.type("half typed")
    terminal.wait_for(lambda _: terminal.cursor_line().endswith("you> half typed"), "typing")
    terminal.type("\x03")
    deadline = time.monotonic() + 30
    while terminal.process.poll() is None and time.monotonic() < deadline:
        terminal.pump(0.05)
    terminal.pump(0.2)
    assert terminal.process.returncode == 0, terminal.text()
    assert terminal.screen.cursor.x == 0  # the shell's prompt comes on a line of its own


def test_commands_on_a_terminal(terminal: Terminal) -> None:
    shown = terminal.wait_for(lambda s: prompt_ready(s, 1), "the first prompt")
    first = shown.split("thread ", 1)[1].split()[0]
    terminal.type("/help\r")
    shown = terminal.wait_for(lambda s: prompt_ready(s, 2), "the help")
    assert "/new" in shown
    terminal.type("/new\r")
    shown = terminal.wait_for(lambda s: prompt_ready(s, 3), "a new thread")
    assert f"the previous one was {first}" in shown.replace("\n", "")  # a wrapped line
    terminal.type("/exit\r")
    deadline = time.monotonic() + 30
    while terminal.process.poll() is None and time.monotonic() < deadline:
        terminal.pump(0.05)
    assert terminal.process.returncode == 0, terminal.text()


def test_typed_at_a_terminal_with_stdout_to_a_file_the_file_gets_the_answers_alone(
    tmp_path: Path,
) -> None:
    answers = tmp_path / "answers.txt"
    with answers.open("wb") as out:
        typed = Terminal(CHAT, tmp_path, chat_env(tmp_path), stdout=out.fileno())
    try:
        typed.wait_for(lambda s: prompt_ready(s, 1), "the prompt, on stderr")
        typed.type("hello there\r")
        typed.wait_for(lambda s: prompt_ready(s, 2), "the next prompt")
        typed.type("\x04")
        deadline = time.monotonic() + 30
        while typed.process.poll() is None and time.monotonic() < deadline:
            typed.pump(0.05)
        assert typed.process.returncode == 0, typed.text()
    finally:
        typed.close()
    assert answers.read_bytes() == b"You said: hello there\n"  # no prompt, no escape codes
