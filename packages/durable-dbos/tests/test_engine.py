"""DbosEngine in this process, on real DBOS with SQLite files under tmp_path: a durable run stores
what a plain run stores, steps are recorded under their pinned names at fixed positions (parallel
calls included), a run interrupted by closing its runtime resumes on the next start on the
runtime's own loop, errors reach the caller, and what cannot work says why."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from dbos_crash_worker import Scenario, dumped

from pai.core import (
    DurabilityError,
    InMemoryStorage,
    ModelRequest,
    SqliteStorage,
    ToolContext,
    create_agent_runtime,
    define_agent,
    define_tool,
)
from pai.core.ext import DurableHost, RunSpec, Steps
from pai.core.testing import FunctionModel, text, tool_calls
from pai.durable_dbos import DbosEngine, DbosEngineError

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


def engine_at(folder: Path, **options: Any) -> DbosEngine:
    return DbosEngine(
        system_database_url=f"sqlite:///{folder / 'dbos.sqlite'}",
        executor_id="pai:test",
        recovery_interval=0.1,
        **options,
    )


async def recorded_steps(run_id: str) -> list[tuple[int, str]]:
    from dbos import DBOS

    steps = await DBOS.list_workflow_steps_async(run_id, load_output=False)
    return sorted((step["function_id"], step["function_name"]) for step in steps)


async def test_a_durable_run_stores_what_a_plain_run_stores(tmp_path: Path) -> None:
    (tmp_path / "durable").mkdir()
    (tmp_path / "plain").mkdir()
    durable = Scenario(tmp_path / "durable")
    storage = SqliteStorage(tmp_path / "durable" / "threads.sqlite")
    engine = engine_at(tmp_path / "durable")
    async with durable.build(storage, engine) as runtime:
        thread = await runtime.admin(identity="ann").create_thread(thread_id="t")
        result = await thread.send("go")
        [workflow] = await _workflows()
        run_id = workflow.workflow_id
        steps = await recorded_steps(run_id)
        stored = dumped(await storage.get_messages("t"))
    assert not engine.started

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
    assert result.usage == expected.usage
    assert stored == plain_stored
    # The same effects, keyed by the durable call id (the plain run has none).
    # (a and b run at once: their lines come in either order).
    lines = sorted(entry.split("\t") for entry in durable.lines.read_text().splitlines())
    assert lines == [[f"{run_id}/1/0", "a"], [f"{run_id}/1/1", "b"], [f"{run_id}/2/0", "c"]]
    # Every step recorded once, numbered in the order taken, under its pinned name.
    assert [name for _, name in steps] == STEPS
    assert [number for number, _ in steps] == list(range(1, len(STEPS) + 1))


async def _workflows() -> list[Any]:
    from dbos import DBOS

    return list(await DBOS.list_workflows_async())


async def test_a_finished_run_is_attached_to_not_run_again(tmp_path: Path) -> None:
    scenario = Scenario(tmp_path)
    storage = InMemoryStorage()
    engine = engine_at(tmp_path)
    async with scenario.build(storage, engine) as runtime:
        thread = await runtime.admin(identity="ann").create_thread(thread_id="t")
        first = await thread.send("go")
        [workflow] = await _workflows()
        spec = RunSpec.from_json(_spec_of(workflow))
        again = await engine.run(spec)
        start, end = again["written"]
        assert dumped((await storage.get_messages("t"))[start:end]) == dumped(first.messages)
    assert again["text"] == first.text == "done"
    events = scenario.events.read_text().split()
    assert events.count("tool:a:before") == 1
    assert events.count("model:1") == 1


def _spec_of(workflow: Any) -> Any:
    """The run spec a workflow was started with (PAI records it as JSON text)."""
    return json.loads(workflow.input["args"][0])


class Gate:
    """Tool bodies that wait: ``a`` finishes after ``b`` (so the order the calls finish in differs
    from their order), and ``c`` blocks until released (so the run can be interrupted there)."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.reached_c = asyncio.Event()
        self.b_done = asyncio.Event()
        self.ran: list[str] = []
        self.finished: list[str] = []
        self.where: list[tuple[int, asyncio.AbstractEventLoop]] = []


