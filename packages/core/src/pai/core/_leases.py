"""Run leases in a runtime: one run at a time per thread, across every process on a storage.

Every run (``send``, ``submit_tool_results``, a delegated subagent's run in its child thread)
holds its thread's run lease (:meth:`~pai.core.Storage.acquire_run`) from before it reads the
history until it ends, and passes the lease with each of its appends, so the storage refuses
them once the lease is no longer current. How a run gets, keeps and gives back its lease:

- **Waiting.** A thread another run holds is asked for again with a growing, jittered pause
  (10 ms doubling to 250 ms), and at once when a run of this runtime gives that thread back; after
  ``busy_thread_wait`` seconds the caller gets :class:`~pai.core.ThreadBusyError`. Nothing is
  held by a caller cancelled while it waits.
- **Keeping.** One task per runtime and event loop (the *keeper*, started with the first lease
  and ending once none has been held for ``ttl / 3``, or when the runtime closes) renews every
  lease every ``ttl / 3`` seconds: a run costs no task of its own. On asyncio it sleeps in a
  worker thread, not on a timer of the loop (see :func:`_keeper_sleep`); closing the runtime
  ends it.
  A renewal that finds the thread deleted cancels the run (its caller gets
  :class:`~pai.core.ThreadDeletedError`); one that finds the lease taken over cancels it with
  :class:`~pai.core.RunLeaseLostError`; a storage failure is tried again until the lease would
  have expired, and then counts as lost.
- **Giving back.** When the run ends, however it ends, the lease is released (shielded from
  cancellation) and this runtime's waiters for the thread are woken.

A lease taken over from a run that stopped renewing (its process died or stalled) comes back
with ``interrupted`` set; the new run first records that in the thread as an
:class:`~pai.core.ErrorMessage` (``error_type="RunInterrupted"``), which models never read.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import socket
import sys
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final, TypeVar

import anyio
import anyio.abc
import anyio.to_thread

from pai.core._detached import DetachedTask
from pai.core._errors import (
    RunLeaseLostError,
    ThreadBusyError,
    ThreadDeletedError,
    ThreadNotFoundError,
)
from pai.core._lifecycle import ActiveOperation, ActiveWork, RuntimeErrorEvent
from pai.core._messages import ErrorMessage
from pai.core._storage import RunLease, Storage

T = TypeVar("T")
_log = logging.getLogger("pai.core")

TTL_OPTION: Final = "run_lease_ttl"
WAIT_OPTION: Final = "busy_thread_wait"

_FIRST_PAUSE: Final = 0.01
_LONGEST_PAUSE: Final = 0.25
_HOST: Final = 64
"""At most this many characters of the host name go into a holder string."""


def _loop() -> object:
    """The running event loop (asyncio) or run (trio), to tell one event loop from the next."""
    loop = asyncio._get_running_loop()  # None when there is none: no exception to pay for
    if loop is not None:
        return loop
    return sys.modules["trio"].lowlevel.current_trio_token()


async def _keeper_sleep(seconds: float, loop: object) -> None:
    """Sleep ``seconds`` without a timer on an asyncio loop: in a worker thread.

    asyncio drops a cancelled timer only once it reaches the head of the loop's timer heap (or
    when half the heap is cancelled). The keeper's wake-up, a few seconds ahead, would sit at
    that head for the whole sleep and keep every command deadline cancelled behind it (the
    sandbox's are minutes ahead) alive meanwhile: with a thousand commands queued that is a
    thousand dead timers, promoted from one garbage collector generation to the next. A thread
    parked on a ``threading.Event`` holds no timer; the event lets a cancelled sleep end its
    thread at once. Its own limiter: the keeper never waits behind the app's threads. (trio
    keeps its deadlines in a sorted structure that drops cancelled ones: it sleeps as usual.)
    """
    if not isinstance(loop, asyncio.AbstractEventLoop):
        await anyio.sleep(seconds)
        return
    stop = threading.Event()
    try:
        await anyio.to_thread.run_sync(
            stop.wait, seconds, abandon_on_cancel=True, limiter=anyio.CapacityLimiter(1)
        )
    finally:
        stop.set()


@dataclass(eq=False, slots=True)
class HeldLease:
    """A lease a run of this runtime holds, and what the keeper knows about it."""

    lease: RunLease
    loop: object
    due: float
    """When (``anyio.current_time()``) the keeper renews it next."""
    expires: float
    """When it expires at the latest, by this process's clock (measured from before the call
    that set it, so never later than the storage's own expiry)."""
    operation: ActiveOperation | None
    """The thread's tracked work the run is part of (see :class:`ActiveWork`): cancelling it is
    how the keeper stops the run; ``None`` for a run outside tracked work, which gets ``scope``."""
    scope: anyio.CancelScope | None = None
    lost: Exception | None = None
    """Why the keeper cancelled the run: the error its caller gets."""
    renewing: bool = False
    """Whether a renewal of it is under way."""


