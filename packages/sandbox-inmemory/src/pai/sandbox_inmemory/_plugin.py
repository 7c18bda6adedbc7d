"""pai-sandbox-inmemory as a plugin: registers the ``inmemory`` sandbox provider.

Kept light: it imports neither just-bash nor the provider until the provider is chosen.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from pai.core import hookimpl
from pai.sandbox.provider import SandboxProvider, SandboxProviderRegistration


class InMemoryOptions(BaseModel):
    """``[capabilities.sandbox.inmemory]``: the interpreter's execution limits."""

    model_config: ClassVar[ConfigDict] = ConfigDict(extra="forbid")

    max_loop_iterations: int = Field(10_000, gt=0)
    max_command_count: int = Field(100_000, gt=0)
    max_call_depth: int = Field(100, gt=0)


def _make_provider(options: InMemoryOptions) -> SandboxProvider:
    from pai.sandbox_inmemory._just_bash import ExecutionLimits
    from pai.sandbox_inmemory._provider import create_in_memory_sandbox_provider

    return create_in_memory_sandbox_provider(
        limits=ExecutionLimits(
            max_loop_iterations=options.max_loop_iterations,
            max_command_count=options.max_command_count,
            max_call_depth=options.max_call_depth,
        )
    )


@hookimpl
def pai_sandbox_providers() -> list[SandboxProviderRegistration]:
    return [
        SandboxProviderRegistration(
            name="inmemory",
            factory=_make_provider,
            options=InMemoryOptions,
            description="In-process: an in-memory filesystem and a bash interpreter (no host access).",
            install_hint="pip install pai-sandbox-inmemory",
        )
    ]