def gated_runtime(storage: Any, engine: DbosEngine, gate: Gate) -> Any:
    from pydantic import BaseModel

    class Line(BaseModel):
        line: str

    async def append(ctx: ToolContext[Line, Any]) -> str:
        line = ctx.input.line
        gate.ran.append(line)
        gate.where.append((threading.get_ident(), asyncio.get_running_loop()))
        if line == "a":
            await asyncio.wait_for(gate.b_done.wait(), 10)
        if line == "c":
            gate.reached_c.set()
            await gate.release.wait()
        gate.finished.append(line)
        if line == "b":
            gate.b_done.set()
        return f"appended {line} at {ctx.durable_call_id}"

    def model(request: ModelRequest) -> Any:
        if request.step == 1:
            return tool_calls(("append", {"line": "a"}), ("append", {"line": "b"}), ids=["x", "y"])
        if request.step == 2:
            return tool_calls(("append", {"line": "c"}), ids=["z"])
        return text("done")

    agent = define_agent(
        name="main",
        model=FunctionModel(model),
        tools={
            "append": define_tool(
                id="append", description="append", input_schema=Line, execute=append
            )
        },
    )
    return create_agent_runtime(
        agent=agent, storage=storage, scope_key=lambda identity: "acme", durability=engine
    )


async def test_an_interrupted_run_resumes_at_the_next_start_on_the_runtime_loop(
    tmp_path: Path,
) -> None:
    """Closing the runtime while a run waits inside tool ``c`` leaves the run pending; the next
    start resumes it: the parallel calls of step 1 (which finished b first) are replayed from
    their positions, not run again, and the resumed run executes on this test's event loop."""
    storage = SqliteStorage(tmp_path / "threads.sqlite")
    gate = Gate()
    engine = engine_at(tmp_path)
    runtime = gated_runtime(storage, engine, gate)
    await runtime.__aenter__()
    try:
        thread = await runtime.admin(identity="ann").create_thread(thread_id="t")
        sending = asyncio.ensure_future(thread.send("go"))
        await asyncio.wait_for(gate.reached_c.wait(), 30)
        assert sorted(gate.ran[:2]) == ["a", "b"]
        assert gate.ran[2:] == ["c"]
        assert gate.finished == ["b", "a"]
        [workflow] = await _workflows()
        run_id = workflow.workflow_id
        # b finished before a; their step numbers are still those of the calls' order.
        steps = await recorded_steps(run_id)
        assert steps[:4] == [
            (1, "pai.app/history"),
            (2, "pai.model/1"),
            (3, "pai.tool/1/0/append"),
            (4, "pai.tool/1/1/append"),
        ]
    finally:
        await runtime.aclose()
    with pytest.raises(DurabilityError, match="interrupted"):
        await sending

    gate2 = Gate()
    gate2.release.set()
    engine2 = engine_at(tmp_path)
    storage = SqliteStorage(tmp_path / "threads.sqlite")
    async with gated_runtime(storage, engine2, gate2):
        data = await asyncio.wait_for(engine2.run(RunSpec.from_json(_spec_of(workflow))), 30)
        messages = dumped(await storage.get_messages("t"))
    assert data["status"] == "completed"
    assert data["text"] == "done"
    # Only c ran again (it never finished); a and b came from the record.
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


class Probe:
    """A host whose workflow code is ``body(steps)`` and whose steps' work is ``work(name,
    payload)``."""

    def __init__(self, body: Any, work: Any = None) -> None:
        self.body = body
        self.work = work

    async def execute(self, spec: RunSpec, steps: Steps) -> Any:
        return await self.body(steps)

    async def perform(self, spec: RunSpec, name: str, payload: Any) -> Any:
        return await self.work(name, payload)


def spec(run_id: str = "r1", **fields: Any) -> RunSpec:
    return RunSpec(
        run_id=run_id,
        kind="send",
        thread_id="t",
        agent_name="main",
        scope_key="acme",
        user_key=None,
        **fields,
    )