ReportFn = Callable[[RuntimeErrorEvent], Awaitable[None]]


class RunLeases:
    """The run leases of one runtime's runs, and the keeper renewing them."""

    def __init__(
        self, storage: Storage, work: ActiveWork, *, ttl: float, wait: float, report: ReportFn
    ) -> None:
        self.storage = storage
        self._work = work
        self.ttl = ttl
        self.wait = wait
        self._report = report
        self._host = socket.gethostname()[:_HOST]
        self._held: dict[HeldLease, None] = {}
        """Every lease held, in the order taken (a dict: adding and removing cost O(1))."""
        self._waiters: dict[str, list[anyio.Event]] = {}
        """Per thread, the events of this runtime's callers waiting for its lease."""
        self._keeper: DetachedTask | None = None
        """The keeper running now, if any; ``_keeper_id`` is its identity, ``_keeper_loop`` the
        event loop it runs in."""
        self._keeper_id: object = None
        self._keeper_loop: object = None

    def holder(self) -> str:
        """Who a new run is: ``"host:pid:run-id"``, the run id 8 random hex digits."""
        return f"{self._host}:{os.getpid()}:{os.urandom(4).hex()}"

    async def run(
        self,
        thread_id: str,
        body: Callable[[RunLease], Awaitable[T]],
        *,
        holder: str | None = None,
        reclaim: bool = False,
        release: bool = True,
    ) -> T:
        """Run ``body(lease)`` holding the thread's run lease: wait for it (bounded), keep it
        renewed, release it when the run ends. ``body`` passes the lease to every append.

        A durable run passes its own ``holder`` (``"durable:<run id>"``) and ``reclaim=True``:
        resumed after its process died, it takes back its own lease at once (see
        :meth:`~pai.core.Storage.acquire_run`), and an expired one of its own is no
        interruption to record. Each of its steps holds the lease this way with
        ``release=False``: between steps, which may run in different processes, the lease
        stays taken until it expires (``ttl`` after the step), and the run's last step gives
        it back."""
        lease = await self._acquire(thread_id, holder, reclaim)
        # No await between the acquisition and this try: the lease is always released.
        held: HeldLease | None = None
        try:
            now = anyio.current_time()
            loop = _loop()
            # The run's tracked work already has a cancel scope (deleting the thread here
            # cancels it): the keeper cancels that one, and a run costs no scope of its own.
            operation = self._work.current()
            held = HeldLease(lease, loop, now + self.ttl / 3, now + self.ttl, operation)
            self._held[held] = None
            if self._keeper is None or self._keeper_loop is not loop:
                self._start_keeper(loop)
            # The body is awaited right here, not in a helper: one frame fewer in every run
            # in flight (the garbage collector walks them all).
            if operation is not None:
                if lease.interrupted is not None and lease.interrupted != holder:
                    await self._mark_interrupted(lease)
                return await body(lease)
            held.scope = anyio.CancelScope()
            with held.scope:
                if lease.interrupted is not None and lease.interrupted != holder:
                    await self._mark_interrupted(lease)
                return await body(lease)
        except RunLeaseLostError as error:
            if held is not None and held.lost is not None:
                raise held.lost from error
            raise self._lost(thread_id) from error
        except ThreadNotFoundError as error:
            if error.thread_id != thread_id:
                raise
            raise deleted_elsewhere(thread_id) from error
        except Exception as error:
            if held is not None and held.lost is not None:
                raise held.lost from error
            raise
        finally:
            if held is not None:
                self._held.pop(held, None)
            if release:
                await self._release(lease)
        # Only the keeper's cancellation ends the scope without a result or an error.
        assert held is not None
        assert held.lost is not None
        raise held.lost

    async def _mark_interrupted(self, lease: RunLease) -> None:
        """Record first that the run this one took the thread over from was interrupted."""
        assert lease.interrupted is not None
        await self.storage.append_messages(
            lease.thread_id, [interrupted_marker(lease.interrupted)], lease=lease
        )

    # -- acquiring and releasing --------------------------------------------------------------

    async def _acquire(self, thread_id: str, holder: str | None, reclaim: bool) -> RunLease:
        lease = await self._ask(thread_id, holder, reclaim)
        if lease is not None:
            return lease
        started = anyio.current_time()
        deadline = started + self.wait
        pause = _FIRST_PAUSE
        while True:
            left = deadline - anyio.current_time()
            if left <= 0:
                raise busy(thread_id, anyio.current_time() - started)
            woken = anyio.Event()
            waiting = self._waiters.setdefault(thread_id, [])
            waiting.append(woken)
            try:
                with anyio.move_on_after(min(pause * random.uniform(0.5, 1.0), left)):
                    await woken.wait()
            finally:
                if woken in waiting:
                    waiting.remove(woken)
                    if not waiting and self._waiters.get(thread_id) is waiting:
                        del self._waiters[thread_id]
            pause = min(pause * 2, _LONGEST_PAUSE)
            lease = await self._ask(thread_id, holder, reclaim)
            if lease is not None:
                return lease

    def _ask(self, thread_id: str, holder: str | None, reclaim: bool) -> Awaitable[RunLease | None]:
        if reclaim:
            # Only durable runs pass it: a storage of a plugin that predates it serves the rest.
            return self.storage.acquire_run(
                thread_id, holder=holder or self.holder(), ttl=self.ttl, reclaim=True
            )
        return self.storage.acquire_run(thread_id, holder=holder or self.holder(), ttl=self.ttl)

    async def _release(self, lease: RunLease) -> None:
        """Release ``lease``, also when the run is being cancelled (a release is idempotent: one
        cut short by the cancellation is made again, shielded; the common case pays for no
        shield)."""
        try:
            try:
                await self.storage.release_run(lease)
            except anyio.get_cancelled_exc_class():
                with anyio.CancelScope(shield=True):
                    await self.storage.release_run(lease)
                raise
        except Exception as error:
            await self._report(
                RuntimeErrorEvent(
                    source="runtime",
                    error=error,
                    message=f"releasing the run lease of thread {lease.thread_id!r} failed: "
                    f"{error!r}; the thread stays busy until the lease expires "
                    f"({self.ttl} s after its last renewal)",
                    thread_id=lease.thread_id,
                )
            )
        finally:
            for woken in self._waiters.pop(lease.thread_id, ()):
                woken.set()

    # -- keeping ------------------------------------------------------------------------------

    def _start_keeper(self, loop: object) -> None:
        keeper_id = object()
        self._keeper_id = keeper_id
        self._keeper_loop = loop
        self._keeper = DetachedTask(lambda: self._keep(keeper_id), name="pai run lease keeper")

    def _forget_keeper(self, keeper_id: object) -> None:
        """Forget keeper ``keeper_id`` (if it is still the current one): the next lease starts
        another."""
        if self._keeper_id is keeper_id:
            self._keeper = None
            self._keeper_id = None
            self._keeper_loop = None

    async def _keep(self, keeper_id: object) -> None:
        """Renew every held lease when it is due; end when none has been held for ``ttl / 3``.

        Each renewal runs in a task of its own, so one the storage is slow to answer does not
        hold back the others.
        """
        try:
            async with anyio.create_task_group() as tg:
                idle = False
                loop = _loop()
                while True:
                    wake = self._start_due_renewals(tg, loop)
                    if wake is None:
                        if idle:
                            # Forgotten before anything awaits (leaving the task group does):
                            # a lease taken from now on starts a keeper of its own.
                            self._forget_keeper(keeper_id)
                            break
                        # Linger a while: starting a keeper for every run costs more than the
                        # run's own lease does (one run after another is the common case).
                        idle = True
                        await _keeper_sleep(self.ttl / 3, loop)
                        continue
                    idle = False
                    await _keeper_sleep(max(wake - anyio.current_time(), 0), loop)
        except Exception:  # pragma: no cover - a bug; the keeper must not crash the event loop
            _log.exception("the run lease keeper failed; leases held now are no longer renewed")
        finally:
            self._forget_keeper(keeper_id)

    def _start_due_renewals(self, tg: anyio.abc.TaskGroup, loop: object) -> float | None:
        """Start renewing this event loop's leases that are due; when to look again (``None``
        when none is held). A function of its own, so that the keeper holds no lease (nor the
        run it belongs to) while it sleeps."""
        now = anyio.current_time()
        wake: float | None = None
        renewing = False
        for held in self._held:
            if held.loop is not loop:
                continue
            if held.due <= now and not held.renewing:
                held.renewing = True
                tg.start_soon(self._renew, held)
            if held.renewing:
                renewing = True
            elif wake is None or held.due < wake:
                wake = held.due
        if wake is None and renewing:
            # While every lease is being renewed, look again soon for their next turn.
            wake = now + max(self.ttl / 30, 0.01)
        return wake

    async def _renew(self, held: HeldLease) -> None:
        try:
            await self._renew_once(held)
        finally:
            held.renewing = False

    async def _renew_once(self, held: HeldLease) -> None:
        started = anyio.current_time()
        failure: Exception | None = None
        renewed: RunLease | None = None
        try:
            with anyio.move_on_after(max(held.expires - started, 0)):
                renewed = await self.storage.renew_run(held.lease, ttl=self.ttl)
        except ThreadNotFoundError as error:
            self._cancel(held, deleted_elsewhere(held.lease.thread_id), error)
            return
        except RunLeaseLostError as error:
            self._cancel(held, self._lost(held.lease.thread_id), error)
            return
        except Exception as error:
            failure = error
        if held not in self._held:
            return  # the run ended meanwhile
        if renewed is not None:
            held.lease = renewed
            held.expires = started + self.ttl
            held.due = started + self.ttl / 3
            return
        now = anyio.current_time()
        if now >= held.expires:
            lost = self._lost(held.lease.thread_id)
            self._cancel(held, lost, failure)
            return
        # The storage failed (or did not answer): try again soon, until the lease would expire.
        held.due = min(now + max(self.ttl / 30, 0.01), held.expires)
        if failure is not None:
            await self._report(
                RuntimeErrorEvent(
                    source="runtime",
                    error=failure,
                    message=f"renewing the run lease of thread {held.lease.thread_id!r} failed: "
                    f"{failure!r}; trying again until it expires",
                    thread_id=held.lease.thread_id,
                )
            )

    def _cancel(self, held: HeldLease, error: Exception, cause: BaseException | None) -> None:
        if held not in self._held:
            return  # the run ended meanwhile: nothing to cancel
        error.__cause__ = cause
        held.lost = error
        if held.operation is not None:
            ActiveWork.cancel(held.operation, error)
        elif held.scope is not None:
            held.scope.cancel()

    def _lost(self, thread_id: str) -> RunLeaseLostError:
        return RunLeaseLostError(
            f"the run in thread {thread_id!r} lost the thread: another process (or runtime) "
            f"took it over because this run did not renew its run lease within "
            f"{TTL_OPTION}={self.ttl:g} s (the process stalled: a blocked event loop, a "
            "suspended process, or a storage it could not reach). Nothing more of this run was "
            "stored: the thread holds its steps completed before that. Find what blocked "
            f"this process, or raise {TTL_OPTION} (create_agent_runtime({TTL_OPTION}=...), or "
            f"{TTL_OPTION} in [storage] of pai.toml)"
        )

    async def aclose(self) -> None:
        """Stop the keeper and wait for it to end (the runs still holding leases are no longer
        renewed).

        Waiting matters: until its task has run once more, the cancelled keeper still holds
        this runtime, and everything the runtime's storage holds, alive, so a closed runtime
        would be freed only by a later full garbage collection. A keeper of another event loop
        is only cancelled: its own loop ends it.
        """
        keeper = self._keeper
        if keeper is None:
            return
        keeper.cancel()
        if self._keeper_loop is _loop():
            with anyio.CancelScope(shield=True):
                await keeper.wait()


