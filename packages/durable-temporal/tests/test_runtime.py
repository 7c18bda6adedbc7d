"""Durable runs through a real runtime on Temporal (the dev server): a durable run stores what a
plain run stores, its steps are recorded in Temporal's history under their pinned names in the
calls' order, and a run interrupted by closing its runtime is finished by the next one, only its
unfinished step performed again, on the runtime's event loop."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel
from temporal_crash_worker import Scenario, dumped
from temporalio.client import Client

from pai.core import (
    AgentRuntime,
    DurabilityError,
    InMemoryStorage,
    ModelRequest,
    SqliteStorage,
    ToolContext,
    create_agent_runtime,
    define_agent,
    define_tool,
)
from pai.core.ext import RunSpec, Storage
from pai.core.testing import FunctionModel, text, tool_call, tool_calls
from pai.durable_temporal import TemporalEngine

pytestmark = pytest.mark.anyio

STEPS = [
    "pai.app/instructions",
    "pai.app/history",
    "pai.model/1",
    "pai.tool/1/0/append",
    "pai.tool/1/1/append",
    "pai.append/1",
    "pai.model/2",
    "pai.tool/2/0/append",
    "pai.append/2",
    "pai.model/3",
    "pai.append/3",
    "pai.end",
]


def engine(temporal: str, task_queue: str) -> TemporalEngine:
    return TemporalEngine(
        target_host=temporal, task_queue=task_queue, heartbeat_timeout=2, shutdown_grace=0
    )


async def only_run(durable: TemporalEngine) -> str:
    deadline = time.monotonic() + 20
    while True:
        runs = await durable.list_runs()
        if runs or time.monotonic() > deadline:
            [run] = runs
            return run.run_id
        await asyncio.sleep(0.1)


async def recorded_steps(temporal: str, run_id: str) -> list[str]:
    """The activity ids of the run's scheduled steps, in the order Temporal recorded them."""
    client = await Client.connect(temporal)
    history = await client.get_workflow_handle(run_id).fetch_history()
    return [
        event.activity_task_scheduled_event_attributes.activity_id
        for event in history.events
        if event.HasField("activity_task_scheduled_event_attributes")
    ]


async def test_a_durable_run_stores_what_a_plain_run_stores(temporal: str, tmp_path: Path) -> None:
    (tmp_path / "durable").mkdir()
    (tmp_path / "plain").mkdir()
    durable = Scenario(tmp_path / "durable")
    storage = SqliteStorage(tmp_path / "durable" / "threads.sqlite")
    durable_engine = engine(temporal, f"rt-{uuid.uuid4().hex[:8]}")
    async with durable.build(storage, durable_engine) as runtime:
        thread = await runtime.admin(identity="ann").create_thread(thread_id="t")
        result = await thread.send("go")
        stored = dumped(await storage.get_messages("t"))
        run_id = await only_run(durable_engine)
    await storage.aclose()
    assert not durable_engine.started

    plain = Scenario(tmp_path / "plain")
    plain_storage = InMemoryStorage()
    async with plain.build(plain_storage, None) as runtime:
        thread = await runtime.admin(identity="ann").create_thread(thread_id="t")
        expected = await thread.send("go")
        plain_stored = dumped(await plain_storage.get_messages("t"))

    assert result.status == "completed"
    assert result.text == "done"
    assert result.steps == 3
    assert dumped(result.messages) == dumped(expected.messages)
    assert stored == plain_stored
    lines = sorted(entry.split("\t") for entry in durable.lines.read_text().splitlines())
    assert lines == [[f"{run_id}/1/0", "a"], [f"{run_id}/1/1", "b"], [f"{run_id}/2/0", "c"]]
    # Every step recorded once, numbered in the order asked for, under its pinned name.
    assert await recorded_steps(temporal, run_id) == [
        f"{number}/{name}" for number, name in enumerate(STEPS, 1)
    ]


class Line(BaseModel):
    line: str


