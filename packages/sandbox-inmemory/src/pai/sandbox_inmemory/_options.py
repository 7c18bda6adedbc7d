"""``[capabilities.sandbox.inmemory]``: the ``inmemory`` sandbox provider's options model.

Kept apart from :mod:`pai.sandbox_inmemory._plugin` so that loading the plugin (``pai --help``) imports
no pydantic; the ``pai_sandbox_providers`` hook imports it when it is called.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field


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


__all__ = ["InMemoryOptions"]
