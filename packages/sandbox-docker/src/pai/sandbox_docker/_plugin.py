"""pai-sandbox-docker as a plugin: registers the ``docker`` sandbox provider.

Kept light: it imports neither the ``docker`` SDK nor the provider until the provider is chosen.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pai.core.ext import hookimpl

if TYPE_CHECKING:
    # Types only: loading this plugin (``pai --help``) imports no pydantic; the hook imports
    # the options model when it is called.
    from pai.sandbox.provider import SandboxProvider, SandboxProviderRegistration
    from pai.sandbox_docker._options import DockerOptions

_OPTIONS_NAMES = frozenset({"DEFAULT_USER", "DockerOptions"})


def __getattr__(name: str) -> Any:
    # The options model lives in _options (pydantic): imported when asked for.
    if name in _OPTIONS_NAMES:
        from pai.sandbox_docker import _options

        return getattr(_options, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _make_provider(options: DockerOptions) -> SandboxProvider:
    from pai.sandbox_docker._provider import DockerSandboxProvider

    return DockerSandboxProvider(
        options.image,
        workdir=options.workdir,
        user=options.user,
        env=options.env,
        cpus=options.cpus,
        memory=options.memory,
        pids_limit=options.pids_limit,
        network=options.network,
        labels=options.labels,
        namespace=options.namespace,
        idle_ttl=options.idle_ttl,
        docker_host=options.docker_host,
        runtime=options.runtime,
        disk=options.disk,
        max_concurrent_commands=options.max_concurrent_commands,
        list_limit=options.list_limit,
        helper_timeout=options.helper_timeout,
    )


@hookimpl
def pai_sandbox_providers() -> list[SandboxProviderRegistration]:
    from pai.sandbox.provider import SandboxProviderRegistration
    from pai.sandbox_docker._options import DockerOptions

    return [
        SandboxProviderRegistration(
            name="docker",
            factory=_make_provider,
            options=DockerOptions,
            description="Sandboxes in Docker containers (hardened: no network, no capabilities).",
            install_hint="pip install pai-sandbox-docker",
        )
    ]
