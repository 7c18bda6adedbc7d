"""Two server processes on one PostgreSQL database: a run started in one is resumed, attended,
limited and cancelled through the other (the PostgreSQL run channel)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from http_helpers import ACME, agui_body, sse

from pai.storage_postgres.testing import TestSchemas, postgres_test_url

TESTS = Path(__file__).parent


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def _server(url: str, schema: str) -> Iterator[str]:
    port = _port()
    env = {
        **os.environ,
        "PAI_TEST_POSTGRES_URL": url,
        "PAI_TEST_SCHEMA": schema,
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
    }
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "--factory",
            "process_app:make_app",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                output = process.stdout.read().decode() if process.stdout else ""
                raise AssertionError(f"the server exited ({process.returncode}): {output}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                    break
            assert time.monotonic() < deadline, "the server did not become ready in 30 s"
            time.sleep(0.1)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def two_servers() -> Iterator[tuple[str, str]]:
    url = postgres_test_url()
    with TestSchemas(url) as schemas:
        schema = schemas.fresh()
        with _server(url, schema) as first, _server(url, schema) as second:
            yield first, second


def test_a_run_of_one_process_is_resumed_limited_and_cancelled_through_another(
    two_servers: tuple[str, str],
) -> None:
    a, b = two_servers
    # Start a slow run on A, read its first events, and drop the connection.
    with httpx.stream(
        "POST",
        f"{a}/agents/coder/ag-ui",
        json=agui_body("t-x", "slow please"),
        headers=ACME,
        timeout=30,
    ) as response:
        assert response.status_code == 200
        run_id = response.headers["x-pai-run-id"]
        seen: list[tuple[int | None, str]] = []
        for event in sse(response):
            seen.append(event)
            if len(seen) == 4:
                break
    assert [i for i, _ in seen] == [1, 2, 3, 4]

    # B knows the run: it is the thread's live run, and another run of the caller (limit 1,
    # counted across processes) or on the thread is refused.
    thread = httpx.get(f"{b}/threads/t-x", headers=ACME).json()
    assert thread["live_run_id"] == run_id
    busy = httpx.post(f"{b}/agents/coder/ag-ui", json=agui_body("t-x", "run it"), headers=ACME)
    assert busy.status_code == 409
    assert run_id in busy.json()["error"]["message"]
    limited = httpx.post(f"{b}/agents/coder/ag-ui", json=agui_body("t-y", "run it"), headers=ACME)
    assert limited.status_code == 429

    # Resume through B from the last event seen: every later event once, in order. Reading
    # through B for longer than A's reattach grace (1 s) keeps the run going.
    with httpx.stream(
        "GET",
        f"{b}/threads/t-x/runs/{run_id}/events",
        headers={**ACME, "Last-Event-ID": "4"},
        timeout=30,
    ) as resumed:
        assert resumed.status_code == 200
        later: list[tuple[int | None, str]] = []
        started = time.monotonic()
        cancelled = False
        for event in sse(resumed):
            later.append(event)
            if not cancelled and time.monotonic() - started > 2.5:
                cancel = httpx.post(f"{b}/threads/t-x/runs/{run_id}/cancel", headers=ACME)
                assert cancel.status_code == 202
                cancelled = True
    ids = [i for i, _ in later]
    assert ids == list(range(5, 5 + len(ids)))
    events = [json.loads(data) for _, data in later]
    contents = [e for e in events if e["type"] == "TEXT_MESSAGE_CONTENT"]
    assert len(contents) > 30, "the run stopped early: A did not see B's reader"
    assert events[-1]["type"] == "RUN_ERROR"
    assert events[-1]["message"] == "the run was cancelled on request"

    # Ended everywhere: the thread is free in A and B, and nothing partial was stored.
    for server in (a, b):
        deadline = time.monotonic() + 10
        while httpx.get(f"{server}/threads/t-x", headers=ACME).json()["live_run_id"] is not None:
            assert time.monotonic() < deadline, "the run did not end"
            time.sleep(0.1)
    stored = httpx.get(f"{b}/threads/t-x/messages", headers=ACME).json()["messages"]
    assert stored == []
    # A replay from the start through A holds the same events as the live streams did.
    with httpx.stream(
        "GET", f"{a}/threads/t-x/runs/{run_id}/events", headers={**ACME, "Last-Event-ID": "0"}
    ) as replay:
        assert list(sse(replay)) == seen + later


def test_a_run_nobody_reads_in_any_process_is_cancelled(two_servers: tuple[str, str]) -> None:
    a, b = two_servers
    with httpx.stream(
        "POST",
        f"{a}/agents/coder/ag-ui",
        json=agui_body("t-z", "slow please"),
        headers=ACME,
        timeout=30,
    ) as response:
        run_id = response.headers["x-pai-run-id"]
        next(iter(sse(response)))
    deadline = time.monotonic() + 15
    while httpx.get(f"{b}/threads/t-z", headers=ACME).json()["live_run_id"] is not None:
        assert time.monotonic() < deadline, "the run went on with nobody reading"
        time.sleep(0.1)
    with httpx.stream(
        "GET", f"{b}/threads/t-z/runs/{run_id}/events", headers={**ACME, "Last-Event-ID": "0"}
    ) as replay:
        events = [json.loads(data) for _, data in sse(replay)]
    assert events[-1]["type"] == "RUN_ERROR"
    assert "disconnected" in events[-1]["message"]
