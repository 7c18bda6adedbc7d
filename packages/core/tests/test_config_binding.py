"""Binding from configuration: the capabilities an agent needs that code does not bind, built by
the capability packages plugins registered, and every problem reported at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from config_helpers import (
    NO_ENV,
    NoInput,
    Vault,
    VaultOptions,
    binding_error,
    config_of,
    fetch_tool_agent,
    ledger,
    other,
    scope_of,
    seen_settings,
    vault,
    vault_plugins,
    write,
)

import pai.core._pai
from pai.core import (
    AcquireInput,
    CapabilityBinding,
    CapabilityBindingError,
    ConfigError,
    InMemoryStorage,
    PaiConfig,
    ToolResultMessage,
    UserError,
    bindings_from_config,
    capability_binding,
    create_agent_runtime,
    create_capability_binding,
    create_pai,
    define_agent,
    define_tool,
    load_config,
)
from pai.core.ext import CapabilityRegistration, CapabilitySettings, Plugins
from pai.core.testing import ScriptedModel, text, tool_call

pytestmark = pytest.mark.usefixtures("fresh_plugins")


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

    error = binding_error(config)

    message = str(error)
    assert error.ids == ("acme.vault",)
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

    error = binding_error(config)

    message = str(error)
    assert "capabilities.acme.vault.timeout = 'soon'" in message
    assert "environment variable PAI_CAPABILITIES__ACME__VAULT__TIMEOUT" in message
    assert "valid number" in message  # pydantic's account of the problem


def test_a_bad_scope_lists_the_valid_scopes(tmp_path: Path) -> None:
    config = config_of(tmp_path, '[capabilities.acme.vault]\nurl = "u"\nscope = "forever"\n')

    error = binding_error(config)

    message = str(error)
    assert "capabilities.acme.vault.scope = 'forever'" in message
    assert "'thread', 'rootThread', 'user', 'scope', 'global'" in message


def test_missing_required_options_show_the_toml_that_would_bind_it(tmp_path: Path) -> None:
    config = config_of(tmp_path, "")

    error = binding_error(config)

    message = str(error)
    assert "'acme.vault' (declared by tool 'fetch') is not bound" in message
    assert "acme-vault" in message  # the package that provides it
    assert f"Add to {tmp_path / 'pai.toml'}" in message
    assert '[capabilities.acme.vault]\n        url = "..."' in message
    assert "capabilities={'acme.vault': <binding>}" in message  # the other way to fix it


def test_the_snippet_is_written_for_pyproject_toml_when_that_is_the_file(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", "[tool.pai]\n")
    config = load_config(tmp_path, environ=NO_ENV)

    error = binding_error(config)

    assert '[tool.pai.capabilities.acme.vault]\n        url = "..."' in str(error)


def test_a_partly_configured_section_names_the_missing_key_and_shows_the_snippet(
    tmp_path: Path,
) -> None:
    config = config_of(tmp_path, "[capabilities.acme.vault]\ntimeout = 3\n")

    error = binding_error(config)

    message = str(error)
    assert "capabilities.acme.vault.url: required, and not set" in message
    assert 'url = "..."' in message


def test_capabilities_no_plugin_provides_are_all_listed_with_who_declared_them_and_the_fix(
    tmp_path: Path,
) -> None:
    agent = fetch_tool_agent(ledger, other)

    error = binding_error(config_of(tmp_path, ""), agent=agent)

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

    error = binding_error(config, plugins=vault_plugins(registration))

    message = str(error)
    assert "backend 'http' is not installed; pip install acme-vault-http" in message
    assert isinstance(error.__cause__, NotInstalledError)
    assert f"[capabilities.acme.vault] ({tmp_path / 'pai.toml'})" in message


def test_a_package_whose_factory_returns_no_binding_is_reported_as_its_bug(tmp_path: Path) -> None:
    registration = CapabilityRegistration(
        capability=vault,
        factory=lambda settings: "not a binding",  # type: ignore[arg-type,return-value]
        options=VaultOptions,
    )
    config = config_of(tmp_path, '[capabilities.acme.vault]\nurl = "u"\n')

    error = binding_error(config, plugins=vault_plugins(registration))

    message = str(error)
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
        agent=fetch_tool_agent().with_model(ScriptedModel([])),
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
        model=ScriptedModel([]),
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
