"""Configuration: where it is found, how environment and code override it, and how it binds the
capabilities an agent needs that code does not bind."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

import pai.core._pai
from pai.core import (
    AcquireInput,
    Agent,
    CapabilityBinding,
    CapabilityBindingError,
    CapabilityRegistration,
    CapabilitySettings,
    ConfigError,
    InMemoryStorage,
    PaiConfig,
    Plugins,
    ToolContext,
    ToolResultMessage,
    UserError,
    bindings_from_config,
    capability_binding,
    create_agent_runtime,
    create_capability_binding,
    create_pai,
    define_agent,
    define_capability,
    define_tool,
    hookimpl,
    load_config,
    reset_plugins,
)
from pai.core.testing import ScriptedModel, text, tool_call

NO_ENV: dict[str, str] = {}


@pytest.fixture(autouse=True)
def _fresh_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No test sees another's plugins, or the developer's PAI_* configuration variables."""
    import os

    for name in list(os.environ):
        if name.startswith("PAI_"):
            monkeypatch.delenv(name)
    reset_plugins()
    yield
    reset_plugins()


def write(path: Path, content: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, encoding="utf-8")
    return path


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


# -- binding capabilities from configuration -----------------------------------------------------


class Vault:
    def __init__(self, url: str, scope: str) -> None:
        self.url = url
        self.scope = scope


class VaultOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str
    timeout: float = 5.0


vault = define_capability(Vault, id="acme.vault", description="Secrets from the Acme vault.")
ledger = define_capability(Vault, id="acme.ledger", description="Not installed anywhere.")
other = define_capability(Vault, id="acme.other", description="Not installed anywhere.")

seen_settings: list[CapabilitySettings[Any]] = []


def vault_factory(settings: CapabilitySettings[VaultOptions]) -> CapabilityBinding[Vault]:
    seen_settings.append(settings)
    url = settings.options.url
    scope = settings.scope or "thread"
    return create_capability_binding(
        capability=vault,
        scope=scope,  # type: ignore[arg-type]  # the loader checked it
        acquire=lambda _input: Vault(url, scope),
    )


class VaultPlugin:
    """A capability package's plugin, registered in code on a fresh ``Plugins``."""

    def __init__(self, registration: CapabilityRegistration) -> None:
        self.registration = registration

    @hookimpl
    def pai_capabilities(self) -> list[CapabilityRegistration]:
        return [self.registration]


VAULT = CapabilityRegistration(
    capability=vault,
    factory=vault_factory,
    options=VaultOptions,
    description="Secrets from the Acme vault.",
    install_hint="pip install acme-vault",
)


def vault_plugins(registration: CapabilityRegistration = VAULT) -> Plugins:
    plugins = Plugins()
    plugins.register(VaultPlugin(registration), name="acme-vault", distribution="acme-vault")
    return plugins


class NoInput(BaseModel):
    pass


def fetch_tool_agent(*extra_tokens: Any, name: str = "main") -> Agent:
    async def fetch(ctx: ToolContext[NoInput]) -> dict[str, str]:
        found: Vault = ctx.capabilities[vault]
        return {"url": found.url, "scope": found.scope}

    tools: dict[str, Any] = {
        "fetch": define_tool(
            id="fetch",
            description="Fetch a secret.",
            input_schema=NoInput,
            capabilities={"vault": vault},
            execute=fetch,
        )
    }
    for token in extra_tokens:
        tools[f"use_{token.id.replace('.', '_')}"] = define_tool(
            id=f"use_{token.id.replace('.', '_')}",
            description="Declares another capability.",
            input_schema=NoInput,
            capabilities={"it": token},
            execute=lambda ctx: "unused",
        )
    return define_agent(name=name, tools=tools)


def config_of(tmp_path: Path, content: str, environ: dict[str, str] | None = None) -> PaiConfig:
    write(tmp_path / "pai.toml", content)
    return load_config(tmp_path, environ=environ or NO_ENV)


