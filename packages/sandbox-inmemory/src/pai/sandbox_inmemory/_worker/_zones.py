"""Time zones for the worker's shell, computed in Python, never by the C library from a path.

just-bash's ``printf '%(fmt)T'`` put the shell's ``TZ`` into the worker's process environment and
called ``time.tzset()``: glibc then opened whatever file ``TZ`` named, below the audit hook (a
planted TZif file was read, a FIFO hung the worker). Here the worker's process environment is
fixed at start-up (``TZ=UTC0``, ``LC_ALL=C``; changing it is refused), and a shell's ``TZ`` is
applied by :func:`zone_for`, as glibc reads it but over the *sandbox's* files:

- unset, empty or ``:``: UTC;
- a name or an absolute path (``Asia/Tokyo``, ``/usr/share/zoneinfo/Asia/Tokyo``): the TZif file
  of that name under the sandbox's ``/usr/share/zoneinfo`` (or at that path), read through the
  sandbox's filesystem and parsed by :mod:`zoneinfo` from memory;
- otherwise a POSIX TZ string (``EST5EDT,M3.2.0,M11.1.0``, ``<+0530>-5:30``), parsed by
  :mod:`zoneinfo` as the footer of a TZif document built here;
- anything else: UTC, under the name's letters when it has three or more (as glibc does).
"""

from __future__ import annotations

import io
import re
import struct
import time
import zoneinfo
from collections.abc import Callable, Coroutine, MutableMapping
from contextvars import ContextVar
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any

__all__ = ["ZONEINFO_DIR", "current_fs", "localtime_in", "zone_for"]

ZONEINFO_DIR = "/usr/share/zoneinfo"
"""Where a zone name is looked up, in the sandbox's own filesystem."""

_DEFAULT_RULES = ",M3.2.0,M11.1.0"

_MAX_TZIF = 1 << 20
"""The largest zone file read (real ones are a few KiB)."""

current_fs: ContextVar[Any] = ContextVar("pai_sandbox_inmemory_fs", default=None)
"""The running command's filesystem (``ctx.fs``), set by the command wrapper around ``printf``."""


def _tzif(posix: str) -> bytes:
    """A TZif (version 2) document with no transitions whose footer is ``posix``."""
    header = b"TZif2" + bytes(15) + struct.pack(">6l", 0, 0, 0, 0, 1, 4)
    body = struct.pack(">lBB", 0, 0, 0) + b"UTC\0"
    return header + body + header + body + b"\n" + posix.encode("ascii") + b"\n"


def _sync(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Run a filesystem coroutine that never suspends (the worker's ``RemoteFs``) to its end."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise OSError("the filesystem operation would suspend")


def _sandbox_file(fs: Any, path: str) -> bytes | None:
    if fs is None:
        return None
    try:
        stat = _sync(fs.stat(path))
        if not stat.is_file or stat.size > _MAX_TZIF:
            return None
        data: bytes = _sync(fs.read_file_bytes(path))
    except OSError:
        return None
    return data if data.startswith(b"TZif") else None


class _Named(tzinfo):
    """UTC under another name (glibc's reading of a ``TZ`` it cannot parse)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def utcoffset(self, dt: datetime | None) -> timedelta:
        return timedelta(0)

    def dst(self, dt: datetime | None) -> timedelta:
        return timedelta(0)

    def fromutc(self, dt: datetime) -> datetime:
        return dt

    def tzname(self, dt: datetime | None) -> str:
        return self._name


def zone_for(tz: str | None, fs: Any = None) -> tzinfo:
    """The zone a shell's ``TZ`` names (see the module docstring); ``fs`` is the sandbox's."""
    if tz is None:
        return UTC
    name = tz[1:] if tz.startswith(":") else tz
    if not name:
        return UTC
    if len(name) <= 4096 and "\0" not in name:
        if name.startswith("/"):
            path = name
        elif ".." not in name.split("/"):
            path = f"{ZONEINFO_DIR}/{name}"
        else:
            path = ""
        data = _sandbox_file(fs, path) if path else None
        if data is not None:
            try:
                return zoneinfo.ZoneInfo.from_file(io.BytesIO(data))
            except (ValueError, OSError):
                pass
        if name.isascii() and not tz.startswith(":"):
            # A daylight-saving zone without rules gets glibc's default (US) rules.
            for posix in (name, name + _DEFAULT_RULES) if "," not in name else (name,):
                try:
                    return zoneinfo.ZoneInfo.from_file(io.BytesIO(_tzif(posix)))
                except (ValueError, OSError):
                    continue
    letters = re.match(r"[A-Za-z]{3,}", name)
    return _Named(letters.group(0)) if letters else UTC


def localtime_in(
    environ: MutableMapping[str, str], fs_of: Callable[[], Any] = current_fs.get
) -> Callable[..., time.struct_time]:
    """A ``time.localtime`` whose zone is ``environ["TZ"]`` read by :func:`zone_for` (with
    ``%Z`` and ``%z`` of ``time.strftime`` following it), instead of the C library's."""

    def localtime(seconds: float | None = None) -> time.struct_time:
        moment = datetime.fromtimestamp(
            time.time() if seconds is None else seconds,
            zone_for(environ.get("TZ"), fs_of()),
        )
        offset = moment.utcoffset()
        dst = moment.dst()
        fields = (*moment.timetuple()[:8], 1 if dst else 0)
        seconds_east = int(offset.total_seconds()) if offset is not None else 0
        return time.struct_time((*fields, moment.tzname() or "UTC", seconds_east))

    return localtime
