"""``[capabilities.sandbox]`` read: the provider it selects, built, and the sandbox binding.

The section names a provider and the facade's limits; each provider's options go in a sub-table
named after it::

    [capabilities.sandbox]
    scope = "thread"
    provider = "docker"

    [capabilities.sandbox.docker]
    image = "python:3.12-slim"

:func:`configured_provider` serves tools outside an agent runtime (the ``pai sandbox`` commands,
scripts); :func:`sandbox_binding` is the factory the ``sandbox`` capability registration (a hook
of :mod:`pai.sandbox._plugin`) hands the core. Providers are found and built by
:mod:`pai.sandbox._registry`. Loading this module imports no pydantic: the functions import what
they use.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypedDict, cast

from pai.sandbox._errors import SandboxError
from pai.sandbox._registry import (
    ProviderOptionsError,
    UnknownProviderError,
    build_provider,
    format_errors,
    installed,
    sandbox_providers,
    sentence,
)

if TYPE_CHECKING:
    from pai.core import CapabilityBinding, PaiConfig
    from pai.core.ext import CapabilitySettings, Plugins
    from pai.sandbox._options import SandboxSettings
    from pai.sandbox._provider import SandboxProvider
    from pai.sandbox._receipts import DurableCommands

_log = logging.getLogger("pai.sandbox")

DEFAULT_PROVIDER = "inmemory"
"""The provider used when configuration names none: the embedded in-memory one."""


def __getattr__(name: str) -> Any:
    # SandboxSettings is a pydantic model: imported when asked for, not with this module.
    if name == "SandboxSettings":
        from pai.sandbox._options import SandboxSettings

        return SandboxSettings
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class FacadeLimits(TypedDict):
    """The facade's limits, as keyword arguments of ``create_sandbox``, ``sandbox_capability``
    and ``create_sandbox_service``."""

    default_timeout: float | None
    output_limit: int
    read_limit: int
    durable_commands: DurableCommands


def facade_limits(settings: SandboxSettings) -> FacadeLimits:
    """The limits ``[capabilities.sandbox]`` sets, to pass on as ``**facade_limits(settings)``."""
    return FacadeLimits(
        default_timeout=settings.default_timeout,
        output_limit=settings.output_limit,
        read_limit=settings.read_limit,
        durable_commands=settings.durable_commands,
    )


_told_default = False


def told_default(told: bool) -> None:
    """Whether the warning about running on the default provider was given (or is not wanted:
    the ``pai sandbox`` commands print their own notice)."""
    global _told_default
    _told_default = told


def _with_path(error: SandboxError, *path: str) -> SandboxError:
    # Where under [capabilities.sandbox] the problem is, so callers that know where each value
    # came from (a file, a variable) can say so.
    error.key_path = path  # type: ignore[attr-defined]
    return error


def _provider_from_settings(
    settings: SandboxSettings, *, section: str, plugins: Plugins | None
) -> SandboxProvider:
    """The provider ``[capabilities.sandbox]`` selects (the default one when it names none),
    built from its sub-table. Errors carry ``key_path``, the offending key under the section."""
    from pydantic import ValidationError

    from pai.core.ext import did_you_mean
    from pai.sandbox._options import SandboxSettings

    providers = sandbox_providers(plugins)
    name = settings.provider or DEFAULT_PROVIDER
    extra = dict(settings.model_extra or {})
    if name not in providers:
        if settings.provider is None:
            raise _with_path(
                UnknownProviderError(
                    f"no sandbox provider is configured and the default, {DEFAULT_PROVIDER!r}, is "
                    f"not installed; installed providers: {installed(providers)}. Install it "
                    f"(pip install pai-sandbox-{DEFAULT_PROVIDER}) or choose one: provider = "
                    f'"<name>" in {section} of pai.toml'
                )
            )
        # Reported before unknown keys: the provider's options table is then an unknown key
        # too, but "install it" is the fix.
        try:
            build_provider(name, section=section, plugins=plugins)
        except UnknownProviderError as error:
            raise _with_path(error, "provider") from None
    unknown = sorted(key for key in extra if key not in providers)
    if unknown:
        # scope is read by the core (every capability has one) and never reaches these settings,
        # but it is a valid key of the section all the same.
        valid = sorted({"scope", *SandboxSettings.model_fields})
        raise _with_path(
            ProviderOptionsError(
                f"{section} has unknown key(s) {unknown}; "
                f"{did_you_mean(unknown[0], [*valid, *providers])}valid keys are {valid} and "
                f"a sub-table per installed provider ({sorted(providers)})"
            )
        )
    # The sub-tables of installed providers not selected now are checked all the same: a typo
    # there would otherwise wait, silent, for the day someone switches provider.
    for other in sorted(key for key in extra if key != name):
        table = extra[other]
        if not isinstance(table, Mapping):
            raise _with_path(
                ProviderOptionsError(
                    f"{section.rstrip(']')}.{other}] must be a table of options, got {table!r}"
                ),
                other,
            )
        registration = providers[other]
        try:
            registration.options.model_validate(dict(cast("Mapping[str, Any]", table)))
        except ValidationError as error:
            # A key the provider will need is not a mistake while it is not the one selected.
            wrong = [problem for problem in error.errors() if problem["type"] != "missing"]
            if wrong:
                subsection = f"{section.rstrip(']')}.{other}]"
                fields = registration.options.model_fields
                problems = format_errors(error, subsection, fields, skip_missing=True)
                raise _with_path(
                    ProviderOptionsError(
                        f"invalid options for sandbox provider {other!r} (not the one selected, "
                        f"{name!r}): {sentence(problems)} Valid keys: "
                        f"{sorted(registration.options.model_fields)}"
                    ),
                    other,
                    *(str(part) for part in wrong[0]["loc"]),
                ) from None
    options: object = extra.get(name) or {}
    if not isinstance(options, Mapping):
        raise _with_path(
            ProviderOptionsError(
                f"{section.rstrip(']')}.{name}] must be a table of options, got {options!r}"
            ),
            name,
        )
    try:
        return build_provider(
            name, cast("Mapping[str, Any]", options), section=section, plugins=plugins
        )
    except ProviderOptionsError as error:
        cause = error.__cause__
        loc = cause.errors()[0]["loc"] if isinstance(cause, ValidationError) else ()
        raise _with_path(error, name, *(str(part) for part in loc)) from None


def sandbox_binding(settings: CapabilitySettings[SandboxSettings]) -> CapabilityBinding[Any]:
    global _told_default
    from pai.sandbox._capability import sandbox_capability

    options = settings.options
    # Built first: a mistake in the section is reported alone, never after a notice that the
    # default provider is being used.
    provider = _provider_from_settings(options, section=settings.section, plugins=settings.plugins)
    if options.provider is None and not _told_default:
        _told_default = True
        # WARNING, not INFO: the in-memory provider is for tests and demos, so running on it
        # without having chosen it must be visible (a misspelt table once led here silently).
        _log.warning(
            "no sandbox provider configured; using the embedded in-memory provider, which is "
            'for tests and demos. Choose one with provider = "docker" (or another installed '
            "provider; `pai providers` lists them) in [capabilities.sandbox] of pai.toml, or "
            "PAI_CAPABILITIES__SANDBOX__PROVIDER"
        )
    return sandbox_capability(
        provider=provider,
        scope=settings.scope or "thread",  # type: ignore[arg-type]  # checked by the binding
        **facade_limits(options),
    )


def configured_provider(
    config: PaiConfig | None = None, *, plugins: Plugins | None = None
) -> tuple[SandboxProvider, SandboxSettings]:
    """The sandbox provider configuration selects, built, and the ``[capabilities.sandbox]`` settings.

    For tools that use sandboxes outside an agent runtime (the ``pai sandbox`` commands, scripts).
    ``config`` defaults to :func:`~pai.core._config.load_config` of the working directory.
    ``settings.provider`` is ``None`` when the configuration names no provider; the provider is
    then :data:`DEFAULT_PROVIDER`. The caller owns the provider: ``await provider.aclose()``.

    Raises :class:`UnknownProviderError` (lists the installed providers and what to install) and
    :class:`ProviderOptionsError` (names the key), each prefixed with the file or variable the
    setting came from.

    Example::

        provider, settings = configured_provider()
        sessions = create_sandbox_session_manager(provider=provider)
    """
    from pydantic import ValidationError

    from pai.sandbox._capability import sandbox
    from pai.sandbox._options import SandboxSettings

    if config is None:
        from pai.core import load_config

        config = load_config()
    loaded = config

    def _origin(*path: str) -> str | None:
        # Where a value under [capabilities.sandbox] came from (a file, a variable), if known.
        prefix = ("capabilities", sandbox.id, *path)
        for key, source in sorted(loaded.sources.items()):
            if key[: len(prefix)] == prefix and source not in ("default", "code"):
                return source
        return str(loaded.files[0]) if loaded.files else None

    def _located(message: str, origin: str | None) -> str:
        return f"{origin}: {message}" if origin else message

    section = dict(config.capability(sandbox.id) or {})
    section.pop("scope", None)  # the binding's scope, not a setting of the facade
    where = "[capabilities.sandbox]"
    try:
        settings = SandboxSettings.model_validate(section)
    except ValidationError as error:
        raise ProviderOptionsError(
            _located(
                f"invalid sandbox settings: {sentence(format_errors(error, where))} Valid "
                f"keys: {sorted({'scope', *SandboxSettings.model_fields})} and a sub-table per "
                "installed provider",
                _origin(*(str(part) for part in error.errors()[0]["loc"])),
            )
        ) from error
    try:
        provider = _provider_from_settings(settings, section=where, plugins=plugins)
    except (UnknownProviderError, ProviderOptionsError) as error:
        path: tuple[str, ...] = getattr(error, "key_path", ())
        raise type(error)(_located(str(error), _origin(*path))) from error
    return provider, settings
