"""The plugin: what ``pai_capabilities`` registers, and the binding its factory builds from settings."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterator
from pathlib import Path

import pytest
from pai.core import (
    CapabilityBindingError,
    CommandContext,
    UserError,
    capability_binding,
    create_agent_runtime,
    define_agent,
    define_command,
    load_config,
)
from pai.core.ext import CapabilityRegistration, CapabilitySettings, get_plugins
from pai.core.testing import create_test_runtime, reset_plugins
from pydantic import BaseModel, ValidationError

from acme_vault import Vault, VaultOptions, memory_server, vault
from acme_vault._plugin import pai_capabilities

SECTION = "[capabilities.acme.vault]"


def _registration() -> CapabilityRegistration:
    [registration] = pai_capabilities()
    return registration


def _settings(scope: str | None, **options: object) -> CapabilitySettings[VaultOptions]:
    """What PAI's configuration loader hands the factory for ``[capabilities.acme.vault]``."""
    return CapabilitySettings(
        scope=scope,
        options=VaultOptions.model_validate(options),
        section=SECTION,
        raw={"scope": scope, **options} if scope is not None else dict(options),
    )


class Put(BaseModel):
    name: str
    value: str


async def _put(ctx: CommandContext[Put]) -> list[str]:
    secrets = ctx.capabilities[vault]
    await secrets.put(ctx.input.name, ctx.input.value)
    return await secrets.names()


agent = define_agent(
    name="admin", commands={"put": define_command(input=Put, capabilities={"v": vault}, run=_put)}
)


@pytest.fixture
def fresh_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("PAI_LOAD_PLUGINS", raising=False)
    monkeypatch.delenv("PAI_STRICT_PLUGINS", raising=False)
    reset_plugins()
    yield
    reset_plugins()


# -- the registration ---------------------------------------------------------------------------


def test_registration_names_the_token_options_and_install_hint() -> None:
    registration = _registration()
    assert registration.id == "acme.vault"
    assert registration.capability is vault
    assert registration.capability.facade is Vault
    assert registration.options is VaultOptions
    assert registration.install_hint == "pip install acme-vault"
    assert registration.description


def test_options_forbid_unknown_keys_and_check_the_url() -> None:
    options = VaultOptions.model_validate({"url": "memory://"})
    assert (options.url, options.retries) == ("memory://", 2)
    with pytest.raises(ValidationError, match=r"urll\n  Extra inputs are not permitted"):
        VaultOptions.model_validate({"url": "memory://", "urll": "memory://x"})
    with pytest.raises(ValidationError, match=r"url\n  Field required"):
        VaultOptions.model_validate({})
    with pytest.raises(ValidationError, match=r"url\n.*memory://<server name>"):
        VaultOptions.model_validate({"url": "https://vault.acme.io"})
    with pytest.raises(ValidationError, match="retries"):
        VaultOptions.model_validate({"url": "memory://", "retries": -1})


# -- the factory --------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_factory_builds_a_working_binding_from_settings() -> None:
    server = memory_server()
    binding = _registration().factory(_settings("user", url=server.url, retry_delay=0))
    assert binding.capability is vault
    assert binding.scope == "user"
    assert binding.has_dispose

    async with create_test_runtime(agent=agent, capabilities={"acme.vault": binding}) as runtime:
        thread = await runtime.admin(identity=None).create_thread()
        stored = await thread.commands.put({"name": "db-password", "value": "hunter2"})
        assert stored == ["db-password"]
    [key] = server.vault_ids()
    assert server.secrets(key) == {"db-password": "hunter2"}
    assert server.open_connections == 0  # the runtime closed the binding


def test_factory_defaults_the_scope_to_user() -> None:
    binding = _registration().factory(_settings(None, url="memory://"))
    assert binding.scope == "user"


def test_factory_rejects_an_unknown_scope_naming_the_section() -> None:
    with pytest.raises(CapabilityBindingError) as caught:
        _registration().factory(_settings("tenant", url="memory://"))
    message = str(caught.value)
    assert "[capabilities.acme.vault] scope = 'tenant' is not a scope" in message
    assert "'thread', 'rootThread', 'user', 'scope', 'global'" in message
    assert caught.value.ids == ("acme.vault",)


