"""A task that runs beside the task that started it, for a streamed run.

``thread.stream(...)`` is an async generator: the caller's ``async for`` may stop at any event
(``break``, ``return``, an exception in the loop body) and leave the generator to be closed
later, by the event loop's finalizer, in another task. A task group opened inside the
generator would then be exited in a task that did not enter it: on asyncio that cancels the
*caller's* task, on trio it is an internal error of the event loop. So the run's task is not
started in a task group of the generator's: it is started on its own (an asyncio task, or a
trio system task) with a cancel scope of its own, and the generator cancels it and waits for
it in a ``finally``, which works from whichever task closes it.

The run's task keeps the caller's context variables, as a task started in the caller's task
group would.
"""

from __future__ import annotations

import contextvars
import sys
from collections.abc import Awaitable, Callable

import anyio


class DetachedTask:
    """``fn()`` running in a task of its own, with the caller's context variables: cancel it,
    wait for it to end.

    ``fn`` must not raise: on trio the task is a system task, and an exception escaping one
    is an internal error of the event loop. Its own cancellation (:meth:`cancel`) ends it
    quietly; the event loop's shutdown cancels it too.
    """

    __slots__ = ("_done", "_scope", "_task")

    def __init__(self, fn: Callable[[], Awaitable[None]], *, name: str) -> None:
        self._scope = anyio.CancelScope()
        self._done = anyio.Event()
        self._task: object = None  # an asyncio task: the loop keeps only a weak reference
        if _in_trio_run():
            import trio

            trio.lowlevel.spawn_system_task(
                self._main, fn, name=name, context=contextvars.copy_context()
            )
        else:
            import asyncio

            self._task = asyncio.get_running_loop().create_task(self._main(fn), name=name)

    def cancel(self) -> None:
        """Cancel the task at its next checkpoint (nothing if it has ended)."""
        self._scope.cancel()

    async def wait(self) -> None:
        """Return once the task has ended."""
        await self._done.wait()

    async def _main(self, fn: Callable[[], Awaitable[None]]) -> None:
        try:
            with self._scope:
                await fn()
        finally:
            self._done.set()


def _in_trio_run() -> bool:
    trio = sys.modules.get("trio")  # not running on trio unless it was imported
    if trio is None:
        return False
    try:
        trio.lowlevel.current_trio_token()  # in every trio release, unlike in_trio_run()
    except RuntimeError:
        return False
    return True


__all__ = ["DetachedTask"]
