"""The ``openai`` model provider through the installed plugin: ``"openai:<name>"`` in code,
``[model] provider = "openai"`` in ``pai.toml``, its errors, and ``pai config --check``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from pai.core import (
    ConfigError,
    InMemoryStorage,
    ModelConfigurationError,
    create_agent_runtime,
    define_agent,
    load_config,
    resolve_model,
)
from pai.core.cli import create_cli
from pai.core.ext import get_plugins
from pai.core.testing import reset_plugins
from pai.model_openai import OpenAIModel
from pai.model_openai.testing import OpenAITestServer, text_answer


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """No PAI_ or OPENAI_ variables from outside, a fresh working folder, fresh plugins."""
    for name in list(os.environ):
        if name.startswith(("PAI_", "OPENAI_")):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    reset_plugins()
    yield
    reset_plugins()


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "pai.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_installed_plugin_registers_the_openai_provider() -> None:
    registration = get_plugins().models()["openai"]

    assert registration.distribution == "pai-model-openai"


def test_a_model_name_resolves_to_an_openai_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test")

    model = resolve_model("openai:gpt-4.1-mini")

    assert isinstance(model, OpenAIModel)
    assert model.name == "gpt-4.1-mini"


def test_a_missing_api_key_names_the_variable_and_where_options_go(tmp_path: Path) -> None:
    write_config(tmp_path, '[model]\nprovider = "openai"\nname = "gpt-4.1-mini"\n')

    with pytest.raises(ConfigError) as caught:
        create_agent_runtime(agent=define_agent(name="main"), scope_key=lambda _: "s")
    message = str(caught.value)
    assert "OPENAI_API_KEY is not set" in message
    assert f"[model.openai] of {tmp_path / 'pai.toml'}" in message


def test_a_missing_api_key_for_a_name_in_code_is_a_model_configuration_error() -> None:
    with pytest.raises(ModelConfigurationError, match="OPENAI_API_KEY is not set"):
        resolve_model("openai:gpt-4.1-mini")


def test_an_unknown_openai_option_names_the_key_and_the_close_one(tmp_path: Path) -> None:
    write_config(tmp_path, '[model.openai]\nbase_uri = "http://127.0.0.1:1/v1"\n')

    with pytest.raises(ConfigError, match="did you mean 'base_url'") as caught:
        resolve_model("openai:m", config=load_config())
    assert "model.openai.base_uri" in str(caught.value)


@pytest.mark.anyio
async def test_the_configured_openai_model_answers_through_the_test_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, openai_server: OpenAITestServer
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    monkeypatch.setenv("PAI_MODEL__NAME", "from-env")
    write_config(
        tmp_path,
        f'[model]\nprovider = "openai"\nname = "from-file"\n\n'
        f'[model.openai]\nbase_url = "{openai_server.base_url}"\n',
    )
    openai_server.add(text_answer("hello from the server"))

    async with create_agent_runtime(
        agent=define_agent(name="main"), scope_key=lambda _: "s", storage=InMemoryStorage()
    ) as runtime:
        thread = await runtime.admin(identity=None).create_thread()
        result = await thread.send("hi")

    assert result.text == "hello from the server"
    assert openai_server.requests[0].model == "from-env"


def test_config_check_reports_a_missing_api_key(tmp_path: Path) -> None:
    write_config(tmp_path, '[model]\nprovider = "openai"\nname = "gpt-4.1-mini"\n')

    result = CliRunner().invoke(create_cli(), ["config", "--check"])

    assert result.exit_code == 2
    assert "OPENAI_API_KEY is not set" in result.output


def test_config_check_accepts_a_complete_model_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    write_config(tmp_path, '[model]\nprovider = "openai"\nname = "gpt-4.1-mini"\n')

    result = CliRunner().invoke(create_cli(), ["config", "--check"])

    assert result.exit_code == 0, result.output
    assert "check: the configuration is valid" in result.output
