"""The sandbox-provider registry: the hookspec provider packages implement, and building a provider.

Provider packages implement :meth:`SandboxHookSpecs.pai_sandbox_providers` in a light module named
by their ``pai`` entry point (it must not import the provider's SDK: the factory does, when the
provider is chosen). :func:`sandbox_providers` collects their registrations, and
:func:`build_provider` builds one by name from options its model validates. Reading
``[capabilities.sandbox]`` is :mod:`pai.sandbox._settings`'s; registering the hookspec is a hook
of :mod:`pai.sandbox._plugin`.

Nothing here imports pydantic when the module is loaded (``pai --help`` loads the plugin, which
loads this): the functions import what they use.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pai.core import UserError
from pai.core.ext import get_plugins, hookspec
from pai.sandbox._errors import SandboxError

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError

    from pai.core.ext import Plugins
    from pai.sandbox._provider import SandboxProvider

KNOWN_PROVIDERS: Mapping[str, str] = {
    "inmemory": "pip install pai-sandbox-inmemory",
    "docker": "pip install pai-sandbox-docker",
    "e2b": "pip install pai-sandbox-e2b",
}
"""Providers this project publishes, and how to install each: the only names an error offers an
install command for (never ``pip install pai-sandbox-<typo>``)."""


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
    return plugins.registrations(
        "pai_sandbox_providers",
        SandboxProviderRegistration,
        key=lambda r: r.name,
        kind="sandbox provider",
    )


def installed(providers: Mapping[str, SandboxProviderRegistration]) -> str:
    if not providers:
        return "none"
    return ", ".join(f"{name!r} ({r.distribution})" for name, r in sorted(providers.items()))


def sentence(text: str) -> str:
    """``text`` ended as a sentence (a full stop, unless it ends in a question already)."""
    return text if text.endswith(("?", ".")) else f"{text}."


def format_errors(
    error: ValidationError, section: str, valid: Iterable[str] = (), *, skip_missing: bool = False
) -> str:
    from pai.core.ext import did_you_mean

    def one(problem: Any) -> str:
        loc = ".".join(str(p) for p in problem["loc"])
        if problem["type"] == "extra_forbidden":
            return f"{section}.{loc}: unknown key; {did_you_mean(str(problem['loc'][-1]), valid)}".rstrip(
                "; "
            )
        return f"{section}.{loc}: {problem['msg']}"

    problems = error.errors()
    if skip_missing:
        problems = [problem for problem in problems if problem["type"] != "missing"]
    return "; ".join(one(problem) for problem in problems)


def build_provider(
    name: str,
    options: Mapping[str, Any] | None = None,
    *,
    section: str = "[capabilities.sandbox]",
    plugins: Plugins | None = None,
) -> SandboxProvider:
    """The installed provider ``name``, built from ``options`` validated by its model."""

    from pai.core.ext import did_you_mean

    providers = sandbox_providers(plugins)
    registration = providers.get(name)
    if registration is None:
        hint = KNOWN_PROVIDERS.get(name)
        advice = f"Install it ({hint}) or choose" if hint else "Choose"
        raise UnknownProviderError(
            f"sandbox provider {name!r} (from {section} provider) is not installed; "
            f"{did_you_mean(name, [*providers, *KNOWN_PROVIDERS])}installed providers: "
            f"{installed(providers)}. {advice} an installed one"
        )
    return registration.factory(_validated(registration, options, section=section))


def _validated(
    registration: SandboxProviderRegistration, options: Mapping[str, Any] | None, *, section: str
) -> BaseModel:
    """``options`` validated by the provider's model; a :class:`ProviderOptionsError` naming
    the key and the sub-table otherwise."""
    from pydantic import ValidationError

    name = registration.name
    subsection = f"{section.rstrip(']')}.{name}]"
    try:
        return registration.options.model_validate(dict(options or {}))
    except ValidationError as error:
        raise ProviderOptionsError(
            f"invalid options for sandbox provider {name!r}: "
            f"{sentence(format_errors(error, subsection, registration.options.model_fields))} "
            f"Valid keys: {sorted(registration.options.model_fields)}"
        ) from error
