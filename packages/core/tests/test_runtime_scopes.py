"""The scope table, row by row: which operations share one capability instance, and its key."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from helpers import (
    SCOPE,
    Events,
    RecordingBinding,
    Who,
    box_capability,
    build_agent,
    build_runtime,
    of_role,
    record,
    use_command,
    use_tool,
)

from pai.core import (
    Agent,
    AgentRuntime,
    CapabilityBindingError,
    CapabilityScopeInput,
    InMemoryStorage,
    StorageError,
    ToolResultMessage,
    create_agent_runtime,
    instance_key,
)
from pai.core.ext import ThreadRecord
from pai.core.testing import ScriptedModel, text, tool_call

pytestmark = pytest.mark.anyio

box = box_capability("box")
root_box = box_capability("root-box")

ANN = Who(SCOPE, "ann")
BOB = Who(SCOPE, "bob")
ANN_ELSEWHERE = Who("globex", "ann")
NOBODY = Who(SCOPE, None)


def command_agent(*extra_commands: str) -> Agent:
    commands = {"use": use_command(box)}
    if "use_root" in extra_commands:
        commands["use_root"] = use_command(root_box)
    return build_agent(commands=commands)


async def use(runtime: AgentRuntime, who: Who, thread_id: str, command: str = "use") -> str:
    [instance] = await runtime.admin(identity=who).thread(thread_id).run_command(command, {})
    return instance


async def new_thread(runtime: AgentRuntime, who: Who = ANN) -> str:
    return (await runtime.admin(identity=who).create_thread()).id


async def chain(storage: InMemoryStorage, depth: int, *, agent_name: str = "main") -> list[str]:
    """Threads d0 (top level) .. d<depth>, each delegated from the one before, made in storage."""
    ids = [f"d{i}" for i in range(depth + 1)]
    for i, thread_id in enumerate(ids):
        await storage.create_thread(
            ThreadRecord(
                id=thread_id,
                scope_key=SCOPE,
                agent_name=agent_name,
                parent_thread_id=ids[i - 1] if i else None,
            )
        )
    return ids


def delegating_agents(depth: int, *tools_tokens: Any) -> Agent:
    """Agents L0 .. L<depth>: each uses its tool, delegates to the next (the last does not),
    then answers. Only L0's model is replaced by runtimes; each level scripts its own."""
    agent: Agent | None = None
    for level in reversed(range(depth + 1)):
        script = [tool_call("use")]
        if agent is not None:
            script.append(tool_call("delegate", {"task": f"level {level + 1}"}))
        script.append(text(f"L{level} done"))
        agent = build_agent(
            name=f"L{level}",
            model=ScriptedModel(script),
            tools={"use": use_tool(*tools_tokens)},
            subagents={"delegate": agent} if agent is not None else None,
        )
    assert agent is not None
    return agent


async def tool_outputs(runtime: AgentRuntime, thread_id: str) -> list[Any]:
    """The outputs of every successful tool call in a thread and its descendants, top down."""
    admin = runtime.admin(identity=ANN)
    handle = admin.thread(thread_id)
    outputs = [m.output for m in of_role(await handle.messages(), "tool") if m.tool_name == "use"]
    for child in await handle.children():
        outputs.extend(await tool_outputs(runtime, child.id))
    return outputs


# -- "thread" ---------------------------------------------------------------------------------


async def test_thread_scope_shares_one_instance_within_a_thread() -> None:
    boxes = RecordingBinding(box, scope="thread")
    runtime = build_runtime(command_agent(), boxes)
    thread_id = await new_thread(runtime)

    first = await use(runtime, ANN, thread_id)
    second = await use(runtime, ANN, thread_id)

    assert first == second
    assert boxes.keys == [instance_key("box", "thread", (SCOPE, thread_id))]
    assert boxes.provisions[boxes.keys[0]] == 1


