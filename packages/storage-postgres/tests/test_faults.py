"""Connections that break: a read is run again on a new connection; a write is run again only
when it is known not to have committed, and its result stands when it is known to have; never a
half-written batch, never one written twice.

Three real faults: the server ending the storage's sessions (``pg_terminate_backend``), a TCP
proxy cutting the connection just before or just after a ``COMMIT`` reaches the server, and the
server restarting (``pg_ctl restart``) while a writer appends.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import socket
import subprocess
import threading
import uuid
from collections.abc import Iterator
from datetime import datetime
from urllib.parse import urlsplit, urlunsplit

import anyio
import psycopg
import pytest

from pai.core import StorageError, UserMessage
from pai.core.ext import ThreadRecord
from pai.storage_postgres import PostgresStorage
from pai.storage_postgres.testing import TestSchemas, unavailable

pytestmark = pytest.mark.anyio


def _with_port(url: str, port: int) -> str:
    parts = urlsplit(url)
    userinfo, _, _ = parts.netloc.rpartition("@")
    return urlunsplit((parts.scheme, f"{userinfo}@127.0.0.1:{port}", parts.path, parts.query, ""))


def _batch(n: int) -> list[UserMessage]:
    return [UserMessage(content=f"{n}:{part}") for part in "abc"]


class CuttingProxy:
    """A TCP proxy to the server that, once armed, cuts the connection whose client sends a
    message holding ``trigger``: before passing it on (``"before"``), or after the server has
    answered it, without passing the answer back (``"after"``)."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.loop = asyncio.new_event_loop()
        self.armed: tuple[bytes, str] | None = None
        self.server: asyncio.Server
        self.cuts = 0
        ready = threading.Event()
        self.port = 0

        async def start() -> None:
            self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
            self.port = self.server.sockets[0].getsockname()[1]
            ready.set()

        self.thread = threading.Thread(target=self._run, args=(start,), daemon=True)
        self.thread.start()
        ready.wait(10)

    def _run(self, start: object) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(start())  # type: ignore[operator]
        self.loop.run_forever()

    def arm(self, trigger: bytes, when: str) -> None:
        self.armed = (trigger, when)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)
        cut = asyncio.Event()

        async def to_server() -> None:
            while data := await reader.read(65536):
                armed = self.armed
                if armed is not None and armed[0] in data:
                    self.armed = None
                    self.cuts += 1
                    if armed[1] == "after":
                        upstream_writer.write(data)
                        await upstream_writer.drain()
                        await upstream_reader.read(65536)  # the server has acted on it
                    cut.set()
                    return
                upstream_writer.write(data)
                await upstream_writer.drain()

        async def to_client() -> None:
            while data := await upstream_reader.read(65536):
                if cut.is_set():
                    return
                writer.write(data)
                await writer.drain()

        tasks = [asyncio.ensure_future(to_server()), asyncio.ensure_future(to_client())]
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            task.cancel()
        for stream in (writer, upstream_writer):
            stream.close()

    def close(self) -> None:
        async def stop() -> None:
            self.server.close()
            await self.server.wait_closed()

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


@pytest.fixture
def proxy(postgres_url: str) -> Iterator[CuttingProxy]:
    parts = urlsplit(postgres_url)
    made = CuttingProxy(parts.hostname or "127.0.0.1", parts.port or 5432)
    yield made
    made.close()


