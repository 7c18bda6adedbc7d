"""Binding from configuration: the settings of :class:`~pai.core.PaiConfig` turned into capability
bindings through the capability packages plugins registered.

:func:`create_agent_runtime` and :func:`create_pai` read configuration only for capabilities not
bound in code, through :func:`bindings_from_config`: each is built by the capability package a
plugin registered for its id, from the options in its ``[capabilities.<id>]`` table (validated by
the package's pydantic model; ``scope`` is the binding's scope). Every problem of every capability
is collected, so one error reports them all.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from pai.core._agent import Requirement
from pai.core._binding import CapabilityBinding
from pai.core._config import (
    CONFIG_FILE,
    PYPROJECT,
    KeyPath,
    PaiConfig,
    capability_section,
    check_capability_ids,
    describe_source,
    did_you_mean,
    load_config,
    origin_of,
)
from pai.core._errors import ConfigError, UserError
from pai.core._plugins import CapabilityRegistration, CapabilitySettings, Plugins, get_plugins
from pai.core._scope import SCOPE_KINDS

_log = logging.getLogger("pai.core.config")


def bindings_from_config(
    requirements: Mapping[str, Requirement],
    *,
    config: PaiConfig | None = None,
    plugins: Plugins | None = None,
    bound: Collection[str] = (),
) -> dict[str, CapabilityBinding[object]]:
    """Bindings for every required capability id not in ``bound``, built by the capability
    packages plugins registered, from their configuration sections.

    ``config`` defaults to :func:`load_config` (read only when some capability it could bind is
    unbound); ``plugins`` to :func:`~pai.core.ext.get_plugins`. Every problem is reported in one
    :class:`ConfigError`: an id no installed plugin provides, an invalid option (naming the file
    or variable, the key and the valid keys), required options missing (with the TOML that would
    bind it), or the capability package's own error (an unknown sandbox provider, say).
    """
    resolution = resolve_from_config(requirements, config=config, plugins=plugins, bound=bound)
    problems = resolution.problems
    if problems:
        raise ConfigError(
            "configuration cannot bind every capability that is needed:\n"
            + "\n".join(_bullet(problems[cap_id]) for cap_id in sorted(problems)),
            ids=sorted(problems),
        ) from resolution.cause
    return resolution.bindings


def capability_binding(
    capability_id: str, *, config: PaiConfig | None = None, plugins: Plugins | None = None
) -> CapabilityBinding[object]:
    """The binding configuration gives one capability (for tools such as the CLI)."""
    plugins = plugins if plugins is not None else get_plugins()
    registrations = plugins.capabilities()
    registration = registrations.get(capability_id)
    if registration is None:
        raise ConfigError(
            _not_provided(capability_id, (), plugins, registrations, config),
            ids=(capability_id,),
        )
    requirement = Requirement(capability=registration.capability, declared_by=())
    return bindings_from_config(
        {capability_id: requirement},
        config=config if config is not None else load_config(),
        plugins=plugins,
    )[capability_id]


def config_needed(
    requirements: Mapping[str, Requirement], bound: Collection[str], plugins: Plugins
) -> bool:
    """Whether binding ``requirements`` needs the configuration: some unbound id has a package."""
    missing = requirements.keys() - set(bound)
    return bool(missing) and not missing.isdisjoint(plugins.capabilities())


@dataclass(slots=True)
class Resolution:
    """What configuration made of the capabilities code left unbound.

    ``problems`` explains, per id, why one could not be bound; ``causes`` holds the underlying
    error of those that failed in validation or in their package's factory.
    """

    bindings: dict[str, CapabilityBinding[object]] = field(
        default_factory=dict[str, CapabilityBinding[object]]
    )
    problems: dict[str, str] = field(default_factory=dict[str, str])
    causes: dict[str, BaseException] = field(default_factory=dict[str, BaseException])

    @property
    def cause(self) -> BaseException | None:
        """The first underlying error (by id), to chain a :class:`ConfigError` from."""
        return self.causes[min(self.causes)] if self.causes else None


def resolve_from_config(
    requirements: Mapping[str, Requirement],
    *,
    config: PaiConfig | None,
    plugins: Plugins | None,
    bound: Collection[str],
) -> Resolution:
    """Bind every unbound requirement from configuration, collecting every problem.

    Reads the configuration (when ``config`` is ``None``) only if a capability package is
    installed for one of the unbound ids; builds every binding it can, so one error can report
    every problem.
    """
    resolution = Resolution()
    missing = sorted(requirements.keys() - set(bound))
    if not missing:
        return resolution
    plugins = plugins if plugins is not None else get_plugins()
    registrations = plugins.capabilities()
    if config is None and any(cap_id in registrations for cap_id in missing):
        config = load_config()
    if config is not None:
        check_capability_ids(config, registrations)
    for cap_id in missing:
        declared_by = requirements[cap_id].declared_by
        registration = registrations.get(cap_id)
        if registration is None:
            resolution.problems[cap_id] = _not_provided(
                cap_id, declared_by, plugins, registrations, config
            )
            continue
        assert config is not None
        _bind_one(cap_id, declared_by, registration, config, plugins, resolution)
    return resolution


def _subject(cap_id: str, declared_by: Sequence[str]) -> str:
    if not declared_by:
        return f"capability {cap_id!r}"
    return f"{cap_id!r} (declared by {', '.join(declared_by)})"


def _bind_one(
    cap_id: str,
    declared_by: Sequence[str],
    registration: CapabilityRegistration,
    config: PaiConfig,
    plugins: Plugins,
    resolution: Resolution,
) -> None:
    problems, causes = resolution.problems, resolution.causes
    subject = _subject(cap_id, declared_by)
    table = f"[capabilities.{cap_id}]"
    try:
        found = capability_section(config, cap_id)
    except ConfigError as error:
        problems[cap_id] = f"{subject}: {error}"
        causes[cap_id] = error
        return
    if found is None:
        path: KeyPath = ("capabilities", *cap_id.split("."))
        section: Mapping[str, Any] = {}
    else:
        path, section = found
    options_input = dict(section)
    scope = options_input.pop("scope", None)
    lines: list[str] = []
    if scope is not None and scope not in SCOPE_KINDS:
        lines.append(
            f"capabilities.{cap_id}.scope = {scope!r} ({origin_of(config, (*path, 'scope'))}): "
            f"not a scope; use one of {', '.join(repr(kind) for kind in SCOPE_KINDS)}"
        )
    options: BaseModel | None = None
    required_missing: list[str] = []
    try:
        options = registration.options.model_validate(options_input)
    except ValidationError as error:
        causes[cap_id] = error
        for problem in error.errors():
            loc = tuple(str(part) for part in problem["loc"])
            key = ".".join((f"capabilities.{cap_id}", *loc))
            if problem["type"] == "missing":
                if len(loc) == 1:
                    required_missing.append(loc[0])
                lines.append(f"{key}: required, and not set")
                continue
            what = problem["msg"]
            if problem["type"] == "extra_forbidden":
                what = "unknown key" + did_you_mean(
                    loc[-1], _keys(registration.options), before="; ", after=""
                )
            origin = origin_of(config, (*path, *loc))
            lines.append(f"{key} = {problem['input']!r} ({origin}): {what}")
    if lines:
        target = config.files[0] if config.files else Path(CONFIG_FILE)
        package = registration.distribution or "its capability package"
        if found is None and len(lines) == len(required_missing):
            # Nothing configured at all, and the package needs options: show what to write.
            problems[cap_id] = (
                f"{subject} is not bound: it is not bound in code, and {package}, which "
                f"provides it, needs {table} with {', '.join(required_missing)}, which is not "
                f"configured. Add to {target}:\n\n"
                f"{_snippet(cap_id, registration.options, required_missing, target)}\n\n"
                f"or bind it in code with capabilities={{{cap_id!r}: <binding>}}"
            )
            return
        message = (
            f"{subject} is configured wrongly ({table} of {package}):\n"
            + "\n".join(f"  {line}" for line in lines)
            + f"\nValid keys of {table}: {_valid_keys(registration.options)}. "
            f"Fix them in {origin_of(config, path)}"
        )
        if required_missing:
            message += (
                f"; for example, in {target}:\n\n"
                f"{_snippet(cap_id, registration.options, required_missing, target)}"
            )
        problems[cap_id] = message
        return
    assert options is not None
    settings = CapabilitySettings(
        scope=cast("str | None", scope),
        options=options,
        section=table,
        raw=section,
        plugins=plugins,
    )
    if found is None:
        searched = f" in {describe_source(str(config.files[0]))}" if config.files else ""
        where = f"its defaults ({table} is not configured{searched})"
    else:
        where = f"{table} ({origin_of(config, path)})"
    try:
        binding = cast("object", registration.factory(settings))  # a plugin may get it wrong
    except UserError as error:
        problems[cap_id] = f"{subject} could not be bound from {where}: {error}"
        causes[cap_id] = error
        return
    if (
        not isinstance(binding, CapabilityBinding)
        or cast("CapabilityBinding[object]", binding).capability.id != cap_id
    ):
        dist = registration.distribution or "the capability package"
        problems[cap_id] = (
            f"{subject}: the factory of {dist} returned {binding!r}, not a binding for "
            f"{cap_id!r}; that is a bug in {dist} (report it); meanwhile bind {cap_id!r} in "
            f"code with capabilities={{{cap_id!r}: <binding>}}"
        )
        return
    _log.debug("bound capability %r from %s", cap_id, where)
    resolution.bindings[cap_id] = cast("CapabilityBinding[object]", binding)


def _not_provided(
    cap_id: str,
    declared_by: Sequence[str],
    plugins: Plugins,
    registrations: Mapping[str, CapabilityRegistration],
    config: PaiConfig | None,
) -> str:
    if declared_by:
        head = (
            f"{cap_id!r} is not bound (declared by {', '.join(declared_by)}); bind it in code with "
            f"capabilities={{{cap_id!r}: <binding>}}, or install the package that provides it"
        )
    else:
        head = f"no installed plugin provides capability {cap_id!r}; install the package that does"
    installed = ", ".join(
        f"{known!r} from {registration.distribution}"
        for known, registration in sorted(registrations.items())
    )
    notes = [
        f"no installed plugin registers {cap_id!r} (installed capability packages: "
        f"{installed or 'none'})"
    ]
    infos = plugins.plugins()
    failed = [info for info in infos if info.status == "failed"]
    if failed:
        notes.append(
            "plugins that failed to load, one of which may provide it: "
            + ", ".join(f"{info.name!r} from {info.distribution} ({info.error})" for info in failed)
        )
    skipped = [info.distribution for info in infos if info.status == "skipped"]
    if skipped:
        notes.append(f"PAI_LOAD_PLUGINS leaves out: {', '.join(sorted(set(skipped)))}")
    if config is not None:
        try:
            found = capability_section(config, cap_id)
        except ConfigError:
            found = None
        if found is not None:
            notes.append(
                f"[capabilities.{cap_id}] is configured ({origin_of(config, found[0])}), but "
                "nothing installed reads it"
            )
    return f"{head}: {'; '.join(notes)}"


def _keys(model: type[BaseModel]) -> list[str]:
    return ["scope", *(info.alias or name for name, info in model.model_fields.items())]


def _valid_keys(model: type[BaseModel]) -> str:
    keys = ["scope"]
    for name, info in model.model_fields.items():
        key = info.alias or name
        keys.append(f"{key} (required)" if info.is_required() else key)
    return ", ".join(sorted(keys))


def _placeholder(info: FieldInfo | None) -> str:
    annotation = None if info is None else info.annotation
    if annotation is None or annotation is str:
        return '"..."'
    return f"<{getattr(annotation, '__name__', str(annotation))}>"


def _snippet(cap_id: str, model: type[BaseModel], keys: Sequence[str], target: Path) -> str:
    prefix = "tool.pai." if target.name == PYPROJECT else ""
    fields = {info.alias or name: info for name, info in model.model_fields.items()}
    lines = [f"    [{prefix}capabilities.{cap_id}]"]
    lines.extend(f"    {key} = {_placeholder(fields.get(key))}" for key in keys)
    return "\n".join(lines)


def _bullet(text: str) -> str:
    return "  - " + text.replace("\n", "\n    ")


__all__ = [
    "Resolution",
    "bindings_from_config",
    "capability_binding",
    "config_needed",
    "resolve_from_config",
]