class Gate:
    """Tool ``c`` waits for ``release``; ``b`` finishes before ``a``."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.where: list[tuple[int, asyncio.AbstractEventLoop]] = []
        self.reached_c = asyncio.Event()
        self.release = asyncio.Event()


def gated_runtime(storage: Storage, durable: TemporalEngine, gate: Gate) -> AgentRuntime:
    async def append(ctx: ToolContext[Line, Any]) -> str:
        line = ctx.input.line
        gate.ran.append(line)
        gate.where.append((threading.get_ident(), asyncio.get_running_loop()))
        if line == "a":
            await asyncio.sleep(0.2)
        if line == "c":
            gate.reached_c.set()
            await gate.release.wait()
        return f"appended {line} at {ctx.durable_call_id}"

    def model(request: ModelRequest) -> Any:
        if request.step == 1:
            return tool_calls(("append", {"line": "a"}), ("append", {"line": "b"}), ids=["x", "y"])
        if request.step == 2:
            return tool_call("append", {"line": "c"}, id="z")
        return text("done")

    agent = define_agent(
        name="main",
        model=FunctionModel(model),
        tools={
            "append": define_tool(
                id="append", description="append a line", input_schema=Line, execute=append
            )
        },
    )
    return create_agent_runtime(
        agent=agent, storage=storage, scope_key=lambda identity: "acme", durability=durable
    )


async def test_a_run_interrupted_by_closing_its_runtime_is_finished_by_the_next(
    temporal: str, tmp_path: Path
) -> None:
    task_queue = f"rt-{uuid.uuid4().hex[:8]}"
    storage = SqliteStorage(tmp_path / "threads.sqlite")
    gate = Gate()
    first = engine(temporal, task_queue)
    runtime = gated_runtime(storage, first, gate)
    await runtime.__aenter__()
    try:
        thread = await runtime.admin(identity="ann").create_thread(thread_id="t")
        sending = asyncio.ensure_future(thread.send("go"))
        await asyncio.wait_for(gate.reached_c.wait(), 30)
        assert sorted(gate.ran) == ["a", "b", "c"]
        run_id = await only_run(first)
    finally:
        await runtime.aclose()
    with pytest.raises(DurabilityError, match="interrupted"):
        await sending
    await storage.aclose()

    gate2 = Gate()
    gate2.release.set()
    second = engine(temporal, task_queue)
    storage = SqliteStorage(tmp_path / "threads.sqlite")
    async with gated_runtime(storage, second, gate2):
        client = await Client.connect(temporal)
        data = await asyncio.wait_for(second.run(await _spec(client, run_id)), 60)
        messages = dumped(await storage.get_messages("t"))
    await storage.aclose()
    assert data["status"] == "completed"
    assert data["text"] == "done"
    # Only c ran again (it never finished); a and b came from Temporal's record.
    assert gate2.ran == ["c"]
    [(thread_id, loop)] = gate2.where
    assert thread_id == threading.get_ident()
    assert loop is asyncio.get_running_loop()
    assert [m["role"] for m in messages] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert messages[2]["content"] == f"appended a at {run_id}/1/0"
    assert messages[3]["content"] == f"appended b at {run_id}/1/1"


async def _spec(client: Client, run_id: str) -> RunSpec:
    """The run's spec, read from its workflow's input."""
    history = await client.get_workflow_handle(run_id).fetch_history()
    started = history.events[0].workflow_execution_started_event_attributes
    [text_value] = await client.data_converter.decode(started.input.payloads, [str])
    return RunSpec.from_json(json.loads(text_value))


class Size(BaseModel):
    megabytes: int


class NoBlobs(SqliteStorage):
    """A thread storage that keeps no blobs (as a storage plugin may)."""

    put_blob = get_blob = delete_blobs = None  # type: ignore[assignment]


@pytest.mark.parametrize("blobs", [True, False])
async def test_a_tool_result_over_temporals_payload_limit(
    temporal: str, tmp_path: Path, blobs: bool
) -> None:
    """Temporal refuses payloads over 2 MB: a tool returning 3 MB is recorded as a reference to
    a blob of the thread when the storage keeps blobs, and the thread gets the 3 MB; without
    blobs the run fails at once, naming the step (not retried forever)."""
    big = "y" * (3 * 1024 * 1024)

    async def produce(ctx: ToolContext[Size, Any]) -> str:
        return big[: ctx.input.megabytes * 1024 * 1024]

    def model(request: ModelRequest) -> Any:
        if request.step == 1:
            return tool_call("produce", {"megabytes": 3}, id="p")
        [result] = [m for m in request.messages if m.role == "tool"]
        return text(f"got {len(result.content)} characters")

    tool = define_tool(id="produce", description="produce", input_schema=Size, execute=produce)
    agent = define_agent(name="main", model=FunctionModel(model), tools={"produce": tool})
    path = tmp_path / "threads.sqlite"
    storage = SqliteStorage(path) if blobs else NoBlobs(path)
    durable = engine(temporal, f"big-{uuid.uuid4().hex[:8]}")
    runtime = create_agent_runtime(
        agent=agent, storage=storage, scope_key=lambda identity: "acme", durability=durable
    )
    result = None
    async with runtime:
        thread = await runtime.admin(identity="ann").create_thread(thread_id="t")
        if blobs:
            result = await thread.send("go")
        else:
            with pytest.raises(DurabilityError, match=r"pai.tool/1/0/produce.*2000000 bytes"):
                with anyio.fail_after(60):
                    await thread.send("go")
    if result is not None:
        assert result.text == f"got {len(big)} characters"
        [tool_message] = [m for m in result.messages if m.role == "tool"]
        assert tool_message.content == big
    await storage.aclose()
