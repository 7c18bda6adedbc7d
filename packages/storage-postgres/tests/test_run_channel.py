"""PostgresRunChannel passes the run channel conformance suite against a real server, on asyncio
and trio, across two storages (as two processes would open the database); and an owner that
stops saying it is alive leaves its thread free."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from pai.core.ext import RunChannel, RunInfo, run_channel_for
from pai.core.testing import RunChannelConformance
from pai.storage_postgres import PostgresRunChannel, PostgresStorage
from pai.storage_postgres.testing import TestSchemas


class TestPostgresRunChannel(RunChannelConformance):
    @pytest.fixture(autouse=True)
    async def _server(self, schemas: TestSchemas) -> AsyncIterator[None]:
        self.schemas = schemas
        self.storages: list[PostgresStorage] = []
        yield
        for storage in self.storages:
            await storage.aclose()

    def _storage(self, schema: str) -> PostgresStorage:
        storage = PostgresStorage(self.schemas.url, schema=schema)
        self.storages.append(storage)
        return storage

    def create_channel(self, *, retain_finished: float) -> RunChannel:
        self.schema = self.schemas.fresh()
        return self._storage(self.schema).run_channel(retain_finished=retain_finished)

    def open_second(self, channel: RunChannel) -> RunChannel:
        return self._storage(self.schema).run_channel()


def _info(thread_id: str, run_id: str) -> RunInfo:
    return RunInfo(run_id, thread_id, "acme", "helper", "ag-ui", "alice")


@pytest.mark.anyio
async def test_a_run_whose_owner_stopped_is_ended(schemas: TestSchemas) -> None:
    schema = schemas.fresh()
    async with (
        PostgresStorage(schemas.url, schema=schema) as owner_storage,
        PostgresStorage(schemas.url, schema=schema) as other_storage,
    ):
        owner = PostgresRunChannel(owner_storage._connector, stale_after=0.5)
        other = PostgresRunChannel(other_storage._connector, stale_after=0.5)
        await owner.begin(_info("t1", "r1"), max_live_per_key=1)
        assert await owner.wait_cancel("r1", wait=0) is None  # the owner says it is alive
        live = await other.live("t1")
        assert live is not None
        assert live.run_id == "r1"
        await anyio.sleep(1.0)  # ... and then says nothing: its process died
        assert await other.live("t1") is None
        gone = await other.get("r1")
        assert gone is not None
        assert gone.finished
        with anyio.fail_after(10):
            read = await other.read("r1", after=0, wait=30)  # readers stop at once
        assert read is not None
        assert read.finished
        # The thread and the key are free for the next run.
        assert await other.begin(_info("t1", "r2"), max_live_per_key=1) is None


@pytest.mark.anyio
async def test_the_storage_offers_its_channel(schemas: TestSchemas) -> None:
    async with PostgresStorage(schemas.url, schema=schemas.fresh()) as storage:
        assert isinstance(run_channel_for(storage), PostgresRunChannel)
