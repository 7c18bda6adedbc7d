"""pai-sandbox-inmemory as a plugin: registers the ``inmemory`` sandbox provider.

Kept light: it imports neither just-bash nor the provider until the provider is chosen.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from pai.core import hookimpl
from pai.sandbox.provider import SandboxProvider, SandboxProviderRegistration


class InMemoryOptions(BaseModel):
    """``[capabilities.sandbox.inmemory]``: memory budget, worker count, interpreter limits."""

    model_config: ClassVar[ConfigDict] = ConfigDict(extra="forbid")

    memory_budget: int = Field(
        default=256 * 1024 * 1024,
        ge=1024 * 1024,
        description="bytes one sandbox's files may hold, and one command's worker may allocate",
    )
    max_workers: int = Field(
        default=2,
        gt=0,
        description="worker processes running commands at the same time (per event loop)",
    )
    max_loop_iterations: int = Field(
        default=10_000_000,
        gt=0,
        description="iterations of one shell loop; a script over it exits 126",
    )
    max_command_count: int = Field(
        default=10_000_000,
        gt=0,
        description="commands one script may run; a script over it exits 126",
    )
    max_call_depth: int = Field(
        default=100,
        gt=0,
        description="nesting of shell function calls; deeper exits 126",
    )
    max_awk_iterations: int = Field(
        default=10_000_000,
        gt=0,
        description="iterations of one awk loop; a program over it exits 126",
    )
    max_sed_iterations: int = Field(
        default=10_000_000,
        gt=0,
        description="iterations of one sed script's branch loops; over it exits 126",
    )


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