def test_a_configured_capability_is_bound_by_its_package_from_its_section(tmp_path: Path) -> None:
    config = config_of(
        tmp_path, '[capabilities.acme.vault]\nscope = "user"\nurl = "https://vault"\n'
    )
    seen_settings.clear()

    bindings = bindings_from_config(
        fetch_tool_agent().requirements, config=config, plugins=vault_plugins()
    )

    assert list(bindings) == ["acme.vault"]
    assert bindings["acme.vault"].scope == "user"
    (settings,) = seen_settings
    assert settings.scope == "user"
    assert settings.options == VaultOptions(url="https://vault")
    assert settings.section == "[capabilities.acme.vault]"
    assert settings.raw == {"scope": "user", "url": "https://vault"}


def test_capabilities_bound_in_code_are_left_to_code(tmp_path: Path) -> None:
    config = config_of(tmp_path, "[capabilities.acme.vault]\nurll = 1\n")  # would be an error

    assert (
        bindings_from_config(
            fetch_tool_agent().requirements,
            config=config,
            plugins=vault_plugins(),
            bound={"acme.vault"},
        )
        == {}
    )


def test_a_typo_names_the_file_the_key_path_the_value_and_the_valid_keys(tmp_path: Path) -> None:
    config = config_of(tmp_path, '[capabilities.acme.vault]\nurll = "https://vault"\n')

    with pytest.raises(ConfigError) as caught:
        bindings_from_config(
            fetch_tool_agent().requirements, config=config, plugins=vault_plugins()
        )

    message = str(caught.value)
    assert caught.value.ids == ("acme.vault",)
    assert "capabilities.acme.vault.urll = 'https://vault'" in message
    assert str(tmp_path / "pai.toml") in message
    assert "unknown key; did you mean 'url'?" in message
    assert "Valid keys of [capabilities.acme.vault]: scope, timeout, url (required)" in message
    assert "tool 'fetch'" in message  # who needs it


def test_a_bad_value_from_the_environment_names_the_variable(tmp_path: Path) -> None:
    config = config_of(
        tmp_path,
        '[capabilities.acme.vault]\nurl = "https://vault"\n',
        environ={"PAI_CAPABILITIES__ACME__VAULT__TIMEOUT": "soon"},
    )

    with pytest.raises(ConfigError) as caught:
        bindings_from_config(
            fetch_tool_agent().requirements, config=config, plugins=vault_plugins()
        )

    message = str(caught.value)
    assert "capabilities.acme.vault.timeout = 'soon'" in message
    assert "environment variable PAI_CAPABILITIES__ACME__VAULT__TIMEOUT" in message
    assert "valid number" in message  # pydantic's account of the problem


def test_a_bad_scope_lists_the_valid_scopes(tmp_path: Path) -> None:
    config = config_of(tmp_path, '[capabilities.acme.vault]\nurl = "u"\nscope = "forever"\n')

    with pytest.raises(ConfigError) as caught:
        bindings_from_config(
            fetch_tool_agent().requirements, config=config, plugins=vault_plugins()
        )

    message = str(caught.value)
    assert "capabilities.acme.vault.scope = 'forever'" in message
    assert "'thread', 'rootThread', 'user', 'scope', 'global'" in message


def test_missing_required_options_show_the_toml_that_would_bind_it(tmp_path: Path) -> None:
    config = config_of(tmp_path, "")

    with pytest.raises(ConfigError) as caught:
        bindings_from_config(
            fetch_tool_agent().requirements, config=config, plugins=vault_plugins()
        )

    message = str(caught.value)
    assert "'acme.vault' (declared by tool 'fetch') is not bound" in message
    assert "acme-vault" in message  # the package that provides it
    assert f"Add to {tmp_path / 'pai.toml'}" in message
    assert '[capabilities.acme.vault]\n        url = "..."' in message
    assert "capabilities={'acme.vault': <binding>}" in message  # the other way to fix it


