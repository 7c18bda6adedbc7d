"""Configuration loading: where the file is found, how environment and code override it, where each
value came from, and the mistakes it never lets pass silently."""

from __future__ import annotations

from pathlib import Path

import pytest
from config_helpers import (
    NO_ENV,
    config_of,
    fetch_tool_agent,
    scope_of,
    vault_plugins,
    write,
)

from pai.core import (
    ConfigError,
    InMemoryStorage,
    create_agent_runtime,
    load_config,
)
from pai.core._config import did_you_mean

pytestmark = pytest.mark.usefixtures("fresh_plugins")


# -- discovery -----------------------------------------------------------------------------------


def test_pai_toml_in_the_start_folder_is_read_and_its_values_are_attributed_to_it(
    tmp_path: Path,
) -> None:
    file = write(tmp_path / "pai.toml", '[capabilities.sandbox]\nprovider = "docker"\n')

    config = load_config(tmp_path, environ=NO_ENV)

    assert config.data == {"capabilities": {"sandbox": {"provider": "docker"}}}
    assert config.files == (file,)
    assert config.sources == {("capabilities", "sandbox", "provider"): str(file)}


def test_the_tool_pai_table_of_pyproject_toml_is_read(tmp_path: Path) -> None:
    file = write(
        tmp_path / "pyproject.toml",
        '[project]\nname = "app"\n\n[tool.pai.capabilities.sandbox]\nprovider = "e2b"\n',
    )

    config = load_config(tmp_path, environ=NO_ENV)

    assert config.data == {"capabilities": {"sandbox": {"provider": "e2b"}}}
    assert config.files == (file,)


def test_the_search_goes_upward_and_stops_at_the_first_file_found(tmp_path: Path) -> None:
    write(tmp_path / "pai.toml", '[capabilities.sandbox]\nprovider = "far"\n')
    near = write(tmp_path / "app" / "pai.toml", '[capabilities.sandbox]\nprovider = "near"\n')
    start = tmp_path / "app" / "src" / "pkg"
    start.mkdir(parents=True)

    config = load_config(start, environ=NO_ENV)

    assert config.capability("sandbox") == {"provider": "near"}
    assert config.files == (near,)


def test_a_pyproject_toml_without_tool_pai_does_not_stop_the_search(tmp_path: Path) -> None:
    top = write(tmp_path / "pai.toml", '[capabilities.sandbox]\nprovider = "docker"\n')
    write(tmp_path / "app" / "pyproject.toml", '[project]\nname = "app"\n')

    config = load_config(tmp_path / "app", environ=NO_ENV)

    assert config.files == (top,)


def test_pai_toml_is_preferred_to_pyproject_toml_in_one_folder(tmp_path: Path) -> None:
    file = write(tmp_path / "pai.toml", '[capabilities.sandbox]\nprovider = "from-pai-toml"\n')
    write(tmp_path / "pyproject.toml", '[tool.pai.capabilities.sandbox]\nprovider = "pyproject"\n')

    config = load_config(tmp_path, environ=NO_ENV)

    assert config.capability("sandbox") == {"provider": "from-pai-toml"}
    assert config.files == (file,)


def test_the_search_starts_in_the_working_directory_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file = write(tmp_path / "pai.toml", '[capabilities.sandbox]\nprovider = "docker"\n')
    monkeypatch.chdir(tmp_path)

    assert load_config(environ=NO_ENV).files == (file,)


def test_no_file_gives_an_empty_configuration(tmp_path: Path) -> None:
    config = load_config(tmp_path, environ=NO_ENV)

    assert config.data == {}
    assert config.files == ()
    assert config.capability("sandbox") is None
    assert config.flat() == []


def test_invalid_toml_is_an_error_naming_the_file_the_problem_and_the_fix(tmp_path: Path) -> None:
    file = write(tmp_path / "pai.toml", "[capabilities.sandbox]\nprovider = docker\n")

    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path, environ=NO_ENV)

    message = str(caught.value)
    assert str(file) in message
    assert "not valid TOML" in message
    assert "line 2" in message  # tomllib's own account of where
    assert "Fix" in message


