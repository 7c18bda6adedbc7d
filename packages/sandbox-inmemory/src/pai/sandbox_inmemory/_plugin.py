"""pai-sandbox-inmemory as a plugin: registers the ``inmemory`` sandbox provider.

Kept light: it imports neither just-bash nor the provider until the provider is chosen.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pai.core.ext import hookimpl

if TYPE_CHECKING:
    # Types only: loading this plugin (``pai --help``) imports no pydantic; the hook imports
    # the options model when it is called.
    from pai.sandbox.provider import SandboxProvider, SandboxProviderRegistration
    from pai.sandbox_inmemory._options import InMemoryOptions

_OPTIONS_NAMES = frozenset({"InMemoryOptions"})


def __getattr__(name: str) -> Any:
    # The options model lives in _options (pydantic): imported when asked for.
    if name in _OPTIONS_NAMES:
        from pai.sandbox_inmemory import _options

        return getattr(_options, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _make_provider(options: InMemoryOptions) -> SandboxProvider:
    from just_bash import ExecutionLimits

    from pai.sandbox_inmemory._provider import create_in_memory_sandbox_provider

    return create_in_memory_sandbox_provider(
        limits=ExecutionLimits(
            max_loop_iterations=options.max_loop_iterations,
            max_command_count=options.max_command_count,
            max_call_depth=options.max_call_depth,
            max_awk_iterations=options.max_awk_iterations,
            max_sed_iterations=options.max_sed_iterations,
        ),
        memory_budget=options.memory_budget,
        max_workers=options.max_workers,
    )


@hookimpl
def pai_sandbox_providers() -> list[SandboxProviderRegistration]:
    from pai.sandbox.provider import SandboxProviderRegistration
    from pai.sandbox_inmemory._options import InMemoryOptions

    return [
        SandboxProviderRegistration(
            name="inmemory",
            factory=_make_provider,
            options=InMemoryOptions,
            description=(
                "An in-memory filesystem and a bash interpreter in locked-down worker "
                "processes; for tests and demos, not for untrusted code at scale."
            ),
            install_hint="pip install pai-sandbox-inmemory",
        )
    ]