def test_the_snippet_is_written_for_pyproject_toml_when_that_is_the_file(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", "[tool.pai]\n")
    config = load_config(tmp_path, environ=NO_ENV)

    with pytest.raises(ConfigError) as caught:
        bindings_from_config(
            fetch_tool_agent().requirements, config=config, plugins=vault_plugins()
        )

    assert '[tool.pai.capabilities.acme.vault]\n        url = "..."' in str(caught.value)


def test_a_partly_configured_section_names_the_missing_key_and_shows_the_snippet(
    tmp_path: Path,
) -> None:
    config = config_of(tmp_path, "[capabilities.acme.vault]\ntimeout = 3\n")

    with pytest.raises(ConfigError) as caught:
        bindings_from_config(
            fetch_tool_agent().requirements, config=config, plugins=vault_plugins()
        )

    message = str(caught.value)
    assert "capabilities.acme.vault.url: required, and not set" in message
    assert 'url = "..."' in message


def test_capabilities_no_plugin_provides_are_all_listed_with_who_declared_them_and_the_fix(
    tmp_path: Path,
) -> None:
    agent = fetch_tool_agent(ledger, other)

    with pytest.raises(ConfigError) as caught:
        bindings_from_config(
            agent.requirements, config=config_of(tmp_path, ""), plugins=vault_plugins()
        )

    error = caught.value
    assert isinstance(error, CapabilityBindingError)  # old handlers still catch it
    assert error.ids == ("acme.ledger", "acme.other", "acme.vault")
    message = str(error)
    assert "'acme.ledger' is not bound (declared by tool 'use_acme_ledger')" in message
    assert "'acme.other' is not bound (declared by tool 'use_acme_other')" in message
    assert "capabilities={'acme.ledger': <binding>}" in message
    assert "install the package that provides it" in message
    assert "'acme.vault' from acme-vault" in message  # what is installed


def test_a_package_error_keeps_its_message_and_names_where_the_section_came_from(
    tmp_path: Path,
) -> None:
    class NotInstalledError(UserError):
        pass

    def failing_factory(settings: CapabilitySettings[VaultOptions]) -> CapabilityBinding[Vault]:
        raise NotInstalledError(
            f"backend {settings.options.url!r} is not installed; pip install acme-vault-http"
        )

    registration = CapabilityRegistration(
        capability=vault, factory=failing_factory, options=VaultOptions
    )
    config = config_of(tmp_path, '[capabilities.acme.vault]\nurl = "http"\n')

    with pytest.raises(ConfigError) as caught:
        bindings_from_config(
            fetch_tool_agent().requirements, config=config, plugins=vault_plugins(registration)
        )

    message = str(caught.value)
    assert "backend 'http' is not installed; pip install acme-vault-http" in message
    assert isinstance(caught.value.__cause__, NotInstalledError)
    assert f"[capabilities.acme.vault] ({tmp_path / 'pai.toml'})" in message


def test_a_package_whose_factory_returns_no_binding_is_reported_as_its_bug(tmp_path: Path) -> None:
    registration = CapabilityRegistration(
        capability=vault,
        factory=lambda settings: "not a binding",  # type: ignore[arg-type,return-value]
        options=VaultOptions,
    )
    config = config_of(tmp_path, '[capabilities.acme.vault]\nurl = "u"\n')

    with pytest.raises(ConfigError) as caught:
        bindings_from_config(
            fetch_tool_agent().requirements, config=config, plugins=vault_plugins(registration)
        )

    message = str(caught.value)
    assert "returned 'not a binding'" in message
    assert "bug in acme-vault" in message
    assert "capabilities={'acme.vault': <binding>}" in message


def test_capability_binding_builds_one_capability_from_configuration(tmp_path: Path) -> None:
    config = config_of(tmp_path, '[capabilities.acme.vault]\nurl = "u"\n')

    binding = capability_binding("acme.vault", config=config, plugins=vault_plugins())

    assert binding.capability is vault
    facade = binding.acquire(
        AcquireInput(
            key="k",
            capability_id="acme.vault",
            scope="thread",
            thread_id="t",
            root_thread_id="t",
            scope_key="s",
            user_key=None,
            identity=None,
        )
    )
    assert isinstance(facade, Vault)
    assert facade.url == "u"


def test_capability_binding_of_an_uninstalled_capability_says_to_install_it(
    tmp_path: Path,
) -> None:
    with pytest.raises(ConfigError) as caught:
        capability_binding("acme.ledger", config=config_of(tmp_path, ""), plugins=Plugins())

    message = str(caught.value)
    assert "no installed plugin provides capability 'acme.ledger'" in message
    assert "install the package that does" in message


# -- the runtime and the app bind from configuration ---------------------------------------------


def scope_of(identity: object) -> str:
    return "acme"


def fetch_model() -> ScriptedModel:
    return ScriptedModel([tool_call("fetch"), text("done")])


def fetched(messages: Any) -> object:
    (result,) = [m for m in messages if isinstance(m, ToolResultMessage)]
    return result.output


@pytest.mark.anyio
async def test_a_runtime_binds_from_configuration_what_code_does_not_bind(tmp_path: Path) -> None:
    config = config_of(tmp_path, '[capabilities.acme.vault]\nurl = "https://cfg"\n')

    async with create_agent_runtime(
        agent=fetch_tool_agent(),
        model=fetch_model(),
        scope_key=scope_of,
        config=config,
        plugins=vault_plugins(),
    ) as runtime:
        thread = await runtime.admin(identity=None).create_thread()
        result = await thread.send("go")

    assert fetched(result.messages) == {"url": "https://cfg", "scope": "thread"}


@pytest.mark.anyio
async def test_a_binding_given_in_code_wins_over_configuration(tmp_path: Path) -> None:
    config = config_of(tmp_path, '[capabilities.acme.vault]\nurl = "https://cfg"\n')
    in_code = create_capability_binding(
        capability=vault, acquire=lambda _input: Vault("https://code", "code")
    )

    async with create_agent_runtime(
        agent=fetch_tool_agent(),
        model=fetch_model(),
        scope_key=scope_of,
        capabilities={"acme.vault": in_code},
        config=config,
        plugins=vault_plugins(),
    ) as runtime:
        thread = await runtime.admin(identity=None).create_thread()
        result = await thread.send("go")

    assert fetched(result.messages) == {"url": "https://code", "scope": "code"}


def test_a_user_scope_chosen_in_configuration_without_a_user_key_fails_at_construction(
    tmp_path: Path,
) -> None:
    config = config_of(tmp_path, '[capabilities.acme.vault]\nscope = "user"\nurl = "u"\n')

    with pytest.raises(CapabilityBindingError, match="user_key") as caught:
        create_agent_runtime(
            agent=fetch_tool_agent(),
            scope_key=scope_of,
            storage=InMemoryStorage(),
            config=config,
            plugins=vault_plugins(),
        )

    assert caught.value.ids == ("acme.vault",)
    assert "scope 'user'" in str(caught.value)


def test_configuration_is_not_read_when_code_binds_everything_and_passes_storage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / "pai.toml", "this is not TOML")
    monkeypatch.chdir(tmp_path)
    in_code = create_capability_binding(capability=vault, acquire=lambda _input: Vault("u", "s"))

    create_agent_runtime(
        agent=fetch_tool_agent(),
        scope_key=scope_of,
        capabilities={"acme.vault": in_code},
        storage=InMemoryStorage(),
        plugins=vault_plugins(),
    )