async def test_thread_scope_gives_each_thread_its_own_instance() -> None:
    boxes = RecordingBinding(box, scope="thread")
    runtime = build_runtime(command_agent(), boxes)
    one, two = await new_thread(runtime), await new_thread(runtime)

    assert await use(runtime, ANN, one) != await use(runtime, ANN, two)
    assert boxes.keys == [
        instance_key("box", "thread", (SCOPE, one)),
        instance_key("box", "thread", (SCOPE, two)),
    ]


async def test_one_client_moving_between_threads_gets_each_threads_key_every_time() -> None:
    boxes = RecordingBinding(box, scope="thread")
    runtime = build_runtime(command_agent(), boxes)
    one, two = await new_thread(runtime), await new_thread(runtime)
    admin = runtime.admin(identity=ANN)  # one client: the same caller for every operation

    for thread_id in (one, one, two, one, two, two):
        await admin.thread(thread_id).run_command("use", {})

    assert [acquired.key for acquired in boxes.acquire_inputs] == [
        instance_key("box", "thread", (SCOPE, thread_id))
        for thread_id in (one, one, two, one, two, two)
    ]
    assert [acquired.thread_id for acquired in boxes.acquire_inputs] == [
        one,
        one,
        two,
        one,
        two,
        two,
    ]


async def test_the_same_thread_used_by_another_identity_gets_that_identitys_key() -> None:
    boxes = RecordingBinding(box, scope="user")
    runtime = build_runtime(command_agent(), boxes)
    thread_id = await new_thread(runtime)
    ann = runtime.admin(identity=ANN).thread(thread_id)
    bob = runtime.admin(identity=Who(SCOPE, "bob")).thread(thread_id)

    for handle in (ann, ann, bob, ann):
        await handle.run_command("use", {})

    assert [acquired.key for acquired in boxes.acquire_inputs] == [
        instance_key("box", "user", (SCOPE, user)) for user in ("ann", "ann", "bob", "ann")
    ]


async def test_thread_scope_gives_a_subagents_child_thread_its_own_instance() -> None:
    boxes = RecordingBinding(box, scope="thread")
    runtime = build_runtime(delegating_agents(1, box), boxes)
    top = await new_thread(runtime)

    await runtime.admin(identity=ANN).thread(top).send("go")

    [child] = await runtime.admin(identity=ANN).thread(top).children()
    outputs = await tool_outputs(runtime, top)
    assert len(outputs) == 2
    assert outputs[0] != outputs[1]
    assert boxes.keys == [
        instance_key("box", "thread", (SCOPE, top)),
        instance_key("box", "thread", (SCOPE, child.id)),
    ]


# -- "rootThread" -----------------------------------------------------------------------------


async def test_root_thread_scope_is_shared_by_delegated_threads_at_every_depth() -> None:
    boxes = RecordingBinding(box, scope="rootThread")
    runtime = build_runtime(delegating_agents(3, box), boxes)
    top = await new_thread(runtime)

    result = await runtime.admin(identity=ANN).thread(top).send("go")

    assert result.text == "L0 done"
    outputs = await tool_outputs(runtime, top)
    assert len(outputs) == 4  # L0 .. L3, each in its own thread
    assert len({i.thread_id for i in boxes.acquire_inputs}) == 4
    assert len({tuple(o) for o in outputs}) == 1
    assert boxes.keys == [instance_key("box", "rootThread", (SCOPE, top))]
    assert {i.root_thread_id for i in boxes.acquire_inputs} == {top}
    assert sum(boxes.provisions.values()) == 1


async def test_root_thread_scope_gives_each_top_level_thread_its_own_instance() -> None:
    boxes = RecordingBinding(box, scope="rootThread")
    runtime = build_runtime(command_agent(), boxes)
    one, two = await new_thread(runtime), await new_thread(runtime)

    assert await use(runtime, ANN, one) != await use(runtime, ANN, two)


