"""pai-sandbox's commands of the ``pai`` command line, over a recording test-double provider.

Only pai-sandbox's own plugin is loaded (``PAI_LOAD_PLUGINS=pai-sandbox``), plus a test plugin
registered in code that provides the ``recording`` provider. Its factory hands every command the
same :class:`FakeProvider`, so sandboxes outlive a command the way Docker containers do, and
tests can look at what each command did to the backend.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from fakes import FakeFile, FakeInstance, FakeProvider, Reply
from pydantic import BaseModel, ConfigDict, Field

from pai.core import cli as core_cli
from pai.core import load_config
from pai.core.cli import create_cli
from pai.core.ext import get_plugins, hookimpl
from pai.core.testing import reset_plugins
from pai.sandbox import (
    DEFAULT_PROVIDER,
    ProviderOptionsError,
    SandboxProviderError,
    UnknownProviderError,
)
from pai.sandbox._cli import _sandboxes as sandbox_cli
from pai.sandbox._cli._sandboxes import format_age, parse_duration
from pai.sandbox._settings import configured_provider
from pai.sandbox.provider import RawCommandResult, SandboxProviderRegistration

ANSI = "\x1b["


class RecordingOptions(BaseModel):
    """Options of the test provider."""

    model_config = ConfigDict(extra="forbid")

    label: str = "fake"
    retries: int = Field(default=3, ge=0, description="How often to retry.")


class RecordingPlugin:
    def __init__(self, provider: FakeProvider) -> None:
        self.provider = provider
        self.built_with: list[RecordingOptions] = []

    def _factory(self, options: RecordingOptions) -> FakeProvider:
        self.built_with.append(options)
        return self.provider

    @hookimpl
    def pai_sandbox_providers(self) -> list[SandboxProviderRegistration]:
        return [
            SandboxProviderRegistration(
                name="recording",
                factory=self._factory,
                options=RecordingOptions,
                description="A test double.",
                install_hint="pip install pai-sandbox-recording",
            )
        ]


@pytest.fixture(autouse=True)
def environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    for name in list(os.environ):
        if name.startswith("PAI_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("PAI_LOAD_PLUGINS", "pai-sandbox")
    monkeypatch.chdir(tmp_path)
    reset_plugins()
    yield
    reset_plugins()


@pytest.fixture
def plugin() -> RecordingPlugin:
    """The fake provider, installed (in code) and chosen in pai.toml."""
    found = RecordingPlugin(FakeProvider())
    get_plugins().register(found, name="recording", distribution="pai-sandbox-recording")
    Path("pai.toml").write_text(
        '[capabilities.sandbox]\nprovider = "recording"\n\n'
        '[capabilities.sandbox.recording]\nlabel = "from-config"\n'
    )
    return found


@pytest.fixture
def provider(plugin: RecordingPlugin) -> FakeProvider:
    return plugin.provider


def invoke(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(create_cli(), list(args), input=input, catch_exceptions=False)


def config_check_error() -> str:
    """What ``pai config --check`` says about the configuration (it must find a problem)."""
    result = invoke("config", "--check")
    assert result.exit_code == 2, result.output
    return result.stderr


def age(provider: FakeProvider, key: str, by: timedelta) -> None:
    provider.live[key].created_at = datetime.now(UTC) - by


# -- pai providers ----------------------------------------------------------------------------------


def test_providers_json_lists_name_distribution_description_and_typed_options(
    plugin: RecordingPlugin,
) -> None:
    result = invoke("providers", "--json")

    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["default"] == DEFAULT_PROVIDER
    (row,) = data["providers"]
    assert row == {
        "name": "recording",
        "distribution": "pai-sandbox-recording",
        "description": "A test double.",
        "install_hint": "pip install pai-sandbox-recording",
        "default": False,
        "options": [
            {
                "name": "label",
                "type": "str",
                "required": False,
                "default": "fake",
                "constraints": [],
                "description": "",
            },
            {
                "name": "retries",
                "type": "int",
                "required": False,
                "default": 3,
                "constraints": ["ge=0"],
                "description": "How often to retry.",
            },
        ],
    }


@pytest.mark.usefixtures("plugin")
def test_providers_table_is_plain_when_piped() -> None:
    result = invoke("providers")

    assert result.exit_code == 0
    assert ANSI not in result.stdout
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["PROVIDER", "DISTRIBUTION", "DESCRIPTION"]
    assert lines[1].split()[:2] == ["recording", "pai-sandbox-recording"]
    assert "options of 'recording': [capabilities.sandbox.recording]" in result.stdout
    retries = next(line for line in lines if line.startswith("retries"))
    assert retries.split()[:4] == ["retries", "int", "(ge=0)", "3"]
    assert retries.endswith("How often to retry.")


def test_providers_when_none_is_installed_says_what_to_install() -> None:
    result = invoke("providers")

    assert result.exit_code == 0
    assert "no sandbox providers installed" in result.stdout
    assert "pip install pai-sandbox-inmemory" in result.stdout
    assert json.loads(invoke("providers", "--json").stdout)["providers"] == []


# -- pai sandbox exec -------------------------------------------------------------------------------


def test_exec_runs_the_joined_command_and_prints_its_output(
    plugin: RecordingPlugin, provider: FakeProvider
) -> None:
    provider.reply(Reply(stdout=b"hi\n", stderr=b"careful\n"))

    result = invoke("sandbox", "exec", "--", "echo", "hi there", "$HOME")

    assert result.exit_code == 0
    assert result.stdout == "hi\n"
    assert result.stderr == "careful\n"
    (run,) = provider.runs
    assert run.command == "echo 'hi there' '$HOME'"  # shlex.join: each argument quoted
    assert provider.creates == ["cli"]  # the default key
    # options from [capabilities.sandbox.recording]; built once by the configuration check
    # (and closed again at once), once for the command
    assert [options.label for options in plugin.built_with] == ["from-config", "from-config"]
    assert provider.aclose_calls == 2
    assert provider.log[0] == ("aclose",)
    assert provider.log[-1] == ("aclose",)  # closed after the command


def test_exec_passes_the_exit_code_through(provider: FakeProvider) -> None:
    provider.reply(Reply(exit_code=3))

    result = invoke("sandbox", "exec", "--", "sh", "-c", "exit 3")

    assert result.exit_code == 3
    assert provider.runs[0].command == "sh -c 'exit 3'"


def test_exec_uses_the_key_and_timeout_given(provider: FakeProvider) -> None:
    result = invoke("sandbox", "exec", "--key", "build-7", "--timeout", "2.5", "--", "make")

    assert result.exit_code == 0
    assert provider.creates == ["build-7"]
    assert provider.runs[0].timeout == 2.5


def test_exec_finds_the_sandbox_of_its_key_again(provider: FakeProvider) -> None:
    invoke("sandbox", "exec", "--", "touch", "a")
    invoke("sandbox", "exec", "--", "ls")

    assert provider.creates == ["cli"]
    assert len({run.instance_id for run in provider.runs}) == 1


def test_exec_uses_the_default_timeout_of_the_configuration(provider: FakeProvider) -> None:
    Path("pai.toml").write_text(
        '[capabilities.sandbox]\nprovider = "recording"\ndefault_timeout = 7.0\n'
    )

    invoke("sandbox", "exec", "--", "true")

    assert provider.runs[0].timeout == 7.0


def test_exec_timed_out_exits_124_with_a_message(provider: FakeProvider) -> None:
    provider.reply(Reply(stdout=b"partial\n", exit_code=137, timed_out=True))

    result = invoke("sandbox", "exec", "--timeout", "1", "--", "sleep", "10")

    assert result.exit_code == 124
    assert result.stdout == "partial\n"
    assert "timed out after 1 s" in result.stderr
    assert "--timeout" in result.stderr


def test_exec_says_when_output_was_truncated(provider: FakeProvider) -> None:
    provider.reply(Reply(stdout=b"x" * 10, truncated=True))

    result = invoke("sandbox", "exec", "--", "yes")

    assert "output was cut" in result.stderr


def test_exec_without_a_command_is_a_usage_error(provider: FakeProvider) -> None:
    result = invoke("sandbox", "exec")

    assert result.exit_code == 2
    assert "Missing argument" in result.stderr
    assert provider.runs == []


# -- pai sandbox ls / rm / prune --------------------------------------------------------------------


def test_ls_json_lists_instances_with_stable_keys(provider: FakeProvider) -> None:
    invoke("sandbox", "exec", "--key", "one", "--", "true")
    age(provider, "one", timedelta(hours=2))

    result = invoke("sandbox", "ls", "--json")

    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["provider"] == "recording"
    assert data["cross_process"] is False
    (row,) = data["instances"]
    assert set(row) == {"key", "provider", "instance_id", "created_at", "age_seconds", "details"}
    assert row["key"] == "one"
    assert row["provider"] == "recording"
    assert row["instance_id"] == provider.live["one"].instance_id
    assert 7190 < row["age_seconds"] < 7300
    assert datetime.fromisoformat(row["created_at"]) == provider.live["one"].created_at


def test_ls_table_shows_key_provider_instance_and_age(provider: FakeProvider) -> None:
    invoke("sandbox", "exec", "--key", "old", "--", "true")
    invoke("sandbox", "exec", "--key", "new", "--", "true")
    age(provider, "old", timedelta(days=1, hours=3))

    result = invoke("sandbox", "ls")

    assert result.exit_code == 0
    assert ANSI not in result.stdout
    header, first, second = result.stdout.splitlines()
    assert header.split() == ["KEY", "PROVIDER", "INSTANCE", "AGE"]
    assert first.split() == ["old", "recording", provider.live["old"].instance_id, "1d3h"]
    assert second.split()[:2] == ["new", "recording"]
    # the fake provider is in-process, and the command says what that means
    assert "keeps sandboxes inside the process that made them" in result.stderr


@pytest.mark.usefixtures("provider")
def test_ls_with_no_sandboxes() -> None:
    result = invoke("sandbox", "ls")

    assert result.exit_code == 0
    assert result.stdout == "no sandboxes (provider 'recording')\n"


def test_rm_removes_what_exists_and_exits_1_for_a_missing_key(provider: FakeProvider) -> None:
    invoke("sandbox", "exec", "--key", "a", "--", "true")

    result = invoke("sandbox", "rm", "a", "nope")

    assert result.exit_code == 1  # as docker rm
    assert result.stdout == "removed a\n"
    assert result.stderr == (
        "no such sandbox: 'nope' (provider 'recording'; `pai sandbox ls` lists them)\n"
    )
    assert provider.destroys == ["a"]
    assert provider.live == {}
    again = invoke("sandbox", "rm", "--json", "a")
    assert again.exit_code == 1
    assert json.loads(again.stdout) == {"removed": [], "not_found": ["a"]}


def test_rm_force_makes_a_missing_key_no_error(provider: FakeProvider) -> None:
    invoke("sandbox", "exec", "--key", "a", "--", "true")

    result = invoke("sandbox", "rm", "--force", "a", "nope", "a")

    assert result.exit_code == 0
    assert result.stdout == "removed a\n"
    assert "no such sandbox: 'nope'" in result.stderr
    assert provider.destroys == ["a"]
    forced = invoke("sandbox", "rm", "-f", "--json", "a")
    assert forced.exit_code == 0
    assert json.loads(forced.stdout) == {"removed": [], "not_found": ["a"]}


def test_prune_without_yes_refuses_when_there_is_no_terminal(provider: FakeProvider) -> None:
    invoke("sandbox", "exec", "--key", "a", "--", "true")

    result = invoke("sandbox", "prune")

    assert result.exit_code == 2
    assert "refusing to remove 1 sandbox(es) without confirmation" in result.stderr
    assert "Pass --yes" in result.stderr
    assert "a" in result.stdout  # it listed what it would remove
    assert provider.destroys == []


def test_prune_older_than_removes_only_old_sandboxes(provider: FakeProvider) -> None:
    for key in ("old", "new"):
        invoke("sandbox", "exec", "--key", key, "--", "true")
    age(provider, "old", timedelta(hours=3))

    result = invoke("sandbox", "prune", "--older-than", "2h", "--yes")

    assert result.exit_code == 0, result.output
    assert "sandboxes to remove older than 2h:" in result.stdout
    assert result.stdout.endswith("removed old\n")
    assert provider.destroys == ["old"]
    assert set(provider.live) == {"new"}


def test_prune_json(provider: FakeProvider) -> None:
    invoke("sandbox", "exec", "--key", "a", "--", "true")

    result = invoke("sandbox", "prune", "--yes", "--json")

    data = json.loads(result.stdout)
    assert data["provider"] == "recording"
    assert data["removed"] == ["a"]
    assert [row["key"] for row in data["instances"]] == ["a"]


@pytest.mark.usefixtures("provider")
def test_prune_with_nothing_to_remove() -> None:
    result = invoke("sandbox", "prune", "--older-than", "1d")

    assert result.exit_code == 0
    assert result.stdout == "nothing to prune (provider 'recording')\n"


def test_prune_asks_on_a_terminal(provider: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox_cli, "stdin_is_terminal", lambda: True)
    invoke("sandbox", "exec", "--key", "a", "--", "true")

    declined = invoke("sandbox", "prune", input="n\n")
    assert declined.exit_code == 1
    assert "Remove 1 sandbox(es)?" in declined.stdout
    assert "nothing removed" in declined.stderr
    assert provider.destroys == []

    accepted = invoke("sandbox", "prune", input="y\n")
    assert accepted.exit_code == 0
    assert provider.destroys == ["a"]


@pytest.mark.usefixtures("provider")
def test_prune_with_a_bad_duration_is_a_clear_usage_error() -> None:
    result = invoke("sandbox", "prune", "--older-than", "2 fortnights", "--yes")

    assert result.exit_code == 2
    assert "--older-than" in result.stderr
    assert "'2 fortnights' is not a duration" in result.stderr
    assert "30s, 15m, 2h, 1d or 1w" in result.stderr


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30), ("15m", 900), ("2h", 7200), ("1d", 86400), ("1w", 604800), ("1h30m", 5400),
     ("1.5h", 5400), (" 2H ", 7200), ("0s", 0)],
)  # fmt: skip
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "5", "h", "-1h", "1y", "1h 30m", "1hh"])
def test_parse_duration_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="is not a duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(0, "0s"), (59.9, "59s"), (60, "1m"), (3599, "59m"), (3600, "1h"), (3660, "1h1m"),
     (86400, "1d"), (90000, "1d1h"), (-5, "0s")],
)  # fmt: skip
def test_format_age(seconds: float, shown: str) -> None:
    assert format_age(seconds) == shown


# -- configuration errors ---------------------------------------------------------------------------


@pytest.mark.usefixtures("plugin")
def test_an_unknown_provider_exits_2_naming_the_file_the_installed_ones_and_the_fix() -> None:
    Path("pai.toml").write_text('[capabilities.sandbox]\nprovider = "docker"\n')

    result = invoke("sandbox", "exec", "--", "echo", "hi")

    assert result.exit_code == 2
    message = result.stderr
    assert message == config_check_error()  # the same check as pai config --check
    assert f"[capabilities.sandbox] ({Path('pai.toml').resolve()})" in message
    assert "sandbox provider 'docker'" in message
    assert "is not installed" in message
    assert "'recording' (pai-sandbox-recording)" in message
    assert "pip install pai-sandbox-docker" in message
    assert "Traceback" not in result.output


@pytest.mark.usefixtures("plugin")
def test_a_bad_provider_option_exits_2_naming_the_key_and_the_valid_ones() -> None:
    Path("pai.toml").write_text(
        '[capabilities.sandbox]\nprovider = "recording"\n\n'
        "[capabilities.sandbox.recording]\nretry = 5\n"
    )

    result = invoke("sandbox", "ls")

    assert result.exit_code == 2
    assert "[capabilities.sandbox.recording].retry" in result.stderr
    assert "Valid keys: ['label', 'retries']" in result.stderr
    assert "Traceback" not in result.output


@pytest.mark.usefixtures("plugin")
def test_an_option_from_the_environment_is_blamed_on_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PAI_CAPABILITIES__SANDBOX__RECORDING__RETRIES", "many")

    result = invoke("sandbox", "ls")

    assert result.exit_code == 2
    assert result.stderr == config_check_error()
    assert "environment variable PAI_CAPABILITIES__SANDBOX__RECORDING__RETRIES)" in result.stderr
    assert "invalid options for sandbox provider 'recording'" in result.stderr


@pytest.mark.usefixtures("plugin")
def test_an_unknown_key_in_the_sandbox_section_exits_2() -> None:
    Path("pai.toml").write_text('[capabilities.sandbox]\nprovider = "recording"\ntimeout = 5\n')

    result = invoke("sandbox", "ls")

    assert result.exit_code == 2
    assert "unknown key(s) ['timeout']" in result.stderr
    assert "default_timeout" in result.stderr


def test_no_provider_configured_and_the_default_not_installed_says_what_to_do() -> None:
    result = invoke("sandbox", "exec", "--", "true")

    assert result.exit_code == 2
    assert f"the default, {DEFAULT_PROVIDER!r}, is not installed" in result.stderr
    assert f"pip install pai-sandbox-{DEFAULT_PROVIDER}" in result.stderr


def test_configured_provider_returns_the_built_provider_and_settings(
    plugin: RecordingPlugin,
) -> None:
    Path("pai.toml").unlink()
    config = load_config(
        environ={
            "PAI_CAPABILITIES__SANDBOX__PROVIDER": "recording",
            "PAI_CAPABILITIES__SANDBOX__OUTPUT_LIMIT": "100",
            "PAI_CAPABILITIES__SANDBOX__SCOPE": "user",
        }
    )

    provider, settings = configured_provider(config)

    assert provider is plugin.provider
    assert settings.provider == "recording"
    assert settings.output_limit == 100
    assert plugin.built_with == [RecordingOptions()]


@pytest.mark.usefixtures("plugin")
def test_configured_provider_errors() -> None:
    with pytest.raises(UnknownProviderError, match="env PAI_CAPABILITIES__SANDBOX__PROVIDER: "):
        configured_provider(load_config(environ={"PAI_CAPABILITIES__SANDBOX__PROVIDER": "x"}))
    with pytest.raises(ProviderOptionsError, match=r"must be a table of options"):
        configured_provider(
            load_config(
                environ={
                    "PAI_CAPABILITIES__SANDBOX__PROVIDER": "recording",
                    "PAI_CAPABILITIES__SANDBOX__RECORDING": "5",
                }
            )
        )


# -- pai demo ---------------------------------------------------------------------------------------


@pytest.fixture
def script_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake runs nothing; make running greet.sh leave the log the real script would."""
    run = FakeInstance.run

    async def run_and_log(self: FakeInstance, command: str, **kwargs: Any) -> RawCommandResult:
        if "greet.sh" in command:
            log = b"".join(f"{name}\n".encode() for name in re.findall(r"greet.sh (\w+)", command))
            self.root["workspace"]["greeted.txt"] = FakeFile(log)  # type: ignore[index]
        return await run(self, command, **kwargs)

    monkeypatch.setattr(FakeInstance, "run", run_and_log)


