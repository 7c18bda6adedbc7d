"""The one module that talks to PostgreSQL: connection pools, event loops, retries, and writes
whose outcome is known even when the connection breaks.

Event loops. psycopg's async API runs on asyncio only. A call from an asyncio task runs on the
caller's own loop, on a connection of that loop's :class:`_LoopPool`: connections opened on
demand (up to ``pool_max_size``) and handed back to a free list, with no task of its own, so a
loop that ends (``anyio.run`` or ``asyncio.run`` returning without ``aclose``) leaves nothing
running behind and never waits for the pool. (psycopg_pool's ``AsyncConnectionPool`` is not
used there: its background tasks catch ``CancelledError``, which keeps such a loop from ever
shutting down.) A connection is only ever used on the loop that opened it; one whose query was
cut short (the caller cancelled) is closed, not handed back. A call from trio runs on a helper
asyncio loop in a thread of the storage's own, which holds a psycopg_pool pool until
:meth:`Connector.aclose`; the trio task waits for it without blocking its loop and without
holding a worker thread.

Opening. The first call on a loop connects once directly (so a bad password or a missing
database is one clear error, not a pool timeout), checks the schema and applies pending
migrations (once per storage), then opens the pool.

Retries. A call whose connection fails (the server restarted, the pool held a connection the
server had ended) is tried again on another connection until ``connect_timeout`` has passed:
reads always, writes only when they are known not to have committed. A write runs as
``BEGIN``; ``SELECT pg_current_xact_id()`` with its first statement (one round trip, pipelined),
its other statements, then ``COMMIT``. A failure before ``COMMIT`` was sent cannot have
committed anything, so the write is run again from the start. A failure while ``COMMIT`` was in
flight is settled by asking the server (on a new connection) for the transaction's status with
``pg_xact_status``: committed (the write's result stands), aborted (run it again), or, when the
server does not answer within ``connect_timeout``, a :class:`ConnectionLostError`. So a write is
never half applied and never applied twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar

import sniffio
from psycopg import AsyncConnection, AsyncCursor
from psycopg import Error as PsycopgError
from psycopg.pq import TransactionStatus
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from pai.core import PaiError, StorageError, StorageSchemaError
from pai.storage_postgres._errors import (
    ConnectionLostError,
    connection_failure,
    is_connection_error,
    query_failure,
)
from pai.storage_postgres._schema import SchemaStatus, migrate, schema_status

if TYPE_CHECKING:
    from collections.abc import Coroutine

    from pai.storage_postgres._options import ConnectionSettings

__all__ = ["Abort", "Connector"]

_T = TypeVar("_T")
_ON_HELPER: ContextVar[bool] = ContextVar("pai_storage_postgres_on_helper", default=False)
_log = logging.getLogger("pai.storage_postgres")

Conn = AsyncConnection[tuple[Any, ...]]

_BACKOFF_FIRST: Final = 0.02
_BACKOFF_MAX: Final = 0.5


_RETRY_STATES: Final = frozenset({"40001", "40P01"})
"""serialization_failure, deadlock_detected: the server rolled the transaction back and asks
for it to be run again."""


def _rolled_back_for_a_retry(error: PsycopgError) -> bool:
    return getattr(error, "sqlstate", None) in _RETRY_STATES


class Abort(Exception):
    """Raised by a write's body to roll the transaction back and raise ``error`` instead."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


class _Pool(Protocol):
    """What the calls need of a pool: psycopg_pool's ``AsyncConnectionPool`` (on the helper
    loop) and :class:`_LoopPool` (on a caller's loop) both have it."""

    def connection(
        self, timeout: float | None = None
    ) -> contextlib.AbstractAsyncContextManager[Conn]: ...

    async def getconn(self, timeout: float | None = None) -> Conn: ...

    async def putconn(self, conn: Conn) -> None: ...

    async def check(self) -> None: ...

    async def close(self) -> None: ...


