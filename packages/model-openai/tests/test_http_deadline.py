"""The answer's deadline, kept by its connection's reads and writes (headers and body alike).

Servers here are real sockets on 127.0.0.1: a raw one for what no HTTP server would do (never
answer; trickle its status line), and the shipped test server for answers on a reused
connection.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator

import anyio
import pytest

from pai.core import ModelRequest, ModelTimeoutError, UserMessage
from pai.model_openai import OpenAIModel
from pai.model_openai.testing import OpenAITestServer, text_answer

pytestmark = pytest.mark.anyio


def ask() -> ModelRequest:
    return ModelRequest(instructions="", messages=[UserMessage(content="hi")], tools=(), step=1)


class RawServer:
    """A TCP server on 127.0.0.1 that reads each request, then runs ``behave(connection)``."""

    def __init__(self) -> None:
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(4)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def stopped(self) -> bool:
        return self._stop.is_set()

    def start(self, behave: Callable[[socket.socket], None]) -> str:
        """Serve one connection with ``behave``; the base URL to give a model."""

        def serve() -> None:
            connection, _ = self._listener.accept()
            with connection, contextlib.suppress(OSError):  # OSError: the client went away
                connection.settimeout(0.05)
                with contextlib.suppress(TimeoutError):
                    while not self.stopped():  # read the request (and whatever follows)
                        connection.recv(65536)
                behave(connection)

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        self._threads.append(thread)
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}/v1"

    def close(self) -> None:
        self._stop.set()
        self._listener.close()
        for thread in self._threads:
            thread.join(timeout=5)


@pytest.fixture
def raw_server() -> Iterator[RawServer]:
    server = RawServer()
    try:
        yield server
    finally:
        server.close()


def _silent(server: RawServer) -> Callable[[socket.socket], None]:
    def silent(_connection: socket.socket) -> None:
        deadline = time.monotonic() + 30
        while not server.stopped() and time.monotonic() < deadline:
            time.sleep(0.02)

    return silent


async def test_a_server_that_never_answers_is_a_timeout_of_the_whole_answer(
    raw_server: RawServer,
) -> None:
    url = raw_server.start(_silent(raw_server))
    async with OpenAIModel("m", base_url=url, api_key="k", timeout=1, max_retries=0) as model:
        started = time.monotonic()
        with pytest.raises(ModelTimeoutError, match=r"did not end within timeout=1 s"):
            await model.request(ask())
    elapsed = time.monotonic() - started
    assert 0.9 < elapsed < 5, f"timeout=1 took {elapsed:.2f} s"


async def test_headers_trickled_a_byte_at_a_time_are_bounded_too(
    raw_server: RawServer,
) -> None:
    stop = raw_server.stopped

    def trickle(connection: socket.socket) -> None:
        # Each byte comes well within any read timeout; the headers would take ~20 s.
        for byte in b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nx-pad: " + b"a" * 400:
            if stop():
                return
            connection.sendall(bytes([byte]))
            time.sleep(0.05)

    url = raw_server.start(trickle)
    async with OpenAIModel("m", base_url=url, api_key="k", timeout=1, max_retries=0) as model:
        started = time.monotonic()
        with pytest.raises(ModelTimeoutError, match=r"did not end within timeout=1 s"):
            await model.request(ask())
    elapsed = time.monotonic() - started
    assert 0.9 < elapsed < 5, f"timeout=1 took {elapsed:.2f} s"


async def test_a_reused_connection_gets_the_deadline_of_its_new_answer(
    openai_server: OpenAITestServer,
) -> None:
    # The second answer goes out on the first one's kept-alive connection after the first
    # answer's deadline has passed: it is bounded by its own deadline, not the old one.
    openai_server.add(text_answer("one"), text_answer("two"))
    async with OpenAIModel(
        "m", base_url=openai_server.base_url, api_key="k", timeout=1, max_retries=0
    ) as model:
        assert (await model.request(ask())).content == "one"
        await anyio.sleep(1.3)
        assert (await model.request(ask())).content == "two"


async def test_connecting_counts_against_the_answers_timeout() -> None:
    # A listener whose accept queue is full: Linux drops further SYNs, so connecting hangs
    # until connect_timeout; the answer's timeout is the shorter bound here.
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers: list[socket.socket] = []
    try:
        for _ in range(8):  # fill the queue; past it, connecting no longer completes
            filler = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            filler.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                filler.connect(("127.0.0.1", port))
            fillers.append(filler)
        async with OpenAIModel(
            "m",
            base_url=f"http://127.0.0.1:{port}/v1",
            api_key="k",
            timeout=1,
            connect_timeout=30,
            max_retries=0,
        ) as model:
            started = time.monotonic()
            with pytest.raises(ModelTimeoutError, match=r"did not end within timeout=1 s"):
                await model.request(ask())
        elapsed = time.monotonic() - started
        assert 0.9 < elapsed < 5, f"timeout=1 took {elapsed:.2f} s"
    finally:
        for filler in fillers:
            filler.close()
        listener.close()
