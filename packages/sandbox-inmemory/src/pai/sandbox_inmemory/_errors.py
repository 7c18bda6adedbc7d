"""Errors of pai-sandbox-inmemory, under pai-sandbox's tree.

::

    SandboxError (pai.sandbox)
    └── SandboxMemoryBudgetError   (OSError ENOSPC: the sandbox's files would exceed memory_budget)
"""

from __future__ import annotations

import errno

from pai.sandbox import SandboxError

__all__ = ["SandboxMemoryBudgetError", "budget_message"]


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):g} MiB"


def budget_message(path: str, needed: int | None, budget: int) -> str:
    """The message of a write refused by the memory budget (shared with the shell's error);
    ``needed`` is ``None`` when the write alone is larger than the budget."""
    what = (
        f"writing {path!r} would take the sandbox's files to {needed} bytes, over"
        if needed is not None
        else f"writing {path!r} needs more than"
    )
    return (
        f"{what} the sandbox's memory budget of {budget} bytes ({_mib(budget)}, option "
        "memory_budget); remove files or raise memory_budget"
    )


class SandboxMemoryBudgetError(SandboxError, OSError):
    """A write that would take an in-memory sandbox's files over its memory budget.

    Carries the sandbox ``path`` (also ``.filename``), the bytes the files would ``need`` and the
    ``budget`` (the provider's ``memory_budget`` option). Nothing was written.
    """

    def __init__(self, path: str, *, needed: int, budget: int) -> None:
        OSError.__init__(self, errno.ENOSPC, budget_message(path, needed, budget))
        self.filename = path
        self.path = path
        self.needed = needed
        self.budget = budget

    def __str__(self) -> str:
        return str(self.strerror)

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild, (self.path, self.needed, self.budget))


def _rebuild(path: str, needed: int, budget: int) -> SandboxMemoryBudgetError:
    return SandboxMemoryBudgetError(path, needed=needed, budget=budget)