class _LoopPool:
    """The connections of one caller's asyncio loop: opened on demand up to ``max_size``, kept
    on a free list when handed back, and no task of its own (see the module documentation).

    A connection handed back in a transaction or with a query in flight (its caller was
    cancelled mid-statement; psycopg has then usually closed it already) is closed, not handed
    back: nothing half done is ever handed out again.
    """

    def __init__(self, connect: Callable[[], Awaitable[Conn]], max_size: int) -> None:
        self._connect = connect
        self._max_size = max_size
        self._free: list[Conn] = []
        self._size = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._closed = False

    @contextlib.asynccontextmanager
    async def connection(self, timeout: float | None = None) -> AsyncGenerator[Conn]:
        conn = await self.getconn(timeout)
        try:
            yield conn
        finally:
            self._hand_back(conn)

    async def getconn(self, timeout: float | None = None) -> Conn:
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            if self._closed:
                raise PoolTimeout("the pool is closed")
            while self._free:
                conn = self._free.pop()
                if _reusable(conn):
                    return conn
                self._discard(conn)
            if self._size < self._max_size:
                self._size += 1
                try:
                    return await self._connect()
                except BaseException:
                    self._size -= 1
                    self._wake_one()
                    raise
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append(waiter)
            try:
                async with asyncio.timeout_at(deadline):
                    await waiter
            except TimeoutError:
                raise PoolTimeout(f"no connection free within {timeout} s") from None
            finally:
                if not waiter.done():
                    waiter.cancel()
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)

    async def putconn(self, conn: Conn) -> None:
        self._hand_back(conn)

    def _hand_back(self, conn: Conn) -> None:
        if self._closed or not _reusable(conn):
            self._discard(conn)
        else:
            self._free.append(conn)
        self._wake_one()

    def _discard(self, conn: Conn) -> None:
        self._size -= 1
        _finish(conn)

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def check(self) -> None:
        """Drop the idle connections: after a connection failure they may all be broken (the
        server restarted); the next calls open new ones."""
        self.drop_idle()

    def drop_idle(self) -> None:
        free, self._free = self._free, []
        for conn in free:
            self._discard(conn)

    async def close(self) -> None:
        self._closed = True
        self.drop_idle()
        self._wake_one()


def _reusable(conn: Conn) -> bool:
    return not conn.closed and conn.info.transaction_status == TransactionStatus.IDLE


def _finish(conn: Conn) -> None:
    """Close ``conn`` now, without awaiting: libpq closes the socket, and the server ends the
    session (rolling back whatever it had begun)."""
    with contextlib.suppress(Exception):
        conn.pgconn.finish()


@dataclass(slots=True)
class _LoopState:
    """One event loop's pool, made by the first call on that loop."""

    loop: asyncio.AbstractEventLoop
    pool: _Pool | None = None
    opening: asyncio.Lock = field(default_factory=asyncio.Lock)
    listener: _Listener | None = None


class _Listener:
    """One loop's ``LISTEN`` connection, held while someone waits for a notification.

    Waiters register a key (a notification's payload) and an event; the listener sets the
    events of each payload it receives. It connects when the first waiter comes and closes when
    the last one leaves, so a loop with no waiter has no task and no connection of the
    storage's. When the connection fails, every waiter is woken (each reads again, which is what
    a missed notification would have made it do) and the next waiter connects again."""

    def __init__(self, connector: Connector, channel: str) -> None:
        self._connector = connector
        self._channel = channel
        self._waiters: dict[str, set[asyncio.Event]] = {}
        self._count = 0
        self._task: asyncio.Task[None] | None = None
        self._ready: asyncio.Event = asyncio.Event()

    @contextlib.asynccontextmanager
    async def waiting(self, key: str) -> AsyncGenerator[asyncio.Event]:
        event = asyncio.Event()
        self._waiters.setdefault(key, set()).add(event)
        self._count += 1
        try:
            if self._task is None or self._task.done():
                self._ready = asyncio.Event()
                self._task = asyncio.get_running_loop().create_task(self._listen())
            ready = self._ready
            # Until the LISTEN holds, a notification could be missed: wait for it (bounded;
            # the waiter reads again after its own timeout in any case).
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    ready.wait(), self._connector.settings.options.connect_timeout
                )
            yield event
        finally:
            waiters = self._waiters.get(key)
            if waiters is not None:
                waiters.discard(event)
                if not waiters:
                    del self._waiters[key]
            self._count -= 1
            if self._count == 0 and self._task is not None:
                self._task.cancel()
                self._task = None

    async def _listen(self) -> None:
        conn: Conn | None = None
        try:
            conn = await self._connector._connect()  # pyright: ignore[reportPrivateUsage]
            await conn.execute(f"LISTEN {self._channel}".encode())
            self._ready.set()
            async for notification in conn.notifies():
                for event in self._waiters.get(notification.payload, ()):
                    event.set()
        except asyncio.CancelledError:
            raise
        except Exception as error:
            _log.warning(
                "pai-storage-postgres stopped listening for run notifications at %s (%s); "
                "waiters read again",
                self._connector.display,
                type(error).__name__,
            )
        finally:
            self._ready.set()
            for waiters in self._waiters.values():
                for event in waiters:
                    event.set()
            if conn is not None:
                _finish(conn)


