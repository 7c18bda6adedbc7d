"""The realtime binding: the channel that carries a run's events to whoever reads them.

A served run (``pai.http``) executes in one process; the clients that read it, resume it after a
dropped connection or cancel it may reach any process of the deployment. A :class:`RunChannel`
is what they share: for each run, its description (:class:`RunInfo`), its frames in order (the
encoded events, opaque strings), whether it has ended, who last read it, and whether someone
asked to cancel it.

It is chosen like storage: :class:`InMemoryRunChannel` serves one process; a storage that can
carry runs between processes offers its own channel (:class:`ProvidesRunChannel`; PostgreSQL's
uses a table and ``LISTEN``/``NOTIFY``). :func:`run_channel_for` picks one.

The contract (``pai.core.testing.RunChannelConformance`` checks it on a backend):

- :meth:`RunChannel.begin` registers a run, unless its thread has a live run, or its
  ``limit_key`` has ``max_live_per_key`` live runs, or its id is taken: then it stores nothing
  and says why (:class:`RunRefused`). Across processes, two begins on one thread let one win.
- :meth:`RunChannel.append` adds frames after the last; positions count from 1.
  :meth:`RunChannel.read` returns the frames after a position, waiting up to ``wait`` seconds
  for some while the run is live, and says when there will be no more.
- :meth:`RunChannel.end` ends a run: readers get its last frames and learn it has ended; it is
  no longer the thread's live run nor counted against its key. An ended run stays readable for
  the channel's retention, then is forgotten.
- :meth:`RunChannel.cancel` asks a live run's owner to stop it; the owner learns it from
  :meth:`RunChannel.wait_cancel`, which also tells the channel the owner is alive (a channel
  shared by processes ends the runs of an owner that stopped calling it).
- :meth:`RunChannel.attended` says whether any reader read the run within the last seconds.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol, runtime_checkable

import anyio

__all__ = [
    "InMemoryRunChannel",
    "ProvidesRunChannel",
    "RunChannel",
    "RunFrames",
    "RunInfo",
    "RunRefused",
    "run_channel_for",
]


@dataclass(frozen=True, slots=True)
class RunInfo:
    """A run the channel carries: its id, the thread it runs in and whose it is (``scope_key``),
    the agent, the wire ``protocol`` its frames are encoded in, and the ``limit_key`` its
    concurrency is counted against (the caller's). ``finished`` once it has ended."""

    run_id: str
    thread_id: str
    scope_key: str
    agent: str
    protocol: str
    limit_key: str
    finished: bool = False


@dataclass(frozen=True, slots=True)
class RunRefused:
    """Why :meth:`RunChannel.begin` stored nothing: the thread has a live run (``busy``), the
    key has ``live_for_key`` live runs already (``limit``), or the run id is taken."""

    reason: Literal["busy", "limit", "taken"]
    busy: RunInfo | None = None
    live_for_key: int = 0


@dataclass(frozen=True, slots=True)
class RunFrames:
    """Frames after a position, in order, and whether the run has ended after them."""

    frames: tuple[str, ...]
    finished: bool


@runtime_checkable
class RunChannel(Protocol):
    """Carries runs' frames, ends and cancel requests (see the module documentation)."""

    async def begin(self, info: RunInfo, *, max_live_per_key: int) -> RunRefused | None:
        """Register ``info`` as live; ``None`` when it was, else why not (nothing stored)."""
        ...

    async def append(self, run_id: str, frames: Sequence[str]) -> None:
        """Add ``frames`` after the run's last frame. The owner calls it, in order."""
        ...

    async def end(self, run_id: str) -> None:
        """End the run: no more frames; readers are woken. Ending twice is harmless."""
        ...

    async def get(self, run_id: str) -> RunInfo | None:
        """The run, live or ended and still kept; ``None`` when unknown or forgotten."""
        ...

    async def live(self, thread_id: str) -> RunInfo | None:
        """The thread's live run, if any."""
        ...

    async def read(self, run_id: str, *, after: int, wait: float) -> RunFrames | None:
        """The frames after position ``after`` (0 for all). While the run is live and has
        none, wait up to ``wait`` seconds for some (an empty, unfinished answer when none came).
        ``None`` for an unknown run. Each call counts as attending the run."""
        ...

    async def cancel(self, run_id: str, reason: str) -> bool:
        """Ask the owner of a live run to cancel it with ``reason``; ``False`` when the run is
        not live (ended or unknown)."""
        ...

    async def wait_cancel(self, run_id: str, *, wait: float) -> str | None:
        """For the run's owner: wait up to ``wait`` seconds for a cancel request and return its
        reason (``None`` when none came). Calling it says the owner is alive."""
        ...

    async def attended(self, run_id: str, *, within: float) -> bool:
        """Whether a :meth:`read` of the run (from any process) began within ``within``
        seconds."""
        ...

    async def aclose(self) -> None:
        """Release the channel's local resources (never the data it shares)."""
        ...


@runtime_checkable
class ProvidesRunChannel(Protocol):
    """A storage that can carry runs between the processes sharing it."""

    def run_channel(self, *, retain_finished: float) -> RunChannel:
        """A channel over the same database, keeping ended runs ``retain_finished`` seconds."""
        ...


@dataclass(eq=False, slots=True)
class _Run:
    info: RunInfo
    frames: list[str] = field(default_factory=list[str])
    changed: anyio.Event = field(default_factory=anyio.Event)
    cancel_reason: str | None = None
    cancel_requested: anyio.Event = field(default_factory=anyio.Event)
    ended_at: float = 0.0
    read_at: float = 0.0

    def wake(self) -> None:
        changed, self.changed = self.changed, anyio.Event()
        changed.set()


class InMemoryRunChannel:
    """The channel of one process: runs live in this object's memory.

    Ended runs are kept ``retain_finished`` seconds, and at most ``max_kept_runs`` runs are kept
    in all (the oldest ended go first when a run begins past it)."""

    def __init__(self, *, retain_finished: float = 300.0, max_kept_runs: int = 1000) -> None:
        self._retain = retain_finished
        self._max_kept = max_kept_runs
        self._runs: dict[str, _Run] = {}
        self._live_by_thread: dict[str, _Run] = {}
        self._live_per_key: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"InMemoryRunChannel(retain_finished={self._retain:g})"

    async def begin(self, info: RunInfo, *, max_live_per_key: int) -> RunRefused | None:
        self._forget_old()
        busy = self._live_by_thread.get(info.thread_id)
        if busy is not None:
            return RunRefused("busy", busy=busy.info)
        live = self._live_per_key.get(info.limit_key, 0)
        if live >= max_live_per_key:
            return RunRefused("limit", live_for_key=live)
        if info.run_id in self._runs:
            return RunRefused("taken")
        run = _Run(replace(info, finished=False))
        self._runs[info.run_id] = run
        self._live_by_thread[info.thread_id] = run
        self._live_per_key[info.limit_key] = live + 1
        return None

    async def append(self, run_id: str, frames: Sequence[str]) -> None:
        run = self._runs.get(run_id)
        if run is None or run.info.finished or not frames:
            return
        run.frames.extend(frames)
        run.wake()

    async def end(self, run_id: str) -> None:
        run = self._runs.get(run_id)
        if run is None or run.info.finished:
            return
        info = run.info
        run.info = replace(info, finished=True)
        run.ended_at = time.monotonic()
        if self._live_by_thread.get(info.thread_id) is run:
            del self._live_by_thread[info.thread_id]
        left = self._live_per_key.get(info.limit_key, 1) - 1
        if left > 0:
            self._live_per_key[info.limit_key] = left
        else:
            self._live_per_key.pop(info.limit_key, None)
        run.wake()

    async def get(self, run_id: str) -> RunInfo | None:
        run = self._runs.get(run_id)
        return None if run is None else run.info

    async def live(self, thread_id: str) -> RunInfo | None:
        run = self._live_by_thread.get(thread_id)
        return None if run is None else run.info

    async def read(self, run_id: str, *, after: int, wait: float) -> RunFrames | None:
        run = self._runs.get(run_id)
        if run is None:
            return None
        run.read_at = time.monotonic()
        start = max(0, after)
        if start >= len(run.frames) and not run.info.finished and wait > 0:
            changed = run.changed
            with anyio.move_on_after(wait):
                await changed.wait()
        return RunFrames(tuple(run.frames[start:]), run.info.finished)

    async def cancel(self, run_id: str, reason: str) -> bool:
        run = self._runs.get(run_id)
        if run is None or run.info.finished:
            return False
        if run.cancel_reason is None:
            run.cancel_reason = reason
            run.cancel_requested.set()
        return True

    async def wait_cancel(self, run_id: str, *, wait: float) -> str | None:
        run = self._runs.get(run_id)
        if run is None:
            return None
        if run.cancel_reason is None:
            with anyio.move_on_after(wait):
                await run.cancel_requested.wait()
        return run.cancel_reason

    async def attended(self, run_id: str, *, within: float) -> bool:
        run = self._runs.get(run_id)
        return run is not None and time.monotonic() - run.read_at <= within

    async def aclose(self) -> None:
        self._runs.clear()
        self._live_by_thread.clear()
        self._live_per_key.clear()

    def _forget_old(self) -> None:
        now = time.monotonic()
        for run_id, run in list(self._runs.items()):
            if run.info.finished and now - run.ended_at > self._retain:
                del self._runs[run_id]
        excess = len(self._runs) - self._max_kept + 1
        if excess > 0:
            ended = sorted((r for r in self._runs.values() if r.info.finished), key=_ended_at)
            for run in ended[:excess]:
                del self._runs[run.info.run_id]


def _ended_at(run: _Run) -> float:
    return run.ended_at


def run_channel_for(
    storage: object, *, retain_finished: float = 300.0, max_kept_runs: int = 1000
) -> RunChannel:
    """The channel for an app on ``storage``: the storage's own when it offers one
    (:class:`ProvidesRunChannel`), else an :class:`InMemoryRunChannel`."""
    if isinstance(storage, ProvidesRunChannel):
        return storage.run_channel(retain_finished=retain_finished)
    return InMemoryRunChannel(retain_finished=retain_finished, max_kept_runs=max_kept_runs)
