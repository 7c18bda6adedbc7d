"""The test app on PostgreSQL storage, for servers in separate processes (``uvicorn --factory
process_app:make_app``): the database and schema come from ``PAI_TEST_POSTGRES_URL`` and
``PAI_TEST_SCHEMA``."""

from __future__ import annotations

import os
from typing import Any

from http_helpers import build_app

from pai.http import HttpLimits
from pai.storage_postgres import PostgresStorage


def make_app() -> Any:
    storage = PostgresStorage(
        os.environ["PAI_TEST_POSTGRES_URL"], schema=os.environ["PAI_TEST_SCHEMA"]
    )
    limits = HttpLimits(reattach_grace=1.0, max_runs_per_identity=1)
    _, app = build_app(limits, storage=storage)
    return app
