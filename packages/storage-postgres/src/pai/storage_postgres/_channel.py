""":class:`PostgresRunChannel`: the :class:`~pai.core.RunChannel` protocol on PostgreSQL, so that
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
- **Retention.** Finished runs older than ``retain_finished`` are deleted by the next begin.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import zlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from pai.core import RunFrames, RunInfo, RunRefused
from pai.storage_postgres._codec import decode_text, encode_text
from pai.storage_postgres._options import quote_identifier

if TYPE_CHECKING:
    from pai.storage_postgres._pool import Conn, Connector

__all__ = ["PostgresRunChannel"]

_LOCK_CLASS: Final = 0x70616901
"""The first key of the begin lock (``pai\\1``); the second is a hash of the limit key."""

_COLUMNS: Final = "run_id, thread_id, scope_key, agent, protocol, limit_key"
_ENDED: Final = (
    "(finished_at IS NOT NULL OR alive_at < clock_timestamp() - make_interval(secs => %s))"
)

_STATEMENTS: Final = {
    "lock": "SELECT pg_advisory_xact_lock(%s::int4, %s::int4)",
    "end_stale": "UPDATE {s}.runs SET finished_at = clock_timestamp()"
    " WHERE finished_at IS NULL AND alive_at < clock_timestamp() - make_interval(secs => %s)",
    "forget": "DELETE FROM {s}.runs"
    " WHERE finished_at < clock_timestamp() - make_interval(secs => %s)",
    "busy": f"SELECT {_COLUMNS} FROM {{s}}.runs WHERE thread_id = %s AND finished_at IS NULL",
    "count": "SELECT count(*) FROM {s}.runs WHERE limit_key = %s AND finished_at IS NULL",
    "insert": f"INSERT INTO {{s}}.runs ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s)"
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
    "end": "UPDATE {s}.runs SET finished_at = clock_timestamp()"
    " WHERE run_id = %s AND finished_at IS NULL RETURNING 1",
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
            await self._one(conn, "lock", (_LOCK_CLASS, _lock_key(info.limit_key)))
            await conn.execute(self._sql["end_stale"], (self._stale,))
            await conn.execute(self._sql["forget"], (self._retain,))
            busy = await self._one(conn, "busy", (values[1],))
            if busy is not None:
                return RunRefused("busy", busy=self._info(busy))
            count = await self._one(conn, "count", (values[5],))
            live = int(count[0]) if count else 0
            if live >= max_live_per_key:
                return RunRefused("limit", live_for_key=live)
            if await self._one(conn, "insert", values) is not None:
                return None
            taken = await self._one(conn, "exists", (values[0],))
            if taken and taken[0]:
                return RunRefused("taken")
            # Another process began a run on the thread meanwhile: it committed first.
            busy = await self._one(conn, "busy", (values[1],))
            return RunRefused("busy", busy=None if busy is None else self._info(busy))

        return await self._connector.write(begin, doing=f"beginning run {info.run_id!r}")

    async def append(self, run_id: str, frames: Sequence[str]) -> None:
        if not frames:
            return
        key = encode_text(run_id)
        bodies = [encode_text(frame) for frame in frames]
        count = len(bodies)

        async def append(conn: Conn) -> None:
            await conn.execute(self._sql["append"], (count, key, count, key, bodies))
            await conn.execute(self._sql["notify"], (self._channel_text, _key(run_id)))

        await self._connector.write(append, doing=f"appending to run {run_id!r}")

    async def end(self, run_id: str) -> None:
        key = encode_text(run_id)

        async def end(conn: Conn) -> None:
            if await self._one(conn, "end", (key,)) is not None:
                await conn.execute(self._sql["notify"], (self._channel_text, _key(run_id)))

        await self._connector.write(end, doing=f"ending run {run_id!r}")

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
        async def attended(conn: Conn) -> tuple[Any, ...] | None:
            return await self._one(conn, "attended", (float(within), encode_text(run_id)))

        row = await self._connector.read(attended, doing=f"reading run {run_id!r}")
        return bool(row and row[0])

    async def aclose(self) -> None:
        """Nothing to release: the channel uses its storage's connections."""


async def _wait(event: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), seconds)