class _Helper:
    """An asyncio loop in a daemon thread, where the storage's calls run (see the module
    documentation)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name="pai-storage-postgres", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
        if not self.thread.is_alive():
            self.loop.close()


class Connector:
    """Runs operations on PostgreSQL for one storage (see the module documentation)."""

    def __init__(self, settings: ConnectionSettings) -> None:
        self.settings: ConnectionSettings = settings
        self.display: str = settings.display
        self.schema: str = settings.options.schema
        self._timeout = settings.options.connect_timeout
        self._states: dict[asyncio.AbstractEventLoop, _LoopState] = {}
        self._states_lock = threading.Lock()
        self._helper: _Helper | None = None
        self._schema_ready = False
        self._closed = False

    # -- where a call runs ---------------------------------------------------------------------

    async def _bridge(self, make: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
        """Run ``make()`` on the right asyncio loop for the caller and return its result."""
        if self._closed:
            raise self._closed_error()
        if _ON_HELPER.get() or sniffio.current_async_library() == "asyncio":
            return await make()
        return await self._on_helper(make)

    def _helper_loop(self) -> asyncio.AbstractEventLoop:
        with self._states_lock:
            if self._helper is None:
                self._helper = _Helper()
            return self._helper.loop

    async def _on_helper(self, make: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
        import trio

        async def on_helper() -> _T:
            # The helper's task runs in a copy of the trio task's context, where sniffio says
            # "trio": mark it, so calls made inside run here rather than bridging again.
            _ON_HELPER.set(True)
            return await make()

        future = asyncio.run_coroutine_threadsafe(on_helper(), self._helper_loop())
        token = trio.lowlevel.current_trio_token()
        done = trio.Event()

        def wake(_: object) -> None:
            # The trio run may have ended meanwhile: then nobody is left to wake.
            with contextlib.suppress(trio.RunFinishedError):
                token.run_sync_soon(done.set)

        future.add_done_callback(wake)
        try:
            await done.wait()
        except BaseException:
            future.cancel()
            raise
        return future.result()

    def _closed_error(self) -> StorageError:
        return StorageError(
            f"PostgresStorage({self.display!r}) is closed; create a new one to keep working "
            "(the data stays in the database)"
        )

    async def _state(self) -> _LoopState:
        """This loop's state, its pool open (connecting and migrating on first use)."""
        loop = asyncio.get_running_loop()
        with self._states_lock:
            state = self._states.get(loop)
            if state is None:
                # Pools of loops that are gone cannot be closed any more; drop them.
                for gone in [other for other in self._states if other.is_closed()]:
                    pool = self._states.pop(gone).pool
                    if isinstance(pool, _LoopPool):
                        pool.drop_idle()  # nobody can use them: their loop has ended
                state = self._states[loop] = _LoopState(loop)
        if state.pool is None:
            async with state.opening:
                if state.pool is None:
                    state.pool = await self._open_pool(loop)
        if self._closed:
            raise self._closed_error()
        return state

    async def _connect(self) -> Conn:
        """One connection made directly (not from a pool), its failure a clear error."""
        try:
            return await AsyncConnection.connect(**self._kwargs())
        except PsycopgError as error:
            raise connection_failure(error, self.display, timeout=self._timeout) from None

    async def _connect_for_pool(self) -> Conn:
        # Raw psycopg errors, as psycopg_pool's connections give them: the callers retry on a
        # connection failure and word every other one.
        return await AsyncConnection.connect(**self._kwargs())

    def _kwargs(self) -> dict[str, Any]:
        return {**self.settings.conninfo, "autocommit": True}

    async def _open_pool(self, loop: asyncio.AbstractEventLoop) -> _Pool:
        deadline = time.monotonic() + self._timeout
        while True:
            try:
                conn = await self._connect()
                break
            except StorageError as error:
                # A server that is starting (or restarting) answers "not yet": wait for it.
                cause = str(error)
                if time.monotonic() >= deadline or not (
                    "starting up" in cause or "shutting down" in cause or "refused" in cause
                ):
                    raise
                await asyncio.sleep(_BACKOFF_MAX)
        try:
            if not self._schema_ready:
                await self._ensure_schema(conn)
        finally:
            await conn.close()
        options = self.settings.options
        helper = self._helper
        if helper is None or loop is not helper.loop:
            return _LoopPool(self._connect_for_pool, options.pool_max_size)
        pool: AsyncConnectionPool[Conn] = AsyncConnectionPool(
            "",
            kwargs=self._kwargs(),
            min_size=options.pool_min_size,
            max_size=options.pool_max_size,
            open=False,
            timeout=self._timeout,
            name="pai-storage-postgres",
            reconnect_timeout=max(60.0, self._timeout * 6),
        )
        await pool.open(wait=False)
        return pool

    async def _ensure_schema(self, conn: Conn) -> None:
        options = self.settings.options
        try:
            if options.migrate:
                status = await migrate(conn, self.schema, self.display)
                if status.just_applied:
                    _log.info(
                        "pai-storage-postgres applied %s to schema %r at %s",
                        ", ".join(status.just_applied),
                        self.schema,
                        self.display,
                    )
            else:
                status = await schema_status(conn, self.schema, self.display)
        except PaiError:
            raise
        except PsycopgError as error:
            raise query_failure(
                error, self.display, schema=self.schema, doing="checking the schema"
            ) from None
        if status.pending:
            raise StorageSchemaError(
                f"schema {self.schema!r} of PostgreSQL at {self.display} is at version "
                f"{status.current} and {len(status.pending)} migration(s) are pending "
                f"({'; '.join(status.pending)}), and this storage does not migrate on open "
                "(migrate=false); run `pai storage migrate`, or open it with migrate=true",
                path=self.display,
            )
        self._schema_ready = True

    # -- calls ---------------------------------------------------------------------------------

    async def call(self, make: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
        """Run ``make()`` where this caller's calls run (its own asyncio loop, or the helper
        loop under trio); inside it, :meth:`read`, :meth:`write` and :meth:`notified` run
        directly."""
        return await self._bridge(make)

    @contextlib.asynccontextmanager
    async def notified(self, channel: str, key: str) -> AsyncGenerator[asyncio.Event]:
        """An event set when a notification with payload ``key`` arrives on ``channel`` (a
        quoted identifier) while the block runs: enter it before reading what the notification
        announces, so none is missed. Call it inside :meth:`call`."""
        state = await self._state()
        listener = state.listener
        if listener is None:
            listener = state.listener = _Listener(self, channel)
        async with listener.waiting(key) as event:
            yield event

    async def read(self, op: Callable[[Conn], Awaitable[_T]], *, doing: str) -> _T:
        """Run ``op`` on a pooled connection (in autocommit), again on another one when the
        connection fails, until ``connect_timeout`` has passed: statements that change nothing,
        or one whose repetition changes nothing more (an idempotent update)."""
        return await self._bridge(lambda: self._read_here(op, doing))

    async def _read_here(self, op: Callable[[Conn], Awaitable[_T]], doing: str) -> _T:
        state = await self._state()
        assert state.pool is not None
        deadline = time.monotonic() + self._timeout
        attempt = 0
        while True:
            try:
                conn = await state.pool.getconn(timeout=self._left(deadline))
            except PoolTimeout:
                raise await self._no_connection(doing) from None
            except PsycopgError as error:
                if not is_connection_error(error) or time.monotonic() >= deadline:
                    raise connection_failure(error, self.display, timeout=self._timeout) from None
                attempt = await self._recover(state.pool, attempt)
                continue
            try:
                return await op(conn)
            except PsycopgError as error:
                if not is_connection_error(error) or time.monotonic() >= deadline:
                    raise query_failure(
                        error, self.display, schema=self.schema, doing=doing
                    ) from None
            finally:
                await state.pool.putconn(conn)
            attempt = await self._recover(state.pool, attempt)

    async def write(self, body: Callable[[Conn], Awaitable[_T]], *, doing: str) -> _T:
        """Run ``body``'s statements in one transaction whose outcome is known (see the module
        documentation). ``body`` raises :class:`Abort` to roll back and raise another error;
        its first statement should fetch a result, which brings the transaction id in the same
        round trip."""
        return await self._bridge(lambda: self._write_here(body, doing))

    async def _write_here(self, body: Callable[[Conn], Awaitable[_T]], doing: str) -> _T:
        state = await self._state()
        pool = state.pool
        assert pool is not None
        deadline = time.monotonic() + self._timeout
        attempt = 0
        while True:
            try:
                conn = await pool.getconn(timeout=self._left(deadline))
            except PoolTimeout:
                raise await self._no_connection(doing) from None
            except PsycopgError as error:
                # Opening a connection failed (this loop's pool opens them on demand): nothing
                # was sent, so try again while the server may be coming back.
                if not is_connection_error(error) or time.monotonic() >= deadline:
                    raise connection_failure(error, self.display, timeout=self._timeout) from None
                attempt = await self._recover(pool, attempt)
                continue
            xid: str | None = None
            committing = False
            results: list[_T] = []
            try:
                try:
                    async with conn.pipeline() as pipeline:
                        await conn.execute(b"BEGIN")
                        xid_cursor: AsyncCursor[tuple[Any, ...]] = await conn.execute(
                            b"SELECT pg_current_xact_id()::text"
                        )
                        results.append(await body(conn))
                        row = await xid_cursor.fetchone()
                        assert row is not None
                        xid = str(row[0])
                        committing = True
                        await conn.execute(b"COMMIT")
                        await pipeline.sync()
                    return results[0]
                except Abort as abort:
                    await self._rollback(conn)
                    raise abort.error from None
                except PsycopgError as error:
                    if not is_connection_error(error):
                        await self._rollback(conn)
                        if not _rolled_back_for_a_retry(error) or time.monotonic() >= deadline:
                            raise query_failure(
                                error, self.display, schema=self.schema, doing=doing
                            ) from None
                    elif committing:
                        assert xid is not None
                        outcome = await self._outcome(pool, xid, deadline)
                        if outcome is True:
                            return results[0]
                        if outcome is None:
                            raise ConnectionLostError(
                                f"the connection to PostgreSQL at {self.display} broke while "
                                f"committing ({doing}), and the server did not say within "
                                f"{self._timeout:g} s (connect_timeout) whether it was "
                                "committed; read what the database holds before writing it "
                                "again",
                                path=self.display,
                            ) from None
                    if time.monotonic() >= deadline:
                        raise query_failure(
                            error, self.display, schema=self.schema, doing=doing
                        ) from None
            finally:
                await pool.putconn(conn)
            # Known not committed: run it again on another connection.
            attempt = await self._recover(pool, attempt)

    async def _rollback(self, conn: Conn) -> None:
        if conn.closed:
            return
        # The pool discards a connection it cannot reset.
        with contextlib.suppress(PsycopgError):
            await conn.execute(b"ROLLBACK")

    async def _outcome(self, pool: _Pool, xid: str, deadline: float) -> bool | None:
        """Whether the transaction ``xid`` committed (``True``), aborted (``False``), or
        ``None`` when the server does not say before ``deadline``."""
        attempt = 0
        while time.monotonic() < deadline:
            try:
                async with pool.connection(timeout=self._left(deadline)) as conn:
                    cursor = await conn.execute(b"SELECT pg_xact_status(%s::xid8)", (xid,))
                    row = await cursor.fetchone()
                status = None if row is None else row[0]
                if status == "committed":
                    return True
                if status == "aborted":
                    return False
                if status is None:
                    return None
                # "in progress": the old session still runs; its end decides.
            except PoolTimeout:
                return None
            except PsycopgError as error:
                if not is_connection_error(error):
                    return None
            attempt = await self._recover(pool, attempt)
        return None

    async def _recover(self, pool: _Pool, attempt: int) -> int:
        """After a connection failure: drop the pool's broken connections (once), back off."""
        if attempt == 0:
            try:
                await pool.check()
            except Exception as error:  # checking is best effort; the retry decides
                _log.debug("checking the pool after a connection failure: %r", error)
        await asyncio.sleep(min(_BACKOFF_FIRST * 2**attempt, _BACKOFF_MAX))
        return attempt + 1

    def _left(self, deadline: float) -> float:
        return max(0.001, deadline - time.monotonic())

    async def _no_connection(self, doing: str) -> StorageError:
        """The error when the pool had no connection for ``connect_timeout``: why, if a direct
        connection says, else the pool was busy."""
        try:
            conn = await self._connect()
        except StorageError as error:
            return error
        await conn.close()
        size = self.settings.options.pool_max_size
        return StorageError(
            f"no connection to PostgreSQL at {self.display} was free for "
            f"{self._timeout:g} s (connect_timeout) while {doing}: all {size} of this "
            "process's connections were busy; raise pool_max_size, or connect_timeout"
        )

    # -- schema --------------------------------------------------------------------------------

    async def schema_status(self) -> SchemaStatus:
        async def status() -> SchemaStatus:
            conn = await self._connect()
            try:
                return await schema_status(conn, self.schema, self.display)
            except PsycopgError as error:
                raise query_failure(
                    error, self.display, schema=self.schema, doing="reading the schema version"
                ) from None
            finally:
                await conn.close()

        return await self._bridge(status)

    async def migrate(self) -> SchemaStatus:
        async def run() -> SchemaStatus:
            conn = await self._connect()
            try:
                result = await migrate(conn, self.schema, self.display)
            except PsycopgError as error:
                raise query_failure(
                    error, self.display, schema=self.schema, doing="migrating the schema"
                ) from None
            finally:
                await conn.close()
            self._schema_ready = True
            return result

        return await self._bridge(run)

    # -- closing -------------------------------------------------------------------------------

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._states_lock:
            states = list(self._states.values())
            self._states.clear()
            helper, self._helper = self._helper, None
        try:
            current: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        for state in states:
            pool = state.pool
            if pool is None:
                continue
            if state.loop.is_closed():
                if isinstance(pool, _LoopPool):
                    pool.drop_idle()  # their loop has ended: nobody else can use them
                continue
            if state.loop is current:
                await pool.close()
            elif helper is not None and state.loop is helper.loop:
                await self._wait_threadsafe(pool.close(), state.loop)
            elif state.loop.is_running():
                # Another thread's loop: ask it to close its pool, without waiting for it.
                asyncio.run_coroutine_threadsafe(pool.close(), state.loop)
        if helper is not None:
            helper.stop()

    async def _wait_threadsafe(
        self, coro: Coroutine[Any, Any, None], loop: asyncio.AbstractEventLoop
    ) -> None:
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        if sniffio.current_async_library() == "trio":
            import trio

            await trio.to_thread.run_sync(future.result)
        else:
            await asyncio.wrap_future(future)
