"""Tool calls that need a human's approval: the run stops with them pending, the approval (or
denial) comes with ``submit_tool_results``, and the approved call runs exactly once, in plain
runs, through another runtime on the same storage, and in durable runs across crashes."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio
import pytest
from pydantic import BaseModel

from pai.core import (
    AgentRuntime,
    DefinitionError,
    InMemoryStorage,
    ModelRequest,
    RunResult,
    SqliteStorage,
    ToolApproval,
    ToolContext,
    ToolResultMessage,
    create_agent_runtime,
    define_agent,
    define_tool,
)
from pai.core._durability import (
    append_step,
    durable_call_id,
    end_step,
    history_step,
    model_step,
    tool_step,
)
from pai.core._messages import AssistantMessage, message_adapter
from pai.core.ext import Storage
from pai.core.testing import (
    FunctionModel,
    JournalEngine,
    SimulatedCrash,
    text,
    tool_call,
    tool_calls,
)

pytestmark = pytest.mark.anyio


class Payment(BaseModel):
    amount: int


class Question(BaseModel):
    text: str


@dataclass
class World:
    """What the tools did: ``bodies`` counts every run of a tool body, ``paid`` the payments
    made (keyed by the durable call id in durable runs: an idempotent effect)."""

    bodies: Counter[str] = field(default_factory=Counter[str])
    paid: list[int] = field(default_factory=list[int])
    keys: set[str] = field(default_factory=set[str])
    call_ids: list[str | None] = field(default_factory=list[str | None])
    delay: float = 0.0


def first_step(request: ModelRequest) -> AssistantMessage:
    return tool_call("pay", {"amount": 5}, id="p")


def agent_of(world: World, first: Any = first_step) -> Any:
    async def pay(ctx: ToolContext[Payment, Any]) -> str:
        world.bodies["pay"] += 1
        world.call_ids.append(ctx.durable_call_id)
        if world.delay:
            await anyio.sleep(world.delay)
        key = ctx.durable_call_id
        if key is None or key not in world.keys:
            if key is not None:
                world.keys.add(key)
            world.paid.append(ctx.input.amount)
        return f"paid {ctx.input.amount}"

    def note(ctx: ToolContext[Question, Any]) -> str:
        world.bodies["note"] += 1
        return f"noted {ctx.input.text}"

    def model(request: ModelRequest) -> AssistantMessage:
        last = request.messages[-1]
        if last.role == "user":
            return first(request)
        results = [m.content for m in request.messages if isinstance(m, ToolResultMessage)]
        return text("model saw " + " | ".join(str(r) for r in results))

    return define_agent(
        name="main",
        model=FunctionModel(model),
        instructions="you pay",
        tools={
            "pay": define_tool(
                id="pay",
                description="pay an amount",
                input_schema=Payment,
                execute=pay,
                needs_approval=True,
            ),
            "ask": define_tool(id="ask", description="ask a human", input_schema=Question),
            "note": define_tool(
                id="note", description="take a note", input_schema=Question, execute=note
            ),
        },
    )


def runtime_of(
    world: World, storage: Storage, engine: JournalEngine | None = None, first: Any = first_step
) -> AgentRuntime:
    return create_agent_runtime(
        agent=agent_of(world, first),
        storage=storage,
        scope_key=lambda identity: "acme",
        durability=engine,
    )


def dumped(messages: Any) -> list[Any]:
    return [message_adapter.dump_python(m, mode="json") for m in messages]


# -- defining -----------------------------------------------------------------------------------


def test_needs_approval_is_stored_and_needs_execute() -> None:
    tool = define_tool(
        id="pay",
        description="pay",
        input_schema=Payment,
        execute=lambda ctx: 1,
        needs_approval=True,
    )
    assert tool.needs_approval
    plain = define_tool(id="pay", description="pay", input_schema=Payment, execute=lambda ctx: 1)
    assert not plain.needs_approval
    with pytest.raises(DefinitionError, match="needs_approval=True but no execute"):
        define_tool(id="ask", description="ask", input_schema=Payment, needs_approval=True)  # pyright: ignore[reportCallIssue]


def test_a_tool_approval_is_frozen_json() -> None:
    approval = ToolApproval(approved=False, reason="too much")
    assert approval.model_dump(mode="json") == {"approved": False, "reason": "too much"}
    assert ToolApproval.model_validate({"approved": True}) == ToolApproval(approved=True)
    with pytest.raises(ValueError, match="frozen"):
        approval.approved = True  # pyright: ignore[reportAttributeAccessIssue]


# -- plain runs ---------------------------------------------------------------------------------


async def test_a_call_that_needs_approval_waits_and_does_not_run() -> None:
    world, storage = World(), InMemoryStorage()
    async with runtime_of(world, storage) as runtime:
        thread = await runtime.admin(identity="ann").create_thread(thread_id="t")
        result = await thread.send("pay 5")
    assert result.status == "awaiting_approval"
    assert [c.id for c in result.pending_tool_calls] == ["p"]
    assert list(result.pending_approvals) == list(result.pending_tool_calls)
    assert world.bodies["pay"] == 0
    assert [m.role for m in await storage.get_messages("t")] == ["user", "assistant"]


async def test_an_approved_call_runs_once_and_the_model_goes_on() -> None:
    world, storage = World(), InMemoryStorage()
    async with runtime_of(world, storage) as runtime:
        thread = await runtime.admin(identity="ann").create_thread(thread_id="t")
        await thread.send("pay 5")
        done = await thread.submit_tool_results({"p": ToolApproval(approved=True)})
    assert (done.status, done.text) == ("completed", "model saw paid 5")
    assert done.pending_approvals == ()
    assert world.bodies["pay"] == 1
    assert world.paid == [5]
    assert world.call_ids == [None]
    messages = await storage.get_messages("t")
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    result = messages[2]
    assert isinstance(result, ToolResultMessage)
    assert (result.tool_call_id, result.content, result.is_error) == ("p", "paid 5", False)


@pytest.mark.parametrize(
    ("answer", "seen"),
    [
        (
            ToolApproval(approved=False, reason="too much"),
            "Error: the user denied this call to 'pay': too much",
        ),
        (ToolApproval(approved=False), "Error: the user denied this call to 'pay'"),
        ({"approved": False, "reason": "no"}, "Error: the user denied this call to 'pay': no"),
        ('{"approved": false}', "Error: the user denied this call to 'pay'"),
    ],
)
async def test_a_denied_call_never_runs_and_the_model_reads_why(answer: object, seen: str) -> None:
    world, storage = World(), InMemoryStorage()
    async with runtime_of(world, storage) as runtime:
        thread = await runtime.admin(identity="ann").create_thread(thread_id="t")
        await thread.send("pay 5")
        done = await thread.submit_tool_results({"p": answer})
    assert (done.status, done.text) == ("completed", f"model saw {seen}")
    assert world.bodies["pay"] == 0
    result = (await storage.get_messages("t"))[2]
    assert isinstance(result, ToolResultMessage)
    assert (result.content, result.is_error) == (seen, True)


async def test_an_approval_as_json_runs_the_call() -> None:
    world, storage = World(), InMemoryStorage()
    async with runtime_of(world, storage) as runtime:
        thread = await runtime.admin(identity="ann").create_thread(thread_id="t")
        await thread.send("pay 5")
        done = await thread.submit_tool_results({"p": {"approved": True, "reason": "fine"}})
    assert done.text == "model saw paid 5"
    assert world.bodies["pay"] == 1


def mixed_step(request: ModelRequest) -> AssistantMessage:
    return tool_calls(
        ("note", {"text": "n"}),
        ("pay", {"amount": 7}),
        ("ask", {"text": "sure?"}),
        ids=["n", "p", "q"],
    )


async def test_approval_external_and_normal_calls_in_one_step() -> None:
    world, storage = World(), InMemoryStorage()
    async with runtime_of(world, storage, first=mixed_step) as runtime:
        thread = await runtime.admin(identity="ann").create_thread(thread_id="t")
        first = await thread.send("go")
        assert first.status == "awaiting_tool_results"
        assert [c.id for c in first.pending_tool_calls] == ["p", "q"]
        assert [c.id for c in first.pending_approvals] == ["p"]
        assert world.bodies == Counter({"note": 1})
        done = await thread.submit_tool_results({"q": "yes", "p": ToolApproval(approved=True)})
    assert (done.status, done.text) == ("completed", "model saw noted n | paid 7 | yes")
    assert world.bodies == Counter({"note": 1, "pay": 1})
    messages = await storage.get_messages("t")
    assert [m.role for m in messages] == ["user", "assistant", "tool", "tool", "tool", "assistant"]
    assert [m.tool_call_id for m in messages if isinstance(m, ToolResultMessage)] == ["n", "p", "q"]


async def test_several_approved_calls_run_and_keep_their_order() -> None:
    world, storage = World(delay=0.01), InMemoryStorage()

    def two(request: ModelRequest) -> AssistantMessage:
        return tool_calls(("pay", {"amount": 1}), ("pay", {"amount": 2}), ids=["a", "b"])

    async with runtime_of(world, storage, first=two) as runtime:
        thread = await runtime.admin(identity="ann").create_thread(thread_id="t")
        first = await thread.send("go")
        assert first.status == "awaiting_approval"
        assert [c.id for c in first.pending_approvals] == ["a", "b"]
        done = await thread.submit_tool_results(
            {"b": ToolApproval(approved=True), "a": ToolApproval(approved=True)}
        )
    assert done.text == "model saw paid 1 | paid 2"
    assert sorted(world.paid) == [1, 2]


async def test_wrong_answers_name_the_call_and_what_to_pass() -> None:
    world, storage = World(), InMemoryStorage()
    async with runtime_of(world, storage, first=mixed_step) as runtime:
        thread = await runtime.admin(identity="ann").create_thread(thread_id="t")
        await thread.send("go")
        with pytest.raises(DefinitionError) as caught:
            await thread.submit_tool_results(
                {"p": ToolApproval(approved=True), "q": ToolApproval(approved=True)}
            )
        message = str(caught.value)
        assert "'q'" in message
        assert "'ask'" in message
        assert "does not need approval" in message
        with pytest.raises(DefinitionError) as caught:
            await thread.submit_tool_results({"p": "yes", "q": "yes"})
        message = str(caught.value)
        assert "'p'" in message
        assert "'pay'" in message
        assert "ToolApproval(approved=True)" in message
        with pytest.raises(DefinitionError, match="needs approval"):
            await thread.submit_tool_results({"p": {"approved": "maybe"}, "q": "yes"})
        # Nothing ran and nothing was stored: the calls are still pending.
        assert world.bodies["pay"] == 0
        assert len(await storage.get_messages("t")) == 3
        done = await thread.submit_tool_results({"p": ToolApproval(approved=True), "q": "yes"})
    assert done.status == "completed"


async def test_a_second_submission_is_refused() -> None:
    world, storage = World(), InMemoryStorage()
    async with runtime_of(world, storage) as runtime:
        thread = await runtime.admin(identity="ann").create_thread(thread_id="t")
        await thread.send("pay 5")
        await thread.submit_tool_results({"p": ToolApproval(approved=True)})
        with pytest.raises(DefinitionError, match="must answer exactly the pending tool calls"):
            await thread.submit_tool_results({"p": ToolApproval(approved=True)})
    assert world.bodies["pay"] == 1


async def test_an_approval_through_another_runtime_runs_the_call_exactly_once(
    tmp_path: Path,
) -> None:
    """Two runtimes on one SQLite file ("two processes"): the run started in one is approved
    in the other, and the same approval sent to both at once runs the call once."""
    path = tmp_path / "threads.db"
    world = World(delay=0.05)
    async with runtime_of(world, SqliteStorage(path)) as first:
        thread = await first.admin(identity="ann").create_thread(thread_id="t")
        waiting = await thread.send("pay 5")
        assert waiting.status == "awaiting_approval"
        async with runtime_of(world, SqliteStorage(path)) as second:
            outcomes: list[object] = []

            async def approve(runtime: AgentRuntime) -> None:
                handle = runtime.admin(identity="ann").thread("t")
                try:
                    outcomes.append(
                        await handle.submit_tool_results({"p": ToolApproval(approved=True)})
                    )
                except DefinitionError as error:
                    outcomes.append(error)

            async with anyio.create_task_group() as tg:
                tg.start_soon(approve, second)
                tg.start_soon(approve, first)
            messages = await second.admin(identity="ann").thread("t").messages()
    assert world.bodies["pay"] == 1
    assert world.paid == [5]
    done = [o for o in outcomes if isinstance(o, RunResult)]
    refused = [o for o in outcomes if isinstance(o, DefinitionError)]
    assert len(done) == 1
    assert len(refused) == 1
    assert done[0].text == "model saw paid 5"
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]


# -- durable runs -------------------------------------------------------------------------------

SEND_STEPS = [history_step(), model_step(1), append_step(1), end_step()]
SUBMIT_STEPS = [history_step(), tool_step(0, 0, "pay"), model_step(1), append_step(1), end_step()]


async def durable_uncrashed() -> tuple[RunResult, list[Any], World, JournalEngine]:
    world, engine, storage = World(), JournalEngine(), InMemoryStorage()
    async with runtime_of(world, storage, engine) as runtime:
        thread = await runtime.admin(identity="ann").create_thread(thread_id="t")
        first = await thread.send("pay 5")
        assert first.status == "awaiting_approval"
        assert [c.id for c in first.pending_approvals] == ["p"]
        done = await thread.submit_tool_results({"p": ToolApproval(approved=True)})
    return done, dumped(await storage.get_messages("t")), world, engine


async def test_durable_step_names_are_pinned() -> None:
    assert SUBMIT_STEPS == [
        "pai.app/history",
        "pai.tool/0/0/pay",
        "pai.model/1",
        "pai.append/1",
        "pai.end",
    ]
    done, messages, world, engine = await durable_uncrashed()
    assert (done.status, done.text) == ("completed", "model saw paid 5")
    send, submit = engine.journals.values()
    assert send.names == SEND_STEPS
    assert submit.names == SUBMIT_STEPS
    assert world.call_ids == [durable_call_id(submit.spec.run_id, 0, 0)]
    assert world.paid == [5]
    # What the history step recorded: the approved call (to run as a step), no result of it.
    begun = submit.results[0]
    assert begun["staged"] == []
    assert [a["index"] for a in begun["approved"]] == [0]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]


async def test_a_durable_run_stores_what_a_plain_run_stores() -> None:
    durable, messages, _, _ = await durable_uncrashed()
    world, storage = World(), InMemoryStorage()
    async with runtime_of(world, storage) as runtime:
        thread = await runtime.admin(identity="ann").create_thread(thread_id="t")
        await thread.send("pay 5")
        plain = await thread.submit_tool_results({"p": ToolApproval(approved=True)})
    assert dumped(await storage.get_messages("t")) == messages
    assert dumped(plain.messages) == dumped(durable.messages)


@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("crash_step", SUBMIT_STEPS)
async def test_a_crash_in_an_approved_run_resumes_and_pays_once(
    crash_step: str, when: Literal["before", "after"]
) -> None:
    expected, expected_messages, _, _ = await durable_uncrashed()
    world, engine, storage = World(), JournalEngine(), InMemoryStorage()
    async with runtime_of(world, storage, engine) as runtime:
        thread = await runtime.admin(identity="ann").create_thread(thread_id="t")
        await thread.send("pay 5")
        engine.crash_at(crash_step, when=when)
        with pytest.raises(SimulatedCrash):
            await thread.submit_tool_results({"p": ToolApproval(approved=True)})
    assert engine.pending()
    # "Another process" on the same storage and engine resumes the run.
    async with runtime_of(world, storage, engine) as runtime:
        [resumed] = await engine.recover()
        with pytest.raises(DefinitionError, match="must answer exactly"):
            await (
                runtime.admin(identity="ann")
                .thread("t")
                .submit_tool_results({"p": ToolApproval(approved=True)})
            )
    assert not engine.pending()
    assert (resumed["status"], resumed["text"]) == ("completed", expected.text)
    # The result names the run's messages by where they are in the thread.
    start, end = resumed["written"]
    assert dumped((await storage.get_messages("t"))[start:end]) == dumped(expected.messages)
    assert dumped(await storage.get_messages("t")) == expected_messages
    assert world.paid == [5]
    again = crash_step == tool_step(0, 0, "pay") and when == "after"
    assert world.bodies["pay"] == (2 if again else 1)


async def test_durable_mixed_answers_keep_the_pending_order() -> None:
    world, engine, storage = World(), JournalEngine(), InMemoryStorage()

    def step(request: ModelRequest) -> AssistantMessage:
        return tool_calls(
            ("ask", {"text": "sure?"}),
            ("pay", {"amount": 1}),
            ("pay", {"amount": 2}),
            ("pay", {"amount": 3}),
            ids=["q", "a", "b", "c"],
        )

    async with runtime_of(world, storage, engine, first=step) as runtime:
        thread = await runtime.admin(identity="ann").create_thread(thread_id="t")
        first = await thread.send("go")
        assert first.status == "awaiting_tool_results"
        assert [c.id for c in first.pending_approvals] == ["a", "b", "c"]
        engine.crash_at(tool_step(0, 3, "pay"), when="after")
        with pytest.raises(SimulatedCrash):
            await thread.submit_tool_results(
                {
                    "q": "yes",
                    "a": ToolApproval(approved=True),
                    "b": ToolApproval(approved=False, reason="no"),
                    "c": {"approved": True},
                }
            )
        [done] = await engine.recover()
    assert done["text"] == (
        "model saw yes | paid 1 | Error: the user denied this call to 'pay': no | paid 3"
    )
    submit = list(engine.journals.values())[1]
    assert submit.names[:3] == [history_step(), tool_step(0, 1, "pay"), tool_step(0, 3, "pay")]
    assert sorted(world.paid) == [1, 3]