@pytest.mark.usefixtures("script_runs")
def test_demo_runs_the_scripted_agent_in_the_configured_sandbox(
    provider: FakeProvider,
) -> None:
    provider.reply(
        Reply(stdout=b"Hello, PAI!\ngreeted 1 time(s) so far\n"),
        Reply(stdout=b"greet.sh\ngreeted.txt\n"),
    )

    result = invoke("demo")

    assert result.exit_code == 0, result.output
    out = result.stdout
    assert ANSI not in out
    assert "ScriptedModel, a SCRIPTED stand-in" in out
    assert "not a language model" in out
    assert "provider 'recording'" in out
    assert "user> Write a small shell script" in out
    assert '-> write_file(path="greet.sh", executable=true)' in out
    assert "     | #!/bin/sh" in out  # the script it wrote, shown
    assert '-> run(command="sh greet.sh PAI && sh greet.sh sandbox")' in out
    assert "<- run: exit 0" in out
    assert "     | Hello, PAI!" in out
    assert '-> read_file(path="greeted.txt")' in out
    assert "     | PAI\n     | sandbox\n" in out  # the log it read back
    assert "ran it for PAI and sandbox" in out  # the scripted answer quotes the tool results
    assert "done: 5 model steps (scripted), 4 tool calls" in out
    # the tools really ran in the sandbox: the script file is there, then the sandbox is removed
    assert [run.command for run in provider.runs] == [
        "sh greet.sh PAI && sh greet.sh sandbox",
        "ls -l",
    ]
    assert len(provider.creates) == 1
    # destroyed before it is reported removed (and again, as a no-op, when the thread goes)
    assert set(provider.destroys) == set(provider.creates)
    assert provider.live == {}
    assert "removed the demo's sandbox" in out


