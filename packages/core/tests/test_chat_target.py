"""What ``pai chat`` runs: an agent, a ``create_pai`` app, a runtime, or a function returning
one, with capabilities bound in code; ``--agent`` chooses within an app; ``pai config --check``
builds the same thing and reports what it lacks. Through the real CLI (click's runner)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from pai.core.cli import create_cli

APPS = """
from pydantic import BaseModel

from pai.core import (
    create_agent_runtime,
    create_capability_binding,
    create_pai,
    define_agent,
    define_capability,
    define_tool,
)
from pai.core.testing import FunctionModel, text, tool_call


class Notes:
    def __init__(self, key: str) -> None:
        self.key = key


notes = define_capability(Notes, id="notes", description="A notebook only code binds.")


class NoInput(BaseModel):
    pass


read_notes = define_tool(
    id="read_notes",
    description="Read the notes.",
    input_schema=NoInput,
    execute=lambda ctx: "notes of " + ".".join(ctx.capabilities.notes.key.split(".")[:4]),
    capabilities={"notes": notes},
)


def answer(request):
    if request.messages[-1].role == "tool":
        return text("I read them.")
    return tool_call("read_notes", {})


writer = define_agent(name="writer", model=FunctionModel(answer), tools={"read_notes": read_notes})
reviewer = define_agent(name="reviewer", model=FunctionModel(lambda request: text("Looks fine.")))
nomodel = define_agent(name="nomodel")
notes_binding = create_capability_binding(capability=notes, acquire=lambda input: Notes(input.key))


def make_app():
    return create_pai(
        agents={"writer": {"agent": writer, "capabilities": {"notes": notes_binding}}},
        scope_key=lambda identity: "cli",
    )


async def make_app_async():
    return make_app()


def make_runtime():
    return create_agent_runtime(
        agent=writer, scope_key=lambda identity: "cli", capabilities={"notes": notes_binding}
    )


def make_team():
    return create_pai(
        agents={
            "writer": {"agent": writer, "capabilities": {"notes": notes_binding}},
            "reviewer": {"agent": reviewer},
        },
        scope_key=lambda identity: "cli",
    )


def make_team_without_model():
    return create_pai(
        agents={"reviewer": {"agent": reviewer}, "idle": {"agent": nomodel}},
        scope_key=lambda identity: "cli",
    )


def by_workspace():
    return create_pai(
        agents={"reviewer": {"agent": reviewer}},
        scope_key=lambda identity: identity["workspace"],
    )


def needs_argument(name):
    return make_app()


def make_text():
    return "not an agent"


def broken():
    raise RuntimeError("the database is down")


