"""Runtime context and per-request tool availability: ``define_agent(runtime_context=...)`` and
``ToolEntry(tool=..., enabled=...)``."""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
from helpers import (
    NoInput,
    RecordingBinding,
    Who,
    box_capability,
    build_runtime,
    of_role,
    use_tool,
)

from pai.core import (
    CommandContext,
    DefinitionError,
    ErrorMessage,
    InstructionsInput,
    ModelRequest,
    RuntimeContextError,
    RuntimeContextInput,
    ThreadDeletedError,
    ToolContext,
    ToolEnabledInput,
    ToolEntry,
    ToolResultMessage,
    define_agent,
    define_command,
    define_tool,
)
from pai.core._context import RUN_FIELDS, new_runtime_context_input
from pai.core.testing import FunctionModel, ScriptedModel, text, tool_call

pytestmark = pytest.mark.anyio

ANN = Who()
box = box_capability()
LIMIT = 10


@dataclass(frozen=True)
class Plan:
    tier: str


class Recorder:
    """A model that records every request and answers from a script."""

    def __init__(self, *script: Any) -> None:
        self.requests: list[ModelRequest] = []
        self._script = ScriptedModel(script)

    async def request(self, request: ModelRequest) -> Any:
        self.requests.append(request)
        return await self._script.request(request)

    def offered(self, step: int) -> list[str]:
        return [spec.name for spec in self.requests[step - 1].tools]


def echo_context_tool(id: str = "whoami") -> Any:
    def execute(ctx: ToolContext[NoInput, Plan]) -> str:
        return ctx.runtime_context.tier

    return define_tool(id=id, description="say the tier", input_schema=NoInput, execute=execute)


# -- runtime_context --------------------------------------------------------------------------


async def test_runtime_context_runs_once_per_send_and_reaches_instructions_tools_and_predicates() -> (
    None
):
    calls: list[RuntimeContextInput] = []
    seen: dict[str, list[object]] = {"instructions": [], "enabled": []}

    def runtime_context(run: RuntimeContextInput) -> Plan:
        calls.append(run)
        return Plan(tier=f"gold-{len(calls)}")

    def instructions(run: InstructionsInput[Plan]) -> str:
        seen["instructions"].append(run.runtime_context)
        return "be helpful"

    def enabled(check: ToolEnabledInput[Plan]) -> bool:
        seen["enabled"].append(check.runtime_context)
        return True

    model = Recorder(tool_call("whoami"), text("done"), tool_call("whoami"), text("again"))
    agent = define_agent(
        name="main",
        model=model,
        instructions=instructions,
        runtime_context=runtime_context,
        tools={"whoami": ToolEntry(tool=echo_context_tool(), enabled=enabled)},
    )
    runtime = build_runtime(agent)
    thread = await runtime.admin(identity=ANN).create_thread()

    first = await thread.send("hi")
    second = await thread.send("hi again")

    assert [c.thread_id for c in calls] == [thread.id, thread.id]
    assert calls[0] == RuntimeContextInput(
        identity=ANN, thread_id=thread.id, scope_key="acme", user_key="ann", agent_name="main"
    )
    assert seen["instructions"] == [Plan("gold-1"), Plan("gold-2")]
    assert seen["enabled"] == [Plan("gold-1")] * 2 + [Plan("gold-2")] * 2  # once per model step
    [result1] = of_role(first.messages, "tool")
    [result2] = of_role(second.messages, "tool")
    assert (result1.content, result2.content) == ("gold-1", "gold-2")


async def test_runtime_context_gets_the_thread_and_identity_of_each_run() -> None:
    calls: list[RuntimeContextInput] = []

    def runtime_context(run: RuntimeContextInput) -> Plan:
        calls.append(run)
        return Plan(tier="gold")

    agent = define_agent(
        name="main", model=ScriptedModel([text("ok")] * 6), runtime_context=runtime_context
    )
    runtime = build_runtime(agent)
    ann = runtime.admin(identity=ANN)
    bob = runtime.admin(identity=Who(user="bob"))
    one, two = (await ann.create_thread()).id, (await ann.create_thread()).id
    await bob.thread(one).send("hi")  # bob's own: admin handles check the scope, not the user

    for client, thread_id in ((ann, one), (ann, two), (ann, one), (bob, one), (ann, one)):
        await client.thread(thread_id).send("hi")

    assert [(c.thread_id, c.user_key) for c in calls[1:]] == [
        (one, "ann"),
        (two, "ann"),
        (one, "ann"),
        (one, "bob"),
        (one, "ann"),
    ]