async def test_root_thread_scope_follows_stored_parent_links_at_every_depth() -> None:
    storage = InMemoryStorage()
    ids = await chain(storage, 5)
    boxes = RecordingBinding(box, scope="rootThread")
    runtime = build_runtime(command_agent(), boxes, storage=storage)

    instances = {await use(runtime, ANN, thread_id) for thread_id in reversed(ids)}

    assert len(instances) == 1
    assert boxes.keys == [instance_key("box", "rootThread", (SCOPE, "d0"))]
    assert [i.root_thread_id for i in boxes.acquire_inputs] == ["d0"] * 6
    assert [i.thread_id for i in boxes.acquire_inputs] == list(reversed(ids))


async def test_root_thread_id_equals_thread_id_for_a_top_level_thread() -> None:
    boxes = RecordingBinding(box, scope="rootThread")
    runtime = build_runtime(command_agent(), boxes)
    top = await new_thread(runtime)

    await use(runtime, ANN, top)

    [acquired] = boxes.acquire_inputs
    assert acquired.root_thread_id == acquired.thread_id == top
    assert acquired.scope == "rootThread"


# -- "user" -----------------------------------------------------------------------------------


async def test_user_scope_shares_one_instance_per_scope_key_and_user_key() -> None:
    boxes = RecordingBinding(box, scope="user")
    runtime = build_runtime(command_agent(), boxes)
    ann_one, ann_two = await new_thread(runtime, ANN), await new_thread(runtime, ANN)
    bob_thread = await new_thread(runtime, BOB)
    elsewhere = await new_thread(runtime, ANN_ELSEWHERE)

    ann_first = await use(runtime, ANN, ann_one)
    ann_again = await use(runtime, ANN, ann_two)
    bob = await use(runtime, BOB, bob_thread)
    ann_in_globex = await use(runtime, ANN_ELSEWHERE, elsewhere)

    assert ann_first == ann_again
    assert len({ann_first, bob, ann_in_globex}) == 3
    assert boxes.keys == [
        instance_key("box", "user", (SCOPE, "ann")),
        instance_key("box", "user", (SCOPE, "bob")),
        instance_key("box", "user", ("globex", "ann")),
    ]


def test_a_user_scoped_binding_without_a_user_key_option_fails_at_construction() -> None:
    with pytest.raises(CapabilityBindingError, match="user_key") as caught:
        build_runtime(command_agent(), RecordingBinding(box, scope="user"), user_key=None)

    assert caught.value.ids == ("box",)
    assert "scope 'user'" in str(caught.value)


async def test_user_scope_command_for_an_identity_without_a_user_raises_naming_user_key() -> None:
    boxes = RecordingBinding(box, scope="user")
    runtime = build_runtime(command_agent(), boxes, user_key=lambda who: who.user)
    thread_id = await new_thread(runtime, NOBODY)

    with pytest.raises(CapabilityBindingError, match="user_key") as caught:
        await use(runtime, NOBODY, thread_id)

    assert caught.value.ids == ("box",)
    assert "'user'" in str(caught.value)
    assert boxes.acquire_inputs == []


async def test_user_scope_tool_without_a_user_key_gets_a_model_facing_error_naming_user_key() -> (
    None
):
    boxes = RecordingBinding(box, scope="user")
    events = Events()
    model = ScriptedModel([tool_call("use"), text("ok")])
    agent = build_agent(tools={"use": use_tool(box)})
    runtime = build_runtime(
        agent, boxes, model=model, on_runtime_error=events, user_key=lambda who: who.user
    )
    thread_id = await new_thread(runtime, NOBODY)

    result = await runtime.admin(identity=NOBODY).thread(thread_id).send("go")

    assert result.text == "ok"
    [tool_result] = of_role(result.messages, "tool")
    assert isinstance(tool_result, ToolResultMessage)
    assert tool_result.is_error
    assert "user_key" in tool_result.content
    assert model.requests[1].messages[-1] == tool_result
    assert sum(boxes.provisions.values()) == 0
    [event] = events.received
    assert event.source == "capability"
    assert event.capability_id == "box"
    assert isinstance(event.error, CapabilityBindingError)


# -- "scope" ----------------------------------------------------------------------------------