def test_invalid_toml_in_a_pyproject_toml_that_mentions_pai_is_an_error(tmp_path: Path) -> None:
    file = write(tmp_path / "pyproject.toml", "[tool.pai\nprovider = 1\n")

    with pytest.raises(ConfigError, match="not valid TOML") as caught:
        load_config(tmp_path, environ=NO_ENV)

    assert str(file) in str(caught.value)


def test_a_tool_pai_that_is_not_a_table_is_an_error(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", '[tool]\npai = "docker"\n')

    with pytest.raises(ConfigError, match=r"tool\.pai = 'docker'.*not a table"):
        load_config(tmp_path, environ=NO_ENV)


# -- environment and code overrides --------------------------------------------------------------


def test_environment_variables_override_the_file_with_typed_values_and_their_source(
    tmp_path: Path,
) -> None:
    write(tmp_path / "pai.toml", '[capabilities.sandbox]\nprovider = "inmemory"\n')
    environ = {
        "PAI_CAPABILITIES__SANDBOX__PROVIDER": "docker",  # not TOML: a plain string
        "PAI_CAPABILITIES__SANDBOX__DEFAULT_TIMEOUT": "5",
        "PAI_CAPABILITIES__SANDBOX__DOCKER__PULL": "true",
        "PAI_CAPABILITIES__SANDBOX__DOCKER__IMAGE": '"python:3.12"',
        "PAI_CAPABILITIES__SANDBOX__DOCKER__PORTS": "[1, 2]",
        "PAI_CAPABILITIES__SANDBOX__DOCKER__NOTE": "",
    }

    config = load_config(tmp_path, environ=environ)

    assert config.capability("sandbox") == {
        "provider": "docker",
        "default_timeout": 5,
        "docker": {"pull": True, "image": "python:3.12", "ports": [1, 2], "note": ""},
    }
    assert config.sources[("capabilities", "sandbox", "provider")] == (
        "env PAI_CAPABILITIES__SANDBOX__PROVIDER"
    )
    assert config.sources[("capabilities", "sandbox", "docker", "ports")] == (
        "env PAI_CAPABILITIES__SANDBOX__DOCKER__PORTS"
    )


def test_plugin_switches_and_variables_without_a_level_separator_are_not_configuration(
    tmp_path: Path,
) -> None:
    environ = {
        "PAI_STRICT_PLUGINS": "1",
        "PAI_LOAD_PLUGINS": "",
        "PAI_REQUIRE_DOCKER": "1",
        "PAI_HOME": "/somewhere",
        "OTHER__KEY": "x",
    }

    assert load_config(tmp_path, environ=environ).data == {}


def test_the_environment_defaults_to_the_process_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PAI_CAPABILITIES__SANDBOX__PROVIDER", "docker")

    assert load_config(tmp_path).capability("sandbox") == {"provider": "docker"}


def test_an_environment_variable_reaches_a_quoted_capability_table(tmp_path: Path) -> None:
    write(tmp_path / "pai.toml", '[capabilities."acme.vault"]\nurl = "https://file"\n')

    config = load_config(tmp_path, environ={"PAI_CAPABILITIES__ACME__VAULT__URL": "https://env"})

    assert config.capability("acme.vault") == {"url": "https://env"}
    assert config.sources[("capabilities", "acme.vault", "url")] == (
        "env PAI_CAPABILITIES__ACME__VAULT__URL"
    )


def test_an_environment_variable_with_an_empty_key_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path, environ={"PAI_CAPABILITIES____PROVIDER": "x"})

    message = str(caught.value)
    assert "PAI_CAPABILITIES____PROVIDER" in message
    assert "PAI_CAPABILITIES__SANDBOX__PROVIDER=docker" in message  # what to write instead