async def test_what_is_not_json_is_named(tmp_path: Path) -> None:
    async def not_json_step(steps: Steps) -> Any:
        return await steps.step("pai.model/1", {"n": 1})

    async def not_json_payload(steps: Steps) -> Any:
        return await steps.step("pai.model/1", {"n": object()})

    async def work(name: str, payload: Any) -> Any:
        if name == "s":
            return (1, "x")
        return {"when": object()}

    engine = engine_at(tmp_path)
    host: DurableHost = Probe(not_json_step, work)
    await engine.start(host)
    try:
        with pytest.raises(DurabilityError, match=r"step 'pai.model/1' of durable run 'r1'.*JSON"):
            await engine.run(spec("r1"))
        engine_host = engine._host
        assert isinstance(engine_host, Probe)
        engine_host.body = not_json_payload
        with pytest.raises(DurabilityError, match=r"payload of step 'pai.model/1'.*not JSON"):
            await engine.run(spec("r0"))
        with pytest.raises(DurabilityError, match=r"input of durable run 'r2'.*not JSON"):
            await engine.run(spec("r2", identity={1, 2}))

        async def not_json_result(steps: Steps) -> Any:
            return (x for x in ())

        engine_host.body = not_json_result
        with pytest.raises(DurabilityError, match=r"durable run 'r3' returned generator"):
            await engine.run(spec("r3"))
        # A step's JSON comes back as JSON, the first time as on replay: a tuple is a list.

        async def tuple_step(steps: Steps) -> Any:
            return await steps.step("s")

        engine_host.body = tuple_step
        assert await engine.run(spec("r4")) == [1, "x"]
    finally:
        await engine.aclose()


class Unpicklable(Exception):
    def __init__(self, message: str, *, code: int) -> None:
        super().__init__(message)
        self.code = code


async def test_a_run_error_reaches_the_caller_and_attaching_raises_it_again(
    tmp_path: Path,
) -> None:
    calls: list[str] = []

    async def failing(steps: Steps) -> Any:
        return await steps.step("fail")

    async def unpicklable(steps: Steps) -> Any:
        return await steps.step("unpicklable")

    async def work(name: str, payload: Any) -> Any:
        if name == "fail":
            calls.append("body")
            raise LookupError("no such thing")
        raise Unpicklable("bad input", code=3)

    engine = engine_at(tmp_path)
    probe = Probe(failing, work)
    await engine.start(probe)
    try:
        with pytest.raises(LookupError, match="no such thing"):
            await engine.run(spec("f1"))
        with pytest.raises(LookupError, match="no such thing"):
            await engine.run(spec("f1"))  # attached: raised from DBOS's record
        assert calls == ["body"]
        probe.body = unpicklable
        with pytest.raises(DbosEngineError, match=r"Unpicklable: bad input") as caught:
            await engine.run(spec("f2"))
        assert isinstance(caught.value.__cause__, Unpicklable)
        with pytest.raises(DbosEngineError, match=r"Unpicklable: bad input"):
            await engine.run(spec("f2"))
    finally:
        await engine.aclose()


@pytest.mark.parametrize("anyio_backend", ["trio"])
async def test_trio_is_refused_clearly(tmp_path: Path) -> None:
    engine = engine_at(tmp_path)
    runtime = Scenario(tmp_path).build(InMemoryStorage(), engine)
    with pytest.raises(DurabilityError, match=r"asyncio only.*trio"):
        async with runtime:
            pass
    assert not engine.started


async def test_one_engine_per_process_and_start_after_close(tmp_path: Path) -> None:
    first, second = engine_at(tmp_path / "a"), engine_at(tmp_path / "b")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    host = Probe(None)
    await first.start(host)
    try:
        await first.start(host)  # idempotent for its host
        with pytest.raises(DbosEngineError, match="another runtime"):
            await first.start(Probe(None))
        with pytest.raises(DbosEngineError, match="DBOS already runs in this process"):
            await second.start(host)
    finally:
        await first.aclose()
    await second.start(host)
    await second.aclose()
    # The loop's default executor works after DBOS shut its own down.
    assert await asyncio.to_thread(lambda: 7) == 7


