"""One storage used from successive event loops, asyncio and trio alike, as a command line tool
that runs several ``anyio.run`` calls does."""

from __future__ import annotations

import threading

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
