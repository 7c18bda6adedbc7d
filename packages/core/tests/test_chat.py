"""``pai chat`` with a scripted model: piped lines are messages, answers and tool calls are
printed as they stream, and a bad target is one clear error."""

from __future__ import annotations

import os
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from pai.core import reset_plugins
from pai.core.cli import create_cli

AGENT_MODULE = """
from pydantic import BaseModel

from pai.core import define_agent, define_tool
from pai.core.testing import ScriptedModel, text, tool_call


class ShoutInput(BaseModel):
    word: str


shout = define_tool(
    id="shout",
    description="Shout a word.",
    input_schema=ShoutInput,
    execute=lambda ctx: ctx.input.word.upper(),
)

talker = define_agent(
    name="talker",
    model=ScriptedModel([tool_call("shout", {"word": "hey"}), text("I shouted."), text("Bye.")]),
    tools={"shout": shout},
)
silent = define_agent(name="silent")
"""


@pytest.fixture(autouse=True)
def project(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    for name in list(os.environ):
        if name.startswith("PAI_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("PAI_LOAD_PLUGINS", "")
    (tmp_path / "talkers.py").write_text(textwrap.dedent(AGENT_MODULE), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "talkers", raising=False)
    reset_plugins()
    yield tmp_path
    reset_plugins()


def test_each_line_is_a_message_and_tool_calls_and_results_are_shown() -> None:
    result = CliRunner().invoke(create_cli(), ["chat", "talkers:talker"], input="go\nagain\n")

    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        '  -> shout({"word": "hey"})',
        "  <- shout [ok]: HEY",
        "I shouted.",
        "Bye.",
    ]
    assert "come back to it with --thread" in result.stderr


def test_without_an_agent_the_error_shows_how_to_name_one() -> None:
    result = CliRunner().invoke(create_cli(), ["chat"])

    assert result.exit_code == 2
    assert "pai chat myapp.agents:coder" in result.stderr


def test_a_target_without_a_colon_is_refused() -> None:
    result = CliRunner().invoke(create_cli(), ["chat", "talkers"])

    assert result.exit_code == 2
    assert "is not '<module>:<attribute>'" in result.stderr


def test_a_missing_module_is_named() -> None:
    result = CliRunner().invoke(create_cli(), ["chat", "nowhere.agents:coder"])

    assert result.exit_code == 2
    assert "there is no module 'nowhere.agents'" in result.stderr


def test_an_agent_without_any_model_says_how_to_give_it_one() -> None:
    result = CliRunner().invoke(create_cli(), ["chat", "talkers:silent"], input="hi\n")

    assert result.exit_code == 2
    assert "--model openai:NAME" in result.stderr
    assert "[model]" in result.stderr
