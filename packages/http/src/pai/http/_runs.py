"""Runs served over HTTP: each run executes in a task of the server (not of the request), its
frames go to the app's run channel (:class:`~pai.core.ext.RunChannel`), and any number of clients
read them from any position, in this process or, with a channel shared by processes
(PostgreSQL's), in another.

- **Streaming.** A response reads the run's frames from a position (0, or the client's
  ``Last-Event-ID``) and waits for more while the run is live: each frame is sent once, in
  order, with its position as the SSE ``id``.
- **Disconnects.** When no client has been reading for ``reattach_grace`` seconds (here or,
  through the channel, in another process), the run is cancelled, with the semantics of
  ``thread.stream``: the steps it completed stay in the thread, nothing of a step in progress is
  stored. A client that comes back within the grace (with ``Last-Event-ID``) keeps it going.
- **Cancelling.** A cancel request reaches the run's owner through the channel, from any
  process.
- **Keeping.** The channel keeps a finished run's frames ``retain_finished`` seconds for late
  readers (the in-process channel also at most ``max_kept_runs`` runs).
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass, field, replace

import anyio
import anyio.abc

from pai.core import AdminClient, PaiError, RunFinished, ThreadBusyError, ThreadDeletedError
from pai.core.ext import RunChannel, RunInfo, RunRefused
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
    """A run this process executes: what the channel knows of it, and its local controls."""

    info: RunInfo
    protocol: WireProtocol
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    finished: bool = False
    cancel_reason: str = ""
    readers: int = 0
    unread_since: float | None = None
    size: int = 0

    def cancel(self, reason: str) -> None:
        if not self.finished and not self.cancel_reason:
            self.cancel_reason = reason
            self.scope.cancel()


class LiveRuns:
    """The runs of one server (see the module documentation)."""

    def __init__(self, limits: HttpLimits, channel: RunChannel) -> None:
        self._limits = limits
        self.channel = channel
        self._local: dict[str, LiveRun] = {}
        self._group: anyio.abc.TaskGroup | None = None

    def bind(self, group: anyio.abc.TaskGroup | None) -> None:
        """The task group runs execute in (the server's lifespan)."""
        self._group = group

    async def get(self, run_id: str, *, thread_id: str, scope_key: str) -> RunInfo | None:
        """The run ``run_id`` of ``thread_id`` in scope ``scope_key``, live or kept."""
        info = await self.channel.get(run_id)
        if info is None or info.thread_id != thread_id or info.scope_key != scope_key:
            return None
        return info

    async def live(self, thread_id: str, *, scope_key: str) -> RunInfo | None:
        info = await self.channel.live(thread_id)
        return info if info is not None and info.scope_key == scope_key else None

    async def start(
        self,
        *,
        admin: AdminClient,
        agent: str,
        request: RunRequest,
        text: str,
        protocol: WireProtocol,
    ) -> RunInfo:
        """Start a run in ``request.thread_id`` (which exists and is the caller's)."""
        if self._group is None:
            raise HttpError(
                503,
                "not_ready",
                "the server is starting or stopping; try again in a moment",
                headers={"Retry-After": "1"},
            )
        user_key = admin.user_key
        info = RunInfo(
            run_id=request.run_id or uuid.uuid4().hex,
            thread_id=request.thread_id,
            scope_key=admin.scope_key,
            agent=agent,
            protocol=protocol.name,
            limit_key=f"user:{user_key}" if user_key is not None else f"scope:{admin.scope_key}",
        )
        limit = self._limits.max_runs_per_identity
        refused = await self.channel.begin(info, max_live_per_key=limit)
        if refused is not None and refused.reason == "taken":
            info = replace(info, run_id=uuid.uuid4().hex)  # a client's id used before
            refused = await self.channel.begin(info, max_live_per_key=limit)
        if refused is not None:
            raise _refusal(refused, info, limit)
        run = LiveRun(info, protocol)
        self._local[info.run_id] = run
        encoder = protocol.encoder(thread_id=info.thread_id, run_id=info.run_id)
        try:
            await self._publish(run, encoder.start())
            self._group.start_soon(self._execute, run, encoder, admin, request, text)
        except BaseException:
            await self._ended(run)
            raise
        return info

    async def _publish(self, run: LiveRun, frames: list[str]) -> None:
        if not frames:
            return
        run.size += sum(len(frame) for frame in frames)
        limit = self._limits.max_run_bytes
        if run.size > limit:
            run.cancel(
                f"the run's events passed {limit:,} bytes (HttpLimits.max_run_bytes); "
                "it was stopped"
            )
        await self.channel.append(run.info.run_id, frames)

    async def _execute(
        self, run: LiveRun, encoder: Encoder, admin: AdminClient, request: RunRequest, text: str
    ) -> None:
        handle = admin.thread(run.info.thread_id)
        watching = anyio.CancelScope()
        if self._group is not None:
            self._group.start_soon(self._watch_cancel, run, watching)
        try:
            try:
                with run.scope:
                    if request.tool_results:
                        result = await handle.submit_tool_results(request.tool_results)
                        await self._publish(run, encoder.finish(result))
                    else:
                        async with aclosing(handle.stream(text)) as events:
                            async for event in events:
                                if isinstance(event, RunFinished):
                                    frames = encoder.finish(event.result)
                                else:
                                    frames = encoder.event(event)
                                await self._publish(run, frames)
            finally:
                watching.cancel()
            if run.scope.cancelled_caught:
                reason = run.cancel_reason or "the run was cancelled"
                await self._publish(run, encoder.error(reason, code="cancelled"))
        except PaiError as error:
            await self._publish(run, encoder.error(safe_text(error), code=_error_code(error)))
        except Exception as error:
            _log.exception("run %s in thread %r failed", run.info.run_id, run.info.thread_id)
            await self._publish(run, encoder.error(safe_text(error), code="internal_error"))
        finally:
            with anyio.CancelScope(shield=True):
                await self._ended(run)

    async def _ended(self, run: LiveRun) -> None:
        run.finished = True
        self._local.pop(run.info.run_id, None)
        try:
            await self.channel.end(run.info.run_id)
        except Exception:
            _log.exception("could not end run %s in the run channel", run.info.run_id)

    async def _watch_cancel(self, run: LiveRun, watching: anyio.CancelScope) -> None:
        """Cancel ``run`` when the channel brings a request (from this process or another),
        until ``watching`` is cancelled."""
        with watching:
            while not run.finished:
                try:
                    reason = await self.channel.wait_cancel(run.info.run_id, wait=_HEARTBEAT)
                except Exception:
                    _log.exception("the run channel failed; retrying in %g s", _HEARTBEAT)
                    await anyio.sleep(_HEARTBEAT)
                    continue
                if reason is not None:
                    run.cancel(reason)
                    return

    async def cancel(self, info: RunInfo, reason: str) -> None:
        """Cancel ``info``'s run, wherever it executes."""
        run = self._local.get(info.run_id)
        if run is not None:
            run.cancel(reason)
        else:
            await self.channel.cancel(info.run_id, reason)

    async def frames(
        self, info: RunInfo, *, after: int, keepalive: float
    ) -> AsyncGenerator[tuple[int, str] | None]:
        """Every frame of the run after position ``after``, in order, waiting for more while it
        runs; ``None`` after ``keepalive`` seconds without one. Reading counts as attending the
        run (see the module documentation)."""
        run = self._local.get(info.run_id)
        if run is not None:
            run.readers += 1
            run.unread_since = None
        # A reader of a run of another process reads at least twice per grace, so the owner
        # sees it attended.
        grace = self._limits.reattach_grace
        wait = keepalive if run is not None or grace <= 0 else min(keepalive, grace / 2)
        position = max(0, after)
        quiet_since = time.monotonic()
        try:
            while True:
                read = await self.channel.read(info.run_id, after=position, wait=wait)
                if read is None:
                    return  # forgotten meanwhile
                for frame in read.frames:
                    position += 1
                    yield position, frame
                if read.finished:
                    return
                now = time.monotonic()
                if read.frames:
                    quiet_since = now
                elif now - quiet_since >= keepalive:
                    quiet_since = now
                    yield None
        finally:
            if run is not None:
                run.readers -= 1
                if run.readers == 0 and not run.finished:
                    self._unattended(run)

    def _unattended(self, run: LiveRun) -> None:
        """Nobody here reads ``run`` any more: cancel it unless a reader comes back in time
        (here, or in another process through the channel)."""
        grace = self._limits.reattach_grace
        if grace <= 0 or self._group is None:
            run.cancel("the client disconnected")
            return
        since = run.unread_since = time.monotonic()

        async def later() -> None:
            while True:
                await anyio.sleep(grace)
                if run.finished or run.readers > 0 or run.unread_since != since:
                    return
                if not await self.channel.attended(run.info.run_id, within=grace):
                    run.cancel(f"the client disconnected and did not come back within {grace:g} s")
                    return

        self._group.start_soon(later)


_HEARTBEAT = 5.0
"""Seconds between a run owner's calls to the channel saying it is alive."""


def _refusal(refused: RunRefused, info: RunInfo, limit: int) -> HttpError:
    if refused.reason == "busy" and refused.busy is not None:
        thread_id, busy = info.thread_id, refused.busy.run_id
        return HttpError(
            409,
            "thread_busy",
            f"thread {thread_id!r} is running run {busy!r}; wait for it to finish "
            f"(GET /threads/{thread_id}/runs/{busy}/events streams it) or cancel it "
            f"(POST /threads/{thread_id}/runs/{busy}/cancel)",
        )
    if refused.reason == "limit":
        return HttpError(
            429,
            "too_many_runs",
            f"{refused.live_for_key} runs of yours are running; at most {limit} may run at once "
            "(HttpLimits.max_runs_per_identity); try again when one has finished",
            headers={"Retry-After": "1"},
        )
    return HttpError(
        409, "run_id_taken", f"run id {info.run_id!r} is taken; start the run without an id"
    )


__all__ = ["LiveRun", "LiveRuns", "safe_text"]