def test_code_overrides_go_on_top_of_file_and_environment(tmp_path: Path) -> None:
    write(tmp_path / "pai.toml", '[capabilities.sandbox]\nprovider = "inmemory"\nscope = "user"\n')

    config = load_config(
        tmp_path,
        environ={"PAI_CAPABILITIES__SANDBOX__PROVIDER": "docker"},
        overrides={"capabilities": {"sandbox": {"provider": "e2b", "e2b": {"template": "t"}}}},
    )

    assert config.capability("sandbox") == {
        "provider": "e2b",
        "scope": "user",
        "e2b": {"template": "t"},
    }
    assert config.sources[("capabilities", "sandbox", "provider")] == "code"
    assert config.sources[("capabilities", "sandbox", "scope")] == str(tmp_path / "pai.toml")


def test_a_value_replaced_by_a_table_keeps_only_the_new_sources(tmp_path: Path) -> None:
    write(tmp_path / "pai.toml", '[capabilities]\nsandbox = "oops"\n')

    config = load_config(tmp_path, environ={"PAI_CAPABILITIES__SANDBOX__PROVIDER": "docker"})

    assert config.capability("sandbox") == {"provider": "docker"}
    assert config.sources == {
        ("capabilities", "sandbox", "provider"): "env PAI_CAPABILITIES__SANDBOX__PROVIDER"
    }


# -- capability sections and flat() --------------------------------------------------------------


def test_a_prefixed_id_is_found_as_a_nested_or_a_quoted_table(tmp_path: Path) -> None:
    write(tmp_path / "nested" / "pai.toml", '[capabilities.acme.vault]\nurl = "n"\n')
    write(tmp_path / "quoted" / "pai.toml", '[capabilities."acme.vault"]\nurl = "q"\n')

    assert load_config(tmp_path / "nested", environ=NO_ENV).capability("acme.vault") == {"url": "n"}
    assert load_config(tmp_path / "quoted", environ=NO_ENV).capability("acme.vault") == {"url": "q"}


def test_both_forms_of_one_id_is_an_error_naming_both_and_the_fix(tmp_path: Path) -> None:
    file = write(
        tmp_path / "pai.toml",
        '[capabilities.acme.vault]\nurl = "n"\n\n[capabilities."acme.vault"]\nurl = "q"\n',
    )
    config = load_config(tmp_path, environ=NO_ENV)

    with pytest.raises(ConfigError) as caught:
        config.capability("acme.vault")

    message = str(caught.value)
    assert "[capabilities.acme.vault]" in message
    assert '[capabilities."acme.vault"]' in message
    assert str(file) in message
    assert "merge them into one table" in message


def test_a_capability_section_that_is_not_a_table_is_an_error(tmp_path: Path) -> None:
    write(tmp_path / "pai.toml", '[capabilities]\nsandbox = "docker"\n')

    with pytest.raises(ConfigError, match=r"capabilities\.sandbox = 'docker'.*not a table"):
        load_config(tmp_path, environ=NO_ENV).capability("sandbox")


def test_flat_lists_every_leaf_with_its_source_sorted_by_key(tmp_path: Path) -> None:
    file = write(
        tmp_path / "pai.toml",
        '[capabilities.sandbox]\nprovider = "docker"\n[capabilities."acme.vault"]\nurl = "u"\n',
    )

    config = load_config(tmp_path, environ={"PAI_CAPABILITIES__SANDBOX__SCOPE": "user"})

    assert config.flat() == [
        ('capabilities."acme.vault".url', "u", str(file)),
        ("capabilities.sandbox.provider", "docker", str(file)),
        ("capabilities.sandbox.scope", "user", "env PAI_CAPABILITIES__SANDBOX__SCOPE"),
    ]


# -- no silent fallback: misspelt tables and ids, PAI_CONFIG -------------------------------------


def test_a_misspelt_top_level_table_is_an_error_naming_the_file_and_the_closest_table(
    tmp_path: Path,
) -> None:
    file = write(tmp_path / "pai.toml", '[capabilites.sandbox]\nprovider = "docker"\n')

    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path, environ={})

    message = str(caught.value)
    assert "[capabilites]" in message
    assert str(file) in message
    assert "did you mean 'capabilities'?" in message


