"""``pai chat`` driven by piped input against the test server, through the real openai SDK:
streamed text, each tool call and result in the configured sandbox, a stored thread resumed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from pai.core.cli import create_cli
from pai.core.testing import reset_plugins
from pai.model_openai.testing import (
    OpenAITestServer,
    function_call,
    stalled_stream,
    text_answer,
    tool_calls_answer,
)

AGENT_MODULE = """
from pydantic import BaseModel

from pai.core import ToolContext, define_agent, define_tool
from pai.sandbox import sandbox


class RunInput(BaseModel):
    command: str


async def run(ctx: ToolContext[RunInput]) -> str:
    result = await ctx.capabilities.sandbox.run_command(ctx.input.command)
    return result.stdout


coder = define_agent(
    name="coder",
    instructions="You run commands.",
    tools={
        "run": define_tool(
            id="run",
            description="Run a command in the sandbox.",
            input_schema=RunInput,
            capabilities={"sandbox": sandbox},
            execute=run,
        )
    },
)
not_an_agent = 42
"""


@pytest.fixture(autouse=True)
def project(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """A project folder with the agent's module and pai.toml, as the working directory."""
    for name in list(os.environ):
        if name.startswith(("PAI_", "OPENAI_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    (tmp_path / "chatagents.py").write_text(textwrap.dedent(AGENT_MODULE), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "chatagents", raising=False)
    reset_plugins()
    yield tmp_path
    reset_plugins()


def configure(project: Path, server: OpenAITestServer, *, storage: bool = False) -> None:
    text = (
        '[model]\nprovider = "openai"\nname = "chat-model"\n\n'
        f'[model.openai]\nbase_url = "{server.base_url}"\n\n'
        '[capabilities.sandbox]\nprovider = "inmemory"\n'
    )
    if storage:
        text += '\n[storage]\nurl = "sqlite:///threads.db"\n'
    (project / "pai.toml").write_text(text, encoding="utf-8")


def test_chat_streams_the_answer_and_shows_each_tool_call_and_result(
    project: Path, openai_server: OpenAITestServer
) -> None:
    configure(project, openai_server)
    openai_server.add(
        tool_calls_answer(function_call("run", {"command": "echo sandboxed"}, id="c1")),
        text_answer("The command ", "printed sandboxed."),
        text_answer("Bye."),
    )

    result = CliRunner().invoke(
        create_cli(), ["chat", "chatagents:coder"], input="run it\nthanks\n"
    )

    assert result.exit_code == 0, result.output
    assert '-> run({"command": "echo sandboxed"})' in result.stdout
    assert "  <- run:\n     | sandboxed\n" in result.stdout
    assert "The command printed sandboxed.\n" in result.stdout
    assert result.stdout.rstrip().endswith("Bye.")
    assert "come back to it with --thread" in result.stderr
    assert openai_server.requests[-1].model == "chat-model"
    assert [m["role"] for m in openai_server.requests[-1].messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]


def test_chat_resumes_a_stored_thread(project: Path, openai_server: OpenAITestServer) -> None:
    configure(project, openai_server, storage=True)
    openai_server.add(text_answer("First answer."), text_answer("Second answer."))
    first = CliRunner().invoke(create_cli(), ["chat", "chatagents:coder"], input="one\n")
    thread_id = first.stderr.split("thread ", 1)[1].split(" ", 1)[0]

    second = CliRunner().invoke(
        create_cli(), ["chat", "chatagents:coder", "--thread", thread_id], input="two\n"
    )

    assert second.exit_code == 0, second.output
    assert "Second answer." in second.stdout
    sent = [m.get("content") for m in openai_server.requests[-1].messages]
    assert sent[1:] == ["one", "First answer.", "two"]


def test_chat_with_thread_but_no_storage_says_what_to_configure(
    project: Path, openai_server: OpenAITestServer
) -> None:
    configure(project, openai_server)

    result = CliRunner().invoke(create_cli(), ["chat", "chatagents:coder", "--thread", "x"])

    assert result.exit_code == 2
    assert 'url = "sqlite:///threads.db"' in result.stderr


def test_chat_names_a_missing_attribute_with_a_close_match(project: Path) -> None:
    result = CliRunner().invoke(create_cli(), ["chat", "chatagents:codr"])

    assert result.exit_code == 2
    assert "did you mean 'coder'?" in result.stderr


def test_chat_refuses_a_target_that_is_not_an_agent(project: Path) -> None:
    result = CliRunner().invoke(create_cli(), ["chat", "chatagents:not_an_agent"])

    assert result.exit_code == 2
    assert "is a int, not an agent" in result.stderr


def test_chat_model_option_overrides_the_configured_model(
    project: Path, openai_server: OpenAITestServer
) -> None:
    configure(project, openai_server)
    openai_server.add(text_answer("hi"))

    result = CliRunner().invoke(
        create_cli(), ["chat", "chatagents:coder", "--model", "openai:other-model"], input="hi\n"
    )

    assert result.exit_code == 0, result.output
    assert openai_server.requests[0].model == "other-model"


def test_python_dash_m_pai_core_runs_chat_like_the_pai_script(
    project: Path, openai_server: OpenAITestServer
) -> None:
    configure(project, openai_server)
    openai_server.add(text_answer("Hello ", "from a subprocess."))

    done = subprocess.run(
        [sys.executable, "-m", "pai.core", "chat", "chatagents:coder"],
        input="hello\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Hello from a subprocess."


def test_ctrl_c_cancels_the_answer_in_progress_and_the_chat_goes_on(
    project: Path, openai_server: OpenAITestServer
) -> None:
    configure(project, openai_server)
    openai_server.add(stalled_stream("I was about to"), text_answer("Fresh answer."))
    chat = subprocess.Popen(
        [sys.executable, "-m", "pai.core", "chat", "chatagents:coder"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert chat.stdin is not None
        chat.stdin.write("first\n")
        chat.stdin.flush()
        assert openai_server.wait_for_streams_started(timeout=30)
        chat.send_signal(signal.SIGINT)
        assert openai_server.wait_for_streams_closed(timeout=10)
        out, err = chat.communicate("second\n", timeout=60)
    finally:
        if chat.poll() is None:
            chat.kill()

    assert chat.returncode == 0, err
    assert "cancelled; the thread keeps what was said before this answer" in err
    assert out.endswith("Fresh answer.\n")
    # The interrupted answer was not kept: the next request carries only the new message.
    assert [m.get("content") for m in openai_server.requests[-1].messages][1:] == ["second"]


def test_pai_demo_model_runs_the_demo_agent_on_the_model(
    project: Path, openai_server: OpenAITestServer
) -> None:
    configure(project, openai_server)
    openai_server.add(
        tool_calls_answer(function_call("run", {"command": "echo from the model"}, id="c1")),
        text_answer("Ran it."),
    )

    result = CliRunner().invoke(create_cli(), ["demo", "--model", "openai:demo-model"])

    assert result.exit_code == 0, result.output
    assert "done: 2 model steps (openai:demo-model), 1 tool calls" in result.stdout
    assert "from the model" in result.stdout
    assert openai_server.requests[0].model == "demo-model"