def _terminate(url: str, application_name: str) -> int:
    """End every session of ``application_name``; how many there were."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (application_name,),
        ).fetchall()
    return len(rows)


async def test_sessions_ended_by_the_server_are_replaced_for_reads_and_writes(
    postgres_url: str, schemas: TestSchemas
) -> None:
    name = f"pai-fault-{uuid.uuid4().hex[:8]}"
    url = f"{postgres_url}?application_name={name}"
    storage = PostgresStorage(url, schema=schemas.fresh(), pool_min_size=3)
    try:
        await storage.create_thread(ThreadRecord(id="t1", scope_key="s", agent_name="a"))
        await storage.append_messages("t1", _batch(0))
        assert await anyio.to_thread.run_sync(_terminate, postgres_url, name) >= 1

        assert list(await storage.get_messages("t1")) == _batch(0), "the read was not retried"
        assert await anyio.to_thread.run_sync(_terminate, postgres_url, name) >= 1
        await storage.append_messages("t1", _batch(1))
        assert list(await storage.get_messages("t1")) == _batch(0) + _batch(1), (
            "an append on an ended session was lost or stored twice"
        )
    finally:
        await storage.aclose()


@pytest.mark.parametrize("when", ["before", "after"])
async def test_a_connection_cut_around_commit_stores_the_batch_exactly_once(
    postgres_url: str, schemas: TestSchemas, proxy: CuttingProxy, when: str
) -> None:
    storage = PostgresStorage(_with_port(postgres_url, proxy.port), schema=schemas.fresh())
    try:
        await storage.create_thread(ThreadRecord(id="t1", scope_key="s", agent_name="a"))
        proxy.arm(b"COMMIT", when)
        await storage.append_messages("t1", _batch(1))
        assert proxy.cuts == 1, "the proxy never saw the COMMIT: the test did not cut anything"
        assert list(await storage.get_messages("t1")) == _batch(1), (
            f"a connection cut {when} COMMIT left {await storage.get_messages('t1')}"
        )
    finally:
        await storage.aclose()


@pytest.mark.parametrize("when", ["before", "after"])
async def test_a_create_cut_around_commit_is_not_reported_as_taken(
    postgres_url: str, schemas: TestSchemas, proxy: CuttingProxy, when: str
) -> None:
    storage = PostgresStorage(_with_port(postgres_url, proxy.port), schema=schemas.fresh())
    try:
        await storage.get_thread("warm-up")  # migrated and pooled before the cut
        proxy.arm(b"COMMIT", when)
        await storage.create_thread(ThreadRecord(id="t1", scope_key="s", agent_name="a"))
        assert proxy.cuts == 1
        assert [r.id for r in await storage.list_threads("s")] == ["t1"]
    finally:
        await storage.aclose()


async def test_a_read_cut_mid_way_is_run_again(
    postgres_url: str, schemas: TestSchemas, proxy: CuttingProxy
) -> None:
    storage = PostgresStorage(_with_port(postgres_url, proxy.port), schema=schemas.fresh())
    try:
        await storage.create_thread(ThreadRecord(id="t1", scope_key="s", agent_name="a"))
        await storage.append_messages("t1", _batch(0))
        proxy.arm(b"SELECT body", "after")
        assert list(await storage.get_messages("t1")) == _batch(0)
        assert proxy.cuts == 1
    finally:
        await storage.aclose()


def _started_at(url: str) -> datetime:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT pg_postmaster_start_time()").fetchone()
    assert row is not None
    assert isinstance(row[0], datetime)
    return row[0]


def _pg_ctl() -> list[str]:
    command = os.environ.get("PAI_TEST_POSTGRES_PGCTL", "")
    if not command:
        unavailable(
            "PAI_TEST_POSTGRES_PGCTL is not set, so the server cannot be restarted (tests never "
            "restart a server they did not start: run them under scripts/with-postgres.sh)"
        )
    return shlex.split(command)


async def test_a_server_restart_mid_run_loses_no_acknowledged_batch_and_splits_none(
    postgres_url: str, schemas: TestSchemas
) -> None:
    pg_ctl = _pg_ctl()
    storage = PostgresStorage(postgres_url, schema=schemas.fresh(), connect_timeout=30)
    stored: list[int] = []
    failed: list[str] = []
    started, restarted = anyio.Event(), anyio.Event()

    async def writer() -> None:
        n = 0
        after = 0
        while after < 20:
            try:
                await storage.append_messages("t1", _batch(n))
                stored.append(n)
            except StorageError as error:
                failed.append(f"{n}: {error}")
            n += 1
            if n == 5:
                started.set()
            if restarted.is_set():
                after += 1

    def restart() -> None:
        subprocess.run(
            [*pg_ctl, "restart", "-m", "fast", "-w", "-t", "60"],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    booted = await anyio.to_thread.run_sync(_started_at, postgres_url)
    try:
        await storage.create_thread(ThreadRecord(id="t1", scope_key="s", agent_name="a"))
        async with anyio.create_task_group() as tg:
            tg.start_soon(writer)
            await started.wait()
            await anyio.to_thread.run_sync(restart)
            restarted.set()
        messages = [str(getattr(m, "content", "")) for m in await storage.get_messages("t1")]
    finally:
        await storage.aclose()
    assert await anyio.to_thread.run_sync(_started_at, postgres_url) > booted, "no restart happened"
    batches = [tuple(messages[k : k + 3]) for k in range(0, len(messages), 3)]
    assert all(len(b) == 3 and len({c.split(":")[0] for c in b}) == 1 for b in batches), (
        f"a batch was split or interleaved across the restart: {batches}"
    )
    written = [int(b[0].split(":")[0]) for b in batches]
    assert written == sorted(set(written)), f"a batch was stored twice or out of order: {written}"
    assert set(stored) <= set(written), "an append that returned was lost in the restart"
    # Each failed append says why; the ones that failed may or may not have been stored, but
    # only with their whole batch (checked above).
    assert all("PostgreSQL" in line for line in failed), failed
    assert len(stored) >= 20, f"writes did not resume after the restart ({len(stored)} stored)"


def test_the_proxy_helper_cuts_only_when_armed(postgres_url: str) -> None:
    """The fault injector itself: unarmed it passes everything; armed it cuts once."""
    parts = urlsplit(postgres_url)
    proxy = CuttingProxy(parts.hostname or "127.0.0.1", parts.port or 5432)
    try:
        url = _with_port(postgres_url, proxy.port)
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        proxy.arm(b"SELECT 2", "before")
        with psycopg.connect(url, autocommit=True) as conn, pytest.raises(psycopg.OperationalError):
            conn.execute("SELECT 2")
        assert proxy.cuts == 1
    finally:
        proxy.close()
    with socket.socket() as probe:  # the port is free again once the proxy stopped
        probe.settimeout(1)
        assert probe.connect_ex(("127.0.0.1", proxy.port)) != 0
