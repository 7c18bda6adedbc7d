"""Durable PAI runs on DBOS: a run survives the death of its process.

Each run is a DBOS workflow and each of its phases (the model's answer, each tool call, each
append to the thread) a recorded step; after a crash, the restarted process resumes the run from
what was recorded. DBOS needs only a database: a SQLite file on one machine, PostgreSQL for many::

    from pai.durable_dbos import DbosEngine

    engine = DbosEngine(system_database_url="sqlite:///runs.sqlite")
    async with create_agent_runtime(agent=agent, durability=engine) as runtime:
        ...

Importing this package does not import DBOS (which takes seconds): starting an engine does.
See the package README for the options, production, and what runs more than once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pai.core.ext import lazy_exports

if TYPE_CHECKING:
    from pai.durable_dbos._engine import DbosEngine as DbosEngine
    from pai.durable_dbos._errors import DbosEngineError as DbosEngineError
    from pai.durable_dbos._options import DEFAULT_APPLICATION_VERSION as DEFAULT_APPLICATION_VERSION
    from pai.durable_dbos._options import DbosOptions as DbosOptions
    from pai.durable_dbos._options import default_executor_id as default_executor_id

_SOURCES = {
    "DEFAULT_APPLICATION_VERSION": "pai.durable_dbos._options",
    "DbosEngine": "pai.durable_dbos._engine",
    "DbosEngineError": "pai.durable_dbos._errors",
    "DbosOptions": "pai.durable_dbos._options",
    "default_executor_id": "pai.durable_dbos._options",
}

if not TYPE_CHECKING:  # type checkers see the imports above, and no catch-all attribute
    __getattr__, __dir__ = lazy_exports(__name__, _SOURCES)

__all__ = [
    "DEFAULT_APPLICATION_VERSION",
    "DbosEngine",
    "DbosEngineError",
    "DbosOptions",
    "default_executor_id",
]
