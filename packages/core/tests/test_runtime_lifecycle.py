"""Capability lifecycle: acquire per operation, dispose on thread delete, close at shutdown."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio
import pytest
from helpers import (
    SCOPE,
    Box,
    Events,
    NoInput,
    RecordingBinding,
    Who,
    box_capability,
    build_agent,
    build_runtime,
    declare_tool,
    local_name,
    use_command,
    use_tool,
)

from pai.core import (
    AcquireInput,
    AgentRuntime,
    Capability,
    CapabilityBindingError,
    Command,
    CommandContext,
    DisposeInput,
    InMemoryStorage,
    RuntimeClosedError,
    ThreadDeletedError,
    ThreadNotFoundError,
    Tool,
    ToolContext,
    create_agent_runtime,
    create_capability_binding,
    define_command,
    define_tool,
    instance_key,
)
from pai.core.ext import ThreadRecord
from pai.core.testing import ScriptedModel, text, tool_call, tool_calls

pytestmark = pytest.mark.anyio

ANN = Who()
LIMIT = 5  # seconds before a would-be deadlock fails the test instead of hanging it

box = box_capability("box")
tray = box_capability("tray")


class Blocker:
    """An operation body that blocks until released, and reports how cancellation reached it.

    ``proceed`` lets it finish normally. When the thread's deletion cancels it, it sets
    ``cancelled``; with ``shield=True`` it then keeps working, shielded, until ``shield_until`` is
    set, and only then sets ``finished`` and lets the cancellation through.
    """

    def __init__(self, *tokens: Capability[Box], shield: bool = False) -> None:
        self.tokens = tokens
        self.shield = shield
        self.started = anyio.Event()
        self.proceed = anyio.Event()
        self.cancelled = anyio.Event()
        self.shield_until = anyio.Event()
        self.finished = anyio.Event()

    async def body(self, capabilities: Any) -> str:
        for token in self.tokens:
            await capabilities[token].use()
        self.started.set()
        try:
            await self.proceed.wait()
        except anyio.get_cancelled_exc_class():
            self.cancelled.set()
            if self.shield:
                # Bounded, so a regression that never releases it fails instead of hanging.
                with anyio.CancelScope(shield=True, deadline=anyio.current_time() + LIMIT):
                    await self.shield_until.wait()
            self.finished.set()
            raise
        return "finished normally"

    def command(self) -> Command[NoInput, str]:
        async def run(ctx: CommandContext[NoInput]) -> str:
            return await self.body(ctx.capabilities)

        return define_command(
            input=NoInput, capabilities={local_name(t): t for t in self.tokens}, run=run
        )

    def tool(self) -> Tool[NoInput, str]:
        async def execute(ctx: ToolContext[NoInput]) -> str:
            return await self.body(ctx.capabilities)

        return define_tool(
            id="block",
            description="blocks",
            input_schema=NoInput,
            capabilities={local_name(t): t for t in self.tokens},
            execute=execute,
        )


async def raises_thread_deleted(operation: Callable[[], Awaitable[object]]) -> None:
    with pytest.raises(ThreadDeletedError):
        await operation()


async def new_thread(runtime: AgentRuntime) -> Any:
    return await runtime.admin(identity=ANN).create_thread()


# -- acquire ----------------------------------------------------------------------------------


async def test_acquire_runs_once_per_operation_per_declared_capability() -> None:
    boxes, trays = RecordingBinding(box), RecordingBinding(tray)
    model = ScriptedModel(
        [
            tool_calls(("both", {}), ("both", {}), ("only_box", {}), ("plain", {})),
            tool_call("only_box"),
            text("done"),
        ]
    )
    agent = build_agent(
        tools={
            "both": use_tool(box, tray, id="both"),
            "only_box": use_tool(box, id="only_box"),
            "plain": use_tool(id="plain"),
        },
        commands={"reset": use_command(box, tray)},
    )
    runtime = build_runtime(agent, boxes, trays, model=model)
    thread = await new_thread(runtime)

    await thread.send("go")
    assert sum(boxes.acquires.values()) == 4  # both, both, only_box, only_box
    assert sum(trays.acquires.values()) == 2  # both, both

    await thread.commands.reset({})
    assert sum(boxes.acquires.values()) == 5
    assert sum(trays.acquires.values()) == 3


async def test_an_operation_without_capabilities_acquires_nothing() -> None:
    boxes = RecordingBinding(box)
    agent = build_agent(
        tools={"plain": use_tool(id="plain")},
        commands={"plain": use_command(), "use": use_command(box)},
    )
    runtime = build_runtime(agent, boxes, model=ScriptedModel([tool_call("plain"), text("ok")]))
    thread = await new_thread(runtime)

    await thread.send("go")
    await thread.commands.plain({})

    assert boxes.acquire_inputs == []


def mutually_waiting_bindings() -> dict[str, Any]:
    """Two async acquires that each wait for the other to start: they finish only if they run
    concurrently; acquired one after the other, they deadlock."""
    box_started, tray_started = anyio.Event(), anyio.Event()

    async def acquire_box(input: AcquireInput) -> Box:
        box_started.set()
        await tray_started.wait()
        return Box()

    async def acquire_tray(input: AcquireInput) -> Box:
        tray_started.set()
        await box_started.wait()
        return Box()

    return {
        "box": create_capability_binding(capability=box, acquire=acquire_box),
        "tray": create_capability_binding(capability=tray, acquire=acquire_tray),
    }


async def test_all_of_a_commands_capabilities_are_acquired_in_parallel() -> None:
    received: list[int] = []

    async def run(ctx: CommandContext[NoInput]) -> None:
        received.append(len(ctx.capabilities))

    both = define_command(input=NoInput, capabilities={"box": box, "tray": tray}, run=run)
    runtime = create_agent_runtime(
        agent=build_agent(commands={"both": both}),
        storage=InMemoryStorage(),
        scope_key=lambda _: SCOPE,
        capabilities=mutually_waiting_bindings(),
    )
    thread = await new_thread(runtime)

    with anyio.fail_after(LIMIT):
        await thread.commands.both({})

    assert received == [2]


async def test_all_of_a_tools_capabilities_are_acquired_in_parallel() -> None:
    runtime = create_agent_runtime(
        agent=build_agent(tools={"both": declare_tool(box, tray)}),
        model=ScriptedModel([tool_call("both"), text("done")]),
        storage=InMemoryStorage(),
        scope_key=lambda _: SCOPE,
        capabilities=mutually_waiting_bindings(),
    )
    thread = await new_thread(runtime)

    with anyio.fail_after(LIMIT):
        result = await thread.send("go")

    [tool_result] = [m for m in result.messages if m.role == "tool"]
    assert not tool_result.is_error
    assert tool_result.content == "untouched"


async def test_acquiring_provisions_nothing_until_the_facade_is_used() -> None:
    boxes = RecordingBinding(box)
    agent = build_agent(tools={"declare": declare_tool(box), "use": use_tool(box)})
    model = ScriptedModel([tool_call("declare"), text("declared"), tool_call("use"), text("used")])
    runtime = build_runtime(agent, boxes, model=model)
    thread = await new_thread(runtime)
    key = instance_key("box", "thread", (SCOPE, thread.id))

    await thread.send("declare only")
    assert (boxes.acquires[key], boxes.provisions[key]) == (1, 0)

    await thread.send("use it")
    assert (boxes.acquires[key], boxes.provisions[key]) == (2, 1)


async def test_an_operation_whose_keys_cannot_all_be_derived_acquires_nothing() -> None:
    boxes = RecordingBinding(box, scope="thread")
    per_user = RecordingBinding(tray, scope="user")
    agent = build_agent(commands={"both": use_command(box, tray)})
    runtime = build_runtime(agent, boxes, per_user, user_key=lambda who: None)
    thread = await new_thread(runtime)

    with pytest.raises(CapabilityBindingError, match="user_key"):
        await thread.commands.both({})

    assert boxes.acquire_inputs == []
    assert per_user.acquire_inputs == []


# -- thread delete: cancellation and settlement ----------------------------------------------


async def test_deleting_a_thread_cancels_its_running_command_with_thread_deleted_error() -> None:
    blocker = Blocker(box)
    boxes = RecordingBinding(box)
    runtime = build_runtime(build_agent(commands={"block": blocker.command()}), boxes)
    thread = await new_thread(runtime)

    with anyio.fail_after(LIMIT):
        async with anyio.create_task_group() as tg:
            tg.start_soon(raises_thread_deleted, lambda: thread.commands.block({}))
            await blocker.started.wait()
            await thread.delete()

    assert blocker.cancelled.is_set()
    assert runtime.active_operations(thread.id) == 0


async def test_work_that_turns_the_cancellation_into_another_error_still_reports_the_delete() -> (
    None
):
    started = anyio.Event()

    async def run(ctx: CommandContext[NoInput]) -> str:
        started.set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            raise RuntimeError("cleanup failed while being cancelled") from None
        return "unreachable"

    runtime = build_runtime(build_agent(commands={"block": define_command(input=NoInput, run=run)}))
    thread = await new_thread(runtime)
    caught: list[BaseException] = []

    async def call() -> None:
        try:
            await thread.commands.block({})
        except Exception as error:
            caught.append(error)

    with anyio.fail_after(LIMIT):
        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await started.wait()
            await thread.delete()

    assert [type(e) for e in caught] == [ThreadDeletedError]
    assert isinstance(caught[0].__cause__, RuntimeError)


async def test_work_that_swallows_the_cancellation_and_returns_still_reports_the_delete() -> None:
    started = anyio.Event()

    async def run(ctx: CommandContext[NoInput]) -> str:
        started.set()
        with anyio.CancelScope() as scope:
            await anyio.sleep_forever()
        return "returned anyway" if scope.cancel_called else "unreachable"

    runtime = build_runtime(build_agent(commands={"block": define_command(input=NoInput, run=run)}))
    thread = await new_thread(runtime)

    with anyio.fail_after(LIMIT):
        async with anyio.create_task_group() as tg:
            tg.start_soon(raises_thread_deleted, lambda: thread.commands.block({}))
            await started.wait()
            await thread.delete()


async def test_deleting_a_thread_cancels_its_running_tool_and_the_run_raises_thread_deleted() -> (
    None
):
    blocker = Blocker(box)
    boxes = RecordingBinding(box)
    agent = build_agent(tools={"block": blocker.tool()})
    runtime = build_runtime(agent, boxes, model=ScriptedModel([tool_call("block"), text("no")]))
    thread = await new_thread(runtime)

    with anyio.fail_after(LIMIT):
        async with anyio.create_task_group() as tg:
            tg.start_soon(raises_thread_deleted, lambda: thread.send("go"))
            await blocker.started.wait()
            await thread.delete()

    assert blocker.cancelled.is_set()


async def test_deleting_a_thread_cancels_work_running_in_its_delegated_threads() -> None:
    blocker = Blocker(box)
    boxes = RecordingBinding(box)
    helper = build_agent(
        name="helper",
        model=ScriptedModel([tool_call("block"), text("never")]),
        tools={"block": blocker.tool()},
    )
    agent = build_agent(subagents={"helper": helper})
    model = ScriptedModel([tool_call("helper", {"task": "block"}), text("never")])
    runtime = build_runtime(agent, boxes, model=model)
    thread = await new_thread(runtime)
    child: ThreadRecord | None = None

    with anyio.fail_after(LIMIT):
        async with anyio.create_task_group() as tg:
            tg.start_soon(raises_thread_deleted, lambda: thread.send("go"))
            await blocker.started.wait()
            [child] = await thread.children()
            await thread.delete()

    assert child is not None
    assert blocker.cancelled.is_set()
    assert {d.thread_id for d in boxes.dispose_inputs} == {thread.id, child.id}


async def test_running_work_is_not_cancelled_when_the_storage_delete_fails() -> None:
    class FailingDelete(InMemoryStorage):
        async def delete_thread(self, thread_id: str) -> Sequence[str]:
            raise OSError("disk on fire")

    blocker = Blocker(box)
    boxes = RecordingBinding(box)
    runtime = build_runtime(
        build_agent(commands={"block": blocker.command()}), boxes, storage=FailingDelete()
    )
    thread = await new_thread(runtime)
    outcome: list[object] = []

    async def run() -> None:
        outcome.append(await thread.commands.block({}))

    with anyio.fail_after(LIMIT):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await blocker.started.wait()
            with pytest.raises(OSError, match="disk on fire"):
                await thread.delete()
            blocker.proceed.set()

    assert outcome == ["finished normally"]
    assert not blocker.cancelled.is_set()
    assert boxes.dispose_inputs == []


async def test_dispose_waits_for_cancelled_work_to_settle() -> None:
    blocker = Blocker(box, shield=True)
    finished_at_dispose: list[bool] = []
    boxes = RecordingBinding(
        box, on_dispose=lambda _: finished_at_dispose.append(blocker.finished.is_set())
    )
    runtime = build_runtime(
        build_agent(commands={"block": blocker.command()}), boxes, settlement_window=60
    )
    thread = await new_thread(runtime)

    with anyio.fail_after(LIMIT):
        async with anyio.create_task_group() as tg:
            tg.start_soon(raises_thread_deleted, lambda: thread.commands.block({}))
            await blocker.started.wait()
            tg.start_soon(thread.delete)
            try:
                await blocker.cancelled.wait()
                assert boxes.dispose_inputs == []  # the work is still settling
            finally:
                blocker.shield_until.set()

    assert finished_at_dispose == [True]


async def test_dispose_happens_once_the_settlement_window_passes_even_if_work_still_runs() -> None:
    blocker = Blocker(box, shield=True)
    finished_at_dispose: list[bool] = []
    boxes = RecordingBinding(
        box, on_dispose=lambda _: finished_at_dispose.append(blocker.finished.is_set())
    )
    runtime = build_runtime(
        build_agent(commands={"block": blocker.command()}), boxes, settlement_window=0.2
    )
    thread = await new_thread(runtime)

    with anyio.fail_after(LIMIT):
        async with anyio.create_task_group() as tg:
            tg.start_soon(raises_thread_deleted, lambda: thread.commands.block({}))
            await blocker.started.wait()
            try:
                await thread.delete()  # returns although the command ignores its cancellation
                assert finished_at_dispose == [False]
                assert runtime.active_operations(thread.id) == 1
            finally:
                blocker.shield_until.set()

    assert blocker.finished.is_set()
    assert runtime.active_operations(thread.id) == 0
    assert len(boxes.dispose_inputs) == 1


async def test_dispose_still_runs_when_the_caller_of_delete_is_cancelled_while_work_settles() -> (
    None
):
    blocker = Blocker(box, shield=True)
    boxes = RecordingBinding(box)
    runtime = build_runtime(
        build_agent(commands={"block": blocker.command()}), boxes, settlement_window=60
    )
    thread = await new_thread(runtime)
    deleter_cancelled = anyio.Event()

    async def delete_then_get_cancelled(scope: anyio.CancelScope) -> None:
        with scope:
            await thread.delete()
        deleter_cancelled.set()

    with anyio.fail_after(LIMIT):
        async with anyio.create_task_group() as tg:
            tg.start_soon(raises_thread_deleted, lambda: thread.commands.block({}))
            await blocker.started.wait()
            deleter = anyio.CancelScope()
            tg.start_soon(delete_then_get_cancelled, deleter)
            await blocker.cancelled.wait()  # the delete is now inside its settlement window
            deleter.cancel()  # the caller of delete() goes away (a dropped request)
            blocker.shield_until.set()
            await deleter_cancelled.wait()

    assert len(boxes.dispose_inputs) == 1
    assert boxes.instances == {}


async def test_a_command_that_deletes_its_own_thread_disposes_its_instances() -> None:
    boxes = RecordingBinding(box)
    deleted_from_inside: list[bool] = []

    async def run(ctx: CommandContext[NoInput]) -> str:
        await ctx.capabilities[box].use()
        await runtime.admin(identity=ANN).thread(ctx.thread_id).delete()
        deleted_from_inside.append(True)
        return "deleted myself"

    agent = build_agent(
        commands={
            "self_destruct": define_command(input=NoInput, capabilities={"box": box}, run=run)
        }
    )
    runtime = build_runtime(agent, boxes, settlement_window=60)
    thread = await new_thread(runtime)

    with anyio.fail_after(LIMIT), pytest.raises(ThreadDeletedError):
        await thread.commands.self_destruct({})

    assert deleted_from_inside == [True]  # delete() returned inside the command, without waiting
    assert len(boxes.dispose_inputs) == 1
    assert boxes.instances == {}
    assert runtime.active_operations(thread.id) == 0


async def test_a_tool_that_deletes_its_own_thread_disposes_its_instances() -> None:
    boxes = RecordingBinding(box)

    async def execute(ctx: ToolContext[NoInput]) -> str:
        await ctx.capabilities[box].use()
        await runtime.admin(identity=ANN).thread(ctx.thread_id).delete()
        return "deleted myself"

    tool = define_tool(
        id="selfDestruct",
        description="delete this conversation",
        input_schema=NoInput,
        capabilities={"box": box},
        execute=execute,
    )
    model = ScriptedModel([tool_call("selfDestruct"), text("unreachable")])
    runtime = build_runtime(build_agent(model=model, tools={"selfDestruct": tool}), boxes)
    thread = await new_thread(runtime)

    with anyio.fail_after(LIMIT), pytest.raises(ThreadDeletedError):
        await thread.send("clean up")

    assert len(boxes.dispose_inputs) == 1
    assert boxes.instances == {}
    with pytest.raises(ThreadNotFoundError):
        await thread.record()


# -- thread delete: what is disposed ----------------------------------------------------------


async def test_deleting_a_thread_disposes_its_thread_scoped_instances() -> None:
    boxes = RecordingBinding(box, scope="thread")
    runtime = build_runtime(build_agent(commands={"use": use_command(box)}), boxes)
    thread, other = await new_thread(runtime), await new_thread(runtime)
    await thread.commands.use({})
    await other.commands.use({})
    [acquired, _] = boxes.acquire_inputs

    await thread.delete()

    assert boxes.dispose_inputs == [
        DisposeInput(
            reason="thread-deleted", key=acquired.key, thread_id=thread.id, capability_id="box"
        )
    ]
    with pytest.raises(ThreadNotFoundError):
        await thread.record()


async def test_thread_instances_are_disposed_even_if_never_acquired_in_this_process() -> None:
    boxes = RecordingBinding(box, scope="thread")
    runtime = build_runtime(build_agent(commands={"use": use_command(box)}), boxes)
    thread = await new_thread(runtime)

    await thread.delete()

    assert [d.key for d in boxes.dispose_inputs] == [
        instance_key("box", "thread", (SCOPE, thread.id))
    ]


def delegating_runtime(*recorders: RecordingBinding, tokens: Sequence[Capability[Box]]) -> Any:
    helper = build_agent(
        name="helper",
        model=ScriptedModel([tool_call("use"), text("helped")]),
        tools={"use": use_tool(*tokens)},
    )
    agent = build_agent(tools={"use": use_tool(*tokens)}, subagents={"helper": helper})
    model = ScriptedModel([tool_call("use"), tool_call("helper", {"task": "help"}), text("done")])
    return build_runtime(agent, *recorders, model=model)


async def test_deleting_a_thread_disposes_the_thread_instances_of_its_delegated_threads() -> None:
    boxes = RecordingBinding(box, scope="thread")
    runtime = delegating_runtime(boxes, tokens=[box])
    thread = await new_thread(runtime)
    await thread.send("go")
    [child] = await thread.children()

    await thread.delete()

    assert sorted(boxes.disposes) == sorted(boxes.keys)
    assert {d.thread_id for d in boxes.dispose_inputs} == {thread.id, child.id}
    assert all(count == 1 for count in boxes.disposes.values())


async def test_deleting_a_delegated_thread_disposes_only_its_own_thread_instances() -> None:
    boxes = RecordingBinding(box, scope="thread")
    shared = RecordingBinding(tray, scope="rootThread")
    runtime = delegating_runtime(boxes, shared, tokens=[box, tray])
    thread = await new_thread(runtime)
    await thread.send("go")
    [child] = await thread.children()

    await runtime.admin(identity=ANN).thread(child.id).delete()

    assert [(d.thread_id, d.key) for d in boxes.dispose_inputs] == [
        (child.id, instance_key("box", "thread", (SCOPE, child.id)))
    ]
    assert shared.dispose_inputs == []  # the top-level thread still owns it


async def test_root_thread_instances_are_disposed_when_the_top_level_thread_is_deleted() -> None:
    shared = RecordingBinding(tray, scope="rootThread")
    runtime = delegating_runtime(shared, tokens=[tray])
    thread = await new_thread(runtime)
    await thread.send("go")
    assert shared.keys == [instance_key("tray", "rootThread", (SCOPE, thread.id))]

    await thread.delete()

    assert shared.dispose_inputs == [
        DisposeInput(
            reason="thread-deleted", key=shared.keys[0], thread_id=thread.id, capability_id="tray"
        )
    ]


@pytest.mark.parametrize(
    "scope",
    ["user", "scope", "global", lambda s: f"custom-{s.thread_id}"],
    ids=["user", "scope", "global", "custom"],
)
async def test_instances_of_other_scopes_are_never_disposed_on_delete(scope: Any) -> None:
    others = RecordingBinding(box, scope=scope)
    runtime = delegating_runtime(others, tokens=[box])
    thread = await new_thread(runtime)
    await thread.send("go")
    assert others.keys  # the instances exist

    await thread.delete()

    assert others.dispose_inputs == []


async def test_bindings_without_a_dispose_hook_are_left_alone_on_delete() -> None:
    boxes = RecordingBinding(box, scope="thread", dispose=False)
    events = Events()
    runtime = build_runtime(
        build_agent(commands={"use": use_command(box)}), boxes, on_runtime_error=events
    )
    thread = await new_thread(runtime)
    await thread.commands.use({})

    await thread.delete()

    assert boxes.dispose_inputs == []
    assert events.received == []


async def test_a_failing_dispose_is_routed_to_on_runtime_error_and_the_delete_succeeds() -> None:
    broken = RecordingBinding(box, scope="thread", fail_dispose=True)
    fine = RecordingBinding(tray, scope="thread")
    events = Events()
    runtime = build_runtime(
        build_agent(commands={"use": use_command(box, tray)}),
        broken,
        fine,
        on_runtime_error=events,
    )
    thread = await new_thread(runtime)
    await thread.commands.use({})

    await thread.delete()

    [event] = events.received
    assert event.source == "capability"
    assert event.capability_id == "box"
    assert event.thread_id == thread.id
    assert event.key == instance_key("box", "thread", (SCOPE, thread.id))
    assert isinstance(event.error, RuntimeError)
    assert len(fine.dispose_inputs) == 1
    assert await runtime.admin(identity=ANN).list_threads() == ()


class AwaitedLater:
    """An awaitable that is neither a coroutine nor None: the result of a hook returning, say, a
    future. Records that it was awaited."""

    def __init__(self, seen: list[str], what: str) -> None:
        self.seen, self.what = seen, what

    def __await__(self) -> Any:
        self.seen.append(f"{self.what} awaited")
        yield from ()


def hook(kind: str, what: str, seen: list[str]) -> Callable[..., object]:
    """A dispose or close hook of one kind, recording its call in ``seen``."""
    if kind == "async def":

        async def hook_async(*_: object) -> None:
            seen.append(f"{what} ran")

        return hook_async

    def hook_sync(*_: object) -> object:
        seen.append(f"{what} ran")
        returns: dict[str, object] = {
            "returns None": None,
            "returns a value": [what],  # dispose=lambda input: pages.pop(input.key, None)
            "returns False": False,
            "returns an awaitable": AwaitedLater(seen, what),
        }
        return returns[kind]

    return hook_sync


@pytest.mark.parametrize(
    "kind",
    ["returns None", "returns a value", "returns False", "async def", "returns an awaitable"],
)
async def test_dispose_and_close_hooks_await_only_what_is_awaitable(kind: str) -> None:
    seen: list[str] = []
    events = Events()
    binding = create_capability_binding(
        capability=box,
        acquire=lambda input: Box(),
        dispose=hook(kind, "dispose", seen),
        close=hook(kind, "close", seen),
    )
    runtime = build_runtime(
        build_agent(commands={"use": use_command(box)}),
        on_runtime_error=events,
        extra={"box": binding},
    )
    thread = await new_thread(runtime)

    await thread.delete()
    await runtime.aclose()

    assert events.received == []
    awaited = ["dispose awaited", "close awaited"] if kind == "returns an awaitable" else []
    assert sorted(seen) == sorted(["dispose ran", "close ran", *awaited])


async def test_deleting_a_thread_of_another_scope_is_not_found_and_disposes_nothing() -> None:
    boxes = RecordingBinding(box)
    runtime = build_runtime(build_agent(commands={"use": use_command(box)}), boxes)
    thread = await new_thread(runtime)

    with pytest.raises(ThreadNotFoundError):
        await runtime.admin(identity=Who("globex")).thread(thread.id).delete()

    assert boxes.dispose_inputs == []
    assert (await thread.record()).id == thread.id


# -- shutdown ---------------------------------------------------------------------------------


class RecordingStorage(InMemoryStorage):
    def __init__(self, log: list[str]) -> None:
        super().__init__()
        self.log = log
        self.closes = 0

    async def aclose(self) -> None:
        self.closes += 1
        self.log.append("close storage")


async def test_aclose_awaits_every_binding_close_before_closing_storage() -> None:
    log: list[str] = []
    boxes, trays = RecordingBinding(box, log=log), RecordingBinding(tray, log=log)
    storage = RecordingStorage(log)
    runtime = build_runtime(
        build_agent(commands={"use": use_command(box, tray)}), boxes, trays, storage=storage
    )

    await runtime.aclose()

    assert sorted(log[:2]) == ["close box", "close tray"]
    assert log[2:] == ["close storage"]


async def test_aclose_is_idempotent() -> None:
    log: list[str] = []
    boxes = RecordingBinding(box, log=log)
    storage = RecordingStorage(log)
    runtime = build_runtime(build_agent(commands={"use": use_command(box)}), boxes, storage=storage)

    await runtime.aclose()
    await runtime.aclose()

    assert log == ["close box", "close storage"]


async def test_aclose_never_disposes_instances() -> None:
    boxes = RecordingBinding(box)
    runtime = build_runtime(build_agent(commands={"use": use_command(box)}), boxes)
    thread = await new_thread(runtime)
    await thread.commands.use({})

    await runtime.aclose()

    assert boxes.dispose_inputs == []
    assert boxes.instances  # durable state is untouched


async def test_async_with_closes_the_runtime() -> None:
    log: list[str] = []
    boxes = RecordingBinding(box, log=log)
    runtime = build_runtime(
        build_agent(commands={"use": use_command(box)}), boxes, storage=RecordingStorage(log)
    )

    async with runtime as entered:
        assert entered is runtime
        assert log == []

    assert log == ["close box", "close storage"]


async def test_a_failing_close_is_routed_and_everything_else_still_closes() -> None:
    log: list[str] = []
    broken = RecordingBinding(box, log=log, fail_close=True)
    fine = RecordingBinding(tray, log=log)
    events = Events()
    runtime = build_runtime(
        build_agent(commands={"use": use_command(box, tray)}),
        broken,
        fine,
        storage=RecordingStorage(log),
        on_runtime_error=events,
    )

    await runtime.aclose()

    [event] = events.received
    assert event.source == "capability"
    assert event.capability_id == "box"
    assert isinstance(event.error, RuntimeError)
    assert sorted(log) == ["close box", "close storage", "close tray"]
    assert log[-1] == "close storage"


async def test_aclose_leaves_storage_open_when_the_runtime_does_not_own_it() -> None:
    storage = RecordingStorage([])
    runtime = create_agent_runtime(
        agent=build_agent(), storage=storage, scope_key=lambda _: SCOPE, owns_storage=False
    )

    await runtime.aclose()

    assert storage.closes == 0


OPERATIONS: dict[str, Callable[[AgentRuntime, str], Awaitable[object]]] = {
    "create_thread": lambda rt, tid: rt.admin(identity=ANN).create_thread(),
    "list_threads": lambda rt, tid: rt.admin(identity=ANN).list_threads(),
    "send": lambda rt, tid: rt.admin(identity=ANN).thread(tid).send("hi"),
    "command": lambda rt, tid: rt.admin(identity=ANN).thread(tid).commands.use({}),
    "submit_tool_results": lambda rt, tid: (
        rt.admin(identity=ANN).thread(tid).submit_tool_results({})
    ),
    "messages": lambda rt, tid: rt.admin(identity=ANN).thread(tid).messages(),
    "children": lambda rt, tid: rt.admin(identity=ANN).thread(tid).children(),
    "delete": lambda rt, tid: rt.admin(identity=ANN).thread(tid).delete(),
}


@pytest.mark.parametrize("operation", OPERATIONS)
async def test_operations_after_close_raise_runtime_closed_error(operation: str) -> None:
    boxes = RecordingBinding(box)
    runtime = build_runtime(
        build_agent(commands={"use": use_command(box)}), boxes, model=ScriptedModel([text("hi")])
    )
    thread = await new_thread(runtime)
    await runtime.aclose()

    with pytest.raises(RuntimeClosedError, match="closed"):
        await OPERATIONS[operation](runtime, thread.id)

    assert boxes.acquire_inputs == []