async def test_an_async_runtime_context_is_awaited() -> None:
    async def runtime_context(run: RuntimeContextInput) -> Plan:
        await anyio.lowlevel.checkpoint()
        return Plan(tier="async")

    agent = define_agent(
        name="main",
        model=ScriptedModel([tool_call("whoami"), text("done")]),
        runtime_context=runtime_context,
        tools={"whoami": echo_context_tool()},
    )
    runtime = build_runtime(agent)
    thread = await runtime.admin(identity=ANN).create_thread()

    result = await thread.send("hi")

    [tool_result] = of_role(result.messages, "tool")
    assert tool_result.content == "async"


async def test_a_command_receives_the_runtime_context() -> None:
    def run(ctx: CommandContext[NoInput, Plan]) -> str:
        return ctx.runtime_context.tier

    agent = define_agent(
        name="main",
        runtime_context=lambda run: Plan(tier=f"for {run.thread_id}"),
        commands={"tier": define_command(input=NoInput, run=run)},
    )
    runtime = build_runtime(agent)
    thread = await runtime.admin(identity=ANN).create_thread(thread_id="t1")

    assert await thread.commands.tier({}) == "for t1"


async def test_without_a_runtime_context_function_the_context_is_none() -> None:
    seen: list[object] = []

    def execute(ctx: ToolContext[NoInput]) -> str:
        seen.append(ctx.runtime_context)
        return "ok"

    tool = define_tool(id="t", description="t", input_schema=NoInput, execute=execute)
    agent = define_agent(
        name="main", model=ScriptedModel([tool_call("t"), text("done")]), tools={"t": tool}
    )
    runtime = build_runtime(agent)
    thread = await runtime.admin(identity=ANN).create_thread()

    await thread.send("hi")

    assert seen == [None]


async def test_a_delegated_run_computes_the_subagents_own_runtime_context_in_the_child_thread() -> (
    None
):
    runs: list[tuple[str, str]] = []

    def context_of(name: str) -> Any:
        def runtime_context(run: RuntimeContextInput) -> Plan:
            runs.append((run.agent_name, run.thread_id))
            return Plan(tier=name)

        return runtime_context

    helper = define_agent(
        name="helper",
        model=ScriptedModel([tool_call("whoami"), text("helper says hi")]),
        runtime_context=context_of("helper"),
        tools={"whoami": echo_context_tool()},
    )
    main = define_agent(
        name="main",
        model=ScriptedModel([tool_call("helper", {"task": "greet"}), text("done")]),
        runtime_context=context_of("main"),
        subagents={"helper": helper},
    )
    runtime = build_runtime(main)
    thread = await runtime.admin(identity=ANN).create_thread(thread_id="top")

    await thread.send("go")

    [child] = await thread.children()
    assert runs == [("main", "top"), ("helper", child.id)]
    child_messages = await runtime.admin(identity=ANN).thread(child.id).messages()
    [tool_result] = of_role(child_messages, "tool")
    assert tool_result.content == "helper"


async def test_a_failing_runtime_context_fails_the_run_and_records_only_the_error() -> None:
    model = Recorder(text("never"))

    def runtime_context(run: RuntimeContextInput) -> Plan:
        raise LookupError("no plan for this workspace")

    agent = define_agent(name="main", model=model, runtime_context=runtime_context)
    runtime = build_runtime(agent)
    thread = await runtime.admin(identity=ANN).create_thread()

    with pytest.raises(RuntimeContextError, match="no plan for this workspace") as caught:
        await thread.send("hi")

    assert isinstance(caught.value.__cause__, LookupError)
    assert "runtime_context of agent 'main'" in str(caught.value)
    assert model.requests == []
    [error] = await thread.messages()
    assert isinstance(error, ErrorMessage)
    assert error.source == "runtime_context"
    assert "no plan for this workspace" in error.message