def busy(thread_id: str, waited: float) -> ThreadBusyError:
    """The error of a caller that waited ``waited`` seconds for a thread another run held."""
    return ThreadBusyError(
        f"thread {thread_id!r} is busy: another run (in this or another process) held it for "
        f"all {waited:.1f} s this call could wait. Try again once that run has finished, or "
        f"wait longer: create_agent_runtime({WAIT_OPTION}=...), or {WAIT_OPTION} in [storage] "
        f"of pai.toml (PAI_STORAGE__{WAIT_OPTION.upper()})",
        thread_id=thread_id,
        waited=waited,
    )


def deleted_elsewhere(thread_id: str) -> ThreadDeletedError:
    """The error of a run whose thread was deleted (by any process) while it ran."""
    return ThreadDeletedError(
        f"thread {thread_id!r} was deleted while this run ran (by another process or "
        "runtime); the run was cancelled and nothing more of it was stored. Await deletion "
        "before reusing the thread id."
    )


def interrupted_marker(holder: str) -> ErrorMessage:
    """What a run records first when it took its thread over from an interrupted one."""
    return ErrorMessage(
        source="runtime",
        error_type="RunInterrupted",
        message=f"the previous run in this thread ({holder!r}) was interrupted: it stopped "
        "renewing its run lease (its process ended or stalled) and the lease expired. Its "
        "completed steps are above; nothing after them was saved.",
    )


__all__ = [
    "TTL_OPTION",
    "WAIT_OPTION",
    "HeldLease",
    "RunLeases",
    "busy",
    "deleted_elsewhere",
    "interrupted_marker",
]
