"""The task group a streamed run's task starts in: anyio's, or on trio a bare nursery.

anyio (4.14 and later) wraps every task its task group starts in a ``TaskHandle``, with a cancel
scope and an event of its own, so that the task can be awaited. A streamed run's task is never
awaited, and on trio that wrapping is measurable on the way to a run's first token: in five
paired ``bench_models`` runs, a nursery made the first token 1-4% sooner (median 3%) than
anyio's task group did. On trio the run's task starts in a nursery instead, which is what anyio's
task group is made of there.
"""

from __future__ import annotations

import sys
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, cast

import anyio
import anyio.abc

if TYPE_CHECKING:
    import trio


def open_task_group() -> AbstractAsyncContextManager[anyio.abc.TaskGroup | trio.Nursery]:
    """A task group to start a task in with ``start_soon(fn, name=...)`` and cancel with
    ``cancel_scope.cancel()``: a trio nursery when running on trio, else anyio's task group.

    Cancelled from outside, a nursery raises a group of cancellations where anyio's task group
    raises one: pass what it raises through :func:`lone_cancellation`.
    """
    trio_module = sys.modules.get("trio")  # not running on trio unless it was imported
    if trio_module is not None:
        # Old trio releases lack in_trio_run: there, anyio's task group serves.
        in_trio_run = getattr(trio_module.lowlevel, "in_trio_run", None)
        if in_trio_run is not None and in_trio_run():
            nursery = trio_module.open_nursery(strict_exception_groups=True)
            return cast("AbstractAsyncContextManager[trio.Nursery]", nursery)
    return anyio.create_task_group()


def lone_cancellation(group: BaseExceptionGroup[BaseException]) -> BaseException | None:
    """The first of a group of nothing but the backend's cancellation exceptions, to raise in
    its place (as anyio's task group does, so that an ``except`` for that exception still
    matches); ``None`` when the group holds anything else."""
    if group.split(anyio.get_cancelled_exc_class())[1] is not None:
        return None
    return _first_leaf(group)


def _first_leaf(error: BaseException) -> BaseException:
    if isinstance(error, BaseExceptionGroup):
        return _first_leaf(cast("BaseExceptionGroup[BaseException]", error).exceptions[0])
    return error


__all__ = ["lone_cancellation", "open_task_group"]
