"""pai-http benchmarks: runs served over HTTP against the same runs in process.

Run:  uv run python benchmarks/bench_http.py   (or: uv run nox -s bench)

The app: one agent whose scripted model streams its answer in 5 pieces, the first after
``FIRST_TOKEN`` seconds (20 ms: a fast real model takes 200 ms or more), on in-memory storage.
The server is uvicorn with one worker in a process of its own on 127.0.0.1; the client is a
minimal HTTP/1.1 client on kept-alive connections (see ``_Connection``).

Prints, in one run:

- time to first token: from the request to the first text event, over AG-UI (``/ag-ui``) and the
  AI SDK stream (``/chat``), against ``thread.stream`` in this process on the same app (from
  ``create_thread`` to the first ``TextDelta``: each HTTP run names a new thread too). Medians, the configurations interleaved round by round.
  Target: <= 1.2x; the added milliseconds are printed too;
- 100 concurrent streaming clients (``/chat``), each running runs back to back in threads of its
  own on one kept-alive connection (a minimal HTTP/1.1 client: httpx would be the bottleneck),
  opened by one untimed run each before the clock starts: runs per second and the p50/p99
  latency of a whole run. Reported; any error fails it.

Then the same again on PostgreSQL storage (``PAI_TEST_POSTGRES_URL``; skipped without it, unless
``PAI_REQUIRE_POSTGRES=1``), where runs travel through the database's run channel: time to first
token against ``thread.stream`` in this process on the same database (target <= 1.2x), and the
concurrent clients.
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import anyio

FIRST_TOKEN = 0.02
ROUNDS = 40
CLIENTS = 100
RUNS_PER_CLIENT = 5


def build_pai(storage: Any = None) -> Any:
    from pai.core import InMemoryStorage, create_pai, define_agent
    from pai.core.ext import ResponseFinished, TextDelta
    from pai.core.testing import FunctionModel

    async def answer(request: Any) -> AsyncIterator[Any]:
        await anyio.sleep(FIRST_TOKEN)
        for piece in ("The ", "answer ", "is ", "forty-", "two."):
            yield TextDelta(piece)
        yield ResponseFinished("stop")

    agent = define_agent(name="bench", model=FunctionModel(stream_fn=answer))
    return create_pai(
        agents={"bench": {"agent": agent}},
        scope_key=lambda identity: str(identity),
        storage=storage if storage is not None else InMemoryStorage(),
    )


def _storage(url: str | None, schema: str | None) -> Any:
    if url is None:
        return None
    from pai.storage_postgres import PostgresStorage

    return PostgresStorage(url, schema=schema)


def serve(port: int, url: str | None, schema: str | None) -> None:
    import uvicorn

    from pai.http import HttpLimits, create_asgi_app

    app = create_asgi_app(
        build_pai(_storage(url, schema)),
        authenticate=lambda request: request.headers.get("x-user", "anonymous"),
        limits=HttpLimits(max_runs_per_identity=1000),
    )
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _agui(thread_id: str) -> dict[str, Any]:
    return {
        "threadId": thread_id,
        "runId": uuid.uuid4().hex,
        "state": None,
        "messages": [{"id": "m", "role": "user", "content": "the question"}],
        "tools": [],
        "context": [],
        "forwardedProps": None,
    }


def _chat(thread_id: str) -> dict[str, Any]:
    return {
        "id": thread_id,
        "trigger": "submit-message",
        "messages": [
            {"id": "m", "role": "user", "parts": [{"type": "text", "text": "the question"}]}
        ],
    }


async def _first_token_http(connection: _Connection, route: str, marker: bytes) -> float:
    import json

    body = _agui(uuid.uuid4().hex) if route == "ag-ui" else _chat(uuid.uuid4().hex)
    encoded = json.dumps(body).encode()
    started = time.perf_counter()
    first, _ = await connection.run(f"/agents/bench/{route}", encoded, {}, marker)
    assert first, f"no text event over {route}"
    return first - started


async def _first_token_in_process(pai: Any) -> float:
    from contextlib import aclosing

    from pai.core.ext import TextDelta

    admin = pai.runtime("bench").admin(identity="bench")
    # The thread is made inside the clock, as the HTTP runs make theirs (a new id each).
    started = time.perf_counter()
    thread = await admin.create_thread()
    first = 0.0
    async with aclosing(thread.stream("the question")) as events:
        async for event in events:
            if not first and isinstance(event, TextDelta):
                first = time.perf_counter() - started
    return first


async def bench_first_token(port: int, url: str | None, schema: str | None) -> None:
    sys.path.insert(0, os.path.dirname(__file__))
    from _verdict import verdict

    pai = build_pai(_storage(url, schema))
    samples: dict[str, list[float]] = {"in process": [], "ag-ui": [], "ai-sdk": []}
    connection = _Connection(port)
    agui, chat = b"TEXT_MESSAGE_CONTENT", b'"text-delta"'
    async with pai:
        for _ in range(3):  # warm up
            await _first_token_in_process(pai)
            await _first_token_http(connection, "ag-ui", agui)
            await _first_token_http(connection, "chat", chat)
        for _ in range(ROUNDS):
            samples["in process"].append(await _first_token_in_process(pai))
            samples["ag-ui"].append(await _first_token_http(connection, "ag-ui", agui))
            samples["ai-sdk"].append(await _first_token_http(connection, "chat", chat))
    await connection.aclose()
    base = statistics.median(samples["in process"])
    print(
        f"time to first token, model's own {FIRST_TOKEN * 1e3:.0f} ms included, median of {ROUNDS} "
        f"(uvicorn, 1 worker, 127.0.0.1; a kept-alive connection; {_where(url)})"
    )
    print(f"  thread.stream in process  {base * 1e3:7.2f} ms")
    for name in ("ag-ui", "ai-sdk"):
        median = statistics.median(samples[name])
        ratio = median / base
        print(
            f"  {name + ' over HTTP':<25} {median * 1e3:7.2f} ms   +{(median - base) * 1e3:5.2f} ms"
            f"   {ratio:5.2f}x {verdict(ratio, 1.2)}"
        )


class _Connection:
    """A minimal HTTP/1.1 client on one kept-alive connection: enough to stream a run, and cheap
    enough that 100 of them in one process measure the server rather than themselves (httpx
    spends about 12 ms of CPU per streamed run here)."""

    def __init__(self, port: int) -> None:
        self._port = port
        self._stream: Any = None

    async def run(
        self, path: str, body: bytes, headers: dict[str, str], marker: bytes = b"\x00"
    ) -> tuple[float, str]:
        """POST ``body`` and read the whole chunked response: when ``marker`` first arrived
        (``perf_counter``; 0.0 if it never did), and the last SSE data line."""
        first = 0.0
        if self._stream is None:
            self._stream = await anyio.connect_tcp("127.0.0.1", self._port)
        extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        request = (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n{extra}\r\n"
        ).encode() + body
        await self._stream.send(request)
        buffer = b""
        while b"\r\n\r\n" not in buffer:
            buffer += await self._stream.receive()
        head, buffer = buffer.split(b"\r\n\r\n", 1)
        status = head.split(b" ", 2)[1]
        if status != b"200" or b"chunked" not in head.lower():
            raise RuntimeError(f"answered {head[:200]!r}")
        body_parts: list[bytes] = []
        while True:
            while b"\r\n" not in buffer:
                buffer += await self._stream.receive()
            size_line, buffer = buffer.split(b"\r\n", 1)
            size = int(size_line, 16)
            while len(buffer) < size + 2:
                buffer += await self._stream.receive()
            body_parts.append(buffer[:size])
            if not first and marker in buffer[:size]:
                first = time.perf_counter()
            buffer = buffer[size + 2 :]
            if size == 0:
                break
        lines = [
            line for line in b"".join(body_parts).decode().splitlines() if line.startswith("data: ")
        ]
        return first, lines[-1] if lines else ""

    async def aclose(self) -> None:
        if self._stream is not None:
            await self._stream.aclose()


def _where(url: str | None) -> str:
    return "in-memory storage" if url is None else "PostgreSQL storage and run channel"


async def bench_concurrent(port: int, url: str | None) -> None:
    import json

    latencies: list[float] = []
    errors: list[str] = []
    connections = [_Connection(port) for _ in range(CLIENTS)]

    async def user(index: int, runs: int, record: bool) -> None:
        headers = {"x-user": f"user-{index}"}
        for _ in range(runs):
            body = json.dumps(_chat(uuid.uuid4().hex)).encode()
            started = time.perf_counter()
            try:
                _, last = await connections[index].run("/agents/bench/chat", body, headers)
            except Exception as error:
                errors.append(repr(error))
                return
            if last != "data: [DONE]":
                errors.append(f"the stream ended with {last[:100]!r}")
            elif record:
                latencies.append(time.perf_counter() - started)

    # Each client connects and runs once first: a burst of 100 new connections measures the
    # kernel's listen backlog (SYNs retried after 1 s), not the server.
    async with anyio.create_task_group() as tg:
        for index in range(CLIENTS):
            tg.start_soon(user, index, 1, False)
    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for index in range(CLIENTS):
            tg.start_soon(user, index, RUNS_PER_CLIENT, True)
    elapsed = time.perf_counter() - started
    for connection in connections:
        await connection.aclose()
    latencies.sort()
    print(
        f"{CLIENTS} concurrent streaming clients x {RUNS_PER_CLIENT} runs (/chat, 1 uvicorn worker, "
        f"model's first token after {FIRST_TOKEN * 1e3:.0f} ms; {_where(url)})"
    )
    print(f"  {len(latencies) / elapsed:8.1f} runs/s over {elapsed:.1f} s")
    if latencies:
        p50 = latencies[len(latencies) // 2]
        p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
        print(f"  latency of a whole run: p50 {p50 * 1e3:.1f} ms, p99 {p99 * 1e3:.1f} ms")
    print(f"  errors: {len(errors)}")
    if errors:
        print("   ", "\n    ".join(errors[:5]))
        raise SystemExit(1)


def _postgres_url() -> str | None:
    """The server's URL, or ``None`` after printing why the PostgreSQL part is skipped
    (exiting with status 1 instead when ``PAI_REQUIRE_POSTGRES=1``)."""
    url = os.environ.get("PAI_TEST_POSTGRES_URL", "")
    if url:
        return url
    reason = "PAI_TEST_POSTGRES_URL is not set (run under scripts/with-postgres.sh)"
    if os.environ.get("PAI_REQUIRE_POSTGRES") == "1":
        print(f"bench_http: PostgreSQL: FAILED: {reason} (and PAI_REQUIRE_POSTGRES=1)")
        sys.exit(1)
    print(f"bench_http: PostgreSQL: skipped: {reason}")
    return None


def _bench(url: str | None, schema: str | None) -> None:
    port = _free_port()
    command = [sys.executable, __file__, "--serve", str(port)]
    if url is not None and schema is not None:
        command += [url, schema]
    server = subprocess.Popen(command)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit("the server did not start") from None
                time.sleep(0.05)
        anyio.run(bench_first_token, port, url, schema)
        anyio.run(bench_concurrent, port, url)
    finally:
        server.terminate()
        server.wait(timeout=10)


def main() -> None:
    _bench(None, None)
    url = _postgres_url()
    if url is None:
        return
    import psycopg

    schema = f"bench_http_{uuid.uuid4().hex[:12]}"
    try:
        _bench(url, schema)
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'.encode())


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        serve(int(sys.argv[2]), *(sys.argv[3:5] or (None, None)))
    else:
        main()
