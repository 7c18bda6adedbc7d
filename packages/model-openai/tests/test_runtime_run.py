"""A multi-step agent run through the runtime, the real openai SDK and the test server, with a
tool that uses the in-memory sandbox."""

from __future__ import annotations

import anyio
import pytest
from pydantic import BaseModel

from pai.core import (
    AssistantMessage,
    ErrorMessage,
    ModelOverloadedError,
    ToolContext,
    ToolResultMessage,
    Usage,
    define_agent,
    define_tool,
)
from pai.core.testing import create_test_runtime
from pai.model_openai import OpenAIModel
from pai.model_openai.testing import (
    OpenAITestServer,
    error_answer,
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


async def run_script_execute(ctx: ToolContext[RunScriptInput]) -> CommandResult:
    return await ctx.capabilities.sandbox.run_command(ctx.input.command)


run_script = define_tool(
    id="runScript",
    description="Run a command in this conversation's sandbox.",
    input_schema=RunScriptInput,
    capabilities={"sandbox": sandbox},
    execute=run_script_execute,
)

coder = define_agent(
    name="coder",
    instructions="You run commands to answer.",
    tools={"runScript": run_script},
)


async def test_a_run_calls_tools_in_parallel_in_the_sandbox_and_answers(
    openai_server: OpenAITestServer, model: OpenAIModel
) -> None:
    openai_server.add(
        tool_calls_answer(
            function_call("runScript", {"command": "echo one > /workspace/a.txt"}, id="c1"),
            function_call("runScript", {"command": "echo two"}, id="c2"),
            usage=Usage(input_tokens=20, output_tokens=8),
        ),
        tool_calls_answer(
            function_call("runScript", {"command": "cat /workspace/a.txt"}, id="c3"),
            usage=Usage(input_tokens=40, output_tokens=5),
        ),
        text_answer("The file says one.", usage=Usage(input_tokens=60, output_tokens=6)),
    )
    provider = create_in_memory_sandbox_provider()
    async with create_test_runtime(
        agent=coder,
        model=model,
        capabilities={"sandbox": sandbox_capability(provider=provider)},
    ) as runtime:
        thread = await runtime.admin(identity=None).create_thread()
        result = await thread.send("What is in a.txt?")
        messages = await thread.messages()
    await provider.aclose()

    assert (result.status, result.text, result.steps) == ("completed", "The file says one.", 3)
    results = [m for m in messages if isinstance(m, ToolResultMessage)]
    assert [(r.tool_call_id, r.is_error) for r in results] == [
        ("c1", False),
        ("c2", False),
        ("c3", False),
    ]
    assert '"stdout":"one\\n"' in results[2].content.replace(" ", "")
    assert model.usage == Usage(input_tokens=120, output_tokens=19)

    # What the SDK sent on the last step: the tool schema as function parameters, and the whole
    # conversation with both parallel calls and their results.
    last = openai_server.requests[-1]
    parameters = last.tools[0]["function"]["parameters"]  # type: ignore[index]
    assert parameters["required"] == ["command"]  # type: ignore[index]
    roles = [m["role"] for m in last.messages]
    assert roles == ["system", "user", "assistant", "tool", "tool", "assistant", "tool"]
    assert [m.get("tool_call_id") for m in last.messages if m["role"] == "tool"] == [
        "c1",
        "c2",
        "c3",
    ]


async def test_a_model_failure_that_outlasts_the_retries_is_recorded_and_raised(
    openai_server: OpenAITestServer, model: OpenAIModel
) -> None:
    openai_server.add(*[error_answer(503, "overloaded") for _ in range(3)])
    provider = create_in_memory_sandbox_provider()
    async with create_test_runtime(
        agent=coder, model=model, capabilities={"sandbox": sandbox_capability(provider=provider)}
    ) as runtime:
        thread = await runtime.admin(identity=None).create_thread()
        with pytest.raises(ModelOverloadedError, match="overloaded"):
            await thread.send("hi")
        messages = await thread.messages()
    await provider.aclose()
    assert len(openai_server.requests) == model.retry.max_attempts
    # The thread keeps the failure, and no partial answer.
    assert [type(m) for m in messages] == [ErrorMessage]
    assert isinstance(messages[0], ErrorMessage)
    assert messages[0].error_type == "ModelOverloadedError"


async def test_a_run_cancelled_mid_answer_saves_nothing_of_the_partial_answer(
    openai_server: OpenAITestServer, model: OpenAIModel
) -> None:
    openai_server.add(stalled_stream("I was about to say"), text_answer("fresh start"))
    provider = create_in_memory_sandbox_provider()
    async with create_test_runtime(
        agent=coder, model=model, capabilities={"sandbox": sandbox_capability(provider=provider)}
    ) as runtime:
        thread = await runtime.admin(identity=None).create_thread()
        async with anyio.create_task_group() as tg:
            tg.start_soon(thread.send, "hi")
            assert await openai_server.streams_started()
            tg.cancel_scope.cancel()
        assert await openai_server.streams_closed()
        after_cancel = list(await thread.messages())
        result = await thread.send("hi again")
    await provider.aclose()
    assert not any(isinstance(m, AssistantMessage) for m in after_cancel)
    assert result.text == "fresh start"