def test_a_did_you_mean_hint_ends_in_its_question_mark_between_the_callers_separators() -> None:
    assert did_you_mean("tempate", ["template", "timeout"]) == "did you mean 'template'? "
    assert (
        did_you_mean("tempate", ["template"], before="; ", after="") == "; did you mean 'template'?"
    )
    assert did_you_mean("sqlit", ["sqlite"], show=lambda s: f"{s}://") == "did you mean sqlite://? "


def test_a_did_you_mean_hint_is_empty_when_nothing_is_close() -> None:
    assert did_you_mean("zzz", ["template"], before="; ") == ""


def test_a_did_you_mean_hint_never_offers_back_the_word_typed() -> None:
    assert did_you_mean("docker", ["docker", "inmemory"]) == ""
    assert did_you_mean("docker", ["docker", "dockers"]) == "did you mean 'dockers'? "


def test_a_misspelt_top_level_table_in_the_environment_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="PAI_STORGE__URL") as caught:
        load_config(tmp_path, environ={"PAI_STORGE__URL": "memory://"})

    assert "did you mean 'storage'?" in str(caught.value)


def test_a_misspelt_capability_id_is_an_error_with_the_closest_installed_id(
    tmp_path: Path,
) -> None:
    config = config_of(tmp_path, '[capabilities.acme.vualt]\nurl = "https://cfg"\n')

    with pytest.raises(ConfigError) as caught:
        create_agent_runtime(
            agent=fetch_tool_agent(),
            scope_key=scope_of,
            storage=InMemoryStorage(),
            config=config,
            plugins=vault_plugins(),
        )

    message = str(caught.value)
    assert "[capabilities.acme.vualt]" in message
    assert str(tmp_path / "pai.toml") in message
    assert "did you mean 'acme.vault'?" in message


def test_tables_below_a_known_capability_id_are_its_own(tmp_path: Path) -> None:
    config = config_of(
        tmp_path, '[capabilities.acme.vault]\nurl = "https://cfg"\n[capabilities."acme.vault.x"]\n'
    )

    with pytest.raises(ConfigError, match=r"acme\.vault\.x"):
        create_agent_runtime(
            agent=fetch_tool_agent(),
            scope_key=scope_of,
            storage=InMemoryStorage(),
            config=config,
            plugins=vault_plugins(),
        )


def test_pai_config_selects_the_file_wherever_the_program_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file = write(tmp_path / "app" / "settings.toml", '[storage]\nurl = "memory://"\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    write(elsewhere / "pai.toml", '[storage]\nurl = "sqlite://"\n')  # not read: PAI_CONFIG wins
    monkeypatch.chdir(elsewhere)

    config = load_config(environ={"PAI_CONFIG": str(file)})

    assert config.files == (file.resolve(),)
    assert config.data == {"storage": {"url": "memory://"}}


def test_pai_config_naming_a_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"PAI_CONFIG=.*names no file"):
        load_config(tmp_path, environ={"PAI_CONFIG": str(tmp_path / "nope.toml")})


def test_pai_config_naming_a_pyproject_reads_its_tool_pai_table(tmp_path: Path) -> None:
    file = write(tmp_path / "pyproject.toml", '[tool.pai.storage]\nurl = "memory://"\n')

    config = load_config(tmp_path / "elsewhere", environ={"PAI_CONFIG": str(file)})

    assert config.data == {"storage": {"url": "memory://"}}


def test_pai_config_naming_a_pyproject_without_tool_pai_is_an_error(tmp_path: Path) -> None:
    file = write(tmp_path / "pyproject.toml", '[project]\nname = "x"\n')

    with pytest.raises(ConfigError, match=r"without a \[tool.pai\] table"):
        load_config(tmp_path, environ={"PAI_CONFIG": str(file)})


def test_a_deleted_working_directory_is_a_config_error_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()

    with pytest.raises(ConfigError, match=r"was the folder deleted\?.*PAI_CONFIG="):
        load_config(environ={})