async def test_scope_scope_shares_one_instance_per_scope_key() -> None:
    boxes = RecordingBinding(box, scope="scope")
    runtime = build_runtime(command_agent(), boxes)
    ann_thread, bob_thread = await new_thread(runtime, ANN), await new_thread(runtime, BOB)
    elsewhere = await new_thread(runtime, ANN_ELSEWHERE)

    ann = await use(runtime, ANN, ann_thread)
    bob = await use(runtime, BOB, bob_thread)
    other = await use(runtime, ANN_ELSEWHERE, elsewhere)

    assert ann == bob
    assert other != ann
    assert boxes.keys == [
        instance_key("box", "scope", (SCOPE,)),
        instance_key("box", "scope", ("globex",)),
    ]


async def test_scope_scope_needs_no_user_key() -> None:
    boxes = RecordingBinding(box, scope="scope")
    runtime = build_runtime(command_agent(), boxes, user_key=None)
    thread_id = await new_thread(runtime, NOBODY)

    await use(runtime, NOBODY, thread_id)

    assert boxes.keys == [instance_key("box", "scope", (SCOPE,))]


# -- "global" ---------------------------------------------------------------------------------


async def test_global_scope_shares_one_instance_across_all_scopes() -> None:
    boxes = RecordingBinding(box, scope="global")
    runtime = build_runtime(command_agent(), boxes)
    here, there = await new_thread(runtime, ANN), await new_thread(runtime, ANN_ELSEWHERE)

    assert await use(runtime, ANN, here) == await use(runtime, ANN_ELSEWHERE, there)
    assert boxes.keys == [instance_key("box", "global", ())]


async def test_keys_of_different_capabilities_never_collide_in_one_scope() -> None:
    boxes = RecordingBinding(box, scope="global")
    roots = RecordingBinding(root_box, scope="global")
    runtime = build_runtime(command_agent("use_root"), boxes, roots)
    thread_id = await new_thread(runtime)

    await use(runtime, ANN, thread_id)
    await use(runtime, ANN, thread_id, "use_root")

    assert boxes.keys != roots.keys


# -- custom -----------------------------------------------------------------------------------


async def test_a_custom_scope_key_is_used_verbatim() -> None:
    seen: list[CapabilityScopeInput] = []

    def per_user_conversation(s: CapabilityScopeInput) -> str:
        seen.append(s)
        return f"{s.scope_key}/{s.user_key}/{s.root_thread_id}"

    storage = InMemoryStorage()
    await chain(storage, 2)
    boxes = RecordingBinding(box, scope=per_user_conversation)
    runtime = build_runtime(command_agent(), boxes, storage=storage)

    await use(runtime, ANN, "d2")

    [acquired] = boxes.acquire_inputs
    assert acquired.key == f"{SCOPE}/ann/d0"
    assert acquired.scope == "custom"
    assert acquired.root_thread_id == "d0"
    assert seen == [
        CapabilityScopeInput(
            thread_id="d2", root_thread_id="d0", scope_key=SCOPE, user_key="ann", identity=ANN
        )
    ]


async def test_a_custom_scope_is_asked_on_every_operation() -> None:
    asked: list[str] = []

    def by_call(s: CapabilityScopeInput) -> str:
        asked.append(s.thread_id)
        return f"call-{len(asked)}"

    boxes = RecordingBinding(box, scope=by_call)
    runtime = build_runtime(command_agent(), boxes)
    thread_id = await new_thread(runtime)
    handle = runtime.admin(identity=ANN).thread(thread_id)

    for _ in range(3):
        await handle.run_command("use", {})

    assert asked == [thread_id] * 3
    assert boxes.keys == ["call-1", "call-2", "call-3"]


async def test_operations_whose_custom_scope_returns_one_key_share_one_instance() -> None:
    boxes = RecordingBinding(box, scope=lambda s: "shared")
    runtime = build_runtime(command_agent(), boxes)
    one, two = await new_thread(runtime, ANN), await new_thread(runtime, ANN_ELSEWHERE)

    assert await use(runtime, ANN, one) == await use(runtime, ANN_ELSEWHERE, two)
    assert boxes.keys == ["shared"]