def test_configuration_is_read_for_the_storage_when_code_passes_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / "pai.toml", "this is not TOML")
    monkeypatch.chdir(tmp_path)
    in_code = create_capability_binding(capability=vault, acquire=lambda _input: Vault("u", "s"))

    with pytest.raises(ConfigError, match="not valid TOML"):
        create_agent_runtime(
            agent=fetch_tool_agent(),
            scope_key=scope_of,
            capabilities={"acme.vault": in_code},
            plugins=vault_plugins(),
        )


def test_configuration_is_read_from_the_working_directory_when_a_capability_is_unbound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file = write(tmp_path / "pai.toml", "this is not TOML")
    monkeypatch.chdir(tmp_path)

    with pytest.raises(ConfigError, match="not valid TOML") as caught:
        create_agent_runtime(agent=fetch_tool_agent(), scope_key=scope_of, plugins=vault_plugins())

    assert str(file) in str(caught.value)


def test_a_capability_no_plugin_provides_is_reported_without_reading_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / "pai.toml", "this is not TOML")  # never read: nothing could use it
    monkeypatch.chdir(tmp_path)
    agent = define_agent(
        name="main",
        tools={
            "use": define_tool(
                id="use",
                description="Uses the ledger.",
                input_schema=NoInput,
                capabilities={"ledger": ledger},
                execute=lambda ctx: "x",
            )
        },
    )

    with pytest.raises(CapabilityBindingError) as caught:
        create_agent_runtime(
            agent=agent, scope_key=scope_of, storage=InMemoryStorage(), plugins=vault_plugins()
        )

    message = str(caught.value)
    assert "'acme.ledger' is not bound (declared by tool 'use')" in message
    assert "capabilities={'acme.ledger': <binding>}" in message
    assert "not valid TOML" not in message


