"""pai-sandbox as a plugin: the sandbox-provider hookspec, and the ``sandbox`` capability package.

Provider packages implement :meth:`SandboxHookSpecs.pai_sandbox_providers` in a light module named
by their ``pai`` entry point (it must not import the provider's SDK: the factory does, when the
provider is chosen). Configuration then selects a provider by name::

    [capabilities.sandbox]
    scope = "thread"
    provider = "docker"

    [capabilities.sandbox.docker]
    image = "python:3.12-slim"
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

from pydantic import BaseModel, ConfigDict, ValidationError

from pai.core import CapabilityBinding, UserError
from pai.core._plugins import (
    CapabilityRegistration,
    CapabilitySettings,
    DuplicateRegistrationError,
    PluginError,
    Plugins,
    get_plugins,
    hookimpl,
    hookspec,
)
from pai.sandbox._capability import sandbox, sandbox_capability
from pai.sandbox._errors import SandboxError
from pai.sandbox._provider import SandboxProvider
from pai.sandbox._sandbox import DEFAULT_OUTPUT_LIMIT, DEFAULT_TIMEOUT

_log = logging.getLogger("pai.sandbox")

DEFAULT_PROVIDER = "inmemory"
"""The provider used when configuration names none: the embedded in-memory one."""


@dataclass(frozen=True, slots=True)
class SandboxProviderRegistration:
    """A sandbox provider, as its package's plugin registers it.

    ``factory(options)`` builds the provider from options validated by ``options`` (a pydantic
    model; use ``extra="forbid"`` so a typo names the key). Import heavy SDKs inside the factory.

    Example::

        @hookimpl
        def pai_sandbox_providers() -> list[SandboxProviderRegistration]:
            return [
                SandboxProviderRegistration(
                    name="docker",
                    factory=_make_docker_provider,   # imports docker only when called
                    options=DockerOptions,
                    description="Sandboxes in Docker containers.",
                    install_hint="pip install pai-sandbox-docker",
                )
            ]
    """

    name: str
    factory: Callable[[Any], SandboxProvider]
    options: type[BaseModel]
    description: str = ""
    install_hint: str = ""
    distribution: str = ""
    """Filled in by the plugin manager: the distribution whose plugin registered it."""


class SandboxHookSpecs:
    """The hook pai-sandbox adds for provider packages."""

    @hookspec
    def pai_sandbox_providers(self) -> Sequence[SandboxProviderRegistration]:
        """Return the sandbox providers this plugin provides."""
        raise NotImplementedError


class UnknownProviderError(SandboxError, UserError):
    """Configuration names a sandbox provider that is not installed."""


class ProviderOptionsError(SandboxError, UserError, ValueError):
    """A provider's options (or the sandbox section) failed validation."""


def sandbox_providers(plugins: Plugins | None = None) -> dict[str, SandboxProviderRegistration]:
    """Every installed sandbox provider, by name (from plugins' ``pai_sandbox_providers``)."""
    plugins = plugins if plugins is not None else get_plugins()
    found: dict[str, SandboxProviderRegistration] = {}
    for distribution, record in plugins.collect("pai_sandbox_providers"):
        if not isinstance(record, SandboxProviderRegistration):
            raise PluginError(
                f"a pai_sandbox_providers hook of {distribution} returned {record!r}; return "
                "SandboxProviderRegistration values"
            )
        existing = found.get(record.name)
        if existing is not None:
            raise DuplicateRegistrationError(
                f"sandbox provider {record.name!r} is registered twice: by "
                f"{existing.distribution} and by {distribution}; uninstall one of them"
            )
        found[record.name] = replace(record, distribution=distribution)
    return found


def _installed(providers: Mapping[str, SandboxProviderRegistration]) -> str:
    if not providers:
        return "none"
    return ", ".join(f"{name!r} ({r.distribution})" for name, r in sorted(providers.items()))


def _format_errors(error: ValidationError, section: str) -> str:
    return "; ".join(
        f"{section}.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in error.errors()
    )


def build_provider(
    name: str,
    options: Mapping[str, Any] | None = None,
    *,
    section: str = "[capabilities.sandbox]",
    plugins: Plugins | None = None,
) -> SandboxProvider:
    """The installed provider ``name``, built from ``options`` validated by its model."""
    providers = sandbox_providers(plugins)
    registration = providers.get(name)
    if registration is None:
        raise UnknownProviderError(
            f"sandbox provider {name!r} (from {section} provider) is not installed; installed "
            f"providers: {_installed(providers)}. Install it (pip install pai-sandbox-{name}) "
            "or choose an installed one"
        )
    subsection = f"{section.rstrip(']')}.{name}]"
    try:
        validated = registration.options.model_validate(dict(options or {}))
    except ValidationError as error:
        raise ProviderOptionsError(
            f"invalid options for sandbox provider {name!r}: {_format_errors(error, subsection)}. "
            f"Valid keys: {sorted(registration.options.model_fields)}"
        ) from error
    return registration.factory(validated)


class SandboxSettings(BaseModel):
    """``[capabilities.sandbox]``: which provider, and the facade's limits.

    Each provider's own options go in a sub-table named after it (``[capabilities.sandbox.docker]``).
    """

    model_config = ConfigDict(extra="allow")

    provider: str | None = None
    default_timeout: float | None = DEFAULT_TIMEOUT
    output_limit: int = DEFAULT_OUTPUT_LIMIT


_told_default = False


def _sandbox_binding(settings: CapabilitySettings[SandboxSettings]) -> CapabilityBinding[Any]:
    global _told_default
    options = settings.options
    providers = sandbox_providers()
    extra = dict(options.model_extra or {})
    unknown = sorted(key for key in extra if key not in providers)
    if unknown:
        raise ProviderOptionsError(
            f"{settings.section} has unknown key(s) {unknown}; valid keys are "
            f"{sorted(SandboxSettings.model_fields)} and a sub-table per installed provider "
            f"({sorted(providers) or 'none installed'})"
        )
    name = options.provider
    if name is None:
        name = DEFAULT_PROVIDER
        if not _told_default:
            _told_default = True
            _log.info(
                "no sandbox provider configured; using the embedded in-memory provider (set "
                "provider in [capabilities.sandbox] to choose another)"
            )
    provider_options = cast("Mapping[str, Any]", extra.get(name) or {})
    provider = build_provider(name, provider_options, section=settings.section)
    return sandbox_capability(
        provider=provider,
        scope=settings.scope or "thread",  # type: ignore[arg-type]  # checked by the binding
        default_timeout=options.default_timeout,
        output_limit=options.output_limit,
    )


@hookimpl
def pai_add_hookspecs(plugins: Plugins) -> None:
    plugins.add_hookspecs(SandboxHookSpecs)


@hookimpl
def pai_capabilities() -> list[CapabilityRegistration]:
    return [
        CapabilityRegistration(
            capability=sandbox,
            factory=_sandbox_binding,
            options=SandboxSettings,
            description="Command and filesystem execution environment, from a sandbox provider.",
            install_hint="pip install pai-sandbox",
        )
    ]
