"""The errors this adapter raises itself; everything else a run raises reaches its caller as is."""

from __future__ import annotations

from pai.core import DurabilityError

__all__ = ["DbosEngineError"]


class DbosEngineError(DurabilityError):
    """DBOS cannot run PAI's durable runs as configured: it is already running in this process for
    another engine, the executor id is held by another live process, or DBOS failed to start. The
    message says which, and what to do."""
