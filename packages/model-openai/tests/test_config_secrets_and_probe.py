"""``pai config`` with the openai provider, through the real CLI: an API key never goes in a file
and is never printed; ``--check --probe`` asks the configured model (the shipped test server, or
a port nobody listens on) whether it answers."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from pai.core import ModelConfigurationError
from pai.core.cli import create_cli
from pai.core.testing import reset_plugins
from pai.model_openai import OpenAIModel
from pai.model_openai.testing import OpenAITestServer, error_answer, text_answer

KEY = "sk-proj-Zq81xTfA0b9Kc2LmQ77vWbN4"
"""A key-shaped value that must never appear in any output."""


@pytest.fixture(autouse=True)
def clean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith(("PAI_", "OPENAI_")):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    reset_plugins()


def invoke(*args: str) -> Result:
    reset_plugins()
    return CliRunner().invoke(create_cli(), list(args), catch_exceptions=False)


def model_toml(options: str, *, name: str = "test-model") -> str:
    return f'[model]\nprovider = "openai"\nname = "{name}"\n\n[model.openai]\n{options}\n'


def assert_never_shown(result: Result, secret: str) -> None:
    assert secret not in result.stdout
    assert secret not in result.stderr
    assert secret[3:15] not in result.output  # not even a part of it


# -- an API key in the file ---------------------------------------------------------------------


@pytest.mark.parametrize("args", [("config",), ("config", "--check"), ("chat",)])
def test_an_api_key_in_the_file_is_refused_with_the_reason_and_the_fix(args: tuple[str]) -> None:
    Path("pai.toml").write_text(model_toml(f'api_key = "{KEY}"'))

    result = invoke(*args)

    assert result.exit_code == 2
    assert "model.openai.api_key" in result.stderr
    assert "secrets never go in configuration" in result.stderr
    assert 'api_key_env = "OPENAI_API_KEY"' in result.stderr
    assert "export OPENAI_API_KEY=" in result.stderr
    assert_never_shown(result, KEY)


def test_the_json_error_names_the_key_and_file_and_hides_the_value() -> None:
    Path("pai.toml").write_text(model_toml(f'api_key = "{KEY}"'))

    result = invoke("config", "--check", "--json")

    assert result.exit_code == 2
    data = json.loads(result.stdout)
    assert data["check"] == "failed"
    assert data["error"]["key"] == "model.openai.api_key"
    assert data["error"]["file"] == str(Path("pai.toml").resolve())
    assert data["error"]["type"] == "ConfigError"
    assert "secrets never go in configuration" in data["error"]["message"]
    assert_never_shown(result, KEY)


def test_following_the_hint_with_the_key_as_the_variable_name_never_prints_it() -> None:
    Path("pai.toml").write_text(model_toml(f'api_key_env = "{KEY}"'))

    for args in [("config",), ("config", "--check"), ("config", "--json"), ("chat",)]:
        result = invoke(*args)

        assert result.exit_code == 2, args
        assert "api_key_env" in result.output
        assert "looks like an API key" in result.output
        assert "export OPENAI_API_KEY=" in result.output
        assert_never_shown(result, KEY)


def test_api_key_env_must_be_a_variable_name() -> None:
    Path("pai.toml").write_text(model_toml('api_key_env = "MY-GATEWAY KEY"'))

    result = invoke("config", "--check")

    assert result.exit_code == 2
    assert "is not a variable name" in result.stderr
    assert "MY-GATEWAY KEY" not in result.stderr


def test_a_key_in_api_key_env_given_in_code_is_never_echoed() -> None:
    with pytest.raises(ModelConfigurationError) as caught:
        OpenAIModel("m", api_key_env=KEY)

    assert KEY not in str(caught.value)
    assert "looks like an API key" in str(caught.value)


def test_the_key_in_a_pai_variable_is_refused_too_with_the_variable_to_use(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    Path("pai.toml").write_text(model_toml('base_url = "http://127.0.0.1:9/v1"'))
    monkeypatch.setenv("PAI_MODEL__OPENAI__API_KEY", KEY)

    result = invoke("config", "--check")

    assert result.exit_code == 2
    assert "PAI_MODEL__OPENAI__API_KEY" in result.stderr
    assert "OPENAI_API_KEY" in result.stderr
    assert_never_shown(result, KEY)


def test_pai_config_masks_passwords_in_urls_and_secret_options(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    Path("pai.toml").write_text(
        model_toml('base_url = "http://gateway:hunter2secret@127.0.0.1:9/v1"')
        + '\n[capabilities.sandbox]\nprovider = "e2b"\n\n[capabilities.sandbox.e2b]\n'
        f'api_key = "e2b_{KEY[3:]}"\n'
    )

    table = invoke("config")
    as_json = invoke("config", "--json")

    for result in (table, as_json):
        assert result.exit_code == 0, result.output
        assert "hunter2secret" not in result.output
        assert_never_shown(result, KEY)
        assert KEY[3:] not in result.output
    values = {row["key"]: row["value"] for row in json.loads(as_json.stdout)["values"]}
    assert values["model.openai.base_url"] == "http://gateway:***@127.0.0.1:9/v1"
    assert values["capabilities.sandbox.e2b.api_key"] == "***"


@pytest.mark.usefixtures("only_openai")
def test_a_storage_url_password_is_masked_in_the_error() -> None:
    # Only this package's plugin: no backend for postgresql:// is installed, so the URL is an
    # error (with pai-storage-postgres installed it would be valid).
    Path("pai.toml").write_text('[storage]\nurl = "postgresql://app:pw-hunter2-x@db/threads"\n')

    result = invoke("config", "--check")
    as_json = invoke("config", "--check", "--json")

    assert result.exit_code == 2
    assert "postgresql://app:***@db/threads" in result.stderr
    assert "pw-hunter2-x" not in result.output
    assert "pw-hunter2-x" not in as_json.output
    assert json.loads(as_json.stdout)["error"]["key"] == "storage"


# -- --probe ------------------------------------------------------------------------------------


@pytest.fixture
def only_openai(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only this provider's plugin: the probes listed are the model's alone."""
    monkeypatch.setenv("PAI_LOAD_PLUGINS", "pai-model-openai")