# -- discovery through the entry point ----------------------------------------------------------


def test_the_entry_point_names_the_plugin_module() -> None:
    [entry_point] = [
        e for e in importlib.metadata.entry_points(group="pai") if e.name == "acme-vault"
    ]
    assert entry_point.value == "acme_vault._plugin"
    assert entry_point.dist is not None
    assert entry_point.dist.name == "acme-vault"


@pytest.mark.usefixtures("fresh_plugins")
def test_pai_finds_the_package_through_its_entry_point() -> None:
    plugins = get_plugins()
    [info] = [p for p in plugins.plugins() if p.name == "acme-vault"]
    assert (info.distribution, info.status) == ("acme-vault", "loaded")
    assert "pai_capabilities" in info.hooks
    registration = plugins.capabilities()["acme.vault"]
    assert registration.distribution == "acme-vault"
    assert registration.options is VaultOptions


# -- configuration: the README's pai.toml, through PAI's configuration loader -------------------


def _pai_toml(tmp_path: Path, body: str) -> Path:
    (tmp_path / "pai.toml").write_text(body)
    return tmp_path


@pytest.mark.anyio
@pytest.mark.usefixtures("fresh_plugins")
async def test_pai_toml_binds_the_capability(tmp_path: Path) -> None:
    server = memory_server()
    config = load_config(
        _pai_toml(tmp_path, f'[capabilities.acme.vault]\nurl = "{server.url}"\nscope = "thread"\n'),
        environ={},
    )
    binding = capability_binding("acme.vault", config=config)
    assert binding.capability is vault
    assert binding.scope == "thread"

    async with create_test_runtime(agent=agent, capabilities={"acme.vault": binding}) as runtime:
        thread = await runtime.admin(identity=None).create_thread()
        await thread.commands.put({"name": "db-password", "value": "hunter2"})
        assert len(server.vault_ids()) == 1
        await thread.delete()  # thread scope: the vault goes with its thread
        assert server.vault_ids() == {}


@pytest.mark.anyio
@pytest.mark.usefixtures("fresh_plugins")
async def test_an_agent_runtime_binds_it_from_configuration(tmp_path: Path) -> None:
    """No binding in code: the runtime asks the installed plugin to build it from pai.toml."""
    server = memory_server()
    config = load_config(
        _pai_toml(tmp_path, f'[capabilities.acme.vault]\nurl = "{server.url}"\n'), environ={}
    )
    runtime = create_agent_runtime(
        agent=agent,
        scope_key=lambda identity: "acme",
        user_key=lambda identity: str(identity),
        config=config,
    )
    async with runtime:
        for user in ("ada", "ada", "grace"):
            thread = await runtime.admin(identity=user).create_thread()
            await thread.commands.put({"name": f"token-{user}", "value": "x"})
    # The default scope is "user": one vault per user, whatever the thread.
    assert sorted(sorted(server.secrets(key)) for key in server.vault_ids()) == [
        ["token-ada"],
        ["token-grace"],
    ]


@pytest.mark.usefixtures("fresh_plugins")
def test_a_misspelt_option_in_pai_toml_is_an_error_naming_the_key(tmp_path: Path) -> None:
    config = load_config(
        _pai_toml(tmp_path, '[capabilities.acme.vault]\nurl = "memory://"\nurll = "x"\n'),
        environ={},
    )
    with pytest.raises(UserError) as caught:
        capability_binding("acme.vault", config=config)
    message = str(caught.value)
    assert "capabilities.acme.vault.urll" in message
    assert "unknown key" in message
    assert "url" in message.split("Valid keys", 1)[1]


@pytest.mark.usefixtures("fresh_plugins")
def test_an_unconfigured_vault_says_what_to_write(tmp_path: Path) -> None:
    config = load_config(_pai_toml(tmp_path, "# nothing configured yet\n"), environ={})
    with pytest.raises(UserError) as caught:
        capability_binding("acme.vault", config=config)
    message = str(caught.value)
    assert "acme-vault, which provides it, needs [capabilities.acme.vault] with url" in message
    assert "[capabilities.acme.vault]\n        url = " in message
