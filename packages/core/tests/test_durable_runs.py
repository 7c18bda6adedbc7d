"""Durable runs through the seam, on the in-memory JournalEngine: a crash at every step boundary
resumes to the uncrashed run's history, effects keyed by the durable call id happen once, a
replay that takes another path is named, and what crosses the seam is JSON."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from pai.core import (
    AgentRuntime,
    DurabilityError,
    DurableReplayError,
    InMemoryStorage,
    ModelRequest,
    RunResult,
    ToolContext,
    ToolEnabledInput,
    ToolEntry,
    create_agent_runtime,
    define_agent,
    define_tool,
)
from pai.core._durability import (
    append_step,
    end_step,
    history_step,
    instructions_step,
    model_step,
    tool_step,
)
from pai.core._messages import AssistantMessage, message_adapter
from pai.core.ext import BlobStore, RunSpec, Storage
from pai.core.testing import (
    FunctionModel,
    JournalEngine,
    SimulatedCrash,
    text,
    tool_call,
    tool_calls,
)

pytestmark = pytest.mark.anyio


class Line(BaseModel):
    line: str


@dataclass
class World:
    """The side effects outside PAI the tools make: ``lines`` keyed by the durable call id (an
    idempotent effect), ``bodies`` counting every execution of a tool body."""

    lines: list[str] = field(default_factory=list[str])
    seen: set[str] = field(default_factory=set[str])
    bodies: Counter[str] = field(default_factory=Counter[str])
    calls: Counter[int] = field(default_factory=Counter[int])
    identities: list[object] = field(default_factory=list[object])
    offer_note: bool = True


def script(request: ModelRequest) -> AssistantMessage:
    """Step 1: two appends at once; step 2: one more; step 3: the answer."""
    if request.step == 1:
        return tool_calls(("append", {"line": "a"}), ("append", {"line": "b"}), ids=["x", "y"])
    if request.step == 2:
        return tool_call("append", {"line": "c"}, id="z")
    return text("done")


def build(
    world: World, engine: JournalEngine, storage: Storage, identity_type: object | None = None
) -> AgentRuntime:
    async def append(ctx: ToolContext[Line, Any]) -> str:
        world.bodies[ctx.input.line] += 1
        world.identities.append(ctx.identity)
        key = ctx.durable_call_id
        assert key is not None
        if key not in world.seen:
            world.seen.add(key)
            world.lines.append(ctx.input.line)
        return f"appended {ctx.input.line}"

    def model(request: ModelRequest) -> AssistantMessage:
        world.calls[request.step] += 1
        return script(request)

    def note_enabled(check: ToolEnabledInput[Any]) -> bool:
        return world.offer_note

    tool = define_tool(id="append", description="append a line", input_schema=Line, execute=append)
    note = define_tool(id="note", description="a note", input_schema=Line, execute=append)
    agent = define_agent(
        name="main",
        model=FunctionModel(model),
        instructions=lambda run: f"you help {run.scope_key}",
        tools={"append": tool, "note": ToolEntry(tool=note, enabled=note_enabled)},
    )
    return create_agent_runtime(
        agent=agent,
        storage=storage,
        scope_key=lambda identity: "acme",
        durability=engine,
        durable_identity=identity_type,
    )


def dumped(messages: Any) -> list[Any]:
    return [message_adapter.dump_python(m, mode="json") for m in messages]


STEPS = [
    instructions_step(),
    history_step(),
    model_step(1),
    tool_step(1, 0, "append"),
    tool_step(1, 1, "append"),
    append_step(1),
    model_step(2),
    tool_step(2, 0, "append"),
    append_step(2),
    model_step(3),
    append_step(3),
    end_step(),
]


async def uncrashed() -> tuple[RunResult, list[Any], World]:
    world, engine, storage = World(), JournalEngine(), InMemoryStorage()
    async with build(world, engine, storage) as runtime:
        thread = await runtime.admin(identity="ann").create_thread(thread_id="t")
        result = await thread.send("go")
    return result, dumped(await storage.get_messages("t")), world


async def test_step_names_are_pinned() -> None:
    """Recorded runs replay only under the same names: this list is compatibility data."""
    assert STEPS == [
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
    world, engine, storage = World(), JournalEngine(), InMemoryStorage()
    async with build(world, engine, storage) as runtime:
        thread = await runtime.admin(identity="ann").create_thread(thread_id="t")
        await thread.send("go")
    names = [name for _, name in engine.executed]
    # The two parallel calls may finish in either order; their positions are fixed.
    assert sorted(names) == sorted(STEPS)
    [journal] = engine.journals.values()
    assert journal.names == STEPS


async def test_a_durable_run_stores_what_a_plain_run_stores() -> None:
    result, messages, world = await uncrashed()
    assert (result.status, result.text, result.steps) == ("completed", "done", 3)
    assert world.lines in (["a", "b", "c"], ["b", "a", "c"])
    plain_storage = InMemoryStorage()
    plain_world = World()

    async def append(ctx: ToolContext[Line, Any]) -> str:
        plain_world.lines.append(ctx.input.line)
        assert ctx.durable_call_id is None
        return f"appended {ctx.input.line}"

    agent = define_agent(
        name="main",
        model=FunctionModel(script),
        instructions=lambda run: f"you help {run.scope_key}",
        tools={
            "append": define_tool(
                id="append", description="append a line", input_schema=Line, execute=append
            ),
            "note": define_tool(id="note", description="a note", input_schema=Line, execute=append),
        },
    )
    async with create_agent_runtime(
        agent=agent, storage=plain_storage, scope_key=lambda identity: "acme"
    ) as runtime:
        thread = await runtime.admin(identity="ann").create_thread(thread_id="t")
        plain = await thread.send("go")
    assert dumped(await plain_storage.get_messages("t")) == messages
    assert dumped(plain.messages) == dumped(result.messages)
    assert plain.usage == result.usage


@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("crash_step", STEPS)
async def test_a_crash_at_any_step_resumes_to_the_uncrashed_history(
    crash_step: str, when: Literal["before", "after"]
) -> None:
    expected, expected_messages, _ = await uncrashed()
    world, engine, storage = World(), JournalEngine(), InMemoryStorage()
    engine.crash_at(crash_step, when=when)
    async with build(world, engine, storage) as runtime:
        thread = await runtime.admin(identity="ann").create_thread(thread_id="t")
        with pytest.raises(SimulatedCrash):
            await thread.send("go")
    assert engine.pending()
    # "The process restarts": a new runtime on the same storage and engine resumes the run.
    async with build(world, engine, storage) as runtime:
        [resumed] = await engine.recover()
    assert not engine.pending()
    assert (resumed["status"], resumed["text"]) == ("completed", expected.text)
    # The result names the run's messages by where they are in the thread.
    start, end = resumed["written"]
    assert dumped((await storage.get_messages("t"))[start:end]) == dumped(expected.messages)
    assert dumped(await storage.get_messages("t")) == expected_messages
    # Each effect keyed by the durable call id happened once; a tool body runs again only when
    # the crash came after it ran and before its step was recorded (a step is at least once).
    assert sorted(world.lines) == ["a", "b", "c"]
    again = crash_step.startswith("pai.tool/") and when == "after"
    assert sum(world.bodies.values()) == 3 + (1 if again else 0)
    # Each model step is asked once, unless the crash hit it after it answered.
    model_again = crash_step.startswith("pai.model/") and when == "after"
    assert sum(world.calls.values()) == 3 + (1 if model_again else 0)


async def test_a_finished_run_is_not_run_again() -> None:
    world, engine, storage = World(), JournalEngine(), InMemoryStorage()
    async with build(world, engine, storage) as runtime:
        thread = await runtime.admin(identity="ann").create_thread(thread_id="t")
        await thread.send("go")
        [run_id] = engine.journals
        again = await engine.run(engine.journals[run_id].spec)
    assert again["text"] == "done"
    assert sum(world.bodies.values()) == 3


async def test_a_predicate_is_recorded_with_its_model_step() -> None:
    """Predicates run inside the model step: what they answered the first time is what the
    replay offers, whatever they would answer now."""
    _, expected, _ = await uncrashed()
    world, engine, storage = World(), JournalEngine(), InMemoryStorage()
    engine.crash_at(tool_step(1, 0, "append"))
    async with build(world, engine, storage) as runtime:
        thread = await runtime.admin(identity="ann").create_thread(thread_id="t")
        with pytest.raises(SimulatedCrash):
            await thread.send("go")
    world.offer_note = False  # the predicate reads live state: not the same on replay
    async with build(world, engine, storage):
        [again] = await engine.recover()
    assert again["status"] == "completed"
    [journal] = engine.journals.values()
    recorded = journal.results[journal.names.index(model_step(1))]
    assert "note" in recorded["offered"]
    assert dumped(await storage.get_messages("t")) == expected


async def test_a_step_asked_with_another_payload_on_replay_is_named() -> None:
    world, engine, storage = World(), JournalEngine(), InMemoryStorage()
    engine.crash_at(model_step(2))
    async with build(world, engine, storage) as runtime:
        thread = await runtime.admin(identity="ann").create_thread(thread_id="t")
        with pytest.raises(SimulatedCrash):
            await thread.send("go")
    [journal] = engine.journals.values()
    at = journal.names.index(append_step(1))
    journal.payloads[at] = journal.payloads[at].replace('"position": 0', '"position": 7')
    async with build(world, engine, storage):
        with pytest.raises(DurableReplayError) as caught:
            await engine.recover()
    message = str(caught.value)
    assert "'pai.append/1'" in message
    assert "not deterministic" in message


async def test_a_changed_step_sequence_is_refused_on_replay() -> None:
    world, engine, storage = World(), JournalEngine(), InMemoryStorage()
    engine.crash_at(model_step(2))
    async with build(world, engine, storage) as runtime:
        thread = await runtime.admin(identity="ann").create_thread(thread_id="t")
        with pytest.raises(SimulatedCrash):
            await thread.send("go")
    [journal] = engine.journals.values()
    journal.names[3] = "pai.tool/1/0/other"  # as if the recording code had called another tool
    async with build(world, engine, storage):
        with pytest.raises(DurableReplayError, match=r"pai\.tool/1/0/other"):
            await engine.recover()


class Person(BaseModel):
    name: str
    team: str


async def test_identity_must_survive_json_or_name_its_type() -> None:
    world, engine, storage = World(), JournalEngine(), InMemoryStorage()
    async with build(world, engine, storage) as runtime:
        thread = await runtime.admin(identity=Person(name="ann", team="x")).create_thread()
        with pytest.raises(DurabilityError, match="durable_identity"):
            await thread.send("go")
    engine = JournalEngine()
    async with build(world, engine, storage, identity_type=Person) as runtime:
        admin = runtime.admin(identity=Person(name="ann", team="x"))
        thread = await admin.create_thread(thread_id="p")
        engine.crash_at(model_step(2))
        with pytest.raises(SimulatedCrash):
            await thread.send("go")
    [journal] = engine.journals.values()
    assert journal.spec.identity == {"name": "ann", "team": "x"}
    world.identities.clear()
    async with build(world, engine, storage, identity_type=Person):
        await engine.recover()
    assert journal.done
    # The resumed run's tool saw the identity rebuilt as its type, not as a dict.
    assert world.identities == [Person(name="ann", team="x")]


async def test_submitted_tool_results_run_durably() -> None:
    engine, storage = JournalEngine(), InMemoryStorage()
    external = define_tool(id="ask", description="ask a human", input_schema=Line)

    def model(request: ModelRequest) -> AssistantMessage:
        if request.step == 1 and request.messages[-1].role == "user":
            return tool_call("ask", {"line": "ok?"}, id="q")
        last = request.messages[-1]
        assert last.role == "tool"
        return text(f"human said {last.content}")

    agent = define_agent(name="main", model=FunctionModel(model), tools={"ask": external})
    async with create_agent_runtime(
        agent=agent, storage=storage, scope_key=lambda i: "s", durability=engine
    ) as runtime:
        thread = await runtime.admin(identity=None).create_thread(thread_id="t")
        first = await thread.send("go")
        assert first.status == "awaiting_tool_results"
        assert [c.id for c in first.pending_tool_calls] == ["q"]
        engine.crash_at(append_step(1), when="after")
        with pytest.raises(SimulatedCrash):
            await thread.submit_tool_results({"q": "yes"})
        [done] = await engine.recover()
    assert done["text"] == "human said yes"
    roles = [m.role for m in await storage.get_messages("t")]
    assert roles == ["user", "assistant", "tool", "assistant"]


def test_a_run_spec_round_trips_and_refuses_what_pai_did_not_write() -> None:
    spec = RunSpec(
        run_id="r",
        kind="send",
        thread_id="t",
        agent_name="main",
        scope_key="s",
        user_key=None,
        identity={"id": 1},
        staged=({"role": "user", "content": "hi"},),
    )
    assert RunSpec.from_json(spec.to_json()) == spec
    with pytest.raises(DurabilityError, match="version"):
        RunSpec.from_json({**spec.to_json(), "version": 99})
    with pytest.raises(DurabilityError, match="'kind'"):
        RunSpec.from_json({**spec.to_json(), "kind": "delete"})
    with pytest.raises(DurabilityError, match="JSON object"):
        RunSpec.from_json(["not", "a", "spec"])


def test_a_runtime_without_durability_never_imports_the_durable_loop() -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from pai.core import create_agent_runtime, define_agent\n"
        "from pai.core.testing import text, ScriptedModel\n"
        "rt = create_agent_runtime(agent=define_agent(name='a', model=ScriptedModel([text('x')])),"
        " storage=__import__('pai.core', fromlist=['x']).InMemoryStorage(),"
        " scope_key=lambda i: 's')\n"
        "print('pai.core._durable' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


async def test_a_streamed_durable_run_streams_its_first_execution() -> None:
    from pai.core import RunFinished, ToolCallResult

    world, engine, storage = World(), JournalEngine(), InMemoryStorage()
    async with build(world, engine, storage) as runtime:
        thread = await runtime.admin(identity="ann").create_thread(thread_id="t")
        events = [event async for event in thread.stream("go")]
    results = [e for e in events if isinstance(e, ToolCallResult)]
    assert len(results) == 3
    assert isinstance(events[-1], RunFinished)
    assert events[-1].result.text == "done"


async def test_a_subagent_runs_inside_its_parents_tool_step() -> None:
    engine, storage = JournalEngine(), InMemoryStorage()

    def child_model(request: ModelRequest) -> AssistantMessage:
        return text("child done")

    def parent_model(request: ModelRequest) -> AssistantMessage:
        if request.step == 1:
            return tool_call("helper", {"task": "help"}, id="h")
        return text("parent done")

    child = define_agent(name="helper", model=FunctionModel(child_model))
    parent = define_agent(
        name="main", model=FunctionModel(parent_model), subagents={"helper": child}
    )
    async with create_agent_runtime(
        agent=parent, storage=storage, scope_key=lambda i: "s", durability=engine
    ) as runtime:
        thread = await runtime.admin(identity=None).create_thread(thread_id="t")
        result = await thread.send("go")
    assert result.text == "parent done"
    [journal] = engine.journals.values()
    assert "pai.tool/1/0/helper" in journal.names


async def test_effects_of_a_call_get_the_same_keys_on_replay() -> None:
    from pai.core import current_durable_call

    keys: list[list[str]] = []
    engine, storage = JournalEngine(), InMemoryStorage()

    async def effects(ctx: ToolContext[Line, Any]) -> str:
        call = current_durable_call()
        assert call is not None
        assert call.id == ctx.durable_call_id
        keys.append([call.next_key("sandbox.command"), call.next_key("sandbox.command")])
        return "ok"

    def model(request: ModelRequest) -> AssistantMessage:
        return tool_call("fx", {"line": "x"}, id="f") if request.step == 1 else text("done")

    tool = define_tool(id="fx", description="effects", input_schema=Line, execute=effects)
    agent = define_agent(name="main", model=FunctionModel(model), tools={"fx": tool})
    engine.crash_at(tool_step(1, 0, "fx"), when="after")
    async with create_agent_runtime(
        agent=agent, storage=storage, scope_key=lambda i: "s", durability=engine
    ) as runtime:
        thread = await runtime.admin(identity=None).create_thread(thread_id="t")
        with pytest.raises(SimulatedCrash):
            await thread.send("go")
        await engine.recover()
    [run_id] = engine.journals
    assert keys == [[f"{run_id}/1/0/sandbox.command/0", f"{run_id}/1/0/sandbox.command/1"]] * 2
    assert current_durable_call() is None


# -- large tool results: kept as blobs of the thread, referenced by the recorded steps -------------

BIG = "x" * (600 * 1024)


def big_runtime(engine: JournalEngine, storage: Storage) -> AgentRuntime:
    async def dump(ctx: ToolContext[Line, Any]) -> str:
        return BIG + ctx.input.line

    def model(request: ModelRequest) -> AssistantMessage:
        if request.step == 1:
            return tool_calls(("dump", {"line": "1"}), ("dump", {"line": "2"}), ids=["a", "b"])
        assert [m.content for m in request.messages if m.role == "tool"] == [BIG + "1", BIG + "2"]
        return text("done")

    tool = define_tool(id="dump", description="dump", input_schema=Line, execute=dump)
    agent = define_agent(name="main", model=FunctionModel(model), tools={"dump": tool})
    return create_agent_runtime(
        agent=agent, storage=storage, scope_key=lambda identity: "acme", durability=engine
    )


def largest_record(engine: JournalEngine) -> int:
    [journal] = engine.journals.values()
    recorded = [len(json.dumps(value)) for value in journal.results.values()]
    return max([*recorded, *(len(text) for text in journal.payloads)])


@pytest.mark.parametrize("crash", [None, "after", "before"])
async def test_a_large_tool_result_is_recorded_as_a_blob_of_the_thread(
    crash: Literal["before", "after"] | None,
) -> None:
    engine, storage = JournalEngine(), InMemoryStorage()
    if crash is not None:
        # After: the blob is written and the step recorded, the append not done yet.
        engine.crash_at(append_step(1), when="before" if crash == "after" else "after")
    async with big_runtime(engine, storage) as runtime:
        thread = await runtime.admin(identity="ann").create_thread(thread_id="t")
        if crash is None:
            result = await thread.send("go")
            assert [m.content for m in result.messages if m.role == "tool"] == [
                BIG + "1",
                BIG + "2",
            ]
        else:
            with pytest.raises(SimulatedCrash):
                await thread.send("go")
            assert (
                await storage.get_blob(
                    "t", f"pai.durable/{engine.pending()[0]}/{tool_step(1, 0, 'dump')}"
                )
                is not None
            )
    if crash is not None:
        async with big_runtime(engine, storage):
            [again] = await engine.recover()
        assert again["status"] == "completed"
    # Every recorded step result and payload is small: the outputs are references.
    assert largest_record(engine) < 10_000
    stored = [m.content for m in await storage.get_messages("t") if m.role == "tool"]
    assert stored == [BIG + "1", BIG + "2"]
    # The run's blobs went with its end.
    [run_id] = engine.journals
    assert await storage.delete_blobs("t", f"pai.durable/{run_id}/") == 0


async def test_without_blobs_a_large_tool_result_is_recorded_as_it_is() -> None:
    class NoBlobs(InMemoryStorage):
        put_blob = get_blob = delete_blobs = None  # type: ignore[assignment]

    storage = NoBlobs()
    assert not isinstance(storage, BlobStore)
    engine = JournalEngine()
    async with big_runtime(engine, storage) as runtime:
        thread = await runtime.admin(identity="ann").create_thread(thread_id="t")
        await thread.send("go")
    assert largest_record(engine) > len(BIG)
