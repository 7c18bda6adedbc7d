"""pai-sandbox as a plugin: its hook implementations, and nothing else.

The ``pai`` entry point ``pai-sandbox`` names this module. Its hooks add the sandbox-provider
hookspec (:class:`~pai.sandbox._registry.SandboxHookSpecs`, which provider packages implement),
register the ``sandbox`` capability (bound by :func:`~pai.sandbox._settings.sandbox_binding` from
``[capabilities.sandbox]``), probe the configured provider and add the sandbox commands. The
registry lives in :mod:`pai.sandbox._registry`, the reading of the configuration in
:mod:`pai.sandbox._settings`; nothing imports this module but the plugin manager.

Loading it (``pai --help``) imports no pydantic and no sandbox code beyond those two light
modules: each hook imports what it uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pai.core.ext import hookimpl
from pai.sandbox._registry import SandboxHookSpecs
from pai.sandbox._settings import DEFAULT_PROVIDER, configured_provider, sandbox_binding

if TYPE_CHECKING:
    import click

    from pai.core import PaiConfig
    from pai.core.ext import CapabilityRegistration, Plugins, Probe


@hookimpl
def pai_add_hookspecs(plugins: Plugins) -> None:
    plugins.add_hookspecs(SandboxHookSpecs)


@hookimpl
def pai_capabilities() -> list[CapabilityRegistration]:
    from pai.core.ext import CapabilityRegistration
    from pai.sandbox._capability import sandbox
    from pai.sandbox._options import SandboxSettings

    return [
        CapabilityRegistration(
            capability=sandbox,
            factory=sandbox_binding,
            options=SandboxSettings,
            description="Command and filesystem execution environment, from a sandbox provider.",
            install_hint="pip install pai-sandbox",
        )
    ]


@hookimpl
def pai_probes(config: PaiConfig) -> list[Probe]:
    """``pai config --check --probe``: the configured sandbox provider's ``probe()`` (the engine
    answers, the image is there, the API takes the key). Nothing when no provider is configured:
    the embedded default has nothing to check."""
    from pai.core.ext import Probe
    from pai.sandbox._capability import sandbox
    from pai.sandbox._provider import probe_provider

    section = config.capability(sandbox.id)
    if section is None:
        return []
    name = section.get("provider") or DEFAULT_PROVIDER

    async def check() -> None:
        provider, _ = configured_provider(config)
        try:
            await probe_provider(provider)
        finally:
            await provider.aclose()

    return [Probe(name=f"sandbox ({name})", check=check)]


@hookimpl
def pai_cli(cli: click.Group) -> None:
    from pai.sandbox._cli import add_commands

    add_commands(cli)
