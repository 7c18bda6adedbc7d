"""``pai chat`` with a scripted model: piped lines are messages, answers and tool calls are
printed as they stream, and a bad target is one clear error; without an argument, the agent
``[chat] agent`` configures."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

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
greeting = "hello"
"""


@pytest.fixture(autouse=True)
def project(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fresh_plugins: None) -> Path:
    monkeypatch.setenv("PAI_LOAD_PLUGINS", "")
    (tmp_path / "talkers.py").write_text(textwrap.dedent(AGENT_MODULE), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "talkers", raising=False)
    monkeypatch.setattr(sys, "path", [*sys.path])  # the folders pai chat adds go with the test
    return tmp_path


def test_each_line_is_a_message_and_tool_calls_and_results_are_shown() -> None:
    result = CliRunner().invoke(create_cli(), ["chat", "talkers:talker"], input="go\nagain\n")

    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        '  -> shout({"word": "hey"})',
        "  <- shout:",
        "     | HEY",
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


# -- the agent [chat] configures ----------------------------------------------------------------

TALKER_LINES = [
    '  -> shout({"word": "hey"})',
    "  <- shout:",
    "     | HEY",
    "I shouted.",
    "Bye.",
]


def test_without_an_argument_the_agent_configured_in_pai_toml_is_used() -> None:
    Path("pai.toml").write_text('[chat]\nagent = "talkers:talker"\n')

    result = CliRunner().invoke(create_cli(), ["chat"], input="go\nagain\n")

    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == TALKER_LINES


def test_the_agent_can_be_configured_in_pyproject_tool_pai_chat() -> None:
    Path("pyproject.toml").write_text('[tool.pai.chat]\nagent = "talkers:talker"\n')

    result = CliRunner().invoke(create_cli(), ["chat"], input="go\nagain\n")

    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == TALKER_LINES


def test_the_environment_variable_pai_chat_agent_overrides_the_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    Path("pai.toml").write_text('[chat]\nagent = "talkers:silent"\n')
    monkeypatch.setenv("PAI_CHAT__AGENT", "talkers:talker")

    result = CliRunner().invoke(create_cli(), ["chat"], input="go\nagain\n")

    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == TALKER_LINES


def test_an_agent_argument_wins_over_the_configured_agent() -> None:
    Path("pai.toml").write_text('[chat]\nagent = "talkers:silent"\n')  # silent has no model

    result = CliRunner().invoke(create_cli(), ["chat", "talkers:talker"], input="go\nagain\n")

    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == TALKER_LINES


