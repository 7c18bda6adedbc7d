"""Concurrent calls from several storage objects on one schema (as from several processes):
overlapping deletes of one tree report each thread once, whichever wins each row."""

from __future__ import annotations

import anyio
import pytest

from pai.core.ext import ThreadRecord
from pai.storage_postgres import PostgresStorage
from pai.storage_postgres.testing import TestSchemas

pytestmark = pytest.mark.anyio


async def test_overlapping_deletes_from_two_storages_report_each_thread_once(
    postgres_url: str, schemas: TestSchemas
) -> None:
    schema = schemas.fresh()
    first = PostgresStorage(postgres_url, schema=schema)
    second = PostgresStorage(postgres_url, schema=schema)
    try:
        for round_ in range(3):
            root = f"root-{round_}"
            await first.create_thread(ThreadRecord(id=root, scope_key="acme", agent_name="a"))
            ids = [root]
            for child in range(6):
                child_id = f"{root}/c{child}"
                await first.create_thread(
                    ThreadRecord(
                        id=child_id, scope_key="acme", agent_name="a", parent_thread_id=root
                    )
                )
                ids.append(child_id)
                for grandchild in range(3):
                    grandchild_id = f"{child_id}/g{grandchild}"
                    await first.create_thread(
                        ThreadRecord(
                            id=grandchild_id,
                            scope_key="acme",
                            agent_name="a",
                            parent_thread_id=child_id,
                        )
                    )
                    ids.append(grandchild_id)
            reported: list[str] = []

            async def delete(
                storage: PostgresStorage, thread_id: str, into: list[str] = reported
            ) -> None:
                into.extend(await storage.delete_thread(thread_id))

            async with anyio.create_task_group() as tg:
                for index, thread_id in enumerate(reversed(ids)):
                    tg.start_soon(delete, (first, second)[index % 2], thread_id)
                tg.start_soon(delete, first, root)
            assert sorted(reported) == sorted(ids), (
                "overlapping concurrent deletes lost or repeated threads"
            )
            assert await first.list_threads("acme") == ()
    finally:
        await first.aclose()
        await second.aclose()
