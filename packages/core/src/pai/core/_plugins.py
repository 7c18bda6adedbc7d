"""Plugin discovery: pluggy hooks, loaded from the ``pai`` entry-point group.

A distribution joins the ecosystem by declaring an entry point in the ``pai`` group whose target
is a module (or object) of hook implementations::

    [project.entry-points.pai]
    acme-vault = "acme_vault._plugin"

and implementing hooks with :data:`hookimpl`. The core's hooks (:class:`CoreHookSpecs`) register
capability packages, storage backends and model providers, extend the CLI, and give
``pai config --check --probe`` live checks (``pai_probes``: :class:`~pai.core.ext.Probe` values, see
:mod:`pai.core._probes`); a plugin can add hookspecs of its own through
:meth:`CoreHookSpecs.pai_add_hookspecs` (as ``pai.sandbox`` does for sandbox providers), the way
pytest plugins add hooks. Callers never touch ``pm.hook``: :class:`Plugins` wraps every hook in
a typed method.

Entry points are imported once, by :func:`get_plugins` (cached), never at import time. A plugin
that fails to import is skipped and reported with its distribution and error (``pai plugins``
shows it); ``PAI_STRICT_PLUGINS=1`` makes that fatal. ``PAI_LOAD_PLUGINS`` (comma-separated
distribution or entry-point names) limits loading to those; set but empty, it loads none.
"""

from __future__ import annotations

import functools
import importlib.metadata
import logging
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, cast

import pluggy

from pai.core._durability_registry import DurabilityRegistration
from pai.core._errors import DuplicateRegistrationError, PluginError
from pai.core._model_registry import ModelRegistration
from pai.core._storage_registry import StorageRegistration

if TYPE_CHECKING:
    # Types only: registering plugins (and ``pai --help``) imports no pydantic.
    import click
    from pydantic import BaseModel

    from pai.core._binding import CapabilityBinding
    from pai.core._capability import Capability
    from pai.core._config import PaiConfig
    from pai.core._options import NoOptions
    from pai.core._probes import Probe

PROJECT = "pai"
"""The pluggy project name, and the entry-point group plugins are found in."""

hookspec: pluggy.HookspecMarker = pluggy.HookspecMarker(PROJECT)
"""Marks a hook specification (for plugins that add hookspecs of their own)."""

hookimpl: pluggy.HookimplMarker = pluggy.HookimplMarker(PROJECT)
"""Marks a hook implementation: decorate your plugin's hook functions with it."""

_log = logging.getLogger("pai.core.plugins")

OptionsT = TypeVar("OptionsT", bound="BaseModel")
R = TypeVar("R")


def __getattr__(name: str) -> Any:
    # NoOptions is a pydantic model: imported when asked for, not with this module.
    if name == "NoOptions":
        from pai.core._options import NoOptions

        return NoOptions
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _no_options() -> type[BaseModel]:
    from pai.core._options import NoOptions

    return NoOptions


@dataclass(frozen=True, slots=True)
class CapabilitySettings(Generic[OptionsT]):
    """What a capability package's binding factory receives: the configured scope and options.

    ``options`` is already validated by the registration's options model. ``section`` is the
    configuration section they came from, for error messages (``[capabilities.acme.vault]``).
    """

    scope: str | None
    options: OptionsT
    section: str
    raw: Mapping[str, Any] = field(default_factory=dict[str, Any])
    plugins: Plugins | None = field(default=None, repr=False, compare=False)
    """The plugins the binding is resolved with; a factory that looks up further registrations
    (``pai.sandbox`` looks up providers) should use these rather than :func:`get_plugins`."""


@dataclass(frozen=True, slots=True)
class CapabilityRegistration:
    """A capability package, as its plugin registers it.

    ``factory(settings)`` builds the binding from validated options; ``options`` is the pydantic
    model that validates them (``extra="forbid"`` so a typo is an error naming the key).
    ``install_hint`` says what to install to get it (``pip install acme-vault``).

    Example::

        @hookimpl
        def pai_capabilities() -> list[CapabilityRegistration]:
            return [
                CapabilityRegistration(
                    capability=vault,
                    factory=lambda settings: vault_capability(settings.options.url),
                    options=VaultOptions,
                    description="Secrets from the Acme vault.",
                    install_hint="pip install acme-vault",
                )
            ]
    """

    capability: Capability[Any]
    factory: Callable[[CapabilitySettings[Any]], CapabilityBinding[Any]]
    options: type[BaseModel] = field(default_factory=_no_options)
    """The options model; :class:`NoOptions` when not given."""
    description: str = ""
    install_hint: str = ""
    distribution: str = ""
    """Filled in by the plugin manager: the distribution whose plugin registered it."""

    @property
    def id(self) -> str:
        """The capability id."""
        return self.capability.id