async def test_a_failing_instructions_function_fails_the_run_and_records_only_the_error() -> None:
    def instructions(run: InstructionsInput) -> str:
        raise ValueError("template missing")

    agent = define_agent(
        name="main", model=ScriptedModel([text("never")]), instructions=instructions
    )
    runtime = build_runtime(agent)
    thread = await runtime.admin(identity=ANN).create_thread()

    with pytest.raises(RuntimeContextError, match="template missing"):
        await thread.send("hi")

    [error] = await thread.messages()
    assert isinstance(error, ErrorMessage)
    assert error.source == "instructions"


async def test_a_failing_runtime_context_fails_a_command_before_it_runs() -> None:
    ran: list[str] = []
    agent = define_agent(
        name="main",
        runtime_context=lambda run: 1 / 0,
        commands={"go": define_command(input=NoInput, run=lambda ctx: ran.append("ran"))},
    )
    runtime = build_runtime(agent)
    thread = await runtime.admin(identity=ANN).create_thread()

    with pytest.raises(RuntimeContextError, match="ZeroDivisionError"):
        await thread.commands.go({})

    assert ran == []


async def test_a_runtime_context_is_cancelled_when_its_thread_is_deleted() -> None:
    started = anyio.Event()
    cancelled = anyio.Event()

    async def runtime_context(run: RuntimeContextInput) -> Plan:
        started.set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            cancelled.set()
            raise
        raise AssertionError("unreachable")

    agent = define_agent(
        name="main", model=ScriptedModel([text("never")]), runtime_context=runtime_context
    )
    runtime = build_runtime(agent)
    thread = await runtime.admin(identity=ANN).create_thread()
    caught: list[BaseException] = []

    async def send() -> None:
        try:
            await thread.send("hi")
        except ThreadDeletedError as error:
            caught.append(error)

    with anyio.fail_after(LIMIT):
        async with anyio.create_task_group() as tg:
            tg.start_soon(send)
            await started.wait()
            await thread.delete()

    assert cancelled.is_set()
    assert len(caught) == 1


# -- ToolEntry and enabled predicates ---------------------------------------------------------


def plan_predicate(tier: str) -> Any:
    def enabled(check: ToolEnabledInput[Plan]) -> bool:
        return check.runtime_context.tier == tier

    return enabled


async def offered_on_first_step(enabled: Any) -> list[str]:
    """The tools the model is offered on a starter plan, ``intake`` given ``enabled``."""
    model = Recorder(text("done"))
    agent = define_agent(
        name="main",
        model=model,
        runtime_context=lambda run: Plan(tier="starter"),
        tools={
            "intake": ToolEntry(tool=echo_context_tool("intake"), enabled=enabled),
            "search": echo_context_tool("search"),
        },
    )
    thread = await build_runtime(agent).admin(identity=ANN).create_thread()
    await thread.send("hi")
    return model.offered(1)


async def test_a_disabled_tool_is_not_offered_to_the_model() -> None:
    assert await offered_on_first_step(plan_predicate("gold")) == ["search"]


def _predicate_forms(answer: object) -> list[Any]:
    """The same predicate as a plain function, an ``async def``, a plain function returning a
    coroutine, an object with an async ``__call__``, and a partial of an ``async def``."""

    def plain(check: ToolEnabledInput[Plan]) -> Any:
        return answer

    async def coroutine_function(check: ToolEnabledInput[Plan]) -> Any:
        await anyio.lowlevel.checkpoint()
        return answer

    class AsyncCallable:
        async def __call__(self, check: ToolEnabledInput[Plan]) -> Any:
            return answer

    async def with_answer(value: object, check: ToolEnabledInput[Plan]) -> Any:
        return value

    return [
        plain,
        coroutine_function,
        lambda check: coroutine_function(check),
        AsyncCallable(),
        functools.partial(with_answer, answer),
    ]


