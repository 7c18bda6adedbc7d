"""The ``pai`` command line over the real in-memory provider, found through its entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from pai.core import cli as core_cli
from pai.core.cli import create_cli
from pai.core.testing import reset_plugins

ANSI = "\x1b["
DEFAULT_NOTE = "no sandbox provider configured; using the embedded 'inmemory' provider"


@pytest.fixture(autouse=True)
def environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    for name in list(os.environ):
        if name.startswith("PAI_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("PAI_LOAD_PLUGINS", "pai-sandbox,pai-sandbox-inmemory")
    monkeypatch.chdir(tmp_path)
    reset_plugins()
    yield
    reset_plugins()


def invoke(*args: str) -> Result:
    return CliRunner().invoke(create_cli(), list(args), catch_exceptions=False)


def test_exec_echo_hi_prints_hi_and_says_the_default_provider_is_used_once() -> None:
    result = invoke("sandbox", "exec", "--", "echo", "hi")

    assert result.exit_code == 0
    assert result.stdout == "hi\n"
    assert result.stderr.count(DEFAULT_NOTE) == 1
    assert "[capabilities.sandbox]" in result.stderr  # and how to choose another


def test_exec_passes_the_exit_code_and_stderr_through() -> None:
    assert invoke("sandbox", "exec", "--", "sh", "-c", "exit 3").exit_code == 3

    result = invoke("sandbox", "exec", "--", "sh", "-c", "echo out; echo oops >&2; exit 1")

    assert result.exit_code == 1
    assert result.stdout == "out\n"
    assert "oops\n" in result.stderr


def test_exec_quotes_each_argument() -> None:
    result = invoke("sandbox", "exec", "--", "echo", "a  b", "$HOME", "*")

    assert result.stdout == "a  b $HOME *\n"


def test_exec_timeout_kills_the_command_and_exits_124() -> None:
    result = invoke("sandbox", "exec", "--timeout", "0.3", "--", "sleep", "5")

    assert result.exit_code == 124
    assert "timed out after 0.3 s" in result.stderr


def test_exec_uses_the_configured_provider_options() -> None:
    Path("pai.toml").write_text(
        '[capabilities.sandbox]\nprovider = "inmemory"\n\n'
        "[capabilities.sandbox.inmemory]\nmax_loop_iterations = 5\n"
    )

    ok = invoke("sandbox", "exec", "--", "echo", "configured")
    looping = invoke("sandbox", "exec", "--", "sh", "-c", "while true; do :; done")

    assert ok.exit_code == 0
    assert ok.stdout == "configured\n"
    assert DEFAULT_NOTE not in ok.stderr
    assert looping.exit_code != 0  # the configured limit stopped the loop


def test_a_bad_inmemory_option_exits_2_naming_the_key() -> None:
    Path("pai.toml").write_text("[capabilities.sandbox.inmemory]\nmax_loop_iteration = 5\n")

    result = invoke("sandbox", "exec", "--", "true")

    assert result.exit_code == 2
    assert "[capabilities.sandbox.inmemory].max_loop_iteration" in result.stderr
    assert "max_loop_iterations" in result.stderr  # the valid keys
    assert "Traceback" not in result.output


def test_a_provider_that_is_not_installed_exits_2_listing_inmemory() -> None:
    Path("pai.toml").write_text('[capabilities.sandbox]\nprovider = "docker"\n')

    result = invoke("sandbox", "exec", "--", "echo", "hi")

    assert result.exit_code == 2
    assert "'inmemory' (pai-sandbox-inmemory)" in result.stderr
    assert "pip install pai-sandbox-docker" in result.stderr


def test_ls_in_a_new_process_shows_nothing_and_says_why() -> None:
    invoke("sandbox", "exec", "--", "touch", "x")  # that sandbox ended with its command

    result = invoke("sandbox", "ls")
    data = json.loads(invoke("sandbox", "ls", "--json").stdout)

    assert result.exit_code == 0
    assert result.stdout == "no sandboxes (provider 'inmemory')\n"
    assert "keeps sandboxes inside the process that made them" in result.stderr
    assert data == {"provider": "inmemory", "cross_process": False, "instances": []}


def test_rm_and_prune_have_nothing_to_do() -> None:
    missing = invoke("sandbox", "rm", "cli")
    assert (missing.exit_code, missing.stdout) == (1, "")  # as docker rm
    assert "no such sandbox: 'cli' (provider 'inmemory'" in missing.stderr
    assert invoke("sandbox", "rm", "--force", "cli").exit_code == 0
    assert invoke("sandbox", "prune").stdout == "nothing to prune (provider 'inmemory')\n"


def test_providers_lists_inmemory_with_its_options() -> None:
    data = json.loads(invoke("providers", "--json").stdout)

    (row,) = data["providers"]
    assert row["name"] == "inmemory"
    assert row["distribution"] == "pai-sandbox-inmemory"
    assert row["default"] is True
    options = {option["name"]: option for option in row["options"]}
    assert options["max_loop_iterations"]["type"] == "int"
    assert options["max_loop_iterations"]["default"] == 10_000_000
    assert options["max_loop_iterations"]["constraints"] == ["gt=0"]
    assert options["memory_budget"]["default"] == 256 * 1024 * 1024
    assert options["max_workers"]["default"] == 2


def test_plugins_lists_the_provider_plugin() -> None:
    rows = {row["name"]: row for row in json.loads(invoke("plugins", "--json").stdout)["plugins"]}

    assert rows["pai-sandbox-inmemory"]["status"] == "loaded"
    assert rows["pai-sandbox-inmemory"]["hooks"] == ["pai_sandbox_providers"]
    assert "pai_cli" in rows["pai-sandbox"]["hooks"]


def test_demo_runs_to_completion_and_names_the_scripted_model() -> None:
    result = invoke("demo")

    assert result.exit_code == 0, result.output
    out = result.stdout
    assert ANSI not in out
    assert "ScriptedModel, a SCRIPTED stand-in" in out
    assert "not a language model" in out
    assert "provider 'inmemory'" in out
    # the script really ran in the sandbox, and the listing and the log show it
    assert "     | Hello, PAI!\n     | greeted 1 time(s) so far\n     | Hello, sandbox!" in out
    assert "greet.sh" in out
    assert "greeted.txt" in out
    assert "ran it for PAI and sandbox" in out
    assert "done: 5 model steps (scripted), 4 tool calls, provider 'inmemory'" in out
    assert result.stderr.count(DEFAULT_NOTE) == 1


def test_demo_on_a_terminal_is_rich(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(core_cli, "stdout_is_terminal", lambda: True)

    result = invoke("demo", "--keep")

    assert result.exit_code == 0
    assert "ScriptedModel" in result.stdout
    assert "╭─ stdout" in result.stdout
    assert "it ends with this process (in-memory provider)" in " ".join(result.stdout.split())


def test_the_console_entry_path_runs_exec_in_a_subprocess(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAI_")}
    completed = subprocess.run(
        [sys.executable, "-m", "pai.core.cli", "sandbox", "exec", "--", "echo", "hi"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
        check=False,
    )

    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == "hi\n"


def test_exec_with_stdin_flag_feeds_your_input_to_the_command() -> None:
    result = CliRunner().invoke(
        create_cli(), ["sandbox", "exec", "-i", "--", "wc", "-l"], input="a\nb\nc\n"
    )
    assert (result.exit_code, result.stdout.strip()) == (0, "3")


def test_exec_without_stdin_flag_gives_the_command_no_input() -> None:
    result = CliRunner().invoke(create_cli(), ["sandbox", "exec", "--", "wc", "-l"], input="a\n")
    assert (result.exit_code, result.stdout.strip()) == (0, "0")