class CoreHookSpecs:
    """The hooks of pai-core. Plugins implement any of them with :data:`hookimpl`."""

    @hookspec
    def pai_add_hookspecs(self, plugins: Plugins) -> None:
        """Add hookspecs of your own with ``plugins.add_hookspecs(YourSpecs)``.

        Called once for every plugin as it is registered, before any other hook is called.
        """

    @hookspec
    def pai_capabilities(self) -> Sequence[CapabilityRegistration]:
        """Return the capability packages this plugin provides."""
        raise NotImplementedError

    @hookspec
    def pai_storage_backends(self) -> Sequence[StorageRegistration]:
        """Return the storage backends this plugin provides, one per URL scheme; the scheme of
        ``[storage] url`` picks one (``sqlite`` and ``memory`` are built in)."""
        raise NotImplementedError

    @hookspec
    def pai_models(self) -> Sequence[ModelRegistration]:
        """Return the model providers this plugin provides, one per name; the prefix of
        ``"openai:gpt-4.1-mini"`` and ``[model] provider`` pick one."""
        raise NotImplementedError

    @hookspec
    def pai_durability_engines(self) -> Sequence[DurabilityRegistration]:
        """Return the durability engines this plugin provides, one per name; ``[durability]
        engine`` picks one (``"dbos"``, ``"temporal"``)."""
        raise NotImplementedError

    @hookspec
    def pai_cli(self, cli: click.Group) -> None:
        """Add commands to the ``pai`` command line: ``cli.add_command(your_group)``."""

    @hookspec
    def pai_check_config(self, config: PaiConfig) -> None:
        """Raise a :class:`~pai.core.ConfigError` for a mistake in the configuration tables this
        plugin reads itself (pai-http's ``[serve]``): every command that reads configuration,
        ``pai config --check`` included, stops on it. Name the key and where it was set
        (``config.origin("serve", "port")``), and what to write instead."""

    @hookspec
    def pai_probes(self, config: PaiConfig) -> Sequence[Probe]:
        """Return live checks of what ``config`` configures for this plugin (an engine that
        must answer, an image that must exist); ``pai config --check --probe`` runs them, each
        within a time limit, and prints one line per probe. Return none for what is not
        configured. A :class:`~pai.core.ext.Probe`'s ``check`` raises a
        :class:`~pai.core.PaiError` saying what is wrong and what to do, without secrets."""
        raise NotImplementedError


PluginStatus = Literal["loaded", "failed", "skipped"]


@dataclass(frozen=True, slots=True)
class PluginInfo:
    """One entry point of the ``pai`` group and what became of it."""

    name: str
    distribution: str
    version: str
    status: PluginStatus
    hooks: tuple[str, ...] = ()
    error: str | None = None


def _distribution_of(entry_point: importlib.metadata.EntryPoint) -> tuple[str, str]:
    dist = entry_point.dist
    if dist is None:
        return "<unknown>", ""
    return dist.metadata["Name"] or dist.name, dist.version


def _normalize(name: str) -> str:
    """A distribution or entry-point name, normalized as PEP 503 does (``Pai_Sandbox`` is
    ``pai-sandbox``)."""
    return re.sub(r"[-_.]+", "-", name.strip()).lower()


def _selected() -> set[str] | None:
    raw = os.environ.get("PAI_LOAD_PLUGINS")
    if raw is None:
        return None
    return {_normalize(part) for part in raw.split(",") if part.strip()}


def _strict() -> bool:
    return os.environ.get("PAI_STRICT_PLUGINS", "").strip().lower() in {"1", "true", "yes", "on"}


