"""PostgresStorage passes the storage conformance suite against a real server, on asyncio and
trio, durability (a new instance on the same schema) included."""

from __future__ import annotations

import pytest

from pai.core.ext import Storage
from pai.core.testing import StorageConformance
from pai.storage_postgres import PostgresStorage
from pai.storage_postgres.testing import TestSchemas


class TestPostgresStorage(StorageConformance):
    @pytest.fixture(autouse=True)
    def _server(self, schemas: TestSchemas) -> None:
        self.schemas = schemas

    def create_storage(self) -> Storage:
        return PostgresStorage(self.schemas.url, schema=self.schemas.fresh())

    def reopen(self, storage: Storage) -> Storage:
        assert isinstance(storage, PostgresStorage)
        return PostgresStorage(self.schemas.url, schema=storage.options.schema)

    def open_second(self, storage: Storage) -> Storage:
        assert isinstance(storage, PostgresStorage)
        return PostgresStorage(self.schemas.url, schema=storage.options.schema)