@pytest.mark.usefixtures("script_runs")
def test_demo_reads_files_within_the_configured_read_limit(provider: FakeProvider) -> None:
    Path("pai.toml").write_text(
        '[capabilities.sandbox]\nprovider = "recording"\nread_limit = 4096\n'
    )

    result = invoke("demo")

    assert result.exit_code == 0, result.output
    assert provider.read_limits == [4096]


@pytest.mark.usefixtures("script_runs")
def test_demo_keep_keeps_the_sandbox(provider: FakeProvider) -> None:
    result = invoke("demo", "--keep")

    assert result.exit_code == 0
    (key,) = provider.live
    assert f"kept the sandbox: key {key!r}" in result.stdout
    assert provider.destroys == []


@pytest.mark.usefixtures("script_runs")
def test_demo_says_when_it_could_not_remove_its_sandbox(
    provider: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken_destroy(key: str) -> None:
        raise SandboxProviderError("the backend went away")

    monkeypatch.setattr(provider, "destroy", broken_destroy)

    result = invoke("demo")

    assert result.exit_code == 1
    (key,) = provider.live  # still there, and the demo says so
    assert "removed the demo's sandbox" not in result.stdout
    assert (
        f"could NOT remove the demo's sandbox (key {key!r}): the backend went away; remove it "
        f"with `pai sandbox rm {key}` once the provider works" in result.stdout
    )
    assert "cleanup: the backend went away" in result.stderr
    assert "Traceback" not in result.output


def test_demo_reports_a_failed_step_and_exits_1(provider: FakeProvider) -> None:
    provider.reply(Reply(stderr=b"sh: not found\n", exit_code=127))

    result = invoke("demo")

    assert result.exit_code == 1
    assert "<- run: exit 127" in result.stdout
    assert "the demo did not go as scripted" in result.stderr


@pytest.mark.usefixtures("script_runs")
def test_demo_is_rich_on_a_terminal(
    provider: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(core_cli, "stdout_is_terminal", lambda: True)

    result = invoke("demo")

    assert "ScriptedModel" in result.stdout
    assert "╭" in result.stdout  # panels around the script and the outputs


def test_the_sandbox_commands_are_in_the_help() -> None:
    result = invoke("--help")

    for command in ("providers", "sandbox", "demo"):
        assert command in result.stdout
    sandbox_help = invoke("sandbox", "--help").stdout
    for command in ("exec", "ls", "rm", "prune"):
        assert command in sandbox_help
    assert "a new `pai` process" in " ".join(invoke("sandbox", "ls", "--help").stdout.split())
