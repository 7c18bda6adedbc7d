"""Models chosen by name: ``"openai:gpt-4.1-mini"`` in code, or ``[model]`` in ``pai.toml``.

A model name is ``<provider>:<model>``. The provider is a :class:`~pai.core.ext.ModelRegistration`
some installed plugin returns from its ``pai_models`` hook (``pai-model-openai`` registers
``openai``); the rest is the provider's name for the model. The provider's options come from the
``[model.<provider>]`` table, validated by the registration's options model::

    [model]
    provider = "openai"
    name = "gpt-4.1-mini"

    [model.openai]
    base_url = "http://127.0.0.1:11434/v1"
    timeout = 60

``[model]`` is the model of every agent defined without one; ``define_agent(model="openai:...")``
picks its own and still takes its options from ``[model.openai]``. Environment variables
override the file as for every table: ``PAI_MODEL__NAME=gpt-4.1``,
``PAI_MODEL__OPENAI__BASE_URL=http://127.0.0.1:8000/v1``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from pydantic import BaseModel, ValidationError

from pai.core._config import CONFIG_FILE, PYPROJECT, PaiConfig, did_you_mean, origin_of
from pai.core._errors import ConfigError, ModelConfigurationError, PaiError
from pai.core._model import Model
from pai.core._model_registry import ModelRegistration
from pai.core._plugins import Plugins, get_plugins
from pai.core._secrets import env_name_key, mask_text, mask_value, secret_key

MODEL_KEYS = ("provider", "name")
"""The keys a ``[model]`` table holds besides one options table per provider."""

KNOWN_PROVIDERS: Mapping[str, str] = {"openai": "pai-model-openai"}
"""Model providers this project publishes: name -> the distribution to install for it."""


def split_model_name(spec: str, *, where: str) -> tuple[str, str]:
    """``("openai", "gpt-4.1-mini")`` from ``"openai:gpt-4.1-mini"``; a
    :class:`~pai.core.ModelConfigurationError` naming ``where`` for anything else."""
    provider, colon, name = spec.partition(":")
    if not colon or not provider.strip() or not name.strip():
        raise ModelConfigurationError(
            f"{where}: model {spec!r} is not '<provider>:<model name>'; write it as, e.g., "
            "'openai:gpt-4.1-mini' (the provider is a model provider package's name, such as "
            "openai from pai-model-openai)"
        )
    return provider.strip(), name.strip()


def _table_file(config: PaiConfig | None) -> Path:
    return config.files[0] if config is not None and config.files else Path(CONFIG_FILE)


def _provider_registration(
    provider: str, *, where: str, plugins: Plugins, error: type[PaiError]
) -> ModelRegistration:
    registrations = plugins.models()
    registration = registrations.get(provider)
    if registration is not None:
        return registration
    installed = ", ".join(
        f"{name} ({reg.distribution or 'code'})" for name, reg in sorted(registrations.items())
    )
    known = KNOWN_PROVIDERS.get(provider)
    if known is not None:
        message = (
            f"{where}: the model provider {provider!r} is not installed; install it with "
            f"pip install {known} (installed providers: {installed or 'none'})"
        )
    else:
        choices = sorted({*registrations, *KNOWN_PROVIDERS})
        message = (
            f"{where}: no installed package provides the model provider {provider!r}; "
            f"{did_you_mean(provider, choices)}"
            f"installed providers: {installed or 'none'}. A provider comes from a package whose "
            "plugin registers it (pai_models)"
        )
    failed = [info for info in plugins.plugins() if info.status == "failed"]
    if failed:
        message += "; plugins that failed to load: " + ", ".join(
            f"{info.name!r} from {info.distribution} ({info.error})" for info in failed
        )
    raise error(message)


def _options_table(config: PaiConfig | None, provider: str) -> Mapping[str, Any] | None:
    if config is None:
        return None
    model = config.data.get("model")
    if not isinstance(model, Mapping):
        return None
    table = cast("Mapping[str, Any]", model).get(provider)
    if table is None:
        return None
    if not isinstance(table, Mapping):
        raise ConfigError(
            f"model.{provider} = {mask_value(provider, table)!r} "
            f"({origin_of(config, ('model', provider))}) is not a "
            f"table; write the options of the {provider} provider as [model.{provider}]"
        )
    return cast("Mapping[str, Any]", table)


def _refuse_secrets(
    registration: ModelRegistration,
    provider: str,
    config: PaiConfig | None,
    raw: Mapping[str, Any],
) -> None:
    """A key in ``[model.<provider>]`` named like a secret (``api_key``, ``token``) that the
    provider does not take: a key pasted into the file. Refused without echoing it."""
    fields = {info.alias or name for name, info in registration.options.model_fields.items()}
    for key in sorted(raw):
        if key in fields or not secret_key(key):
            continue
        origin = origin_of(config, ("model", provider, key)) if config is not None else "code"
        env_fields = sorted(field for field in fields if env_name_key(field))
        variable = f"{provider.upper().replace('-', '_')}_API_KEY"
        if origin.startswith("environment variable"):
            what = "configuration, and PAI_ variables are configuration (pai config lists them)"
            fix = f"unset it, and export the key as {variable}"
            if env_fields:
                setting = f"PAI_MODEL__{provider.upper()}__{env_fields[0].upper()}"
                fix += f" (or in another variable, named by {setting}=NAME)"
        elif env_fields:
            what = "configuration files (files are committed, shared and printed)"
            fix = (
                f"remove it, export the key in an environment variable (export {variable}=...) "
                f'and name that variable instead: {env_fields[0]} = "{variable}"'
            )
        else:
            what = "configuration files (files are committed, shared and printed)"
            fix = (
                f"remove it; the {provider} provider reads its key from the environment "
                f"(see the documentation of {registration.distribution or 'its package'})"
            )
        raise ConfigError(
            f"model.{provider}.{key} ({origin}): secrets never go in {what}; {fix}. The value "
            "is not shown here"
        )


def _options(registration: ModelRegistration, provider: str, config: PaiConfig | None) -> BaseModel:
    raw = _options_table(config, provider)
    _refuse_secrets(registration, provider, config, raw or {})
    try:
        return registration.options.model_validate(dict(raw or {}))
    except ValidationError as error:
        lines: list[str] = []
        fields = [info.alias or name for name, info in registration.options.model_fields.items()]
        for problem in error.errors():
            loc = tuple(str(part) for part in problem["loc"])
            key = ".".join(("model", provider, *loc))
            assert config is not None or problem["type"] == "missing"
            origin = (
                origin_of(config, ("model", provider, *loc)) if config is not None else "defaults"
            )
            if problem["type"] == "missing":
                lines.append(f"{key}: required, and not set ({origin})")
                continue
            what = problem["msg"].removeprefix("Value error, ")
            if problem["type"] == "extra_forbidden":
                what = "unknown key" + did_you_mean(loc[-1], fields, before="; ", after="")
            shown = mask_value(loc[-1] if loc else provider, problem["input"])
            lines.append(f"{key} = {shown!r} ({origin}): {mask_text(what)}")
        raise ConfigError(
            f"[model.{provider}] (the options of the {provider} model provider of "
            f"{registration.distribution or 'a plugin'}) is wrong:\n"
            + "\n".join(f"  {line}" for line in lines)
            + f"\nValid keys of [model.{provider}]: {', '.join(sorted(fields))}. Fix them in "
            f"{origin_of(config, ('model', provider)) if config is not None else 'code'}"
        ) from error


def build_named_model(
    provider: str,
    name: str,
    *,
    where: str,
    config: PaiConfig | None = None,
    plugins: Plugins | None = None,
    error: type[PaiError] = ModelConfigurationError,
) -> Model:
    """The model ``name`` of ``provider``, built by its registration from ``[model.<provider>]``
    options; every failure is ``error`` (or a :class:`ConfigError` for bad options) naming
    ``where``."""
    plugins = plugins if plugins is not None else get_plugins()
    registration = _provider_registration(provider, where=where, plugins=plugins, error=error)
    options = _options(registration, provider, config)
    try:
        model = registration.factory(name, options)
    except PaiError as failure:
        fix = ""
        if config is not None:
            fix = f" (options of the provider go in [model.{provider}] of {_table_file(config)})"
        raise error(f"{where}: the model {provider}:{name} cannot be built: {failure}{fix}") from (
            failure
        )
    if not isinstance(model, Model):  # pyright: ignore[reportUnnecessaryIsInstance]
        dist = registration.distribution or "the model provider's package"
        raise error(
            f"{where}: the {provider} provider of {dist} returned {model!r}, which is not a "
            f"model; that is a bug in {dist} (report it)"
        )
    return model


def resolve_model(
    spec: str, *, config: PaiConfig | None = None, plugins: Plugins | None = None
) -> Model:
    """The model ``"<provider>:<name>"`` names, built by the provider a plugin registers (its
    options from ``[model.<provider>]`` of ``config`` when given).

    Example::

        model = resolve_model("openai:gpt-4.1-mini")   # needs pai-model-openai
    """
    where = f"model {spec!r}"
    provider, name = split_model_name(spec, where=where)
    return build_named_model(provider, name, where=where, config=config, plugins=plugins)


def model_from_config(config: PaiConfig, *, plugins: Plugins | None = None) -> Model | None:
    """The model ``[model]`` configures (``provider`` and ``name``), or ``None`` without one
    (a ``[model]`` holding only ``[model.<provider>]`` options configures none).

    Checks the whole table: an unknown key, a table for a provider nobody installed, one of
    ``provider`` and ``name`` without the other are :class:`~pai.core.ConfigError` naming where
    they were set. Building the model checks its options and, for providers that need one, that
    an API key is there.

    Example::

        # pai.toml:  [model]
        #            provider = "openai"
        #            name = "gpt-4.1-mini"
        model = model_from_config(load_config())
    """
    named = _configured_name(config, plugins=plugins)
    if named is None:
        return None
    provider, name, where = named
    return build_named_model(
        provider, name, where=where, config=config, plugins=plugins, error=ConfigError
    )


def _configured_name(config: PaiConfig, *, plugins: Plugins | None) -> tuple[str, str, str] | None:
    """``[model]`` checked, as ``(provider, name, where)``; ``None`` when it names no model."""
    table = config.data.get("model")
    if table is None:
        return None
    origin = origin_of(config, ("model",))
    if not isinstance(table, Mapping):
        raise ConfigError(
            f"model = {mask_value('model', table)!r} ({origin}) is not a table; write [model] with "
            'provider = "openai" and name = "gpt-4.1-mini"'
        )
    section = cast("Mapping[str, Any]", table)
    plugins = plugins if plugins is not None else get_plugins()
    for key in sorted(section):
        value = section[key]
        if key in MODEL_KEYS:
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(
                    f"model.{key} = {mask_value(key, value)!r} "
                    f"({origin_of(config, ('model', key))}) must be a "
                    "non-empty string, e.g. "
                    + ('provider = "openai"' if key == "provider" else 'name = "gpt-4.1-mini"')
                )
            continue
        if isinstance(value, Mapping) and (key in plugins.models() or key in KNOWN_PROVIDERS):
            continue  # the options of a provider: checked when that provider is chosen
        hint = did_you_mean(key, [*MODEL_KEYS, *plugins.models()])
        raise ConfigError(
            f"unknown key model.{key} ({origin_of(config, ('model', key))}); {hint}[model] takes "
            "provider, name, and one table of options per installed provider (installed: "
            f"{', '.join(sorted(plugins.models())) or 'none'}), such as [model.openai]"
        )
    missing = [key for key in MODEL_KEYS if key not in section]
    if len(missing) == len(MODEL_KEYS):
        return None  # only options of providers, for models named in code
    if missing:
        target = _table_file(config)
        prefix = "tool.pai." if target.name == PYPROJECT else ""
        raise ConfigError(
            f"[model] ({origin}) has no {' and no '.join(missing)}; a configured model needs "
            f'both. Add to {target}:\n\n    [{prefix}model]\n    provider = "openai"\n'
            f'    name = "gpt-4.1-mini"\n\nor set PAI_MODEL__{missing[0].upper()}=...'
        )
    provider = cast("str", section["provider"]).strip()
    name = cast("str", section["name"]).strip()
    where = mask_text(
        f"[model] provider = {provider!r} ({origin_of(config, ('model', 'provider'))}), "
        f"name = {name!r}"
    )
    return provider, name, where


def check_model_config(
    config: PaiConfig, *, plugins: Plugins | None = None, build: bool = True
) -> Model | None:
    """Validate ``[model]`` as a runtime would (for ``pai config --check``): the table, the
    configured model, and the options table of every installed provider. Returns the model
    built, for the caller to close.

    With ``build=False`` the model is not built: its provider and options are checked, but not
    what only building shows (an API key missing from the environment), so commands that use
    no model (``pai sandbox rm``) work without one."""
    plugins = plugins if plugins is not None else get_plugins()
    if build:
        model = model_from_config(config, plugins=plugins)
    else:
        model = None
        named = _configured_name(config, plugins=plugins)
        if named is not None:
            provider, _name, where = named
            registration = _provider_registration(
                provider, where=where, plugins=plugins, error=ConfigError
            )
            _options(registration, provider, config)
    table = config.data.get("model")
    if isinstance(table, Mapping):
        registrations = plugins.models()
        for key in sorted(cast("Mapping[str, Any]", table)):
            registration = registrations.get(key)
            if registration is not None:
                _options(registration, key, config)
    return model


__all__ = [
    "KNOWN_PROVIDERS",
    "MODEL_KEYS",
    "build_named_model",
    "check_model_config",
    "model_from_config",
    "resolve_model",
    "split_model_name",
]
