"""The test server's hostile answers stop when their client goes away, and say nothing about it.

A hostile answer writes as fast as the client reads (or a byte at a time); once the client has
closed the connection, the server must stop writing at once: a writer that kept going would
spin on a lost connection (asyncio logs "socket.send() raised exception." for every such write)
and hold the server's loop.
"""

from __future__ import annotations

import logging
import time

import httpx2
import pytest

from pai.model_openai.testing import (
    Answer,
    OpenAITestServer,
    endless_stream,
    huge_line,
    trickle_stream,
)

pytestmark = pytest.mark.anyio

HOSTILE: dict[str, Answer] = {
    "endless": endless_stream(),
    "huge line": huge_line(),
    "trickle": trickle_stream("x" * 2000, interval=0.001, step=10),
}


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
@pytest.mark.parametrize("name", list(HOSTILE))
async def test_a_hostile_answer_stops_quietly_when_the_client_goes(
    openai_server: OpenAITestServer, caplog: pytest.LogCaptureFixture, name: str, stream: bool
) -> None:
    openai_server.add(HOSTILE[name])
    caplog.set_level(logging.DEBUG, logger="asyncio")
    received = 0
    async with (
        httpx2.AsyncClient() as client,
        client.stream(
            "POST", openai_server.base_url + "/chat/completions", json={"stream": stream}
        ) as response,
    ):
        async for chunk in response.aiter_raw():
            received += len(chunk)
            if received > 64 * 1024 or (name == "trickle" and received > 100):
                break
    closed = time.monotonic()
    if stream:
        assert await openai_server.streams_closed(timeout=5)
    # The server's loop is free again: it answers the next request at once.
    openai_server.add(endless_stream(max_bytes=1000))
    async with httpx2.AsyncClient() as client:
        response = await client.post(
            openai_server.base_url + "/chat/completions", json={"stream": True}, timeout=5
        )
    assert response.status_code == 200
    assert time.monotonic() - closed < 5
    noisy = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert noisy == [], f"{len(noisy)} warnings, first: {noisy[:3]}"