def hold_executor_id(url: str) -> subprocess.Popen[str]:
    """A live process holding executor id ``pai:test`` on ``url`` (until killed)."""
    code = (
        "import sys, time\n"
        "from pai.durable_dbos._executor import ExecutorLock\n"
        "from pai.durable_dbos import DbosOptions\n"
        "options = DbosOptions(system_database_url=sys.argv[1], executor_id='pai:test')\n"
        "lock = ExecutorLock(options)\n"
        "lock.acquire()\n"
        "print('held', flush=True)\n"
        "time.sleep(60)\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", code, url], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "held"
    return holder


async def test_a_live_holder_of_the_executor_id_is_named(tmp_path: Path) -> None:
    holder = hold_executor_id(f"sqlite:///{tmp_path / 'dbos.sqlite'}")
    try:
        engine = engine_at(tmp_path)
        with pytest.raises(DbosEngineError, match=rf"'pai:test' is held by .*pid {holder.pid}"):
            await engine.start(Probe(None))
        assert not engine.started
    finally:
        holder.kill()
        holder.wait()
    # Its death released the lock.
    engine = engine_at(tmp_path)
    await engine.start(Probe(None))
    await engine.aclose()


async def test_a_standby_waits_for_the_holder_and_takes_over_when_it_dies(
    tmp_path: Path,
) -> None:
    import anyio

    holder = hold_executor_id(f"sqlite:///{tmp_path / 'dbos.sqlite'}")
    engine = engine_at(tmp_path, standby=True)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(engine.start, Probe(None))
            await anyio.sleep(0.5)
            assert not engine.started  # waiting: the holder lives
            holder.kill()
            holder.wait()
            with anyio.fail_after(30):
                while not engine.started:  # noqa: ASYNC110
                    await anyio.sleep(0.02)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        await engine.aclose()


async def test_a_cancelled_standby_leaves_the_executor_id_free(tmp_path: Path) -> None:
    import anyio

    holder = hold_executor_id(f"sqlite:///{tmp_path / 'dbos.sqlite'}")
    try:
        with anyio.move_on_after(0.3):
            await engine_at(tmp_path, standby=True).start(Probe(None))
    finally:
        holder.kill()
        holder.wait()
    engine = engine_at(tmp_path)
    await engine.start(Probe(None))  # nothing of the cancelled standby holds the id
    await engine.aclose()


def test_importing_the_package_does_not_import_dbos() -> None:
    code = (
        "import sys\n"
        "from pai.durable_dbos import DbosEngine, DbosOptions\n"
        "import pai.durable_dbos._plugin\n"
        "DbosEngine(system_database_url='sqlite:///x.sqlite')\n"
        "print('dbos' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


async def test_a_tool_may_start_a_durable_run_of_its_own(tmp_path: Path) -> None:
    """A run started inside another run's tool call (a sub-agent on another thread) is a DBOS
    workflow of its own, not a child of the tool's step: both complete and both are recorded."""
    from pydantic import BaseModel

    class Ask(BaseModel):
        question: str

    threads: dict[str, Any] = {}

    async def delegate(ctx: ToolContext[Ask, Any]) -> str:
        inner = await threads["inner"].send(ctx.input.question)
        return f"the helper said {inner.text}"

    def model(request: ModelRequest) -> Any:
        last = request.messages[-1]
        content = getattr(last, "content", None)
        if last.role == "user" and content == "go":
            return tool_calls(("delegate", {"question": "ping"}), ids=["d"])
        if last.role == "user":
            return text(f"pong to {content}")
        return text(f"done: {content}")

    agent = define_agent(
        name="main",
        model=FunctionModel(model),
        tools={
            "delegate": define_tool(
                id="delegate", description="ask", input_schema=Ask, execute=delegate
            )
        },
    )
    engine = engine_at(tmp_path)
    async with create_agent_runtime(
        agent=agent, storage=InMemoryStorage(), scope_key=lambda i: "acme", durability=engine
    ) as runtime:
        admin = runtime.admin(identity="ann")
        outer = await admin.create_thread(thread_id="outer")
        threads["inner"] = await admin.create_thread(thread_id="inner")
        result = await asyncio.wait_for(outer.send("go"), 30)
        workflows = await _workflows()
    assert result.text == "done: the helper said pong to ping"
    assert sorted(w.status for w in workflows) == ["SUCCESS", "SUCCESS"]
    assert all(w.parent_workflow_id is None for w in workflows)