@pytest.mark.parametrize("offered", [True, False])
@pytest.mark.parametrize("form", range(5))
async def test_every_form_of_predicate_is_awaited_when_it_must_be(offered: bool, form: int) -> None:
    # Truthy and falsy values that are not bools, too: the answer is taken for its truth.
    enabled = _predicate_forms(1 if offered else "")[form]

    tools = await offered_on_first_step(enabled)

    assert tools == (["intake", "search"] if offered else ["search"])


async def test_an_enabled_predicate_runs_on_every_model_step_and_sees_the_step() -> None:
    steps: list[int] = []

    def enabled(check: ToolEnabledInput) -> bool:
        steps.append(check.step)
        return check.step == 1

    model = Recorder(tool_call("flaky"), text("done"))
    agent = define_agent(
        name="main",
        model=model,
        tools={"flaky": ToolEntry(tool=echo_context_tool("flaky"), enabled=enabled)},
    )
    runtime = build_runtime(agent)
    thread = await runtime.admin(identity=ANN).create_thread()

    await thread.send("hi")

    assert steps == [1, 2]
    assert (model.offered(1), model.offered(2)) == (["flaky"], [])


async def test_an_async_enabled_predicate_is_awaited() -> None:
    async def enabled(check: ToolEnabledInput) -> bool:
        await anyio.lowlevel.checkpoint()
        return False

    model = Recorder(text("done"))
    agent = define_agent(
        name="main",
        model=model,
        tools={"t": ToolEntry(tool=echo_context_tool("t"), enabled=enabled)},
    )
    runtime = build_runtime(agent)
    thread = await runtime.admin(identity=ANN).create_thread()

    await thread.send("hi")

    assert model.offered(1) == []


async def test_a_call_to_a_disabled_tool_is_answered_not_available_without_acquiring() -> None:
    boxes = RecordingBinding(box)
    counter: Counter[str] = Counter()
    tool = use_tool(box, counter=counter)
    agent = define_agent(
        name="main",
        model=ScriptedModel([tool_call("useBox"), text("done")]),
        tools={"useBox": ToolEntry(tool=tool, enabled=lambda check: False)},
    )
    runtime = build_runtime(agent, boxes)
    thread = await runtime.admin(identity=ANN).create_thread()

    result = await thread.send("hi")

    [answer] = of_role(result.messages, "tool")
    assert isinstance(answer, ToolResultMessage)
    assert answer.is_error
    assert "'useBox' is not available now" in answer.content
    assert boxes.acquire_inputs == []
    assert counter["useBox"] == 0


async def test_a_disabled_external_tool_call_is_answered_and_does_not_pause_the_run() -> None:
    external = define_tool(id="approve", description="ask a person", input_schema=NoInput)
    agent = define_agent(
        name="main",
        model=ScriptedModel([tool_call("approve"), text("done")]),
        tools={"approve": ToolEntry(tool=external, enabled=lambda check: False)},
    )
    runtime = build_runtime(agent)
    thread = await runtime.admin(identity=ANN).create_thread()

    result = await thread.send("hi")

    assert result.status == "completed"
    [answer] = of_role(result.messages, "tool")
    assert "not available" in answer.content


async def test_a_failing_enabled_predicate_fails_the_run_naming_the_tool() -> None:
    def enabled(check: ToolEnabledInput) -> bool:
        raise KeyError("plan")

    agent = define_agent(
        name="main",
        model=ScriptedModel([text("never")]),
        tools={"t": ToolEntry(tool=echo_context_tool("t"), enabled=enabled)},
    )
    runtime = build_runtime(agent)
    thread = await runtime.admin(identity=ANN).create_thread()

    with pytest.raises(RuntimeContextError, match="enabled predicate of tool 't'"):
        await thread.send("hi")

    [error] = await thread.messages()
    assert isinstance(error, ErrorMessage)


def test_a_tool_entry_needs_a_tool_from_define_tool() -> None:
    with pytest.raises(DefinitionError, match="define_tool"):
        ToolEntry(tool="search")  # type: ignore[arg-type]


