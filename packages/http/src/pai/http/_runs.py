"""Runs served over HTTP: each run executes in a task of the server (not of the request), its
frames are kept in order, and any number of clients read them from any position.

- **Streaming.** A response reads the run's frames from a position (0, or the client's
  ``Last-Event-ID``) and waits for more while the run is live: each frame is sent once, in
  order, with its position as the SSE ``id``.
- **Disconnects.** When no client has been reading for ``reattach_grace`` seconds, the run is
  cancelled, with the semantics of ``thread.stream``: the steps it completed stay in the thread,
  nothing of a step in progress is stored. A client that comes back within the grace (with
  ``Last-Event-ID``) keeps it going.
- **Keeping.** A finished run's frames are kept ``retain_finished`` seconds for late readers,
  and at most ``max_kept_runs`` runs are kept in all (the oldest finished go first).

This is the in-process binding: resuming reaches runs of this process. (Runs of another process
need the realtime binding of a shared store.)
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections import Counter
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass, field

import anyio
import anyio.abc

from pai.core import (
    AdminClient,
    PaiError,
    RunFinished,
    ThreadBusyError,
    ThreadDeletedError,
)
from pai.http._errors import HttpError
from pai.http._limits import HttpLimits
from pai.http._wire import Encoder, RunRequest, WireProtocol

_log = logging.getLogger("pai.http")

_HOST_PATH = re.compile(
    r"(?<![\w/.~-])/(?:home|root|usr|etc|var|tmp|opt|srv|mnt|proc|sys|run|Users|private|nix)"
    r"(?:/[^\s'\"`,;)\]]*)?"
)


def safe_text(error: BaseException) -> str:
    """The text of ``error`` a client may see: PAI's own message (written for the person
    using the app), host paths replaced; anything else is an internal error."""
    if isinstance(error, PaiError):
        return _HOST_PATH.sub("<host path>", str(error))[:2000]
    return "the run failed with an internal error; the server's log has the details"


def _error_code(error: PaiError) -> str:
    """The error code a client sees for a run that failed with ``error``."""
    if isinstance(error, ThreadBusyError):
        return "thread_busy"
    if isinstance(error, ThreadDeletedError):
        return "thread_deleted"
    return type(error).__name__


@dataclass(eq=False)
class LiveRun:
    """One run and its frames."""

    run_id: str
    thread_id: str
    agent: str
    scope_key: str
    protocol: WireProtocol
    frames: list[str] = field(default_factory=list[str])
    finished: bool = False
    finished_at: float = 0.0
    readers: int = 0
    changed: anyio.Event = field(default_factory=anyio.Event)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    cancel_reason: str = ""
    unread_since: float | None = None
    size: int = 0
    max_bytes: int = 32 * 1024 * 1024

    def publish(self, frames: list[str]) -> None:
        if frames:
            self.size += sum(len(frame) for frame in frames)
            if self.size > self.max_bytes and not self.finished:
                self.cancel(
                    f"the run's events passed {self.max_bytes:,} bytes "
                    "(HttpLimits.max_run_bytes); it was stopped"
                )
            self.frames.extend(frames)
            self.wake()

    def wake(self) -> None:
        """Wake every reader waiting for a change (new frames, or the end)."""
        changed, self.changed = self.changed, anyio.Event()
        changed.set()

    def cancel(self, reason: str) -> None:
        if not self.finished and not self.cancel_reason:
            self.cancel_reason = reason
            self.scope.cancel()


class LiveRuns:
    """The runs of one server (see the module documentation)."""

    def __init__(self, limits: HttpLimits) -> None:
        self._limits = limits
        self._runs: dict[str, LiveRun] = {}
        self._live_by_thread: dict[str, LiveRun] = {}
        self._per_scope: Counter[str] = Counter()
        self._group: anyio.abc.TaskGroup | None = None

    def bind(self, group: anyio.abc.TaskGroup | None) -> None:
        """The task group runs execute in (the server's lifespan)."""
        self._group = group

    def get(self, run_id: str, *, thread_id: str, scope_key: str) -> LiveRun | None:
        run = self._runs.get(run_id)
        if run is None or run.thread_id != thread_id or run.scope_key != scope_key:
            return None
        return run

    def live(self, thread_id: str, *, scope_key: str) -> LiveRun | None:
        run = self._live_by_thread.get(thread_id)
        return run if run is not None and run.scope_key == scope_key else None

    def start(
        self,
        *,
        admin: AdminClient,
        agent: str,
        request: RunRequest,
        text: str,
        protocol: WireProtocol,
    ) -> LiveRun:
        """Start a run in ``request.thread_id`` (which exists and is the caller's)."""
        if self._group is None:
            raise HttpError(
                503,
                "not_ready",
                "the server is starting or stopping; try again in a moment",
                headers={"Retry-After": "1"},
            )
        scope_key = admin.scope_key
        busy = self._live_by_thread.get(request.thread_id)
        if busy is not None:
            raise HttpError(
                409,
                "thread_busy",
                f"thread {request.thread_id!r} is running run {busy.run_id!r}; wait for it to "
                f"finish (GET /threads/{request.thread_id}/runs/{busy.run_id}/events streams "
                f"it) or cancel it (POST /threads/{request.thread_id}/runs/{busy.run_id}/cancel)",
            )
        if self._per_scope[scope_key] >= self._limits.max_runs_per_identity:
            raise HttpError(
                429,
                "too_many_runs",
                f"{self._per_scope[scope_key]} runs of yours are running; at most "
                f"{self._limits.max_runs_per_identity} may run at once "
                "(HttpLimits.max_runs_per_identity); try again when one has finished",
                headers={"Retry-After": "1"},
            )
        run_id = request.run_id if request.run_id and request.run_id not in self._runs else None
        run = LiveRun(
            run_id=run_id or uuid.uuid4().hex,
            thread_id=request.thread_id,
            agent=agent,
            scope_key=scope_key,
            protocol=protocol,
            max_bytes=self._limits.max_run_bytes,
        )
        self._forget_old()
        self._runs[run.run_id] = run
        self._live_by_thread[run.thread_id] = run
        self._per_scope[scope_key] += 1
        encoder = protocol.encoder(thread_id=run.thread_id, run_id=run.run_id)
        run.publish(encoder.start())
        self._group.start_soon(self._execute, run, encoder, admin, request, text)
        return run

    async def _execute(
        self, run: LiveRun, encoder: Encoder, admin: AdminClient, request: RunRequest, text: str
    ) -> None:
        handle = admin.thread(run.thread_id)
        try:
            with run.scope:
                if request.tool_results:
                    result = await handle.submit_tool_results(request.tool_results)
                    run.publish(encoder.finish(result))
                else:
                    async with aclosing(handle.stream(text)) as events:
                        async for event in events:
                            if isinstance(event, RunFinished):
                                run.publish(encoder.finish(event.result))
                            else:
                                run.publish(encoder.event(event))
            if run.scope.cancelled_caught:
                run.publish(
                    encoder.error(run.cancel_reason or "the run was cancelled", code="cancelled")
                )
        except PaiError as error:
            run.publish(encoder.error(safe_text(error), code=_error_code(error)))
        except Exception as error:
            _log.exception("run %s in thread %r failed", run.run_id, run.thread_id)
            run.publish(encoder.error(safe_text(error), code="internal_error"))
        finally:
            run.finished = True
            run.finished_at = time.monotonic()
            if self._live_by_thread.get(run.thread_id) is run:
                del self._live_by_thread[run.thread_id]
            self._per_scope[run.scope_key] -= 1
            if self._per_scope[run.scope_key] <= 0:
                del self._per_scope[run.scope_key]
            run.wake()  # readers waiting for more learn the run has ended

    async def frames(
        self, run: LiveRun, *, after: int, keepalive: float
    ) -> AsyncGenerator[tuple[int, str] | None]:
        """Every frame of ``run`` after position ``after``, in order, waiting for more while it
        runs; ``None`` after ``keepalive`` seconds without one. Reading counts as attending the
        run (see the module documentation)."""
        run.readers += 1
        run.unread_since = None
        position = max(0, after)
        try:
            while True:
                while position < len(run.frames):
                    position += 1
                    yield position, run.frames[position - 1]
                if run.finished:
                    return
                changed = run.changed
                with anyio.move_on_after(keepalive) as quiet:
                    await changed.wait()
                if quiet.cancelled_caught:
                    yield None
        finally:
            run.readers -= 1
            if run.readers == 0 and not run.finished:
                self._unattended(run)

    def _unattended(self, run: LiveRun) -> None:
        """Nobody reads ``run`` any more: cancel it unless a reader comes back in time."""
        grace = self._limits.reattach_grace
        if grace <= 0 or self._group is None:
            run.cancel("the client disconnected")
            return
        since = run.unread_since = time.monotonic()

        async def later() -> None:
            await anyio.sleep(grace)
            if run.readers == 0 and run.unread_since == since:
                run.cancel(f"the client disconnected and did not come back within {grace:g} s")

        self._group.start_soon(later)

    def _forget_old(self) -> None:
        now = time.monotonic()
        keep = self._limits.retain_finished
        for run_id, run in list(self._runs.items()):
            if run.finished and now - run.finished_at > keep:
                del self._runs[run_id]
        excess = len(self._runs) - self._limits.max_kept_runs + 1
        if excess > 0:
            finished = sorted(
                (r for r in self._runs.values() if r.finished), key=lambda r: r.finished_at
            )
            for run in finished[:excess]:
                del self._runs[run.run_id]


__all__ = ["LiveRun", "LiveRuns", "safe_text"]