def test_the_configured_agent_imports_from_the_config_files_folder(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (project / "rootagents.py").write_text(textwrap.dedent(AGENT_MODULE), encoding="utf-8")
    (project / "pai.toml").write_text('[chat]\nagent = "rootagents:talker"\n')
    (project / "src" / "deep").mkdir(parents=True)
    monkeypatch.chdir(project / "src" / "deep")

    try:
        result = CliRunner().invoke(create_cli(), ["chat"], input="go\nagain\n")
    finally:
        sys.modules.pop("rootagents", None)

    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == TALKER_LINES


def test_an_unknown_key_in_chat_gets_a_did_you_mean_naming_the_file() -> None:
    Path("pai.toml").write_text('[chat]\nagnet = "talkers:talker"\n')

    result = CliRunner().invoke(create_cli(), ["chat", "talkers:talker"], input="go\n")

    assert result.exit_code == 2
    assert "unknown key chat.agnet" in result.stderr
    assert "did you mean 'agent'?" in result.stderr
    assert "pai.toml" in result.stderr


def test_a_misspelt_chat_table_gets_a_did_you_mean() -> None:
    Path("pai.toml").write_text('[caht]\nagent = "talkers:talker"\n')

    result = CliRunner().invoke(create_cli(), ["chat"])

    assert result.exit_code == 2
    assert "unknown configuration table [caht]" in result.stderr
    assert "did you mean 'chat'?" in result.stderr


def test_a_configured_agent_that_is_not_a_string_is_refused_naming_the_file() -> None:
    Path("pai.toml").write_text("[chat]\nagent = 5\n")

    result = CliRunner().invoke(create_cli(), ["chat"])

    assert result.exit_code == 2
    assert "chat.agent = 5" in result.stderr
    assert "pai.toml" in result.stderr
    assert "must be a non-empty string" in result.stderr


def test_a_configured_agent_whose_module_does_not_import_names_the_key_and_file() -> None:
    Path("pai.toml").write_text('[chat]\nagent = "nowhere.agents:coder"\n')

    result = CliRunner().invoke(create_cli(), ["chat"])

    assert result.exit_code == 2
    assert "chat.agent = 'nowhere.agents:coder'" in result.stderr
    assert "pai.toml" in result.stderr
    assert "there is no module 'nowhere.agents'" in result.stderr


def test_a_configured_module_that_fails_to_import_is_named_with_its_error() -> None:
    Path("broken.py").write_text("import nowhere_to_be_found\n")
    Path("pai.toml").write_text('[chat]\nagent = "broken:coder"\n')

    try:
        result = CliRunner().invoke(create_cli(), ["config", "--check"])
    finally:
        sys.modules.pop("broken", None)

    assert result.exit_code == 2
    assert "chat.agent = 'broken:coder'" in result.stderr
    assert "pai.toml" in result.stderr
    assert "importing module 'broken' failed with ModuleNotFoundError" in result.stderr
    assert "nowhere_to_be_found" in result.stderr
    assert "Traceback" not in result.output


def test_a_configured_attribute_that_is_not_an_agent_names_the_key_and_file() -> None:
    Path("pai.toml").write_text('[chat]\nagent = "talkers:greeting"\n')

    result = CliRunner().invoke(create_cli(), ["chat"])

    assert result.exit_code == 2
    assert "chat.agent = 'talkers:greeting'" in result.stderr
    assert "pai.toml" in result.stderr
    assert "is a str, not an agent" in result.stderr


def test_a_configured_target_without_a_colon_shows_the_toml_form() -> None:
    Path("pai.toml").write_text('[chat]\nagent = "talkers"\n')

    result = CliRunner().invoke(create_cli(), ["chat"])

    assert result.exit_code == 2
    assert "chat.agent = 'talkers'" in result.stderr
    assert 'agent = "myapp.agents:coder"' in result.stderr


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('[chat]\nagent = "nowhere.agents:coder"\n', "there is no module 'nowhere.agents'"),
        ('[chat]\nagent = "talkers:greeting"\n', "is a str, not an agent"),
        ('[chat]\nagent = "talkers:talkr"\n', "did you mean 'talker'?"),
        ('[chat]\nagnet = "talkers:talker"\n', "did you mean 'agent'?"),
    ],
    ids=["no-module", "not-an-agent", "no-attribute", "unknown-key"],
)
def test_config_check_reports_a_configured_agent_that_cannot_be_used(
    content: str, expected: str
) -> None:
    Path("pai.toml").write_text(content)

    result = CliRunner().invoke(create_cli(), ["config", "--check"])

    assert result.exit_code == 2
    assert result.stdout == ""
    assert expected in result.stderr
    assert "chat.agent" in result.stderr or "chat.agnet" in result.stderr
    assert "pai.toml" in result.stderr
    assert "Traceback" not in result.output


def test_config_check_accepts_a_configured_agent_and_config_shows_it() -> None:
    Path("pai.toml").write_text('[chat]\nagent = "talkers:talker"\n')

    result = CliRunner().invoke(create_cli(), ["config", "--check", "--json"])

    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert shown["check"] == "ok"
    [row] = [row for row in shown["values"] if row["key"] == "chat.agent"]
    assert row["value"] == "talkers:talker"
    assert row["source"].endswith("pai.toml")


def test_without_an_agent_anywhere_the_error_shows_the_toml_to_add() -> None:
    result = CliRunner().invoke(create_cli(), ["chat"])

    assert result.exit_code == 2
    assert "pai chat myapp.agents:coder" in result.stderr
    assert '    [chat]\n    agent = "myapp.agents:coder"' in result.stderr
    assert "PAI_CHAT__AGENT" in result.stderr


def test_without_an_agent_the_toml_to_add_is_for_the_pyproject_in_use() -> None:
    Path("pyproject.toml").write_text('[tool.pai.storage]\nurl = "memory://"\n')

    result = CliRunner().invoke(create_cli(), ["chat"])

    assert result.exit_code == 2
    assert "pyproject.toml" in result.stderr
    assert '    [tool.pai.chat]\n    agent = "myapp.agents:coder"' in result.stderr