def test_a_tool_entry_predicate_must_be_callable() -> None:
    with pytest.raises(DefinitionError, match="enabled must be a function"):
        ToolEntry(tool=echo_context_tool(), enabled=True)  # type: ignore[arg-type]


def test_runtime_context_must_be_callable() -> None:
    with pytest.raises(DefinitionError, match="runtime_context must be a function"):
        define_agent(name="main", runtime_context={"plan": "gold"})  # type: ignore[arg-type]


def test_an_agent_keeps_its_entries_and_context_when_its_model_is_swapped() -> None:
    def enabled(check: ToolEnabledInput) -> bool:
        return True

    def runtime_context(run: RuntimeContextInput) -> int:
        return 1

    tool = echo_context_tool()
    agent = define_agent(
        name="main",
        tools={"a": ToolEntry(tool=tool, enabled=enabled), "b": tool},
        runtime_context=runtime_context,
    )

    swapped = agent.with_model(ScriptedModel([]))

    assert swapped.tool_enabled == {"a": enabled}
    assert swapped.tools == {"a": tool, "b": tool}
    assert swapped.runtime_context is runtime_context
    assert swapped.tool_entries == {"a": ToolEntry(tool=tool, enabled=enabled), "b": tool}


def test_a_tool_entrys_capabilities_are_part_of_the_agents_requirements() -> None:
    agent = define_agent(
        name="main", tools={"useBox": ToolEntry(tool=use_tool(box), enabled=lambda c: True)}
    )

    assert agent.requirements["box"].declared_by == ("tool 'useBox'",)


async def test_tool_specs_are_built_once_per_runtime_not_per_send() -> None:
    built: Counter[str] = Counter()

    class Counted(NoInput):
        @classmethod
        def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
            built["schema"] += 1
            return super().model_json_schema(*args, **kwargs)

    tool = define_tool(id="t", description="t", input_schema=Counted, execute=lambda ctx: "ok")
    agent = define_agent(
        name="main", model=FunctionModel(lambda request: text("done")), tools={"t": tool}
    )
    runtime = build_runtime(agent)
    thread = await runtime.admin(identity=ANN).create_thread()
    before = built["schema"]

    for _ in range(3):
        await thread.send("hi")

    assert built["schema"] == before


def test_the_runtimes_fast_context_input_equals_the_dataclass_made_the_usual_way() -> None:
    # The runtime fills the frozen slots directly (a hot path); a field added to the class
    # without the fast constructor knowing it fails here.
    run = new_runtime_context_input("ann", "t1", "acme", "u1", "main")

    assert run == RuntimeContextInput(
        identity="ann", thread_id="t1", scope_key="acme", user_key="u1", agent_name="main"
    )
    assert [f.name for f in dataclasses.fields(RuntimeContextInput)] == list(RUN_FIELDS)
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.thread_id = "t2"  # type: ignore[misc]


async def test_a_predicate_receives_each_field_of_its_step_by_name() -> None:
    # The runtime makes the named tuple from its fields in order, without its __new__: each
    # field must land under its own name.
    received: list[ToolEnabledInput[Plan]] = []

    def enabled(check: ToolEnabledInput[Plan]) -> bool:
        received.append(check)
        return True

    agent = define_agent(
        name="main",
        model=ScriptedModel([tool_call("whoami"), text("done")]),
        runtime_context=lambda run: Plan(tier="gold"),
        tools={"whoami": ToolEntry(tool=echo_context_tool(), enabled=enabled)},
    )
    runtime = build_runtime(agent)
    thread = await runtime.admin(identity=ANN).create_thread()

    await thread.send("hi")

    first = ToolEnabledInput(
        runtime_context=Plan(tier="gold"),
        thread_id=thread.id,
        scope_key="acme",
        user_key="ann",
        identity=ANN,
        agent_name="main",
        step=1,
    )
    assert received == [first, first._replace(step=2)]
    assert type(received[0]) is ToolEnabledInput
    with pytest.raises(AttributeError):
        received[0].step = 3  # type: ignore[misc]
