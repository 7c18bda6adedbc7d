"""Where a provider's interpreter work runs: the host's asyncio loop, or a private one.

just-bash is asyncio-only (``sleep`` awaits ``asyncio.sleep``, ``timeout`` uses
``asyncio.wait_for``), so it cannot run on a trio host's loop, and an instance's state must only
be touched from one thread at a time. :meth:`LoopThread.call` therefore picks one *home* loop:

- when the first caller runs on asyncio, that running loop is home and calls from it run
  directly in the caller's task (no thread hop: the common case costs nothing extra);
- otherwise (a trio host), home is a private asyncio loop in a background thread, an anyio
  blocking portal started lazily and stopped by :meth:`LoopThread.aclose`.

Callers on any other loop reach the home loop across threads; the caller's loop never blocks on
it, and cancelling the caller cancels the task there. When a host loop stops running, the next
caller picks a new home.

Two ways in, same behaviour: with anyio >= 4.16, ``BlockingPortal.call_async`` (two thread
wake-ups per call, and a cancelled caller waits until the task has stopped); with older anyio, a
worker thread waits on the portal's future (four wake-ups; a cancelled caller waits until the
cancellation was delivered).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import CancelledError as FutureCancelledError
from concurrent.futures import Future
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import anyio
import anyio.to_thread
from anyio.from_thread import BlockingPortal, start_blocking_portal

from pai.sandbox import SandboxClosedError

T = TypeVar("T")

_HAS_CALL_ASYNC = hasattr(BlockingPortal, "call_async")
"""Whether this anyio has ``BlockingPortal.call_async`` (4.16+). Tests switch it off."""


@dataclass(frozen=True, slots=True)
class _Outcome(Generic[T]):
    """What the operation returned or raised, carried out of the portal untouched, so that
    errors of the portal itself (stopped, cancelled) are never mistaken for the operation's."""

    value: T | None = None
    error: Exception | None = None

    def unwrap(self) -> T:
        if self.error is not None:
            raise self.error
        return self.value  # pyright: ignore[reportReturnType]  # T itself may include None


def _boxed(fn: Callable[[], Awaitable[T]]) -> Callable[[], Awaitable[_Outcome[T]]]:
    async def run() -> _Outcome[T]:
        try:
            return _Outcome(value=await fn())
        except Exception as error:
            return _Outcome(error=error)

    return run


class _PendingCall:
    """One call through a worker thread: lets a cancelled caller cancel the task."""

    __slots__ = ("_cancelled", "_future", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._future: Future[Any] | None = None
        self._cancelled = False

    def started(self, future: Future[Any]) -> None:
        with self._lock:
            self._future = future
            cancelled = self._cancelled
        if cancelled:
            future.cancel()

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
            future = self._future
        if future is not None:
            future.cancel()


def _running_asyncio_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:  # not on asyncio (trio), or not in async code at all
        return None


class LoopThread:
    """A lazily started asyncio event loop in a background thread (an anyio blocking portal).

    Everything submitted through :meth:`call` runs as a task on that one loop, so concurrent
    calls run concurrently there, and state they share is only ever touched from that thread.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._lock = threading.Lock()
        self._portal: BlockingPortal | None = None
        self._stack: ExitStack | None = None
        self._host: asyncio.AbstractEventLoop | None = None
        self._here: set[anyio.CancelScope] = set()

    @property
    def running(self) -> bool:
        """Whether the background loop is started (no I/O)."""
        return self._portal is not None

    def _closed(self, error: BaseException | None = None) -> SandboxClosedError:
        return SandboxClosedError(
            f"the {self._name} sandbox provider was closed (aclose()) while an operation was "
            "running; the operation was stopped"
            + (f" ({error})" if error is not None and str(error) else "")
        )

    def _ensure_portal(self) -> BlockingPortal:
        # Runs in a worker thread: starting the portal blocks until its thread is up.
        with self._lock:
            if self._portal is None:
                stack = ExitStack()
                self._portal = stack.enter_context(start_blocking_portal(backend="asyncio"))
                self._stack = stack
            return self._portal

    async def call(self, fn: Callable[[], Awaitable[T]]) -> T:
        """Run ``fn()`` on the background loop and return its result (or raise its error).

        Cancelling the caller cancels the task in the background loop. A call that was running
        when :meth:`aclose` stopped the loop raises :class:`~pai.sandbox.SandboxClosedError`.
        """
        current = _running_asyncio_loop()
        host = self._host
        if host is not None and not host.is_running():
            host = self._host = None  # that loop has stopped: choose a home again
        if current is not None and (host is current or (host is None and self._portal is None)):
            self._host = current
            return await self._call_here(fn)
        if host is not None:
            home = host

            def submit(boxed: Callable[[], Awaitable[_Outcome[T]]]) -> Future[_Outcome[T]]:
                async def main() -> _Outcome[T]:
                    return await boxed()

                return asyncio.run_coroutine_threadsafe(main(), home)

            return await self._call_across_threads(submit, fn)
        portal = self._portal
        if portal is None:
            portal = await anyio.to_thread.run_sync(self._ensure_portal)
        if _HAS_CALL_ASYNC:
            try:
                outcome = await portal.call_async(_boxed(fn))
            except (RuntimeError, FutureCancelledError) as error:  # the portal stopped
                raise self._closed(error) from error
            return outcome.unwrap()
        return await self._call_across_threads(portal.start_task_soon, fn)

    async def _call_here(self, fn: Callable[[], Awaitable[T]]) -> T:
        # On the home loop, in the caller's task; aclose() cancels it through this scope.
        scope = anyio.CancelScope()
        self._here.add(scope)
        try:
            with scope:
                return await fn()
        finally:
            self._here.discard(scope)
        raise self._closed()  # reached only when aclose() cancelled the scope

    async def _call_across_threads(
        self,
        submit: Callable[[Callable[[], Awaitable[_Outcome[T]]]], Future[_Outcome[T]]],
        fn: Callable[[], Awaitable[T]],
    ) -> T:
        pending = _PendingCall()
        try:
            outcome = await anyio.to_thread.run_sync(
                self._submit_and_wait, submit, pending, _boxed(fn), abandon_on_cancel=True
            )
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                # Delivering the cancellation may wait for the background loop; do it off-loop.
                await anyio.to_thread.run_sync(pending.cancel)
            raise
        return outcome.unwrap()

    def _submit_and_wait(
        self,
        submit: Callable[[Callable[[], Awaitable[_Outcome[T]]]], Future[_Outcome[T]]],
        pending: _PendingCall,
        fn: Callable[[], Awaitable[_Outcome[T]]],
    ) -> _Outcome[T]:
        # Runs in a worker thread.
        try:
            future = submit(fn)
        except RuntimeError as error:  # the loop is stopped
            raise self._closed(error) from error
        pending.started(future)
        try:
            return future.result()
        except FutureCancelledError as error:
            raise self._closed() from error

    def _stop(self) -> None:
        with self._lock:
            portal, stack = self._portal, self._stack
            self._portal = self._stack = None
        if portal is None or stack is None:
            return
        with contextlib.suppress(RuntimeError):  # RuntimeError: already stopped
            portal.call(portal.stop, True)  # cancel whatever still runs
        stack.close()  # joins the thread

    async def aclose(self) -> None:
        """Stop what still runs (on the host loop or the background one) and the background
        loop; a later call starts again."""
        for scope in list(self._here):
            scope.cancel()
        self._host = None
        if self._portal is None:
            return
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self._stop)
