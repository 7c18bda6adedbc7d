"""pai-sandbox-local as a plugin: registers the ``local`` sandbox provider.

Kept light: it imports neither pydantic nor the provider until the provider is chosen.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pai.core.ext import hookimpl

if TYPE_CHECKING:
    from pai.sandbox.provider import SandboxProvider, SandboxProviderRegistration
    from pai.sandbox_local._options import LocalOptions


def _make_provider(options: LocalOptions) -> SandboxProvider:
    from pai.sandbox_local._provider import LocalSandboxProvider

    return LocalSandboxProvider(
        state_dir=options.state_dir,
        namespace=options.namespace,
        network=options.network,
        user=options.user,
        memory=options.memory,
        processes=options.processes,
        file_size=options.file_size,
        env=options.env,
        idle_ttl=options.idle_ttl,
        keep_alive=options.keep_alive,
        bwrap=options.bwrap,
    )


@hookimpl
def pai_sandbox_providers() -> list[SandboxProviderRegistration]:
    from pai.sandbox.provider import SandboxProviderRegistration
    from pai.sandbox_local._options import LocalOptions

    return [
        SandboxProviderRegistration(
            name="local",
            factory=_make_provider,
            options=LocalOptions,
            description="Sandboxes on this machine in bubblewrap namespaces (Linux; no network).",
            install_hint="pip install pai-sandbox-local",
        )
    ]
