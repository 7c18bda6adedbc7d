"""One storage used from successive event loops, asyncio and trio alike, as a command line tool
that runs several ``anyio.run`` calls does."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import anyio

from pai.core import UserMessage
from pai.core.ext import ThreadRecord
from pai.storage_postgres import PostgresStorage
from pai.storage_postgres.testing import TestSchemas


def test_a_storage_serves_successive_asyncio_and_trio_runs(
    postgres_url: str, schemas: TestSchemas
) -> None:
    storage = PostgresStorage(postgres_url, schema=schemas.fresh())

    async def create() -> None:
        await storage.create_thread(ThreadRecord(id="t1", scope_key="s", agent_name="a"))

    async def append(text: str) -> None:
        await storage.append_messages("t1", [UserMessage(content=text)])

    async def read() -> list[str]:
        return [str(getattr(m, "content", "")) for m in await storage.get_messages("t1")]

    anyio.run(create, backend="asyncio")
    anyio.run(append, "from trio", backend="trio")
    anyio.run(append, "from a second asyncio loop", backend="asyncio")
    assert anyio.run(read, backend="trio") == ["from trio", "from a second asyncio loop"]
    anyio.run(storage.aclose, backend="trio")
    helpers = [t for t in threading.enumerate() if t.name == "pai-storage-postgres"]
    assert helpers == [], "closing the storage left its helper loop's thread running"


SCRIPT = """
import sys

import anyio

from pai.core.ext import ThreadRecord
from pai.storage_postgres import PostgresStorage

storage = PostgresStorage(sys.argv[1], schema=sys.argv[2], pool_min_size=4)


async def use(n: int) -> None:
    await storage.create_thread(ThreadRecord(id=f"t{n}", scope_key="s", agent_name="a"))


for n in range(5):  # each run ends while the pool may still be filling its connections
    anyio.run(use, n, backend="asyncio")
print("returned")
"""


def test_an_asyncio_run_that_used_the_storage_returns_without_closing_it(
    postgres_url: str, schemas: TestSchemas, tmp_path: Path
) -> None:
    # psycopg_pool's background tasks swallow cancellation: a pool left on the caller's loop
    # kept asyncio.run / anyio.run from ever returning. A subprocess, so a hang is a timeout.
    (tmp_path / "use.py").write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, "use.py", postgres_url, schemas.fresh()],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, "returned\n"), done.stderr


def test_a_connection_cut_short_by_a_cancellation_is_not_handed_out_again(
    postgres_url: str, schemas: TestSchemas
) -> None:
    # On an asyncio caller's own loop, a connection left mid-statement or mid-transaction by a
    # cancelled caller is closed, not handed back: the next call gets a clean session.
    from psycopg.pq import TransactionStatus

    storage = PostgresStorage(postgres_url, schema=schemas.fresh())
    connector = storage._connector

    async def state(conn: Any) -> tuple[int, TransactionStatus]:
        row = await (await conn.execute("SELECT pg_backend_pid()")).fetchone()
        return int(row[0]), conn.info.transaction_status

    async def in_statement(conn: Any) -> None:
        await conn.execute("SELECT pg_sleep(30)")

    async def in_transaction(conn: Any) -> None:
        await conn.execute("BEGIN")
        await anyio.sleep(30)

    async def main() -> None:
        await storage.create_thread(ThreadRecord(id="t1", scope_key="s", agent_name="a"))
        for cut_short in (in_statement, in_transaction):
            before, _ = await connector.read(state, doing="reading the session")
            with anyio.move_on_after(0.3):
                await connector.read(cut_short, doing="being cut short")
            with anyio.fail_after(5):
                after, status = await connector.read(state, doing="reading the session")
                assert list(await storage.get_messages("t1")) == []
            assert status == TransactionStatus.IDLE, cut_short.__name__
            assert after != before, cut_short.__name__
        await storage.aclose()

    anyio.run(main, backend="asyncio")
