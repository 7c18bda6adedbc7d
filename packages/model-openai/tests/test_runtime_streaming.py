"""``thread.stream`` through the runtime, the real openai SDK and the test server: events in
order, usage summed per run, the same thread as ``send``, and cancellation mid-stream."""

from __future__ import annotations

import anyio
import pytest
from pydantic import BaseModel

from pai.core import (
    RunEvent,
    RunFinished,
    ToolCallResult,
    ToolContext,
    Usage,
    define_agent,
    define_tool,
)
from pai.core.ext import (
    ResponseFinished,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallFinished,
    ToolCallStarted,
    UsageReported,
)
from pai.core.testing import create_test_runtime
from pai.model_openai import OpenAIModel
from pai.model_openai.testing import (
    OpenAITestServer,
    function_call,
    stalled_stream,
    text_answer,
    tool_calls_answer,
)
from pai.sandbox import CommandResult, sandbox, sandbox_capability
from pai.sandbox_inmemory import create_in_memory_sandbox_provider

pytestmark = pytest.mark.anyio


class RunScriptInput(BaseModel):
    command: str


async def run_script_execute(ctx: ToolContext[RunScriptInput]) -> str:
    result: CommandResult = await ctx.capabilities.sandbox.run_command(ctx.input.command)
    return result.stdout  # no duration: two runs' results compare equal


coder = define_agent(
    name="coder",
    instructions="You run commands to answer.",
    tools={
        "runScript": define_tool(
            id="runScript",
            description="Run a command in this conversation's sandbox.",
            input_schema=RunScriptInput,
            capabilities={"sandbox": sandbox},
            execute=run_script_execute,
        )
    },
)


def script(server: OpenAITestServer) -> None:
    server.add(
        tool_calls_answer(
            function_call("runScript", {"command": "echo hi"}, id="c1"),
            usage=Usage(input_tokens=20, output_tokens=8),
        ),
        text_answer("It ", "said hi.", usage=Usage(input_tokens=40, output_tokens=4)),
    )


async def run(model: OpenAIModel, *, stream: bool) -> tuple[list[RunEvent], list[object]]:
    provider = create_in_memory_sandbox_provider()
    async with create_test_runtime(
        agent=coder, model=model, capabilities={"sandbox": sandbox_capability(provider=provider)}
    ) as runtime:
        thread = await runtime.admin(identity=None).create_thread(thread_id="t")
        seen: list[RunEvent]
        if stream:
            seen = [event async for event in thread.stream("Say hi.")]
        else:
            seen = [RunFinished(await thread.send("Say hi."))]
        messages: list[object] = list(await thread.messages())
    await provider.aclose()
    return seen, messages


async def test_a_streamed_run_yields_the_sdks_chunks_as_events_in_order(
    openai_server: OpenAITestServer, model: OpenAIModel
) -> None:
    script(openai_server)

    seen, _ = await run(model, stream=True)

    kinds = [type(event) for event in seen]
    first_result = kinds.index(ToolCallResult)
    assert kinds[0] is ToolCallStarted
    assert ToolCallArgumentsDelta in kinds[:first_result]
    assert kinds[first_result - 2 : first_result] == [UsageReported, ResponseFinished]
    assert ToolCallFinished in kinds[:first_result]
    texts = [event.text for event in seen if isinstance(event, TextDelta)]
    assert texts == ["It ", "said hi."]
    assert kinds[-1] is RunFinished


async def test_a_streamed_run_sums_usage_and_saves_what_send_saves(
    openai_server: OpenAITestServer, model: OpenAIModel
) -> None:
    script(openai_server)
    streamed, streamed_messages = await run(model, stream=True)
    script(openai_server)
    sent, sent_messages = await run(model, stream=False)

    assert streamed_messages == sent_messages
    for events in (streamed, sent):
        last = events[-1]
        assert isinstance(last, RunFinished)
        assert last.result.usage == Usage(input_tokens=60, output_tokens=12)
        assert last.result.text == "It said hi."


async def test_a_stream_cancelled_mid_answer_saves_nothing_and_closes_the_response(
    openai_server: OpenAITestServer, model: OpenAIModel
) -> None:
    openai_server.add(stalled_stream("I was about to"))
    provider = create_in_memory_sandbox_provider()
    async with create_test_runtime(
        agent=coder, model=model, capabilities={"sandbox": sandbox_capability(provider=provider)}
    ) as runtime:
        thread = await runtime.admin(identity=None).create_thread()
        seen: list[RunEvent] = []
        with anyio.CancelScope() as scope:
            async for event in thread.stream("hi"):
                seen.append(event)
                scope.cancel()
        messages = list(await thread.messages())
    await provider.aclose()

    assert seen == [TextDelta("I was about to")]
    assert messages == []
    assert await openai_server.streams_closed()