@pytest.mark.parametrize("returned", ["", 42, None], ids=["empty", "int", "none"])
async def test_a_custom_scope_returning_no_usable_key_raises_naming_the_custom_scope(
    returned: object,
) -> None:
    boxes = RecordingBinding(box, scope=lambda s: returned)  # type: ignore[arg-type, return-value]
    runtime = build_runtime(command_agent(), boxes)
    thread_id = await new_thread(runtime)

    with pytest.raises(CapabilityBindingError, match="custom scope") as caught:
        await use(runtime, ANN, thread_id)

    assert caught.value.ids == ("box",)
    assert repr(returned) in str(caught.value)
    assert boxes.acquire_inputs == []


async def test_a_custom_scope_that_raises_is_reported_as_a_binding_error_naming_it() -> None:
    def broken(s: CapabilityScopeInput) -> str:
        raise KeyError("tenant")

    boxes = RecordingBinding(box, scope=broken)
    runtime = build_runtime(command_agent(), boxes)
    thread_id = await new_thread(runtime)

    with pytest.raises(CapabilityBindingError, match="custom scope") as caught:
        await use(runtime, ANN, thread_id)

    assert caught.value.ids == ("box",)
    assert isinstance(caught.value.__cause__, KeyError)


async def test_a_tool_whose_custom_scope_fails_gets_a_model_facing_error() -> None:
    boxes = RecordingBinding(box, scope=lambda s: "")
    model = ScriptedModel([tool_call("use"), text("ok")])
    agent = build_agent(tools={"use": use_tool(box)})
    events = Events()
    runtime = build_runtime(agent, boxes, model=model, on_runtime_error=events)
    thread_id = await new_thread(runtime)

    result = await runtime.admin(identity=ANN).thread(thread_id).send("go")

    [tool_result] = of_role(result.messages, "tool")
    assert tool_result.is_error
    assert "custom scope" in tool_result.content
    assert [e.source for e in events.received] == ["capability"]


# -- the key options --------------------------------------------------------------------------


@pytest.mark.parametrize("returned", ["", 42, None], ids=["empty", "int", "none"])
def test_a_scope_key_option_returning_no_usable_key_raises_naming_scope_key(
    returned: object,
) -> None:
    runtime = create_agent_runtime(
        agent=command_agent(),
        storage=InMemoryStorage(),
        scope_key=lambda identity: returned,  # type: ignore[arg-type, return-value]
        capabilities=record(RecordingBinding(box)),
    )

    with pytest.raises(CapabilityBindingError, match="scope_key") as caught:
        runtime.admin(identity=ANN)

    assert repr(returned) in str(caught.value)


def failing_user_key(behaviour: str) -> Callable[[Who], Any]:
    def user_key(who: Who) -> Any:
        if behaviour == "raises":
            raise KeyError("no user on this request")
        return {"none": None, "empty": "", "int": 42}[behaviour]

    return user_key


USER_KEY_FAILURES = ["raises", "none", "empty", "int"]


@pytest.mark.parametrize("behaviour", USER_KEY_FAILURES)
async def test_a_failing_user_key_fails_only_the_user_scoped_acquisition_naming_user_key(
    behaviour: str,
) -> None:
    per_user = RecordingBinding(box, scope="user")
    runtime = build_runtime(command_agent(), per_user, user_key=failing_user_key(behaviour))
    admin = runtime.admin(identity=ANN)  # admin() itself works
    thread_id = await new_thread(runtime)

    with pytest.raises(CapabilityBindingError, match="user_key") as caught:
        await admin.thread(thread_id).commands.use({})

    assert caught.value.ids == ("box",)
    assert caught.value.__cause__ is not None  # the original failure, chained
    if behaviour == "raises":
        assert isinstance(caught.value.__cause__, KeyError)
    assert per_user.acquire_inputs == []


