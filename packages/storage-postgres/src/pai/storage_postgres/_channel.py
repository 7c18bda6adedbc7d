""":class:`PostgresRunChannel`: the :class:`~pai.core.ext.RunChannel` protocol on PostgreSQL, so that
every process serving one database reads, resumes and cancels the runs of the others.

Tables (migration 2, see :mod:`pai.storage_postgres._schema`): ``runs`` (one row per run: who
it belongs to, ``frame_count``, when its owner last said it was alive, when a reader last read
it, when it finished, a cancel request) and ``run_frames`` (one row per frame at its 1-based
``position``). Strings are ``bytea`` (see :mod:`pai.storage_postgres._codec`).

- **Begin** holds a transaction-level advisory lock on the run's limit key while it counts the
  key's live runs and inserts, so two processes cannot both pass the limit; a partial unique
  index allows one live run per thread, so two begins on one thread let exactly one win.
- **Wake-ups** use ``NOTIFY`` (sent with the commit of an append, an end or a cancel request)
  on one channel per schema, payload a hash of the run id; a waiting reader or owner listens
  before it reads (:meth:`~pai.storage_postgres._pool.Connector.notified`), so none is
  missed, and reads again after its ``wait`` whatever happens.
- **Owners that die.** An owner calls :meth:`~PostgresRunChannel.wait_cancel` every few
  seconds, which stamps ``alive_at``; a run whose owner has not done so for ``stale_after``
  seconds counts as finished (its thread is free, its readers stop), and the next begin marks
  it so.
- **Retention.** Finished runs older than ``retain_finished`` are deleted by a begin (at most
  one begin in 10 s of a channel object does it).
- **Durability.** The channel's writes commit asynchronously (``synchronous_commit`` off for
  them alone): a run's events are worth less than a flush to disk per event, and a crash of the
  database server, which ends every run anyway, can lose only the last moments of them.
- **Runs begun here** are also kept in this object's memory while they are live: their readers
  in this process read (and wait) there, without a query, and an append wakes them before its
  frames are written; the frames reach the database in the order appended, those that came
  while a write was under way in one transaction, and all of them before the run's end does.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import anyio
import sniffio

from pai.core.ext import RunFrames, RunInfo, RunRefused
from pai.storage_postgres._codec import decode_text, encode_text
from pai.storage_postgres._options import quote_identifier

if TYPE_CHECKING:
    from pai.storage_postgres._pool import Conn, Connector

__all__ = ["PostgresRunChannel"]

_log = logging.getLogger("pai.storage_postgres")

_LOCK_CLASS: Final = 0x70616901
"""The first key of the begin lock (``pai\\1``); the second is a hash of the limit key."""

_FORGET_EVERY: Final = 10.0
"""Seconds between two deletions of runs past their retention (made by a begin)."""

_COLUMNS: Final = "run_id, thread_id, scope_key, agent, protocol, limit_key"
_ENDED: Final = (
    "(finished_at IS NOT NULL OR alive_at < clock_timestamp() - make_interval(secs => %s))"
)

_STATEMENTS: Final = {
    "lock": "SELECT pg_advisory_xact_lock(%s::int4, %s::int4)",
    "end_stale": "UPDATE {s}.runs SET finished_at = clock_timestamp()"
    " WHERE finished_at IS NULL AND (thread_id = %s OR limit_key = %s)"
    " AND alive_at < clock_timestamp() - make_interval(secs => %s) RETURNING 1",
    "forget": "DELETE FROM {s}.runs"
    " WHERE finished_at < clock_timestamp() - make_interval(secs => %s)",
    "busy": f"SELECT {_COLUMNS} FROM {{s}}.runs WHERE thread_id = %s AND finished_at IS NULL",
    "count": "SELECT count(*) FROM {s}.runs WHERE limit_key = %s AND finished_at IS NULL",
    # Inserted only while the thread has no live run and the key is under its limit: the usual
    # begin is this one statement (and the lock, sent with it).
    "insert": f"INSERT INTO {{s}}.runs ({_COLUMNS}) SELECT %s, %s, %s, %s, %s, %s"
    " WHERE set_config('synchronous_commit', 'off', true) IS NOT NULL AND NOT EXISTS (SELECT 1 FROM {s}.runs WHERE thread_id = %s AND finished_at IS NULL)"
    " AND (SELECT count(*) FROM {s}.runs WHERE limit_key = %s AND finished_at IS NULL) < %s"
    " ON CONFLICT DO NOTHING RETURNING 1",
    "exists": "SELECT EXISTS (SELECT 1 FROM {s}.runs WHERE run_id = %s)",
    "append": """WITH run AS (
            UPDATE {s}.runs SET frame_count = frame_count + %s
            WHERE run_id = %s AND finished_at IS NULL RETURNING frame_count - %s AS start
        )
        INSERT INTO {s}.run_frames (run_id, position, body)
        SELECT %s, run.start + f.ord, f.body
        FROM run, unnest(%s::bytea[]) WITH ORDINALITY AS f (body, ord)
        RETURNING 1""",
    # The owner's append of frames at known positions: one statement in a transaction of its
    # own, which a retry after a broken connection repeats harmlessly (a frame already at its
    # position stays), its commit not waiting for a flush to disk.
    "append_at": """WITH no_flush AS (SELECT set_config('synchronous_commit', 'off', true)),
        run AS (
            UPDATE {s}.runs SET frame_count = greatest(frame_count, %s)
            WHERE run_id = %s AND finished_at IS NULL RETURNING 1
        ),
        added AS (
            INSERT INTO {s}.run_frames (run_id, position, body)
            SELECT %s, %s + f.ord, f.body
            FROM run, unnest(%s::bytea[]) WITH ORDINALITY AS f (body, ord)
            ON CONFLICT DO NOTHING RETURNING 1
        )
        SELECT pg_notify(%s, %s), (SELECT count(*) FROM no_flush) FROM run""",
    "end": "WITH no_flush AS (SELECT set_config('synchronous_commit', 'off', true)),"
    " ended AS (UPDATE {s}.runs SET finished_at = clock_timestamp()"
    " WHERE run_id = %s AND finished_at IS NULL RETURNING 1)"
    " SELECT pg_notify(%s, %s), (SELECT count(*) FROM no_flush) FROM ended",
    "notify": "SELECT pg_notify(%s, %s)",
    "get": f"SELECT {_COLUMNS}, {_ENDED} FROM {{s}}.runs WHERE run_id = %s",
    "live": f"SELECT {_COLUMNS} FROM {{s}}.runs WHERE thread_id = %s AND finished_at IS NULL"
    " AND alive_at >= clock_timestamp() - make_interval(secs => %s)",
    "mark_read": f"UPDATE {{s}}.runs SET read_at = clock_timestamp() WHERE run_id = %s"
    f" RETURNING {_ENDED}",
    "frames": "SELECT body FROM {s}.run_frames WHERE run_id = %s AND position > %s"
    " ORDER BY position",
    "cancel": "UPDATE {s}.runs SET cancel_reason = coalesce(cancel_reason, %s)"
    " WHERE run_id = %s AND finished_at IS NULL"
    " AND alive_at >= clock_timestamp() - make_interval(secs => %s) RETURNING 1",
    "alive": "UPDATE {s}.runs SET alive_at = clock_timestamp() WHERE run_id = %s"
    " AND finished_at IS NULL RETURNING cancel_reason",
    "cancel_reason": "SELECT cancel_reason FROM {s}.runs WHERE run_id = %s",
    "attended": "SELECT read_at >= clock_timestamp() - make_interval(secs => %s)"
    " FROM {s}.runs WHERE run_id = %s",
}


def _key(run_id: str) -> str:
    """A run's notification payload: short, ASCII, whatever the run id holds."""
    return hashlib.sha256(encode_text(run_id)).hexdigest()[:24]