class Plugins:
    """The loaded plugins, with a typed method per hook. Get it with :func:`get_plugins`."""

    def __init__(self, manager: pluggy.PluginManager | None = None) -> None:
        self.manager: pluggy.PluginManager = (
            manager if manager is not None else pluggy.PluginManager(PROJECT)
        )
        if manager is None:
            self.manager.add_hookspecs(CoreHookSpecs)
        self._info: list[PluginInfo] = []
        self._distributions: dict[str, str] = {}

    # -- loading ------------------------------------------------------------------------------

    def add_hookspecs(self, specs: type) -> None:
        """Add a plugin's own hookspecs (from its ``pai_add_hookspecs`` implementation)."""
        self.manager.add_hookspecs(specs)

    def register(self, plugin: object, *, name: str, distribution: str = "<code>") -> None:
        """Register a plugin object (a module or instance with hook implementations)."""
        self.manager.register(plugin, name=name)
        self._distributions[name] = distribution
        # A plugin's own hookspecs must exist before any hook is called, so its
        # pai_add_hookspecs runs now, for this plugin only.
        impl = getattr(plugin, "pai_add_hookspecs", None)
        if callable(impl):
            impl(plugins=self)

    def load_entry_points(self) -> None:
        """Import and register every plugin of the ``pai`` entry-point group (see module doc)."""
        selected = _selected()
        strict = _strict()
        for entry_point in sorted(
            importlib.metadata.entry_points(group=PROJECT), key=lambda e: e.name
        ):
            distribution, version = _distribution_of(entry_point)
            if selected is not None and not (
                {_normalize(entry_point.name), _normalize(distribution)} & selected
            ):
                self._info.append(PluginInfo(entry_point.name, distribution, version, "skipped"))
                continue
            if self.manager.has_plugin(entry_point.name):
                first = self.distribution_of(entry_point.name)
                if first == distribution:
                    continue  # loaded already (load_entry_points called again)
                raise DuplicateRegistrationError(
                    f"plugin name {entry_point.name!r} (an entry point of the {PROJECT!r} group) "
                    f"is used by two distributions: {first} and {distribution} {version}; "
                    "uninstall one of them, or rename the entry point of one"
                )
            try:
                plugin = entry_point.load()
                self.register(plugin, name=entry_point.name, distribution=distribution)
            except Exception as error:
                if self.manager.has_plugin(entry_point.name):  # registered, then its hook failed
                    self.manager.unregister(name=entry_point.name)
                    self._distributions.pop(entry_point.name, None)
                message = f"{type(error).__name__}: {error}"
                if strict:
                    raise PluginError(
                        f"plugin {entry_point.name!r} from {distribution} {version} failed to "
                        f"load: {message}. Fix or uninstall it, or unset PAI_STRICT_PLUGINS to "
                        "skip broken plugins"
                    ) from error
                _log.warning(
                    "skipping plugin %r from %s %s: %s",
                    entry_point.name,
                    distribution,
                    version,
                    message,
                )
                self._info.append(
                    PluginInfo(entry_point.name, distribution, version, "failed", error=message)
                )
                continue
            hooks = tuple(
                sorted(caller.name for caller in self.manager.get_hookcallers(plugin) or ())
            )
            self._info.append(PluginInfo(entry_point.name, distribution, version, "loaded", hooks))

    # -- typed hook wrappers --------------------------------------------------------------------

    def distribution_of(self, plugin_name: str) -> str:
        """The distribution a registered plugin came from."""
        return self._distributions.get(plugin_name, "<code>")

    def plugins(self) -> list[PluginInfo]:
        """Every entry point seen, loaded or not, for ``pai plugins``."""
        return list(self._info)

    def collect(self, hook_name: str) -> list[tuple[str, Any]]:
        """Call a registration hook on every plugin; return ``(distribution, record)`` pairs."""
        results: list[tuple[str, Any]] = []
        caller: pluggy.HookCaller = getattr(self.manager.hook, hook_name)
        for impl in caller.get_hookimpls():
            # Called one plugin at a time so each record is known to come from its distribution.
            distribution = self.distribution_of(impl.plugin_name)
            try:
                records = cast("Sequence[object] | None", impl.function())
            except Exception as error:
                raise PluginError(
                    f"the {hook_name} hook of plugin {impl.plugin_name!r} ({distribution}) "
                    f"raised {type(error).__name__}: {error}; fix or uninstall {distribution}, "
                    "or leave it out with PAI_LOAD_PLUGINS"
                ) from error
            results.extend((distribution, record) for record in records or ())
        return results

    def registrations(
        self, hook_name: str, record_type: type[R], *, key: Callable[[R], str], kind: str
    ) -> dict[str, R]:
        """The records a registration hook returns, by name, each stamped with its distribution.

        A record of another type, or two records with one name, is a :class:`PluginError`
        naming the distributions. Plugins that add registration hooks of their own use this
        (``pai.sandbox`` does, for providers).
        """
        found: dict[str, R] = {}
        for distribution, record in self.collect(hook_name):
            if not isinstance(record, record_type):
                raise PluginError(
                    f"a {hook_name} hook of {distribution} returned {record!r}; return "
                    f"{record_type.__name__} values"
                )
            name = key(record)
            existing = found.get(name)
            if existing is not None:
                raise DuplicateRegistrationError(
                    f"{kind} {name!r} is registered twice: by "
                    f"{getattr(existing, 'distribution', '?')} and by {distribution}; uninstall "
                    "one of them"
                )
            found[name] = replace(record, distribution=distribution)  # type: ignore[type-var]
        return found

    def capabilities(self) -> dict[str, CapabilityRegistration]:
        """Every registered capability package, by capability id."""
        return self.registrations(
            "pai_capabilities", CapabilityRegistration, key=lambda r: r.id, kind="capability"
        )

    def storage_backends(self) -> dict[str, StorageRegistration]:
        """Every storage backend plugins register, by URL scheme (the built-in ``sqlite`` and
        ``memory`` are not among them; a plugin registering one of those is an error)."""
        from pai.core._storage_config import BUILTIN_BACKENDS  # that module imports this one

        found = self.registrations(
            "pai_storage_backends",
            StorageRegistration,
            key=lambda r: r.scheme.lower(),
            kind="storage scheme",
        )
        for scheme in BUILTIN_BACKENDS:
            if scheme in found:
                raise DuplicateRegistrationError(
                    f"storage scheme {scheme!r} is built into pai-core, and "
                    f"{found[scheme].distribution} registers it too; uninstall that "
                    "distribution or have it register another scheme"
                )
        return found

    def models(self) -> dict[str, ModelRegistration]:
        """Every model provider plugins register, by name (``openai``); one name registered by
        two distributions is a :class:`DuplicateRegistrationError` naming both."""
        return self.registrations(
            "pai_models", ModelRegistration, key=lambda r: r.name, kind="model provider"
        )

    def durability_engines(self) -> dict[str, DurabilityRegistration]:
        """Every durability engine plugins register, by name; one name registered by two
        distributions is a :class:`DuplicateRegistrationError` naming both."""
        return self.registrations(
            "pai_durability_engines",
            DurabilityRegistration,
            key=lambda r: r.name,
            kind="durability engine",
        )

    def extend_cli(self, cli: click.Group) -> list[str]:
        """Let every plugin add its commands to ``cli``, one plugin at a time.

        A plugin whose ``pai_cli`` hook raises is marked failed (``pai plugins`` shows it with
        its error) and the other plugins' commands are still added; returns a message per
        failure. Under ``PAI_STRICT_PLUGINS=1`` the first failure raises :class:`PluginError`.
        """
        failures: list[str] = []
        caller: pluggy.HookCaller = self.manager.hook.pai_cli
        for impl in caller.get_hookimpls():
            try:
                impl.function(cli)
            except Exception as error:
                distribution = self.distribution_of(impl.plugin_name)
                message = (
                    f"the pai_cli hook of plugin {impl.plugin_name!r} ({distribution}) raised "
                    f"{type(error).__name__}: {error}; its commands are missing; every other "
                    f"plugin's commands work. Fix or uninstall {distribution}, or leave it out with "
                    "PAI_LOAD_PLUGINS"
                )
                if _strict():
                    raise PluginError(message) from error
                _log.warning("%s", message)
                self._mark_failed(impl.plugin_name, message)
                failures.append(message)
        return failures

    def _mark_failed(self, plugin_name: str, message: str) -> None:
        for index, info in enumerate(self._info):
            if info.name == plugin_name:
                self._info[index] = replace(info, status="failed", error=message)
                return


@functools.cache
def get_plugins() -> Plugins:
    """The process's plugins: built on first call (entry points imported then), then cached.

    Tests that change installed plugins or ``PAI_*`` variables call :func:`reset_plugins`.
    """
    plugins = Plugins()
    plugins.load_entry_points()
    return plugins


def reset_plugins() -> None:
    """Forget the cached plugins, so the next :func:`get_plugins` loads them again."""
    get_plugins.cache_clear()


__all__ = [
    "PROJECT",
    "CapabilityRegistration",
    "CapabilitySettings",
    "CoreHookSpecs",
    "DuplicateRegistrationError",
    "NoOptions",
    "PluginError",
    "PluginInfo",
    "PluginStatus",
    "Plugins",
    "get_plugins",
    "hookimpl",
    "hookspec",
    "reset_plugins",
]
