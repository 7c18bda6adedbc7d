"""What the configuration tests share: files written for them, and a capability package
(``acme.vault``) whose plugin is registered in code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from pai.core import (
    Agent,
    CapabilityBinding,
    ConfigError,
    PaiConfig,
    ToolContext,
    bindings_from_config,
    create_capability_binding,
    define_agent,
    define_capability,
    define_tool,
    load_config,
)
from pai.core.ext import CapabilityRegistration, CapabilitySettings, Plugins, hookimpl

NO_ENV: dict[str, str] = {}


def write(path: Path, content: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, encoding="utf-8")
    return path


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


def scope_of(identity: object) -> str:
    return "acme"


def binding_error(
    config: PaiConfig, *, agent: Agent | None = None, plugins: Plugins | None = None
) -> ConfigError:
    """The error binding ``agent``'s requirements (the fetch tool's by default) from ``config``
    raises, with the vault plugin installed unless ``plugins`` says otherwise."""
    agent = agent if agent is not None else fetch_tool_agent()
    with pytest.raises(ConfigError) as caught:
        bindings_from_config(
            agent.requirements,
            config=config,
            plugins=plugins if plugins is not None else vault_plugins(),
        )
    return caught.value