def test_wrong_code_bindings_and_configuration_problems_are_reported_in_one_error(
    tmp_path: Path,
) -> None:
    config = config_of(tmp_path, '[capabilities.acme.vault]\nurll = "x"\n')
    extra_binding = create_capability_binding(
        capability=ledger, acquire=lambda _input: Vault("u", "s")
    )

    with pytest.raises(ConfigError) as caught:
        create_agent_runtime(
            agent=fetch_tool_agent(),
            scope_key=scope_of,
            capabilities={"acme.ledger": extra_binding},
            config=config,
            plugins=vault_plugins(),
        )

    error = caught.value
    assert error.ids == ("acme.ledger", "acme.vault")
    message = str(error)
    assert "'acme.ledger' is bound but no tool or command of the agent declares it" in message
    assert "capabilities.acme.vault.urll = 'x'" in message


@pytest.mark.anyio
async def test_an_app_binds_every_agent_from_configuration_read_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / "pai.toml", '[capabilities.acme.vault]\nurl = "https://app"\n')
    monkeypatch.chdir(tmp_path)
    reads: list[PaiConfig] = []

    def counting_load_config() -> PaiConfig:
        reads.append(load_config(environ=NO_ENV))
        return reads[-1]

    monkeypatch.setattr(pai.core._pai, "load_config", counting_load_config)

    async with create_pai(
        agents={
            "one": {"agent": fetch_tool_agent(name="one").with_model(fetch_model())},
            "two": {"agent": fetch_tool_agent(name="two").with_model(fetch_model())},
        },
        scope_key=scope_of,
        plugins=vault_plugins(),
    ) as app:
        for agent_id in app.agent_ids:
            thread = await app.runtime(agent_id).admin(identity=None).create_thread()
            result = await thread.send("go")
            assert fetched(result.messages) == {"url": "https://app", "scope": "thread"}

    assert len(reads) == 1


def test_an_app_reports_every_agents_configuration_problems_in_one_error(tmp_path: Path) -> None:
    config = config_of(tmp_path, "")

    with pytest.raises(ConfigError) as caught:
        create_pai(
            agents={
                "one": {"agent": fetch_tool_agent(name="one")},
                "two": {"agent": fetch_tool_agent(ledger, name="two")},
            },
            scope_key=scope_of,
            config=config,
            plugins=vault_plugins(),
        )

    message = str(caught.value)
    assert caught.value.ids == ("acme.ledger", "acme.vault")
    assert "agent 'one'" in message
    assert "agent 'two'" in message
    assert message.count('url = "..."') == 2
    assert "'acme.ledger' is not bound" in message


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
