"""One check of the configuration for every command: ``load_checked_config`` and
``pai config --check``, through the real CLI (click's runner) and the installed plugins."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from pai.core import ConfigError, PaiError
from pai.core.cli import create_cli, load_checked_config


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fresh_plugins: None) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)


def invoke(*args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(create_cli(), list(args), input=stdin, catch_exceptions=False)


MISTAKES = [
    ('[capabilities.sandbx]\nprovider = "docker"\n', "[capabilities.sandbx]"),
    ('[storage]\nurl = "sqlit:///x.db"\n', "did you mean sqlite://?"),
    ('[model]\nprovider = "openai"\n', "[model]"),
    ('[capabilities.sandbox]\nscop = "thread"\n', "scop"),
]
MISTAKE_IDS = ["capability-id", "storage-scheme", "model-half", "capability-option"]


@pytest.mark.parametrize(("content", "expected"), MISTAKES, ids=MISTAKE_IDS)
def test_load_checked_config_raises_what_config_check_reports(content: str, expected: str) -> None:
    Path("pai.toml").write_text(content)

    with pytest.raises(PaiError) as raised:
        load_checked_config()

    assert expected in str(raised.value)
    check = invoke("config", "--check")
    assert check.exit_code == 2
    assert str(raised.value) in check.stderr


@pytest.mark.parametrize(("content", "expected"), MISTAKES, ids=MISTAKE_IDS)
def test_pai_config_without_check_refuses_the_same_mistakes(content: str, expected: str) -> None:
    Path("pai.toml").write_text(content)

    result = invoke("config")

    assert result.exit_code == 2
    assert result.stdout == ""
    assert expected in result.stderr
    assert "Traceback" not in result.output


def test_pai_chat_refuses_a_misspelt_capability_table_before_anything_runs() -> None:
    Path("pai.toml").write_text(
        '[capabilities.sandbx]\nprovider = "docker"\n\n[chat]\nagent = "nowhere_at_all:agent"\n'
    )

    result = invoke("chat", stdin="hello\n")

    assert result.exit_code == 2
    assert "[capabilities.sandbx]" in result.stderr
    assert "did you mean 'sandbox'?" in result.stderr
    assert "nowhere_at_all" not in result.stderr  # the static checks came first
    assert "using the embedded" not in result.output


def test_load_checked_config_imports_no_user_code(tmp_path: Path) -> None:
    module = tmp_path / "work" / "pai_check_probe_app.py"
    module.write_text("raise RuntimeError('imported')\n")
    Path("pai.toml").write_text('[chat]\nagent = "pai_check_probe_app:agent"\n')
    sys.path.insert(0, str(module.parent))
    try:
        config = load_checked_config()
        assert "pai_check_probe_app" not in sys.modules
        result = invoke("config", "--check")
    finally:
        sys.path.remove(str(module.parent))
        sys.modules.pop("pai_check_probe_app", None)

    assert config.data["chat"] == {"agent": "pai_check_probe_app:agent"}
    assert result.exit_code == 2  # --check does import it, and reports the failure
    assert "pai_check_probe_app" in result.stderr


def test_load_checked_config_passes_a_valid_configuration() -> None:
    Path("pai.toml").write_text(
        '[storage]\nurl = "memory://"\n\n[capabilities.sandbox]\nprovider = "inmemory"\n'
    )

    config = load_checked_config()

    assert config.capability("sandbox") == {"provider": "inmemory"}


def test_a_config_error_is_a_pai_error() -> None:
    Path("pai.toml").write_text("[capabilites]\n")

    with pytest.raises(ConfigError, match="did you mean 'capabilities'"):
        load_checked_config()


def test_a_known_provider_that_is_not_installed_is_explained_not_offered_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PAI_LOAD_PLUGINS", "pai-sandbox,pai-sandbox-inmemory")
    Path("pai.toml").write_text('[capabilities.sandbox]\nprovider = "docker"\n')

    result = invoke("config", "--check")

    assert result.exit_code == 2
    assert "pip install pai-sandbox-docker" in result.stderr
    assert "did you mean" not in result.stderr


# -- --json on errors ---------------------------------------------------------------------------


@pytest.mark.parametrize("args", [("config", "--check", "--json"), ("config", "--json")])
def test_a_json_run_prints_json_on_errors_too_with_the_key_and_file(args: tuple[str]) -> None:
    Path("pai.toml").write_text('[capabilities.sandbx]\nprovider = "docker"\n')

    result = invoke(*args)

    assert result.exit_code == 2
    data = json.loads(result.stdout)
    assert data["files"] == [str(Path("pai.toml").resolve())]
    assert ("check" in data) == ("--check" in args)
    if "--check" in args:
        assert data["check"] == "failed"
    error = data["error"]
    assert error["type"] == "ConfigError"
    assert error["key"] == "capabilities.sandbx"
    assert error["file"] == str(Path("pai.toml").resolve())
    assert "did you mean 'sandbox'?" in error["message"]


def test_a_file_that_is_not_toml_is_named_in_the_json_error() -> None:
    Path("pai.toml").write_text("[capabilities.sandbox\n")

    result = invoke("config", "--check", "--json")

    assert result.exit_code == 2
    error = json.loads(result.stdout)["error"]
    assert error["file"] == str(Path("pai.toml").resolve())
    assert "not valid TOML" in error["message"]
    assert error["key"] is None


def test_a_misspelt_table_from_the_environment_is_a_json_error_naming_the_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PAI_STORGE__URL", "memory://")

    result = invoke("config", "--check", "--json")

    assert result.exit_code == 2
    data = json.loads(result.stdout)
    assert data["files"] == []
    assert data["error"]["key"] == "storge"
    assert data["error"]["file"] is None
    assert "PAI_STORGE__URL" in data["error"]["message"]


def test_a_probe_timeout_without_probe_is_an_error_not_ignored() -> None:
    result = invoke("config", "--probe-timeout", "3")

    assert result.exit_code == 2
    assert "add --probe" in result.stderr


def test_a_probe_timeout_must_be_a_positive_number_of_seconds() -> None:
    result = invoke("config", "--probe", "--probe-timeout", "0")

    assert result.exit_code == 2
    assert "--probe-timeout" in result.stderr


def test_load_checked_config_never_quotes_a_url_password() -> None:
    # A scheme no installed backend takes (pai-storage-postgres takes postgresql://).
    Path("pai.toml").write_text('[storage]\nurl = "mysql://app:pw-hunter2-x@db/threads"\n')

    with pytest.raises(ConfigError) as raised:
        load_checked_config()

    assert "mysql://app:***@db/threads" in str(raised.value)
    # Nowhere in the error or what it chains (the storage URL is masked where it is opened).
    chained: BaseException | None = raised.value
    while chained is not None:
        assert "pw-hunter2-x" not in str(chained), chained
        chained = chained.__cause__ or chained.__context__
