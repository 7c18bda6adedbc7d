"""Durable PAI runs on Temporal: a run survives the death of its worker.

Each run is a Temporal workflow and each of its steps (the model's answer, each tool call, each
append to the thread) an activity, performed by whichever worker polls the task queue; when a
worker dies, Temporal hands its step to another worker and the run goes on from what was
recorded. It needs a Temporal service (``temporal server start-dev`` on one machine, a cluster
or Temporal Cloud for many)::

    from pai.durable_temporal import TemporalEngine

    engine = TemporalEngine(target_host="127.0.0.1:7233", task_queue="pai")
    async with create_agent_runtime(agent=agent, durability=engine) as runtime:
        ...

Importing this package does not import Temporal's SDK (which takes a second or two): starting
an engine does. See the package README for the options, production, and what runs more than
once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pai.core.ext import lazy_exports

if TYPE_CHECKING:
    from pai.durable_temporal._engine import STATUSES as STATUSES
    from pai.durable_temporal._engine import TemporalEngine as TemporalEngine
    from pai.durable_temporal._errors import TemporalEngineError as TemporalEngineError
    from pai.durable_temporal._options import DEFAULT_TARGET_HOST as DEFAULT_TARGET_HOST
    from pai.durable_temporal._options import TemporalOptions as TemporalOptions

_SOURCES = {
    "DEFAULT_TARGET_HOST": "pai.durable_temporal._options",
    "STATUSES": "pai.durable_temporal._engine",
    "TemporalEngine": "pai.durable_temporal._engine",
    "TemporalEngineError": "pai.durable_temporal._errors",
    "TemporalOptions": "pai.durable_temporal._options",
}

if not TYPE_CHECKING:  # type checkers see the imports above, and no catch-all attribute
    __getattr__, __dir__ = lazy_exports(__name__, _SOURCES)

__all__ = [
    "DEFAULT_TARGET_HOST",
    "STATUSES",
    "TemporalEngine",
    "TemporalEngineError",
    "TemporalOptions",
]
