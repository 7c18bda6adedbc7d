"""One answer cannot flood the runtime: ``max_tool_calls_per_step`` refuses the calls past it as
tool errors the model sees, and ``max_parallel_tool_calls`` bounds how many run at once."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest
from pydantic import BaseModel

from pai.core import (
    DefinitionError,
    ToolCallResult,
    ToolContext,
    ToolResultMessage,
    define_agent,
    define_tool,
)
from pai.core.testing import ScriptedModel, create_test_runtime, text, tool_calls

pytestmark = pytest.mark.anyio


class NoInput(BaseModel):
    pass


class Probe:
    """A tool that records the order calls ran in and the most that ran at once."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.active = 0
        self.most = 0

    async def execute(self, ctx: ToolContext[NoInput]) -> str:
        self.active += 1
        self.most = max(self.most, self.active)
        try:
            # Checkpoints, not sleeps: every other ready call gets to start meanwhile.
            for _ in range(5):
                await anyio.lowlevel.checkpoint()
            self.ran.append(ctx.tool_call_id)
            return "ok"
        finally:
            self.active -= 1

    def tool(self) -> Any:
        return define_tool(
            id="probe", description="probe", input_schema=NoInput, execute=self.execute
        )


def calls(count: int) -> Any:
    return tool_calls(*[("probe", {})] * count, ids=[f"c{i}" for i in range(count)])


async def run(
    probe: Probe,
    answer: Any,
    *,
    max_tool_calls_per_step: int = 64,
    max_parallel_tool_calls: int = 8,
) -> tuple[Any, list[Any], ScriptedModel]:
    model = ScriptedModel([answer, text("done")])
    agent = define_agent(
        name="flooded",
        tools={"probe": probe.tool()},
        max_tool_calls_per_step=max_tool_calls_per_step,
        max_parallel_tool_calls=max_parallel_tool_calls,
    )
    async with create_test_runtime(agent=agent, model=model) as runtime:
        thread = await runtime.admin(identity=None).create_thread()
        result = await thread.send("go")
        messages = list(await thread.messages())
    return result, messages, model


def test_the_defaults_are_64_calls_a_step_8_at_a_time() -> None:
    agent = define_agent(name="a")
    assert (agent.max_tool_calls_per_step, agent.max_parallel_tool_calls) == (64, 8)


@pytest.mark.parametrize("option", ["max_tool_calls_per_step", "max_parallel_tool_calls"])
@pytest.mark.parametrize("value", [0, -1, True, 1.5, "8", None])
def test_the_caps_must_be_positive_ints(option: str, value: object) -> None:
    with pytest.raises(DefinitionError, match=f"agent 'a': {option} must be a positive int"):
        define_agent(name="a", **{option: value})  # type: ignore[arg-type]


def test_a_copy_with_another_model_keeps_the_caps() -> None:
    agent = define_agent(name="a", max_tool_calls_per_step=3, max_parallel_tool_calls=2)
    copy = agent.with_model(ScriptedModel([]))
    assert (copy.max_tool_calls_per_step, copy.max_parallel_tool_calls) == (3, 2)


async def test_ten_thousand_calls_in_one_answer_run_64_at_most_8_at_a_time() -> None:
    probe = Probe()
    result, messages, model = await run(probe, calls(10_000))

    assert result.status == "completed"
    assert set(probe.ran) == {f"c{i}" for i in range(64)}  # the first 64 of the answer
    assert probe.most == 8
    results = [m for m in messages if isinstance(m, ToolResultMessage)]
    assert len(results) == 10_000  # every call is answered, and stored
    assert [r.tool_call_id for r in results] == [f"c{i}" for i in range(10_000)]
    assert not any(r.is_error for r in results[:64])
    refused = results[64:]
    assert all(r.is_error for r in refused)
    assert refused[0].content == (
        "Error: this answer made 10000 tool calls and at most 64 run in one step, so this call "
        "to 'probe' was not run. Call it again in a later step if it is still needed. (The app "
        "can raise the cap: define_agent(max_tool_calls_per_step=...), agent 'flooded'.)"
    )
    # The model sees the refusals on its next step.
    seen = [m for m in model.requests[1].messages if isinstance(m, ToolResultMessage)]
    assert len(seen) == 10_000


async def test_the_caps_are_the_agents() -> None:
    probe = Probe()
    _, messages, _ = await run(
        probe, calls(5), max_tool_calls_per_step=3, max_parallel_tool_calls=2
    )

    assert sorted(probe.ran) == ["c0", "c1", "c2"]
    assert probe.most == 2
    results = [m for m in messages if isinstance(m, ToolResultMessage)]
    assert [(r.tool_call_id, r.is_error) for r in results] == [
        ("c0", False),
        ("c1", False),
        ("c2", False),
        ("c3", True),
        ("c4", True),
    ]
    assert "at most 3 run in one step" in results[3].content


async def test_one_call_at_a_time_runs_them_in_order() -> None:
    probe = Probe()
    await run(probe, calls(6), max_parallel_tool_calls=1)
    assert probe.ran == [f"c{i}" for i in range(6)]
    assert probe.most == 1


async def test_a_streamed_run_emits_the_refusals_as_tool_results() -> None:
    probe = Probe()
    model = ScriptedModel([calls(4), text("done")])
    agent = define_agent(name="a", tools={"probe": probe.tool()}, max_tool_calls_per_step=2)
    async with create_test_runtime(agent=agent, model=model) as runtime:
        thread = await runtime.admin(identity=None).create_thread()
        events = [event async for event in thread.stream("go")]
    emitted = [(e.tool_call_id, e.result.is_error) for e in events if isinstance(e, ToolCallResult)]
    assert emitted == [("c0", False), ("c1", False), ("c2", True), ("c3", True)]
