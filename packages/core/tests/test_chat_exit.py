"""``pai chat`` run by a script: one-shot ``-p``, ``-m``, the exit status of a failed answer,
the chat's ``/`` commands, and tool results shown as ``pai demo`` shows them."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from pai.core._chat import history_path
from pai.core.cli import create_cli

AGENT_MODULE = """
from pydantic import BaseModel

from pai.core import ModelNotFoundError, define_agent, define_tool
from pai.core.ext import TextDelta
from pai.core.testing import ScriptedModel, events, text, tool_call


class RunInput(BaseModel):
    command: str


def run(ctx):
    if ctx.input.command == "false":
        return {"stdout": "", "stderr": "it failed\\n", "exit_code": 1, "timed_out": False}
    if ctx.input.command == "boom":
        raise RuntimeError("the tool broke")
    return {"stdout": "hello\\nworld\\n", "stderr": "", "exit_code": 0, "timed_out": False}


run_tool = define_tool(
    id="run", description="Run a command.", input_schema=RunInput, execute=run
)

answers = define_agent(name="answers", model=ScriptedModel([text("Four."), text("Five.")]))
broken = define_agent(
    name="broken",
    model=ScriptedModel(
        [
            events(TextDelta("Par"), error=ModelNotFoundError("no such model 'x'", model="x")),
            text("never said"),
        ]
    ),
)
runner = define_agent(
    name="runner",
    model=ScriptedModel(
        [
            tool_call("run", {"command": "false"}),
            tool_call("run", {"command": "echo hello"}),
            tool_call("run", {"command": "boom"}),
            text("Done."),
        ]
    ),
    tools={"run": run_tool},
)
"""


@pytest.fixture(autouse=True)
def project(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fresh_plugins: None) -> Path:
    monkeypatch.setenv("PAI_LOAD_PLUGINS", "")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    (tmp_path / "exitagents.py").write_text(textwrap.dedent(AGENT_MODULE), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "exitagents", raising=False)
    monkeypatch.setattr(sys, "path", [*sys.path])
    return tmp_path


def invoke(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(create_cli(), ["chat", *args], input=input)


# -- one-shot ------------------------------------------------------------------------------------


def test_p_sends_one_message_prints_the_answer_and_exits_0() -> None:
    result = invoke("exitagents:answers", "-p", "2+2?", input="never read\n")

    assert result.exit_code == 0, result.output
    assert result.stdout == "Four.\n"


def test_the_long_form_prompt_works_too() -> None:
    result = invoke("exitagents:answers", "--prompt", "2+2?")

    assert result.exit_code == 0, result.output
    assert result.stdout == "Four.\n"


def test_p_exits_1_when_the_answer_fails() -> None:
    result = invoke("exitagents:broken", "-p", "hi")

    assert result.exit_code == 1
    assert "Error: no such model 'x'" in result.stderr
    assert result.stdout == "Par\n"  # what had streamed, then the line ends
    assert "not sent" not in result.stderr  # there was nothing after it


def test_an_empty_p_is_a_usage_error() -> None:
    result = invoke("exitagents:answers", "-p", "  ")

    assert result.exit_code == 2
    assert "-p/--prompt needs a message" in result.stderr


def test_m_is_the_short_form_of_model() -> None:
    result = invoke("exitagents:answers", "-m", "nosuchprovider:x", "-p", "hi")

    assert result.exit_code == 2
    assert "nosuchprovider" in result.stderr


# -- piped input ---------------------------------------------------------------------------------


def test_piped_input_stops_at_a_failed_answer_and_exits_1() -> None:
    result = invoke("exitagents:broken", input="first\nsecond\n")

    assert result.exit_code == 1
    assert result.stderr.count("Error: ") == 1
    assert "stopped at the failed answer; the messages after it were not sent" in result.stderr
    assert "never said" not in result.stdout


def test_piped_input_that_all_succeeds_exits_0() -> None:
    result = invoke("exitagents:answers", input="one\ntwo\n")

    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["Four.", "Five."]


# -- commands ------------------------------------------------------------------------------------


def test_help_lists_the_commands() -> None:
    result = invoke("exitagents:answers", input="/help\n")

    assert result.exit_code == 0, result.output
    for command in ("/help", "/thread", "/new", "/exit"):
        assert command in result.stderr
    assert result.stdout == ""


def test_thread_names_the_thread_and_new_starts_another() -> None:
    result = invoke("exitagents:answers", input="/thread\none\n/new\n/thread\ntwo\n")

    assert result.exit_code == 0, result.output
    first = result.stderr.split("pai: thread ", 2)[1].split()[0]
    assert "pai: new thread " in result.stderr
    second = result.stderr.split("pai: new thread ", 1)[1].split(";")[0]
    assert first != second
    assert f"the previous one was {first}" in result.stderr
    assert f"pai: thread {second} (come back to it with --thread {second})" in result.stderr
    assert result.stdout.splitlines() == ["Four.", "Five."]


def test_exit_ends_the_chat_before_later_lines() -> None:
    result = invoke("exitagents:answers", input="one\n/exit\ntwo\n")

    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["Four."]


def test_an_unknown_command_gets_a_did_you_mean_and_fails_a_script() -> None:
    result = invoke("exitagents:answers", input="/nwe\none\n")

    assert result.exit_code == 1
    assert "unknown command '/nwe'; did you mean '/new'?" in result.stderr
    assert "stopped at the failed command; the messages after it were not sent" in result.stderr
    assert result.stdout == ""  # the script stopped there


def test_a_double_slash_sends_a_message_starting_with_a_slash() -> None:
    result = invoke("exitagents:answers", input="//etc is a folder\n/etc/passwd too\n")

    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["Four.", "Five."]


# -- tool results --------------------------------------------------------------------------------


def test_tool_results_show_exit_codes_and_output_blocks_never_ok_over_a_failure() -> None:
    result = invoke("exitagents:runner", "-p", "go")

    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        '  -> run({"command": "false"})',
        "  <- run: exit 1",
        "     stderr:",
        "     | it failed",
        '  -> run({"command": "echo hello"})',
        "  <- run: exit 0",
        "     stdout:",
        "     | hello",
        "     | world",
        '  -> run({"command": "boom"})',
        "  <- run failed",
        "     | Error: tool 'run' failed: RuntimeError: the tool broke",
        "Done.",
    ]
    assert "[ok]" not in result.stdout


def test_a_result_with_no_text_says_so() -> None:
    from pai.core import ToolResultMessage
    from pai.core._chat_render import describe_result

    shown = describe_result(ToolResultMessage(tool_call_id="c", tool_name="touch", content=""))
    assert (shown.headline, shown.ok, shown.blocks) == ("<- touch: (nothing)", True, ())


def test_control_characters_in_a_result_are_written_out() -> None:
    from pai.core import ToolResultMessage
    from pai.core._chat_render import describe_result

    output = {"stdout": "\x1b]0;owned\x07red\x1b[31m\n", "stderr": "", "exit_code": 0}
    shown = describe_result(
        ToolResultMessage(tool_call_id="c", tool_name="run", content="", output=output)
    )
    assert shown.blocks[0].text == "\\x1b]0;owned\\x07red\\x1b[31m"


def test_a_long_block_is_cut_saying_how_much_was_left_out() -> None:
    from pai.core import ToolResultMessage
    from pai.core._chat_render import MAX_BLOCK_LINES, describe_result

    lines = "\n".join(f"line {n}" for n in range(100))
    shown = describe_result(ToolResultMessage(tool_call_id="c", tool_name="cat", content=lines))
    text = shown.blocks[0].text.split("\n")
    assert text[:2] == ["line 0", "line 1"]
    assert len(text) == MAX_BLOCK_LINES + 1
    assert text[-1] == f"[... {100 - MAX_BLOCK_LINES} more lines not shown]"


def test_history_lives_under_xdg_state_home(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert history_path() == project / "state" / "pai" / "history"
    monkeypatch.setenv("XDG_STATE_HOME", "relative/state")  # ignored, as XDG says
    assert history_path() == Path.home() / ".local" / "state" / "pai" / "history"


def test_the_banner_names_agent_model_capability_providers_and_thread(project: Path) -> None:
    from pydantic import BaseModel

    from pai.core import define_agent, define_capability, define_tool, load_config
    from pai.core._chat import chat_banner
    from pai.core.testing import ScriptedModel

    class Box:
        pass

    class NoInput(BaseModel):
        pass

    box, vault = define_capability(Box, id="box"), define_capability(Box, id="acme.vault")
    agent = define_agent(
        name="boxer",
        model=ScriptedModel([]),
        tools={
            "peek": define_tool(
                id="peek",
                description="Peek.",
                input_schema=NoInput,
                capabilities={"box": box, "vault": vault},
                execute=lambda ctx: "x",
            )
        },
    )
    (project / "pai.toml").write_text('[capabilities.box]\nprovider = "docker"\n')

    banner = chat_banner(agent, None, load_config(project), "t-1", interactive=True)

    assert banner is not None
    assert banner.splitlines()[0] == (
        "pai chat: agent 'boxer' · model ScriptedModel · capabilities: acme.vault, "
        "box 'docker' · thread t-1"
    )
    given = chat_banner(agent, "openai:gpt-x", None, "t-1", interactive=True)
    assert given is not None
    assert "model openai:gpt-x" in given  # --model/-m named it
    assert chat_banner(agent, None, None, "t-1", interactive=False) is None


def test_history_is_saved_for_its_owner_only_and_a_failure_to_save_is_said(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    readline = pytest.importorskip("readline", reason="this Python has no readline module")
    from pai.core._chat import _LineEditing

    readline.clear_history()
    editing = _LineEditing()
    readline.add_history("a line typed")
    editing.save()
    saved = project / "state" / "pai" / "history"
    assert "a line typed" in saved.read_text(encoding="utf-8")
    assert saved.stat().st_mode & 0o777 == 0o600
    assert (project / "state" / "pai").stat().st_mode & 0o777 == 0o700

    (project / "a-file").write_text("")
    monkeypatch.setenv("XDG_STATE_HOME", str(project / "a-file"))  # no folder can go there
    _LineEditing().save()
    readline.clear_history()
    assert (
        f"pai: the chat history was not saved to {project / 'a-file' / 'pai' / 'history'}"
        in capsys.readouterr().err
    )
