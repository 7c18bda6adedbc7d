"""``pai chat`` run by a script against real servers on 127.0.0.1: every failed answer exits
1 with a message naming the URL (a 404 without ``/v1`` suggesting it, a refused key never
printed); ``-p`` answers once, with a tool call in the in-memory sandbox."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from pai.core.cli import create_cli
from pai.core.testing import reset_plugins
from pai.model_openai.testing import (
    OpenAITestServer,
    error_answer,
    function_call,
    text_answer,
    tool_calls_answer,
)

KEY = "sk-test-0123456789abcdef"

AGENT_MODULE = """
from pydantic import BaseModel

from pai.core import ToolContext, define_agent, define_tool
from pai.sandbox import CommandResult, sandbox


class RunInput(BaseModel):
    command: str


async def run(ctx: ToolContext[RunInput]) -> CommandResult:
    return await ctx.capabilities.sandbox.run_command(ctx.input.command)


coder = define_agent(
    name="coder",
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
"""


@pytest.fixture(autouse=True)
def project(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    for name in list(os.environ):
        if name.startswith(("PAI_", "OPENAI_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    (tmp_path / "erragents.py").write_text(textwrap.dedent(AGENT_MODULE), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "erragents", raising=False)
    reset_plugins()
    yield tmp_path
    reset_plugins()


def configure(project: Path, base_url: str, model: str = "chat-model") -> None:
    (project / "pai.toml").write_text(
        f'[model]\nprovider = "openai"\nname = "{model}"\n\n'
        f'[model.openai]\nbase_url = "{base_url}"\nmax_retries = 0\n\n'
        '[capabilities.sandbox]\nprovider = "inmemory"\n',
        encoding="utf-8",
    )


def chat(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(create_cli(), ["chat", "erragents:coder", *args], input=input)


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_unknown_model_exits_1_naming_the_model_and_url(
    project: Path, openai_server: OpenAITestServer
) -> None:
    configure(project, openai_server.base_url, model="gpt-nope")
    openai_server.add(
        error_answer(404, "The model `gpt-nope` does not exist", code="model_not_found"),
        text_answer("never asked for"),
    )

    result = chat(input="hello\nand again\n")

    assert result.exit_code == 1, result.output
    assert "serves a model named 'gpt-nope'" in result.stderr
    assert f"{openai_server.base_url}/chat/completions" in result.stderr
    assert "the messages after it were not sent" in result.stderr
    assert len(openai_server.requests) == 1


def test_a_refused_key_exits_1_and_the_key_is_never_printed(
    project: Path, openai_server: OpenAITestServer
) -> None:
    configure(project, openai_server.base_url)
    openai_server.add(error_answer(401, f"Incorrect API key provided: {KEY}"))

    result = chat(input="hello\n")

    assert result.exit_code == 1, result.output
    assert "the API key was refused" in result.stderr
    assert KEY not in result.output


def test_a_closed_port_exits_1_naming_the_url_tried(project: Path) -> None:
    base_url = f"http://127.0.0.1:{closed_port()}/v1"
    configure(project, base_url)

    result = chat("-p", "hello")

    assert result.exit_code == 1, result.output
    assert f"the connection failed ({base_url}/chat/completions" in result.stderr
    assert "check the base URL" in result.stderr


def test_a_base_url_without_v1_exits_1_suggesting_it(
    project: Path, openai_server: OpenAITestServer
) -> None:
    root = openai_server.base_url.removesuffix("/v1")
    configure(project, f"{root}/api")
    openai_server.add(text_answer("never asked for"))

    result = chat(input="hello\n")

    assert result.exit_code == 1, result.output
    assert f"the base URL {root}/api has no /v1" in result.stderr
    assert f"try base_url = '{root}/api/v1'" in result.stderr
    assert openai_server.remaining == 1


def test_p_answers_once_with_a_tool_call_in_the_sandbox(
    project: Path, openai_server: OpenAITestServer
) -> None:
    configure(project, openai_server.base_url)
    openai_server.add(
        tool_calls_answer(
            function_call("run", {"command": "echo sandboxed; echo oops >&2; exit 3"}, id="c1")
        ),
        text_answer("The command ", "exited 3."),
    )

    result = chat("-m", "openai:one-shot-model", "-p", "run it")

    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        '  -> run({"command": "echo sandboxed; echo oops >&2; exit 3"})',
        "  <- run: exit 3",
        "     stdout:",
        "     | sandboxed",
        "     stderr:",
        "     | oops",
        "The command exited 3.",
    ]
    assert [request.model for request in openai_server.requests] == ["one-shot-model"] * 2


def test_as_processes_the_exit_status_is_the_shells(project: Path) -> None:
    """The shipped server as a process (``python -m pai.model_openai.testing``), ``pai chat -p``
    as another: the status a shell script sees."""
    (project / "answers.json").write_text(
        '[{"error": 401, "message": "Incorrect API key provided"}, {"text": "Hello!"}]',
        encoding="utf-8",
    )
    server = subprocess.Popen(
        [sys.executable, "-m", "pai.model_openai.testing", "--script", "answers.json"],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:"), base_url
        configure(project, base_url)
        env = {**os.environ, "OPENAI_API_KEY": KEY}
        command = [sys.executable, "-m", "pai.core", "chat", "erragents:coder", "-p", "hi"]

        refused = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True)
        answered = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True)
    finally:
        server.terminate()
        server.wait(30)

    assert refused.returncode == 1, refused.stderr
    assert "the API key was refused" in refused.stderr
    assert f"{base_url}/chat/completions" in refused.stderr
    assert refused.stdout == ""
    assert answered.returncode == 0, answered.stderr
    assert answered.stdout == "Hello!\n"