@pytest.mark.parametrize("behaviour", USER_KEY_FAILURES)
async def test_a_failing_user_key_leaves_every_other_scope_working(behaviour: str) -> None:
    per_thread = RecordingBinding(box, scope="thread")
    runtime = build_runtime(command_agent(), per_thread, user_key=failing_user_key(behaviour))
    thread_id = await new_thread(runtime)

    await use(runtime, ANN, thread_id)

    assert len(per_thread.acquire_inputs) == 1
    assert per_thread.acquire_inputs[0].user_key is None


async def test_a_failing_user_key_in_a_tool_is_a_model_facing_error_and_a_logged_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    per_user = RecordingBinding(box, scope="user")
    agent = build_agent(
        model=ScriptedModel([tool_call("useBox"), text("done")]), tools={"useBox": use_tool(box)}
    )
    runtime = build_runtime(agent, per_user, user_key=failing_user_key("raises"))
    thread = await runtime.admin(identity=ANN).create_thread()

    with caplog.at_level("WARNING", logger="pai.core"):
        result = await thread.send("go")

    [tool_result] = of_role(result.messages, "tool")
    assert tool_result.is_error
    assert "user_key" in tool_result.content
    assert any("user_key" in r.getMessage() for r in caplog.records if r.levelname == "WARNING")


# -- the rootThread walk ----------------------------------------------------------------------

NON_WALKING = ["thread", "user", "scope", "global"]


@pytest.mark.parametrize("scope", NON_WALKING)
async def test_operations_of_other_scopes_read_only_their_own_thread_at_depth_five(
    scope: Any,
) -> None:
    storage = InMemoryStorage()
    ids = await chain(storage, 5)
    boxes = RecordingBinding(box, scope=scope)
    roots = RecordingBinding(root_box, scope="rootThread")  # bound, but not used below
    runtime = build_runtime(command_agent("use_root"), boxes, roots, storage=storage)
    storage.reads = 0

    await use(runtime, ANN, ids[-1])

    assert storage.reads == 1
    assert [i.root_thread_id for i in boxes.acquire_inputs] == [None]


async def test_a_root_thread_operation_walks_each_ancestor_once_and_never_again() -> None:
    storage = InMemoryStorage()
    ids = await chain(storage, 5)
    roots = RecordingBinding(root_box, scope="rootThread")
    runtime = build_runtime(
        build_agent(commands={"use": use_command(root_box)}), roots, storage=storage
    )

    storage.reads = 0
    await use(runtime, ANN, ids[-1])
    assert storage.reads == 1 + 5  # the thread itself, then d4 .. d0

    storage.reads = 0
    await use(runtime, ANN, ids[-1])
    await use(runtime, ANN, ids[2])  # an ancestor the walk passed through
    assert storage.reads == 2  # each operation reads only its own thread


async def test_a_custom_scope_operation_walks_to_the_root_too() -> None:
    storage = InMemoryStorage()
    ids = await chain(storage, 5)
    boxes = RecordingBinding(box, scope=lambda s: s.root_thread_id)
    runtime = build_runtime(command_agent(), boxes, storage=storage)
    storage.reads = 0

    await use(runtime, ANN, ids[-1])

    assert storage.reads == 1 + 5
    assert boxes.keys == ["d0"]


async def test_threads_the_runtime_delegates_know_their_root_without_a_walk() -> None:
    storage = InMemoryStorage()
    roots = RecordingBinding(box, scope="rootThread")
    runtime = build_runtime(delegating_agents(3, box), roots, storage=storage)
    top = await new_thread(runtime)
    storage.reads = 0

    await runtime.admin(identity=ANN).thread(top).send("go")

    assert storage.reads == 1  # the top-level thread, read once when the run starts
    assert len(roots.acquire_inputs) == 4