@pytest.mark.usefixtures("only_openai")
def test_probe_asks_the_configured_model_and_reports_ok(
    openai_server: OpenAITestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    Path("pai.toml").write_text(model_toml(f'base_url = "{openai_server.base_url}"'))
    openai_server.add(text_answer("ok"), text_answer("ok"))

    result = invoke("config", "--check", "--probe")
    as_json = invoke("config", "--probe", "--json")

    assert result.exit_code == 0, result.output
    assert "check: the configuration is valid" in result.stdout
    assert "probe model: ok" in result.stdout
    assert len(openai_server.requests) == 2
    assert as_json.exit_code == 0
    data = json.loads(as_json.stdout)
    assert data["check"] == "ok"
    assert [(p["name"], p["status"], p["error"]) for p in data["probes"]] == [("model", "ok", None)]
    assert_never_shown(result, KEY)


@pytest.mark.usefixtures("only_openai")
def test_probe_of_a_model_the_server_does_not_have_names_model_and_url(
    openai_server: OpenAITestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    Path("pai.toml").write_text(
        model_toml(f'base_url = "{openai_server.base_url}"', name="no-such-model")
    )
    openai_server.add(error_answer(404, f"The model no-such-model does not exist ({KEY})"))

    result = invoke("config", "--check", "--probe")

    assert result.exit_code == 1, result.output
    line = next(line for line in result.stdout.splitlines() if line.startswith("probe model"))
    assert line.startswith("probe model: FAILED: the model openai:no-such-model at ")
    assert openai_server.base_url in line
    assert "1 of 1 probe(s) failed: model" in result.stderr
    assert_never_shown(result, KEY)


@pytest.mark.usefixtures("only_openai")
def test_probe_of_a_server_that_is_not_there_fails_within_the_time_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with socket.socket() as sock:  # a port nobody listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://user:hunter2secret@127.0.0.1:{port}/v1"
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    Path("pai.toml").write_text(model_toml(f'base_url = "{url}"\nmax_retries = 0'))

    result = invoke("config", "--probe", "--probe-timeout", "5", "--json")

    assert result.exit_code == 1
    (probe,) = json.loads(result.stdout)["probes"]
    assert probe["name"] == "model"
    assert probe["status"] == "failed"
    assert f"127.0.0.1:{port}" in probe["error"]
    assert "hunter2secret" not in result.output
    assert_never_shown(result, KEY)


@pytest.mark.usefixtures("only_openai")
def test_a_probe_that_hangs_is_stopped_at_the_timeout(
    openai_server: OpenAITestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pai.model_openai.testing import stalled_stream

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    Path("pai.toml").write_text(model_toml(f'base_url = "{openai_server.base_url}"'))
    openai_server.add(stalled_stream())

    result = invoke("config", "--probe", "--probe-timeout", "0.5")

    assert result.exit_code == 1, result.output
    assert "no answer within 0.5 s" in result.stdout


def test_probe_with_nothing_configured_says_so(only_openai: None) -> None:
    result = invoke("config", "--probe")

    assert result.exit_code == 0
    assert "probe: nothing configured to probe" in result.stdout


def test_the_api_key_env_error_reads_as_a_sentence_not_a_validator_dump() -> None:
    Path("pai.toml").write_text(model_toml('api_key_env = "1BAD"'))

    result = invoke("config")

    assert result.exit_code == 2
    assert "model.openai.api_key_env = '***'" in result.stderr
    assert "Value error" not in result.stderr


# -- commands that use no model need no key ----------------------------------------------------


def test_commands_that_use_no_model_run_without_the_api_key() -> None:
    """A configured [model] with OPENAI_API_KEY unset: `pai config` shows the configuration and
    `pai sandbox exec` runs (neither uses the model); `pai config --check` names the variable."""
    Path("pai.toml").write_text(
        model_toml('base_url = "http://127.0.0.1:9/v1"')
        + '\n[capabilities.sandbox]\nprovider = "inmemory"\n'
    )

    shown = invoke("config")
    ran = invoke("sandbox", "exec", "--", "echo", "hi")
    checked = invoke("config", "--check")

    assert shown.exit_code == 0, shown.output
    assert ran.exit_code == 0, ran.output
    assert ran.stdout == "hi\n"
    assert checked.exit_code == 2, checked.output
    assert "OPENAI_API_KEY" in checked.stderr


def test_the_static_check_still_refuses_bad_model_options_without_the_key() -> None:
    Path("pai.toml").write_text(model_toml("timout = 5"))

    result = invoke("sandbox", "ls")

    assert result.exit_code == 2, result.output
    assert "model.openai.timout" in result.stderr
    assert "did you mean 'timeout'?" in result.stderr
