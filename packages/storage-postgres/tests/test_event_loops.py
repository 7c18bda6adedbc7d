"""One storage used from successive event loops, asyncio and trio alike, as a command line tool
that runs several ``anyio.run`` calls does."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import anyio

from pai.core import ThreadRecord, UserMessage
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

from pai.core import ThreadRecord
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