app = make_app()
"""


@pytest.fixture(autouse=True)
def project(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fresh_plugins: None) -> Path:
    monkeypatch.setenv("PAI_LOAD_PLUGINS", "")
    (tmp_path / "apps.py").write_text(textwrap.dedent(APPS), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "apps", raising=False)
    monkeypatch.setattr(sys, "path", [*sys.path])  # the folders pai chat adds go with the test
    return tmp_path


def invoke(*args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(create_cli(), list(args), input=stdin)


@pytest.mark.parametrize(
    "target",
    ["apps:app", "apps:make_app", "apps:make_app_async", "apps:make_runtime"],
    ids=["app", "function-returning-app", "async-function", "function-returning-runtime"],
)
def test_chat_runs_a_target_whose_capability_is_bound_in_code(target: str) -> None:
    result = invoke("chat", target, stdin="go\n")

    assert result.exit_code == 0, result.output
    assert "I read them." in result.stdout
    assert "notes of pai1.thread.notes.cli" in result.stdout


def test_an_agent_whose_capability_only_code_binds_is_refused_naming_the_capability() -> None:
    result = invoke("chat", "apps:writer", stdin="go\n")

    assert result.exit_code == 2
    assert "'apps:writer' cannot run" in result.stderr
    assert "notes" in result.stderr
    assert "Traceback" not in result.output


def test_an_app_with_several_agents_needs_agent_and_lists_them() -> None:
    result = invoke("chat", "apps:make_team", stdin="go\n")

    assert result.exit_code == 2
    assert "2 agents ('writer', 'reviewer')" in result.stderr
    assert "--agent NAME" in result.stderr


def test_agent_chooses_the_agent_of_an_app() -> None:
    result = invoke("chat", "apps:make_team", "--agent", "reviewer", stdin="go\n")

    assert result.exit_code == 0, result.output
    assert "Looks fine." in result.stdout


def test_a_misspelt_agent_gets_a_did_you_mean_and_the_list() -> None:
    result = invoke("chat", "apps:make_team", "--agent", "reviewr", stdin="go\n")

    assert result.exit_code == 2
    assert "no agent 'reviewr'" in result.stderr
    assert "did you mean 'reviewer'?" in result.stderr
    assert "its agents: 'writer', 'reviewer'" in result.stderr


def test_agent_for_a_single_agent_target_that_names_another_is_refused() -> None:
    result = invoke("chat", "apps:reviewer", "--agent", "writer", stdin="go\n")

    assert result.exit_code == 2
    assert "is one agent, 'reviewer'" in result.stderr


def test_model_cannot_replace_the_model_an_app_built_with() -> None:
    result = invoke("chat", "apps:make_app", "--model", "openai:gpt-4.1-mini", stdin="go\n")

    assert result.exit_code == 2
    assert "--model openai:gpt-4.1-mini" in result.stderr
    assert "is an app" in result.stderr


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("apps:needs_argument", "is a function taking arguments ['name']"),
        ("apps:make_text", "'apps:make_text'() returned a str, not an agent"),
        ("apps:broken", "calling it failed with RuntimeError: the database is down"),
        ("apps:notes_binding", "is a CapabilityBinding, not an agent"),
    ],
    ids=["needs-arguments", "returns-text", "raises", "not-callable"],
)
def test_a_target_that_is_not_usable_says_what_it_is(target: str, expected: str) -> None:
    result = invoke("chat", target, stdin="go\n")

    assert result.exit_code == 2
    assert expected in result.stderr
    assert "Traceback" not in result.output


def test_an_app_agent_without_a_model_is_reported_before_the_chat() -> None:
    result = invoke("chat", "apps:make_team_without_model", "--agent", "idle", stdin="go\n")

    assert result.exit_code == 2
    assert "agent 'nomodel' has no model" in result.stderr
    assert "give it one in code, or configure [model]" in result.stderr


def test_a_scope_key_that_fails_for_the_cli_identity_says_to_pass_scope() -> None:
    result = invoke("chat", "apps:by_workspace", stdin="go\n")

    assert result.exit_code == 2
    assert "the scope_key of apps:by_workspace failed for identity None" in result.stderr
    assert "--scope KEY" in result.stderr


def test_identity_is_given_to_the_apps_scope_key_as_json() -> None:
    result = invoke(
        "chat", "apps:by_workspace", "--identity", '{"workspace": "acme"}', stdin="go\n"
    )

    assert result.exit_code == 0, result.output
    assert "Looks fine." in result.stdout


# -- pai config --check builds the same thing -------------------------------------------------


@pytest.mark.parametrize(
    "target", ["apps:make_app", "apps:app", "apps:make_team", "apps:make_runtime"]
)
def test_config_check_accepts_a_configured_target_that_can_chat(target: str) -> None:
    Path("pai.toml").write_text(f'[chat]\nagent = "{target}"\n')

    result = invoke("config", "--check")

    assert result.exit_code == 0, result.output
    assert "check: the configuration is valid" in result.stdout


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("apps:writer", "'notes' is not bound"),
        ("apps:nomodel", "agent 'nomodel' has no model"),
        ("apps:make_team_without_model", "(--agent idle) cannot chat: agent 'nomodel' has no"),
        ("apps:make_text", "returned a str, not an agent"),
    ],
    ids=["capability-unbound", "no-model", "app-agent-without-model", "not-an-agent"],
)
def test_config_check_reports_what_the_configured_target_lacks(target: str, expected: str) -> None:
    Path("pai.toml").write_text(f'[chat]\nagent = "{target}"\n')

    result = invoke("config", "--check")

    assert result.exit_code == 2, result.output
    assert f"chat.agent = '{target}'" in result.stderr
    assert "pai.toml" in result.stderr
    assert expected in result.stderr
    assert "Traceback" not in result.output