async def test_a_known_root_does_not_outlive_its_thread_when_another_runtime_reuses_the_id() -> (
    None
):
    storage = InMemoryStorage()
    roots = RecordingBinding(root_box, scope="rootThread")
    agent = build_agent(commands={"use": use_command(root_box)})
    ours = build_runtime(agent, roots, storage=storage)
    theirs = build_runtime(agent, RecordingBinding(root_box, scope="rootThread"), storage=storage)
    for stored in (
        ThreadRecord(id="old-root", scope_key=SCOPE, agent_name="main"),
        ThreadRecord(id="child", scope_key=SCOPE, agent_name="main", parent_thread_id="old-root"),
    ):
        await storage.create_thread(stored)
    await use(ours, ANN, "child", "use")  # ours now knows child -> old-root
    await theirs.admin(identity=ANN).thread("old-root").delete()  # child goes with it
    for stored in (
        ThreadRecord(id="new-root", scope_key=SCOPE, agent_name="main"),
        ThreadRecord(id="child", scope_key=SCOPE, agent_name="main", parent_thread_id="new-root"),
    ):
        await storage.create_thread(stored)

    await use(ours, ANN, "child", "use")

    assert [i.root_thread_id for i in roots.acquire_inputs] == ["old-root", "new-root"]
    assert roots.keys[-1] == instance_key("root-box", "rootThread", (SCOPE, "new-root"))


async def test_a_known_ancestor_link_is_checked_against_the_ancestor_read_in_a_walk() -> None:
    storage = InMemoryStorage()
    roots = RecordingBinding(root_box, scope="rootThread")
    agent = build_agent(commands={"use": use_command(root_box)})
    ours = build_runtime(agent, roots, storage=storage)
    await chain(storage, 2)  # d0 <- d1 <- d2
    await use(ours, ANN, "d2", "use")  # ours knows d1 -> d0 and d2 -> d0
    await storage.delete_thread("d0")  # another process deletes the tree and builds another
    for stored in (
        ThreadRecord(id="e0", scope_key=SCOPE, agent_name="main"),
        ThreadRecord(id="d1", scope_key=SCOPE, agent_name="main", parent_thread_id="e0"),
        ThreadRecord(id="d3", scope_key=SCOPE, agent_name="main", parent_thread_id="d1"),
    ):
        await storage.create_thread(stored)

    await use(ours, ANN, "d3", "use")

    assert roots.acquire_inputs[-1].root_thread_id == "e0"


async def test_a_parent_cycle_in_storage_fails_the_walk_instead_of_looping() -> None:
    storage = InMemoryStorage()
    roots = RecordingBinding(root_box, scope="rootThread")
    runtime = build_runtime(
        build_agent(commands={"use": use_command(root_box)}), roots, storage=storage
    )
    for thread_id, parent in (("a", "b"), ("b", "a")):
        await storage.create_thread(
            ThreadRecord(id=thread_id, scope_key=SCOPE, agent_name="main", parent_thread_id=parent)
        )

    with pytest.raises(StorageError, match="cycle"):
        await use(runtime, ANN, "a", "use")


async def test_an_acquire_input_says_when_its_thread_was_stored() -> None:
    storage = InMemoryStorage()
    boxes = RecordingBinding(box)
    runtime = build_runtime(command_agent(), boxes, storage=storage)
    stored = datetime(2020, 5, 17, 9, 30, tzinfo=UTC)
    await storage.create_thread(
        ThreadRecord(id="old", scope_key=SCOPE, agent_name="main", created_at=stored)
    )

    await use(runtime, ANN, "old")

    assert [i.thread_created_at for i in boxes.acquire_inputs] == [stored]


async def test_a_thread_stored_again_under_its_id_is_acquired_with_its_new_creation_time() -> None:
    storage = InMemoryStorage()
    boxes = RecordingBinding(box)
    runtime = build_runtime(command_agent(), boxes, storage=storage)
    thread = runtime.admin(identity=ANN).thread("t")  # one caller: its inputs may be reused
    times = [datetime(2020, 5, 17, tzinfo=UTC), datetime(2021, 6, 18, tzinfo=UTC)]
    for created_at in times:
        await storage.delete_thread("t")
        await storage.create_thread(
            ThreadRecord(id="t", scope_key=SCOPE, agent_name="main", created_at=created_at)
        )
        await thread.run_command("use", {})

    # The key is the same, but the second thread is not the first.
    assert [i.thread_created_at for i in boxes.acquire_inputs] == times
