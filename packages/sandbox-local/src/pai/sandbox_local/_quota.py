"""The disk limit of a local sandbox's ``/workspace``: measured, since no kernel quota is at hand.

File system quotas need root and a file system mounted with them, and a size-limited file system
of its own (a loop device) needs root too; the local provider runs as an ordinary user. So the
host measures the workspace folder (the allocated blocks of everything in it, each hard-linked
file once, symbolic links never followed) and acts on what it finds:

- ``write_files`` is refused before anything is written when the files would not fit;
- while an instance is in use (a command running, or one ended less than :data:`LINGER` seconds
  ago), one thread per provider measures its folder every :data:`MIN_INTERVAL` seconds (less
  often when measuring takes long, up to :data:`MAX_INTERVAL`); when
  the folder goes over the limit, every process of the sandbox is ended (its files are kept) and
  the commands that were running say why;
- a command starts on a measurement at most :data:`MAX_INTERVAL` old (one is made first when
  none is); while the folder stays over the limit, commands run with ``RLIMIT_FSIZE`` 0: they
  may read and remove files, and every write fails.

A fast writer can overshoot the limit by what it writes in one interval; ``file_size`` caps each
file. As an ordinary user the host cannot look into a folder a command made unreadable to its
owner (``chmod 0``): what is under it is not counted. Root (and CI) sees everything.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path

import anyio.to_thread

from pai.sandbox_local._errors import DiskLimitError

MIN_INTERVAL = 0.1
"""Seconds between two measurements of a workspace in use, at the least."""

DUTY = 20
"""A measurement that took ``t`` seconds is not repeated for ``DUTY * t`` seconds..."""

MAX_INTERVAL = 1.0
"""... nor waits longer than this (a workspace of a great many files costs more of the thread)."""

LINGER = 1.0
"""Seconds a workspace is still watched after its last command ended (for what it left
running)."""


def usage(folder: Path, stop_above: int | None = None) -> int:
    """Bytes allocated under ``folder``; the walk stops early once past ``stop_above``."""
    total = 0
    seen: set[tuple[int, int]] = set()
    stack = [os.fspath(folder)]
    while stack:
        try:
            entries = os.scandir(stack.pop())
        except OSError:  # gone meanwhile, or unreadable (see the module's docstring)
            continue
        with entries:
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if info.st_nlink > 1 and not stat.S_ISDIR(info.st_mode):
                    identity = (info.st_dev, info.st_ino)
                    if identity in seen:
                        continue
                    seen.add(identity)
                total += info.st_blocks * 512
                if stat.S_ISDIR(info.st_mode):
                    stack.append(entry.path)
        if stop_above is not None and total > stop_above:
            break
    return total


def describe(size: int) -> str:
    """``size`` bytes for a message: ``"12.5 MiB"``."""
    if size < 1024:
        return f"{size} bytes"
    value = float(size)
    for unit in ("KiB", "MiB", "GiB"):
        value /= 1024
        if value < 1024 or unit == "GiB":
            return f"{value:.1f} {unit}"
    raise AssertionError("unreachable")


class DiskWatch:
    """One instance's workspace and its limit (shared by every handle of the instance in this
    process)."""

    def __init__(
        self,
        workspace: Path,
        limit: int,
        key: str,
        stop: Callable[[], None],
        monitor: DiskMonitor,
    ) -> None:
        self.workspace = workspace
        self.limit = limit
        self.key = key
        self.used: int | None = None
        """What the last measurement found (bytes), if any."""
        self.exceeded: int | None = None
        """What the measurement that ended the sandbox's processes found; reported by the
        commands running then, and cleared once a measurement finds the folder under."""
        self.running: int = 0
        self._stop = stop
        self._monitor = monitor
        self._measured_at = -float("inf")
        self._interval = MIN_INTERVAL
        self._last_used = -float("inf")
        self._measuring = threading.Lock()

    @property
    def over(self) -> bool:
        """Whether the last measurement found the workspace over its limit."""
        return self.used is not None and self.used > self.limit

    @property
    def stale(self) -> bool:
        """Whether the last measurement is too old to start a command on (another process, or
        what a command left running, may have written since)."""
        return time.monotonic() - self._measured_at > MAX_INTERVAL

    def message(self, used: int) -> str:
        return (
            f"/workspace of the local sandbox {self.key!r} holds {describe(used)}, over its disk "
            f"limit of {describe(self.limit)} (option disk)"
        )

    # -- measuring (any thread) -----------------------------------------------------------------

    def measure(self) -> int:
        """Measure the workspace now; end the sandbox's processes when it has just gone over."""
        with self._measuring:  # one at a time: the crossing is seen (and acted on) once
            was_over = self.over
            started = time.monotonic()
            used = usage(self.workspace, self.limit)
            self._measured_at = time.monotonic()
            took = self._measured_at - started
            self._interval = min(max(MIN_INTERVAL, DUTY * took), MAX_INTERVAL)
            self.used = used
            if used <= self.limit:
                self.exceeded = None
            elif not was_over:
                self.exceeded = used
                self._stop()
            return used

    def due(self, now: float) -> float | None:
        """When this workspace is next measured (``None``: not in use)."""
        if self.running == 0 and now - self._last_used > LINGER:
            return None
        return self._measured_at + self._interval

    # -- commands (the event loop) --------------------------------------------------------------

    def started(self) -> None:
        self.running += 1
        self._last_used = time.monotonic()
        self._monitor.watch(self)

    def ended(self) -> None:
        self.running -= 1
        self._last_used = time.monotonic()

    async def refresh(self) -> int:
        """Measure in a worker thread (a command's end does not wait for it)."""
        return await anyio.to_thread.run_sync(self.measure, abandon_on_cancel=True)

    async def ensure_room(self, incoming: int) -> None:
        """Refuse, before anything is written, files that would take the workspace over."""
        fresh = time.monotonic() - self._measured_at < self._interval
        used = self.used if fresh and self.used is not None else await self.refresh()
        if used + incoming > self.limit:
            raise DiskLimitError(
                f"writing {describe(incoming)} would take /workspace of the local sandbox "
                f"{self.key!r} over its disk limit of {describe(self.limit)} (option disk): it "
                f"holds {describe(used)} already; remove files, or raise the limit"
            )


class DiskMonitor:
    """One thread per provider that measures the workspaces in use, each when it is due; it
    ends when none is in use, and the next command starts it again."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watches: set[DiskWatch] = set()
        self._thread: threading.Thread | None = None
        self._closed = False

    def watch(self, watch: DiskWatch) -> None:
        with self._lock:
            self._watches.add(watch)
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(
                    target=self._run, name="pai-sandbox-local-disk", daemon=True
                )
                self._thread.start()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._watches.clear()

    def _run(self) -> None:
        while True:
            now = time.monotonic()
            with self._lock:
                schedule = {watch: watch.due(now) for watch in self._watches}
                for watch, due in schedule.items():
                    if due is None:
                        self._watches.discard(watch)
                if not self._watches:
                    self._thread = None
                    return
            for watch, due in schedule.items():
                if due is not None and due <= now:
                    try:
                        watch.measure()
                    except Exception:  # a stop that failed: measured (and tried) again
                        watch.used = None
            now = time.monotonic()
            with self._lock:
                upcoming = [due for due in (w.due(now) for w in self._watches) if due is not None]
            time.sleep(min(max(min(upcoming, default=now) - now, 0.01), MIN_INTERVAL))