def _lock_key(limit_key: str) -> int:
    return zlib.crc32(encode_text(limit_key)) - 2**31  # a signed int4


@dataclass(eq=False, slots=True)
class _Local:
    """A live run begun through this channel object: its frames, and how many are written."""

    frames: list[str] = field(default_factory=list[str])
    written: int = 0
    writer: asyncio.Task[None] | None = None
    """The task writing behind the owner (asyncio), kept referenced while it runs."""
    writing: anyio.Event | None = None
    """Set when the write under way ends; ``None`` while none is."""
    changed: anyio.Event = field(default_factory=anyio.Event)
    read_at: float = 0.0

    def wake(self) -> None:
        changed, self.changed = self.changed, anyio.Event()
        changed.set()


class PostgresRunChannel:
    """Runs carried between the processes sharing a PostgreSQL database (see the module
    documentation). Made by :meth:`PostgresStorage.run_channel
    <pai.storage_postgres.PostgresStorage.run_channel>`; it shares that storage's connections
    and closes with it."""

    def __init__(
        self, connector: Connector, *, retain_finished: float = 300.0, stale_after: float = 30.0
    ) -> None:
        self._connector = connector
        self._retain = float(retain_finished)
        self._stale = float(stale_after)
        quoted = quote_identifier(connector.schema)
        self._sql = {
            name: template.replace("{s}", quoted).encode() for name, template in _STATEMENTS.items()
        }
        digest = hashlib.sha256(connector.schema.encode()).hexdigest()[:16]
        self._channel_text = f"pai_runs_{digest}"
        self._channel = quote_identifier(self._channel_text)
        self._local: dict[str, _Local] = {}
        self._forgot_at = -_FORGET_EVERY

    def __repr__(self) -> str:
        return f"PostgresRunChannel({self._connector.display!r}, schema={self._connector.schema!r})"

    async def _one(self, conn: Conn, name: str, params: Sequence[Any]) -> tuple[Any, ...] | None:
        cursor = await conn.execute(self._sql[name], params)
        return await cursor.fetchone()

    async def _all(self, conn: Conn, name: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        cursor = await conn.execute(self._sql[name], params, binary=True)
        return await cursor.fetchall()

    def _info(self, row: Sequence[Any], finished: bool = False) -> RunInfo:
        run_id, thread_id, scope_key, agent, protocol, limit_key = (
            decode_text(value) for value in row[:6]
        )
        return RunInfo(run_id, thread_id, scope_key, agent, protocol, limit_key, finished)

    async def begin(self, info: RunInfo, *, max_live_per_key: int) -> RunRefused | None:
        values = [
            encode_text(value)
            for value in (
                info.run_id,
                info.thread_id,
                info.scope_key,
                info.agent,
                info.protocol,
                info.limit_key,
            )
        ]

        async def begin(conn: Conn) -> RunRefused | None:
            # Not fetched, so sent with the next statement that is: the lock is held before
            # the insert's statement begins (and takes its snapshot).
            await conn.execute(self._sql["lock"], (_LOCK_CLASS, _lock_key(info.limit_key)))
            now = time.monotonic()
            if now - self._forgot_at >= _FORGET_EVERY or self._retain <= 0:
                self._forgot_at = now
                await conn.execute(self._sql["forget"], (self._retain,))
            insert = (*values, values[1], values[5], max_live_per_key)
            if await self._one(conn, "insert", insert) is not None:
                return None
            # Refused. Runs of owners that died count no more: end them, and try once again.
            ended = await self._one(conn, "end_stale", (values[1], values[5], self._stale))
            if ended is not None and await self._one(conn, "insert", insert) is not None:
                return None
            # Say why.
            busy = await self._one(conn, "busy", (values[1],))
            if busy is not None:
                return RunRefused("busy", busy=self._info(busy))
            count = await self._one(conn, "count", (values[5],))
            live = int(count[0]) if count else 0
            if live >= max_live_per_key:
                return RunRefused("limit", live_for_key=live)
            taken = await self._one(conn, "exists", (values[0],))
            if taken and taken[0]:
                return RunRefused("taken")
            # A run of another process on the thread, which ended since: busy all the same.
            return RunRefused("busy")

        refused = await self._connector.write(begin, doing=f"beginning run {info.run_id!r}")
        if refused is None:
            self._local[info.run_id] = _Local()
        return refused

    async def append(self, run_id: str, frames: Sequence[str]) -> None:
        if not frames:
            return
        local = self._local.get(run_id)
        if local is None:
            await self._write(run_id, frames)
            return
        local.frames.extend(frames)
        local.wake()
        if local.writing is not None:
            return  # the write under way writes these too, once its own are in
        if sniffio.current_async_library() == "asyncio":
            # Written behind the owner, on its loop: it goes on streaming meanwhile, and frames
            # appended during a write go together in the next. end() waits for the task.
            local.writer = asyncio.get_running_loop().create_task(
                self._write_pending(run_id, local, background=True)
            )
        else:
            await self._write_pending(run_id, local)

    async def _write_pending(self, run_id: str, local: _Local, *, background: bool = False) -> None:
        """Write the run's frames not written yet (the caller checked no write is under way)."""
        writing = local.writing = anyio.Event()
        try:
            while local.written < len(local.frames):
                batch = local.frames[local.written :]
                await self._write_at(run_id, local.written, batch)
                local.written += len(batch)
        except Exception as error:
            if not background:
                raise
            # Left unwritten: the run's end writes them again, and says so if it cannot.
            _log.warning("writing the events of run %r failed (%s)", run_id, type(error).__name__)
        finally:
            local.writing = None
            writing.set()

    async def _write_at(self, run_id: str, start: int, frames: Sequence[str]) -> None:
        """Write ``frames`` at positions ``start + 1`` on (the owner's append)."""
        key = encode_text(run_id)
        bodies = [encode_text(frame) for frame in frames]
        params = (start + len(bodies), key, key, start, bodies, self._channel_text, _key(run_id))

        async def append(conn: Conn) -> None:
            await conn.execute(self._sql["append_at"], params)

        await self._connector.read(append, doing=f"appending to run {run_id!r}")

    async def _write(self, run_id: str, frames: Sequence[str]) -> None:
        """Write ``frames`` after the run's last (an append by another than the owner)."""
        key = encode_text(run_id)
        bodies = [encode_text(frame) for frame in frames]
        count = len(bodies)

        async def append(conn: Conn) -> None:
            await conn.execute(self._sql["append"], (count, key, count, key, bodies))
            await conn.execute(self._sql["notify"], (self._channel_text, _key(run_id)))

        await self._connector.write(append, doing=f"appending to run {run_id!r}")

    async def end(self, run_id: str) -> None:
        local = self._local.get(run_id)
        if local is not None:
            while local.writing is not None:  # a write under way: let it finish first
                await local.writing.wait()
            if local.written < len(local.frames):
                await self._write_pending(run_id, local)
        key = encode_text(run_id)

        async def end(conn: Conn) -> None:
            await conn.execute(self._sql["end"], (key, self._channel_text, _key(run_id)))

        # One statement, and ending twice is harmless: it may be repeated after a broken
        # connection.
        await self._connector.read(end, doing=f"ending run {run_id!r}")
        if local is not None:
            # Every frame and the end are in the database: readers here read it there now.
            del self._local[run_id]
            local.wake()

    async def get(self, run_id: str) -> RunInfo | None:
        async def get(conn: Conn) -> tuple[Any, ...] | None:
            return await self._one(conn, "get", (self._stale, encode_text(run_id)))

        row = await self._connector.read(get, doing=f"reading run {run_id!r}")
        return None if row is None else self._info(row, bool(row[6]))

    async def live(self, thread_id: str) -> RunInfo | None:
        async def live(conn: Conn) -> tuple[Any, ...] | None:
            return await self._one(conn, "live", (encode_text(thread_id), self._stale))

        row = await self._connector.read(live, doing=f"reading thread {thread_id!r}'s run")
        return None if row is None else self._info(row)

    async def _read_once(self, run_id: str, after: int) -> RunFrames | None:
        key = encode_text(run_id)

        async def read(conn: Conn) -> RunFrames | None:
            # Whether it ended first, then the frames: every frame of an ended run is read.
            ended = await self._one(conn, "mark_read", (key, self._stale))
            if ended is None:
                return None
            rows = await self._all(conn, "frames", (key, after))
            return RunFrames(tuple(decode_text(row[0]) for row in rows), bool(ended[0]))

        return await self._connector.read(read, doing=f"reading run {run_id!r}")

    async def read(self, run_id: str, *, after: int, wait: float) -> RunFrames | None:
        after = max(0, after)
        local = self._local.get(run_id)
        if local is not None:
            local.read_at = time.monotonic()
            if after >= len(local.frames) and wait > 0:
                changed = local.changed
                with anyio.move_on_after(wait):
                    await changed.wait()
            if run_id in self._local:
                return RunFrames(tuple(local.frames[after:]), False)
            # It ended meanwhile: the database has every frame, and the end.

        async def read() -> RunFrames | None:
            got = await self._read_once(run_id, after)
            if got is None or got.frames or got.finished or wait <= 0:
                return got
            async with self._connector.notified(self._channel, _key(run_id)) as woken:
                # Listening now: read again, so a frame appended meanwhile is not missed.
                got = await self._read_once(run_id, after)
                if got is None or got.frames or got.finished:
                    return got
                await _wait(woken, wait)
            return await self._read_once(run_id, after)

        return await self._connector.call(read)

    async def cancel(self, run_id: str, reason: str) -> bool:
        key = encode_text(run_id)

        async def cancel(conn: Conn) -> bool:
            if await self._one(conn, "cancel", (encode_text(reason), key, self._stale)) is None:
                return False
            await conn.execute(self._sql["notify"], (self._channel_text, "c" + _key(run_id)))
            return True

        return await self._connector.write(cancel, doing=f"cancelling run {run_id!r}")

    async def _alive(self, run_id: str) -> tuple[bool, str | None]:
        key = encode_text(run_id)

        async def alive(conn: Conn) -> tuple[Any, ...] | None:
            return await self._one(conn, "alive", (key,))

        row = await self._connector.read(alive, doing=f"renewing run {run_id!r}")
        if row is None:
            return False, None
        return True, None if row[0] is None else decode_text(row[0])

    async def wait_cancel(self, run_id: str, *, wait: float) -> str | None:
        async def wait_cancel() -> str | None:
            async with self._connector.notified(self._channel, "c" + _key(run_id)) as woken:
                live, reason = await self._alive(run_id)
                if not live or reason is not None or wait <= 0:
                    return reason
                await _wait(woken, wait)

            async def reread(conn: Conn) -> tuple[Any, ...] | None:
                return await self._one(conn, "cancel_reason", (encode_text(run_id),))

            row = await self._connector.read(reread, doing=f"reading run {run_id!r}")
            return None if row is None or row[0] is None else decode_text(row[0])

        return await self._connector.call(wait_cancel)

    async def attended(self, run_id: str, *, within: float) -> bool:
        local = self._local.get(run_id)
        if local is not None and time.monotonic() - local.read_at <= within:
            return True

        async def attended(conn: Conn) -> tuple[Any, ...] | None:
            return await self._one(conn, "attended", (float(within), encode_text(run_id)))

        row = await self._connector.read(attended, doing=f"reading run {run_id!r}")
        return bool(row and row[0])

    async def aclose(self) -> None:
        """Stop writing behind runs still live here (their owners are gone with this object);
        the channel uses its storage's connections, which close with it."""
        for local in self._local.values():
            if local.writer is not None:
                local.writer.cancel()
        self._local.clear()


async def _wait(event: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), seconds)
