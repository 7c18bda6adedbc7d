"""Operations through the runtime: commands, the agent loop, run_tool, storage, create_pai."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
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
    of_role,
    record,
    scope_of,
    use_command,
    use_tool,
)
from pydantic import BaseModel

from pai.core import (
    AcquireInput,
    AgentRuntime,
    AssistantMessage,
    CapabilityAcquireError,
    CommandContext,
    CommandInputError,
    ErrorMessage,
    InMemoryStorage,
    InvalidThreadIdError,
    ModelRequest,
    SqliteStorage,
    StepLimitExceededError,
    ThreadHandle,
    ThreadNotFoundError,
    ToolCapabilitiesError,
    ToolContext,
    ToolResultMessage,
    UnknownAgentError,
    UnknownCommandError,
    UserMessage,
    create_agent_runtime,
    create_capability_binding,
    create_pai,
    define_command,
    define_tool,
)
from pai.core.testing import FunctionModel, ScriptedModel, run_tool, text, tool_call, tool_calls

pytestmark = pytest.mark.anyio

ANN = Who()
LIMIT = 5

box = box_capability("box")


async def new_thread(runtime: AgentRuntime, who: Who = ANN) -> Any:
    return await runtime.admin(identity=who).create_thread()


# -- commands ---------------------------------------------------------------------------------


class Greeting(BaseModel):
    name: str
    times: int = 1


seen_contexts: list[CommandContext[Greeting]] = []


async def greet(ctx: CommandContext[Greeting]) -> str:
    seen_contexts.append(ctx)
    return " ".join([f"hi {ctx.input.name}"] * ctx.input.times)


def greeter(**commands: Any) -> AgentRuntime:
    agent = build_agent(commands={"greet": define_command(input=Greeting, run=greet), **commands})
    return build_runtime(agent)


async def test_a_command_runs_with_dict_input_and_returns_its_result_to_the_caller() -> None:
    runtime = greeter()
    thread = await new_thread(runtime)

    assert await thread.commands.greet({"name": "ann", "times": 2}) == "hi ann hi ann"


async def test_a_command_accepts_an_instance_of_its_input_model() -> None:
    runtime = greeter()
    thread = await new_thread(runtime)

    assert await thread.commands.greet(Greeting(name="bob")) == "hi bob"


async def test_a_command_receives_the_thread_and_the_trusted_identity() -> None:
    runtime = greeter()
    thread = await new_thread(runtime)
    seen_contexts.clear()

    await runtime.admin(identity=ANN).thread(thread.id).commands.greet({"name": "ann"})

    [ctx] = seen_contexts
    assert (ctx.thread_id, ctx.scope_key, ctx.user_key, ctx.identity) == (
        thread.id,
        SCOPE,
        "ann",
        ANN,
    )
    assert len(ctx.capabilities) == 0


async def test_a_command_receives_its_capabilities() -> None:
    boxes = RecordingBinding(box)
    runtime = build_runtime(build_agent(commands={"use": use_command(box)}), boxes)
    thread = await new_thread(runtime)

    [instance] = await thread.commands.use({})

    assert boxes.instances == {boxes.keys[0]: instance}


@pytest.mark.parametrize("local", ["box", "storage"], ids=["named-as-its-id", "aliased"])
async def test_a_capability_is_reached_by_its_local_name_alone_and_by_its_token(local: str) -> None:
    async def run(ctx: CommandContext[NoInput]) -> object:
        caps = ctx.capabilities
        try:  # the capability's id, as a name: only when it is also the local name
            by_id_as_name: object = getattr(caps, box.id) is caps[box]
        except AttributeError as error:
            by_id_as_name = str(error)
        return list(caps), getattr(caps, local) is caps[box], by_id_as_name

    command = define_command(input=NoInput, capabilities={local: box}, run=run)
    runtime = build_runtime(build_agent(commands={"look": command}), RecordingBinding(box))
    thread = await new_thread(runtime)

    names, by_local_name, by_id_as_name = await thread.commands.look({})

    assert names == [local]
    assert by_local_name is True
    if local == box.id:
        assert by_id_as_name is True
    else:
        assert by_id_as_name == (
            "no capability named 'box' on this operation; declared names: ['storage']"
        )


async def test_invalid_command_input_raises_listing_every_bad_field_and_runs_nothing() -> None:
    runtime = greeter()
    thread = await new_thread(runtime)
    seen_contexts.clear()

    with pytest.raises(CommandInputError) as caught:
        await thread.commands.greet({"times": "many"})

    message = str(caught.value)
    assert "'greet'" in message
    assert "name" in message
    assert "times" in message
    assert "Greeting" in message  # what to pass instead
    assert seen_contexts == []
    assert await thread.messages() == ()


async def test_an_unknown_command_raises_listing_the_known_ones() -> None:
    runtime = greeter()
    thread = await new_thread(runtime)

    with pytest.raises(UnknownCommandError) as caught:
        await thread.commands.greeet({"name": "ann"})

    assert caught.value.known == ("greet",)
    assert "'greeet'" in str(caught.value)
    assert "'greet'" in str(caught.value)


async def test_a_failing_command_raises_to_the_caller_and_records_only_an_error_message() -> None:
    def explode(ctx: CommandContext[NoInput]) -> None:
        raise ValueError("the reactor is offline")

    runtime = greeter(explode=define_command(input=NoInput, run=explode))
    thread = await new_thread(runtime)

    with pytest.raises(ValueError, match="the reactor is offline"):
        await thread.commands.explode({})

    assert await thread.messages() == (
        ErrorMessage(source="command", error_type="ValueError", message="the reactor is offline"),
    )


async def test_a_command_whose_capability_fails_to_acquire_raises_to_the_caller() -> None:
    async def acquire(input: AcquireInput) -> Box:
        raise ConnectionError("provider unreachable")

    agent = build_agent(commands={"use": use_command(box)})
    runtime = create_agent_runtime(
        agent=agent,
        storage=InMemoryStorage(),
        scope_key=scope_of,
        capabilities={"box": create_capability_binding(capability=box, acquire=acquire)},
    )
    thread = await new_thread(runtime)

    with pytest.raises(CapabilityAcquireError, match="provider unreachable") as caught:
        await thread.commands.use({})

    assert caught.value.ids == ("box",)
    assert isinstance(caught.value.__cause__, ConnectionError)
    [recorded] = await thread.messages()
    assert isinstance(recorded, ErrorMessage)
    assert recorded.error_type == "CapabilityAcquireError"


async def test_an_unknown_thread_id_raises_thread_not_found_naming_it() -> None:
    runtime = greeter()

    with pytest.raises(ThreadNotFoundError, match="no-such-thread") as caught:
        await runtime.admin(identity=ANN).thread("no-such-thread").commands.greet({"name": "a"})

    assert caught.value.thread_id == "no-such-thread"


@pytest.mark.parametrize("bad_id", [5, "", b"t1", 1.5], ids=repr)
async def test_creating_a_thread_with_an_id_that_is_not_a_non_empty_str_is_refused_before_storage(
    bad_id: object,
) -> None:
    storage = InMemoryStorage()
    runtime = build_runtime(
        build_agent(commands={"greet": define_command(input=Greeting, run=greet)}), storage=storage
    )
    admin = runtime.admin(identity=ANN)

    with pytest.raises(InvalidThreadIdError, match="thread_id must be a non-empty str") as caught:
        await admin.create_thread(thread_id=bad_id)  # type: ignore[arg-type]

    assert repr(bad_id) in str(caught.value)
    assert await storage.list_threads(SCOPE) == ()


@pytest.mark.parametrize("bad_id", [5, "", None, b"t1"], ids=repr)
def test_a_handle_on_an_id_that_is_not_a_non_empty_str_is_refused_at_once(bad_id: object) -> None:
    runtime = greeter()

    with pytest.raises(InvalidThreadIdError, match=r"thread\(\): thread_id"):
        runtime.admin(identity=ANN).thread(bad_id)  # type: ignore[arg-type]


IN_A_THREAD: dict[str, Callable[[ThreadHandle], Awaitable[object]]] = {
    "command": lambda handle: handle.commands.greet({"name": "ann"}),
    "send": lambda handle: handle.send("hello"),
    "messages": lambda handle: handle.messages(),
    "record": lambda handle: handle.record(),
    "delete": lambda handle: handle.delete(),
}


@pytest.mark.parametrize("operation", IN_A_THREAD)
async def test_a_thread_of_another_scope_is_not_found(operation: str) -> None:
    runtime = greeter()
    theirs = await new_thread(runtime, Who("globex"))
    mine = runtime.admin(identity=ANN).thread(theirs.id)

    with pytest.raises(ThreadNotFoundError, match=theirs.id):
        await IN_A_THREAD[operation](mine)

    assert (await theirs.record()).id == theirs.id


async def test_each_scope_lists_only_its_own_threads() -> None:
    runtime = greeter()
    mine = await new_thread(runtime)
    await new_thread(runtime, Who("globex"))

    assert [t.id for t in await runtime.admin(identity=ANN).list_threads()] == [mine.id]


# -- the agent loop ---------------------------------------------------------------------------


def box_agent_runtime(
    model: Any, *, counter: Counter[str] | None = None, **options: Any
) -> tuple[AgentRuntime, RecordingBinding]:
    boxes = RecordingBinding(box)
    agent = build_agent(tools={"useBox": use_tool(box, counter=counter)})
    return build_runtime(agent, boxes, model=model, **options), boxes


async def test_a_tool_call_runs_with_its_capabilities_and_the_result_is_saved() -> None:
    model = ScriptedModel([tool_call("useBox", id="c1"), text("done")])
    runtime, boxes = box_agent_runtime(model)
    thread = await new_thread(runtime)

    result = await thread.send("use the box")

    instance = boxes.instances[boxes.keys[0]]
    saved = await thread.messages()
    assert saved == (
        UserMessage(content="use the box"),
        tool_call("useBox", id="c1"),
        ToolResultMessage(
            tool_call_id="c1", tool_name="useBox", content=f'["{instance}"]', output=[instance]
        ),
        AssistantMessage(content="done"),
    )
    assert (result.status, result.text, result.steps) == ("completed", "done", 2)
    assert tuple(result.messages) == saved


async def test_the_next_model_request_contains_the_saved_tool_result() -> None:
    model = ScriptedModel([tool_call("useBox"), text("done")])
    runtime, _ = box_agent_runtime(model)
    thread = await new_thread(runtime)

    await thread.send("go")

    saved_result = (await thread.messages())[2]
    assert isinstance(saved_result, ToolResultMessage)
    assert model.requests[1].messages[-1] == saved_result
    assert model.requests[1].step == 2


async def test_a_later_run_replays_saved_tool_results_without_running_the_tools_again() -> None:
    executions: Counter[str] = Counter()
    model = ScriptedModel([tool_call("useBox"), text("first"), text("second")])
    runtime, _ = box_agent_runtime(model, counter=executions)
    thread = await new_thread(runtime)
    await thread.send("one")

    await thread.send("two")

    assert executions["useBox"] == 1
    replayed = model.requests[2].messages
    assert [m.role for m in replayed] == ["user", "assistant", "tool", "assistant", "user"]
    assert replayed[2] == (await thread.messages())[2]


async def test_the_model_gets_the_instructions_and_the_tool_specs() -> None:
    model = ScriptedModel([text("hello")])
    runtime, _ = box_agent_runtime(model)
    thread = await new_thread(runtime)

    await thread.send("hi")

    [request] = model.requests
    assert request.instructions == "you are main"
    assert [t.name for t in request.tools] == ["useBox"]
    assert request.tools[0].input_schema == NoInput.model_json_schema()


async def test_tool_input_failing_its_schema_is_a_model_facing_error_and_the_tool_never_runs() -> (
    None
):
    class Point(BaseModel):
        x: int
        y: int

    ran: list[Point] = []
    plot = define_tool(
        id="plot", description="plot", input_schema=Point, execute=lambda ctx: ran.append(ctx.input)
    )
    model = ScriptedModel([tool_call("plot", {"x": "left"}), text("sorry")])
    runtime = build_runtime(build_agent(tools={"plot": plot}), model=model)
    thread = await new_thread(runtime)

    result = await thread.send("plot it")

    [tool_result] = of_role(result.messages, "tool")
    assert tool_result.is_error
    assert "'plot'" in tool_result.content
    assert "x:" in tool_result.content
    assert "y:" in tool_result.content
    assert ran == []
    assert model.requests[1].messages[-1] == tool_result


async def test_a_tool_that_raises_becomes_a_model_facing_error_and_the_run_continues() -> None:
    def broken(ctx: ToolContext[NoInput]) -> str:
        raise LookupError("no such file")

    tool = define_tool(id="read", description="read", input_schema=NoInput, execute=broken)
    model = ScriptedModel([tool_call("read"), text("it failed")])
    runtime = build_runtime(build_agent(tools={"read": tool}), model=model)
    thread = await new_thread(runtime)

    result = await thread.send("read it")

    [tool_result] = of_role(result.messages, "tool")
    assert tool_result.is_error
    assert "LookupError" in tool_result.content
    assert "no such file" in tool_result.content
    assert result.text == "it failed"


async def test_an_unknown_tool_is_a_model_facing_error_listing_the_available_tools() -> None:
    helper = build_agent(name="helper", model=ScriptedModel([]))
    agent = build_agent(tools={"useBox": use_tool(box)}, subagents={"helper": helper})
    model = ScriptedModel([tool_call("hammer"), text("ok")])
    runtime = build_runtime(agent, RecordingBinding(box), model=model)
    thread = await new_thread(runtime)

    result = await thread.send("go")

    [tool_result] = of_role(result.messages, "tool")
    assert tool_result.is_error
    assert "'hammer'" in tool_result.content
    assert "'useBox'" in tool_result.content
    assert "'helper'" in tool_result.content


async def test_a_failed_acquisition_is_a_model_facing_error_and_is_reported() -> None:
    async def acquire(input: AcquireInput) -> Box:
        raise ConnectionError("provider unreachable")

    executions: Counter[str] = Counter()
    events = Events()
    runtime = create_agent_runtime(
        agent=build_agent(tools={"useBox": use_tool(box, counter=executions)}),
        model=ScriptedModel([tool_call("useBox"), text("ok")]),
        storage=InMemoryStorage(),
        scope_key=scope_of,
        capabilities={"box": create_capability_binding(capability=box, acquire=acquire)},
        on_runtime_error=events,
    )
    thread = await new_thread(runtime)

    result = await thread.send("go")

    [tool_result] = of_role(result.messages, "tool")
    assert tool_result.is_error
    assert "'box'" in tool_result.content
    assert "provider unreachable" in tool_result.content
    assert executions["useBox"] == 0
    [event] = events.received
    assert (event.source, event.capability_id, event.thread_id) == ("capability", "box", thread.id)
    assert isinstance(event.error, CapabilityAcquireError)


async def test_the_step_limit_raises_and_the_thread_keeps_the_completed_steps_and_an_error() -> (
    None
):
    model = ScriptedModel([tool_call("useBox"), tool_call("useBox"), tool_call("useBox")])
    boxes = RecordingBinding(box)
    agent = build_agent(tools={"useBox": use_tool(box)}, max_steps=2)
    runtime = build_runtime(agent, boxes, model=model)
    thread = await new_thread(runtime)

    with pytest.raises(StepLimitExceededError, match="2 steps"):
        await thread.send("loop")

    saved = await thread.messages()
    assert [m.role for m in saved] == ["user", "assistant", "tool", "assistant", "tool", "error"]
    assert isinstance(saved[-1], ErrorMessage)
    assert saved[-1].error_type == "StepLimitExceededError"
    assert len(model.requests) == 2


async def test_a_model_failure_raises_and_leaves_only_an_error_message_in_the_thread() -> None:
    def unavailable(request: ModelRequest) -> AssistantMessage:
        raise TimeoutError("model overloaded")

    runtime, _ = box_agent_runtime(FunctionModel(unavailable))
    thread = await new_thread(runtime)

    with pytest.raises(TimeoutError, match="model overloaded"):
        await thread.send("hello")

    assert await thread.messages() == (
        ErrorMessage(source="model", error_type="TimeoutError", message="model overloaded"),
    )


async def test_recorded_errors_are_never_shown_to_the_model() -> None:
    answers = iter([TimeoutError("overloaded"), text("back")])

    def flaky(request: ModelRequest) -> AssistantMessage:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    model = FunctionModel(flaky)
    runtime, _ = box_agent_runtime(model)
    thread = await new_thread(runtime)
    with pytest.raises(TimeoutError):
        await thread.send("first")

    await thread.send("second")

    assert [m.role for m in model.requests[1].messages] == ["user"]
    assert [m.role for m in await thread.messages()] == ["error", "user", "assistant"]


async def test_several_tool_calls_of_one_step_run_concurrently() -> None:
    left_started, right_started = anyio.Event(), anyio.Event()

    async def left(ctx: ToolContext[NoInput]) -> str:
        left_started.set()
        await right_started.wait()  # deadlocks if the calls run one after the other
        return "left"

    async def right(ctx: ToolContext[NoInput]) -> str:
        right_started.set()
        await left_started.wait()
        return "right"

    tools = {
        name: define_tool(id=name, description=name, input_schema=NoInput, execute=fn)
        for name, fn in (("left", left), ("right", right))
    }
    model = ScriptedModel([tool_calls(("left", {}), ("right", {})), text("both")])
    runtime = build_runtime(build_agent(tools=tools), model=model)
    thread = await new_thread(runtime)

    with anyio.fail_after(LIMIT):
        result = await thread.send("go")

    assert [m.content for m in of_role(result.messages, "tool")] == ["left", "right"]


class Question(BaseModel):
    question: str


async def test_external_tools_pause_the_run_until_their_results_are_submitted() -> None:
    ask = define_tool(id="ask", description="ask the person", input_schema=Question)
    model = ScriptedModel([tool_call("ask", {"question": "which?"}, id="q1"), text("thanks")])
    runtime = build_runtime(build_agent(tools={"ask": ask}), model=model)
    thread = await new_thread(runtime)

    paused = await thread.send("help me")

    assert paused.status == "awaiting_tool_results"
    assert [(c.id, c.name, c.arguments) for c in paused.pending_tool_calls] == [
        ("q1", "ask", {"question": "which?"})
    ]
    assert len(model.requests) == 1

    resumed = await thread.submit_tool_results({"q1": "the blue one"})

    assert (resumed.status, resumed.text) == ("completed", "thanks")
    submitted = model.requests[1].messages[-1]
    assert submitted == ToolResultMessage(
        tool_call_id="q1", tool_name="ask", content="the blue one", output="the blue one"
    )
    assert [m.role for m in await thread.messages()] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]


async def test_submitting_results_for_other_calls_than_the_pending_ones_is_refused() -> None:
    ask = define_tool(id="ask", description="ask", input_schema=Question)
    model = ScriptedModel([tool_call("ask", {"question": "?"}, id="q1"), text("never")])
    runtime = build_runtime(build_agent(tools={"ask": ask}), model=model)
    thread = await new_thread(runtime)
    await thread.send("go")

    with pytest.raises(ValueError, match="q1"):
        await thread.submit_tool_results({"q2": "wrong call"})

    assert len(model.requests) == 1


async def test_a_subagent_runs_in_a_child_thread_and_its_final_text_is_the_tool_result() -> None:
    helper_model = ScriptedModel([text("the answer is 42")])
    helper = build_agent(name="helper", model=helper_model)
    model = ScriptedModel([tool_call("helper", {"task": "compute"}, id="d1"), text("done")])
    runtime = build_runtime(build_agent(subagents={"helper": helper}), model=model)
    thread = await new_thread(runtime)

    await thread.send("delegate")

    [child] = await thread.children()
    assert (child.parent_thread_id, child.agent_name, child.scope_key) == (
        thread.id,
        "helper",
        SCOPE,
    )
    assert helper_model.requests[0].messages == [UserMessage(content="compute")]
    child_messages = await runtime.admin(identity=ANN).thread(child.id).messages()
    assert [m.role for m in child_messages] == ["user", "assistant"]
    delegated = model.requests[1].messages[-1]
    assert isinstance(delegated, ToolResultMessage)
    assert (delegated.tool_call_id, delegated.content, delegated.is_error) == (
        "d1",
        "the answer is 42",
        False,
    )
    assert await runtime.admin(identity=ANN).list_threads() == (await thread.record(),)


# -- run_tool ---------------------------------------------------------------------------------


class FakeBox(Box):
    async def use(self) -> str:
        return "fake"


async def read_box(ctx: ToolContext[NoInput]) -> list[str]:
    by_name = await ctx.capabilities.storage.use()
    by_token = await ctx.capabilities[box].use()
    return [by_name, by_token]


aliased = define_tool(
    id="aliased",
    description="reads a box under the local name 'storage'",
    input_schema=NoInput,
    capabilities={"storage": box},
    execute=read_box,
)
plain = define_tool(
    id="plain", description="no capabilities", input_schema=NoInput, execute=lambda ctx: 7
)


async def test_run_tool_runs_a_tool_with_facades_keyed_by_its_local_names() -> None:
    ran = await run_tool(aliased, input={}, capabilities={"storage": FakeBox()})

    assert ran.expect_output() == ["fake", "fake"]
    assert not ran.is_error


async def test_run_tool_requires_capabilities_when_the_tool_declares_them() -> None:
    with pytest.raises(ToolCapabilitiesError, match=r"capabilities=\{'storage': <facade>\}"):
        await run_tool(aliased, input={})


async def test_run_tool_rejects_a_missing_local_name() -> None:
    with pytest.raises(ToolCapabilitiesError, match=r"missing: \['storage'\]"):
        await run_tool(aliased, input={}, capabilities={})


async def test_run_tool_rejects_capabilities_keyed_by_id_instead_of_local_name() -> None:
    with pytest.raises(ToolCapabilitiesError) as caught:
        await run_tool(aliased, input={}, capabilities={"box": FakeBox()})

    assert "missing: ['storage']" in str(caught.value)
    assert "unexpected: ['box']" in str(caught.value)


async def test_run_tool_rejects_an_extra_capability() -> None:
    with pytest.raises(ToolCapabilitiesError, match=r"unexpected: \['spare'\]"):
        await run_tool(aliased, input={}, capabilities={"storage": FakeBox(), "spare": FakeBox()})


@pytest.mark.parametrize("given", [{}, {"box": FakeBox()}], ids=["empty", "one"])
async def test_run_tool_rejects_capabilities_for_a_tool_that_declares_none(
    given: dict[str, object],
) -> None:
    with pytest.raises(ToolCapabilitiesError, match="drop capabilities="):
        await run_tool(plain, input={}, capabilities=given)


async def test_run_tool_runs_a_tool_without_capabilities_when_given_none() -> None:
    assert (await run_tool(plain, input={})).expect_output() == 7


async def test_tool_capabilities_errors_are_type_errors() -> None:
    with pytest.raises(TypeError):
        await run_tool(plain, input={}, capabilities={})


async def test_expect_output_raises_with_the_error_text_when_the_tool_failed() -> None:
    def broken(ctx: ToolContext[NoInput]) -> None:
        raise RuntimeError("sandbox is gone")

    tool = define_tool(id="broken", description="fails", input_schema=NoInput, execute=broken)
    ran = await run_tool(tool, input={})

    assert ran.is_error
    with pytest.raises(AssertionError, match="sandbox is gone"):
        ran.expect_output()


# -- storage and create_pai -------------------------------------------------------------------


async def test_a_runtime_without_storage_uses_sqlite_end_to_end() -> None:
    model = ScriptedModel([tool_call("useBox"), text("done")])
    boxes = RecordingBinding(box)
    runtime = create_agent_runtime(
        agent=build_agent(tools={"useBox": use_tool(box)}),
        model=model,
        scope_key=scope_of,
        capabilities=record(boxes),
    )
    assert isinstance(runtime.storage, SqliteStorage)

    async with runtime:
        thread = await new_thread(runtime)
        result = await thread.send("go")
        assert [m.role for m in await thread.messages()] == [
            "user",
            "assistant",
            "tool",
            "assistant",
        ]
        assert tuple(result.messages) == tuple(await thread.messages())

    assert boxes.closes == 1


async def test_threads_in_a_sqlite_file_survive_a_new_runtime(tmp_path: Path) -> None:
    path = tmp_path / "pai.db"
    first = build_runtime(
        build_agent(), storage=SqliteStorage(path), model=ScriptedModel([text("one")])
    )
    async with first:
        thread = await new_thread(first)
        await thread.send("hello")

    model = ScriptedModel([text("two")])
    async with build_runtime(build_agent(), storage=SqliteStorage(path), model=model) as second:
        await second.admin(identity=ANN).thread(thread.id).send("again")

    assert [m.role for m in model.requests[0].messages] == ["user", "assistant", "user"]


def two_agent_pai(log: list[str], storage: Any = None) -> Any:
    first = RecordingBinding(box, log=log)
    second = RecordingBinding(box_capability("tray"), log=log)
    return create_pai(
        agents={
            "boxer": {
                "agent": build_agent(name="boxer", commands={"use": use_command(box)}),
                "capabilities": record(first),
            },
            "trayer": {
                "agent": build_agent(
                    name="trayer", commands={"use": use_command(second.capability)}
                ),
                "capabilities": record(second),
            },
        },
        scope_key=scope_of,
        storage=storage,
    )


async def test_create_pai_builds_one_runtime_per_agent_over_one_storage() -> None:
    pai = two_agent_pai([])

    boxer, trayer = pai.runtime("boxer"), pai.runtime("trayer")

    assert pai.agent_ids == ("boxer", "trayer")
    assert (boxer.agent.name, trayer.agent.name) == ("boxer", "trayer")
    assert boxer.storage is trayer.storage is pai.storage
    assert isinstance(pai.storage, SqliteStorage)
    thread = await new_thread(boxer)
    assert await pai.storage.get_thread(thread.id) == await thread.record()
    await pai.aclose()


async def test_an_app_agent_cannot_reach_another_agents_threads_in_the_shared_storage() -> None:
    pai = two_agent_pai([])
    boxers_thread = await new_thread(pai.runtime("boxer"))

    trayer = pai.runtime("trayer").admin(identity=ANN)
    with pytest.raises(ThreadNotFoundError):
        await trayer.thread(boxers_thread.id).commands.use({})
    with pytest.raises(ThreadNotFoundError):
        await trayer.thread(boxers_thread.id).delete()
    assert await pai.storage.get_thread(boxers_thread.id) is not None
    await pai.aclose()


async def test_create_pai_names_the_registered_agents_for_an_unknown_one() -> None:
    pai = two_agent_pai([])

    with pytest.raises(UnknownAgentError, match="'boxer', 'trayer'"):
        pai.runtime("nope")
    await pai.aclose()


async def test_closing_the_app_closes_every_binding_then_the_shared_storage_once() -> None:
    log: list[str] = []

    class RecordingStorage(InMemoryStorage):
        async def aclose(self) -> None:
            log.append("close storage")

    async with two_agent_pai(log, RecordingStorage()) as pai:
        await new_thread(pai.runtime("boxer"))
    await pai.aclose()

    assert sorted(log[:2]) == ["close box", "close tray"]
    assert log[2:] == ["close storage"]
