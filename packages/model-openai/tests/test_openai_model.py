"""OpenAIModel through the real openai SDK against the shipped test server.

The SDK runs on asyncio and on trio (it is built on anyio), so every test runs on both.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest
from pydantic import JsonValue

from pai.core import (
    AssistantMessage,
    FatalModelError,
    ModelAuthenticationError,
    ModelBadRequestError,
    ModelConnectionError,
    ModelNotFoundError,
    ModelOverloadedError,
    ModelRateLimitError,
    ModelRequest,
    ModelResponseError,
    ModelTimeoutError,
    RetryPolicy,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
)
from pai.core.ext import (
    ModelEvent,
    ResponseFinished,
    RetryAttempt,
    StreamingModel,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallFinished,
    ToolCallStarted,
    UsageReported,
    collect_response,
)
from pai.model_openai import OpenAIModel
from pai.model_openai.testing import (
    OpenAITestServer,
    cut_stream,
    error_answer,
    function_call,
    malformed_chunk,
    stalled_stream,
    stream_error,
    text_answer,
    tool_calls_answer,
)

pytestmark = pytest.mark.anyio

READ_SCHEMA: dict[str, JsonValue] = {
    "type": "object",
    "properties": {"path": {"type": "string"}},
    "required": ["path"],
}


def ask(text: str = "hi", *, tools: bool = False) -> ModelRequest:
    offered = [ToolSpec("read", "Read a file.", READ_SCHEMA)] if tools else []
    return ModelRequest(
        instructions="be brief", messages=[UserMessage(content=text)], tools=offered, step=1
    )


async def drain(stream: AsyncIterator[ModelEvent], into: list[ModelEvent]) -> None:
    async for event in stream:
        into.append(event)


def retrying_into(seen: list[RetryAttempt], **changes: float) -> RetryPolicy:
    options: dict[str, float] = {"initial_delay": 0.0, "jitter": 0.0, **changes}
    return RetryPolicy(on_retry=seen.append, **options)  # type: ignore[arg-type]


# -- answers ----------------------------------------------------------------------------------


async def test_it_is_a_streaming_model(model: OpenAIModel) -> None:
    assert isinstance(model, StreamingModel)


async def test_a_text_answer_is_the_assistant_message(
    openai_server: OpenAITestServer, model: OpenAIModel
) -> None:
    openai_server.add(text_answer("Hello there"))
    assert await model.request(ask()) == AssistantMessage(content="Hello there")


async def test_streamed_text_arrives_chunk_by_chunk_then_usage_then_the_finish(
    openai_server: OpenAITestServer, model: OpenAIModel
) -> None:
    openai_server.add(text_answer("Hel", "lo", usage=Usage(input_tokens=9, output_tokens=2)))
    events: list[ModelEvent] = []
    await drain(model.stream(ask()), events)
    assert events == [
        TextDelta("Hel"),
        TextDelta("lo"),
        UsageReported(Usage(input_tokens=9, output_tokens=2)),
        ResponseFinished("stop"),
    ]


async def test_parallel_tool_calls_stream_in_order_and_parse_their_arguments(
    openai_server: OpenAITestServer, model: OpenAIModel
) -> None:
    openai_server.add(
        tool_calls_answer(
            function_call("read", {"path": "/a"}, id="c1"),
            function_call("read", {"path": "/b"}, id="c2"),
        )
    )
    events: list[ModelEvent] = []
    await drain(model.stream(ask(tools=True)), events)
    first, second = (
        ToolCall(id="c1", name="read", arguments={"path": "/a"}),
        ToolCall(id="c2", name="read", arguments={"path": "/b"}),
    )
    assert events == [
        ToolCallStarted(index=0, id="c1", name="read"),
        ToolCallArgumentsDelta(index=0, delta='{"path"'),
        ToolCallArgumentsDelta(index=0, delta=': "/a"}'),
        ToolCallStarted(index=1, id="c2", name="read"),
        ToolCallArgumentsDelta(index=1, delta='{"path"'),
        ToolCallArgumentsDelta(index=1, delta=': "/b"}'),
        ToolCallFinished(index=0, call=first),
        ToolCallFinished(index=1, call=second),
        UsageReported(Usage()),
        ResponseFinished("tool_calls"),
    ]


async def test_the_collected_response_carries_usage_and_finish_reason(
    openai_server: OpenAITestServer, model: OpenAIModel
) -> None:
    openai_server.add(text_answer("cut", usage=Usage(12, 4), finish_reason="length"))
    response = await model.respond(ask())
    assert (response.content, response.usage, response.finish_reason) == (
        "cut",
        Usage(input_tokens=12, output_tokens=4),
        "length",
    )


async def test_the_model_adds_up_the_usage_of_every_answer(
    openai_server: OpenAITestServer, model: OpenAIModel
) -> None:
    openai_server.add(text_answer("a", usage=Usage(3, 1)), text_answer("b", usage=Usage(5, 2)))
    await model.request(ask())
    await model.request(ask())
    assert model.usage == Usage(input_tokens=8, output_tokens=3)


# -- what the SDK sends -----------------------------------------------------------------------


async def test_the_request_streams_with_usage_and_sends_tool_schemas_as_function_parameters(
    openai_server: OpenAITestServer, model: OpenAIModel
) -> None:
    openai_server.add(text_answer("ok"))
    await model.request(ask(tools=True))
    sent = openai_server.requests[0]
    assert (sent.path, sent.model, sent.stream) == ("/v1/chat/completions", "test-model", True)
    assert sent.body["stream_options"] == {"include_usage": True}
    assert sent.tools == [
        {
            "type": "function",
            "function": {"name": "read", "description": "Read a file.", "parameters": READ_SCHEMA},
        }
    ]
    assert sent.headers["authorization"] == "Bearer test-key"


async def test_no_tools_key_is_sent_when_no_tool_is_offered(
    openai_server: OpenAITestServer, model: OpenAIModel
) -> None:
    openai_server.add(text_answer("ok"))
    await model.request(ask())
    assert "tools" not in openai_server.requests[0].body


async def test_the_history_is_sent_as_chat_messages_with_tool_calls_and_results(
    openai_server: OpenAITestServer, model: OpenAIModel
) -> None:
    openai_server.add(text_answer("done"))
    history = [
        UserMessage(content="read /a"),
        AssistantMessage(
            content="reading",
            tool_calls=(ToolCall(id="c1", name="read", arguments={"path": "/a"}),),
        ),
        ToolResultMessage(tool_call_id="c1", tool_name="read", content="A", output="A"),
    ]
    await model.request(ModelRequest(instructions="sys", messages=history, tools=[], step=2))
    assert openai_server.requests[0].messages == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "read /a"},
        {
            "role": "assistant",
            "content": "reading",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "read", "arguments": '{"path": "/a"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "A"},
    ]


async def test_an_empty_assistant_answer_is_sent_as_empty_text_not_null(
    openai_server: OpenAITestServer, model: OpenAIModel
) -> None:
    openai_server.add(text_answer("ok"))
    history = [UserMessage(content="hi"), AssistantMessage(), UserMessage(content="hello?")]
    await model.request(ModelRequest(instructions="", messages=history, tools=[], step=1))
    assert openai_server.requests[0].messages[1] == {"role": "assistant", "content": ""}


async def test_request_options_are_sent_when_set(openai_server: OpenAITestServer) -> None:
    openai_server.add(text_answer("ok"))
    async with OpenAIModel(
        "m",
        base_url=openai_server.base_url,
        api_key="k",
        temperature=0.2,
        max_tokens=50,
        parallel_tool_calls=False,
        extra_body={"top_k": 5},
    ) as model:
        await model.request(ask(tools=True))
    body = openai_server.requests[0].body
    assert (body["temperature"], body["max_tokens"]) == (0.2, 50)
    assert (body["parallel_tool_calls"], body["top_k"]) == (False, 5)


# -- failures ---------------------------------------------------------------------------------


async def test_a_429_waits_the_servers_retry_after_and_then_answers(
    openai_server: OpenAITestServer,
) -> None:
    openai_server.add(error_answer(429, "slow down", retry_after=0.05), text_answer("ok"))
    seen: list[RetryAttempt] = []
    async with OpenAIModel(
        "m", base_url=openai_server.base_url, api_key="k", retry=retrying_into(seen)
    ) as model:
        assert await model.request(ask()) == AssistantMessage(content="ok")
    assert [(r.delay, type(r.error), r.error.status_code) for r in seen] == [
        (0.05, ModelRateLimitError, 429)
    ]


async def test_a_429_raised_after_the_attempts_carries_retry_after_and_the_servers_message(
    openai_server: OpenAITestServer,
) -> None:
    openai_server.add(*[error_answer(429, "slow down", retry_after=0) for _ in range(2)])
    async with OpenAIModel(
        "m", base_url=openai_server.base_url, api_key="k", max_retries=1
    ) as model:
        with pytest.raises(ModelRateLimitError, match="slow down") as caught:
            await model.request(ask())
    assert (caught.value.retry_after, caught.value.model) == (0.0, "m")
    assert len(openai_server.requests) == 2


async def test_a_500_is_retried_then_raised_as_overload(
    openai_server: OpenAITestServer, model: OpenAIModel
) -> None:
    openai_server.add(*[error_answer(500, "boom") for _ in range(3)])
    with pytest.raises(ModelOverloadedError, match="HTTP 500: boom"):
        await model.request(ask())
    assert len(openai_server.requests) == model.retry.max_attempts == 3


async def test_a_500_then_an_answer_is_an_answer(
    openai_server: OpenAITestServer, model: OpenAIModel
) -> None:
    openai_server.add(error_answer(503), text_answer("back"))
    assert await model.request(ask()) == AssistantMessage(content="back")


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (400, ModelBadRequestError),
        (422, ModelBadRequestError),
        (401, ModelAuthenticationError),
        (403, ModelAuthenticationError),
        (404, ModelNotFoundError),
    ],
)
async def test_fatal_statuses_are_raised_at_once_without_retry(
    openai_server: OpenAITestServer, model: OpenAIModel, status: int, error: type[Exception]
) -> None:
    openai_server.add(error_answer(status, "nope"), text_answer("never"))
    with pytest.raises(error, match="nope"):
        await model.request(ask())
    assert len(openai_server.requests) == 1


async def test_an_exhausted_quota_is_fatal_not_a_rate_limit(
    openai_server: OpenAITestServer, model: OpenAIModel
) -> None:
    openai_server.add(error_answer(429, "quota", code="insufficient_quota"), text_answer("never"))
    with pytest.raises(FatalModelError, match="out of quota") as caught:
        await model.request(ask())
    assert not isinstance(caught.value, ModelRateLimitError)


async def test_a_stream_cut_mid_answer_is_a_connection_error_when_streaming(
    openai_server: OpenAITestServer, model: OpenAIModel
) -> None:
    openai_server.add(cut_stream("Hel"), text_answer("never"))
    events: list[ModelEvent] = []
    with pytest.raises(ModelConnectionError):
        await drain(model.stream(ask()), events)
    assert events == [TextDelta("Hel")]  # what was yielded stays; nothing is retried after it
    assert len(openai_server.requests) == 1


async def test_a_stream_cut_mid_answer_is_retried_for_a_whole_answer(
    openai_server: OpenAITestServer, model: OpenAIModel
) -> None:
    openai_server.add(cut_stream("Hel"), text_answer("Hello"))
    assert await model.request(ask()) == AssistantMessage(content="Hello")


async def test_a_malformed_chunk_is_a_response_error_and_not_retried(
    openai_server: OpenAITestServer, model: OpenAIModel
) -> None:
    openai_server.add(malformed_chunk("Hel"), text_answer("never"))
    with pytest.raises(ModelResponseError, match="could not be read"):
        await model.request(ask())
    assert len(openai_server.requests) == 1


async def test_an_error_event_mid_stream_is_an_overload_and_retried_for_a_whole_answer(
    openai_server: OpenAITestServer, model: OpenAIModel
) -> None:
    openai_server.add(stream_error("Hel", message="server hiccup"), text_answer("Hello"))
    assert await model.request(ask()) == AssistantMessage(content="Hello")


async def test_an_error_event_mid_stream_is_raised_when_streaming(
    openai_server: OpenAITestServer, model: OpenAIModel
) -> None:
    openai_server.add(stream_error("Hel", message="server hiccup"))
    events: list[ModelEvent] = []
    with pytest.raises(ModelOverloadedError, match="mid-answer: server hiccup"):
        await drain(model.stream(ask()), events)
    assert events == [TextDelta("Hel")]


async def test_an_invalid_request_error_event_mid_stream_is_fatal(
    openai_server: OpenAITestServer, model: OpenAIModel
) -> None:
    openai_server.add(stream_error(message="bad", type="invalid_request_error"), text_answer("x"))
    with pytest.raises(ModelBadRequestError, match="refused the request mid-answer"):
        await model.request(ask())
    assert len(openai_server.requests) == 1


@pytest.mark.parametrize(
    ("arguments", "problem"), [('{"path": ', "are not JSON"), ('"/a"', "are not a JSON object")]
)
async def test_tool_arguments_that_are_not_a_json_object_are_a_response_error_naming_the_tool(
    openai_server: OpenAITestServer, model: OpenAIModel, arguments: str, problem: str
) -> None:
    openai_server.add(tool_calls_answer(function_call("read", arguments, id="c1")))
    with pytest.raises(ModelResponseError, match=f"tool call #0 'read' {problem}"):
        await model.request(ask(tools=True))


async def test_a_server_that_never_answers_in_time_is_a_timeout(
    openai_server: OpenAITestServer,
) -> None:
    openai_server.add(stalled_stream("Hel"))
    async with OpenAIModel(
        "m", base_url=openai_server.base_url, api_key="k", timeout=0.3, max_retries=0
    ) as model:
        with pytest.raises(ModelTimeoutError, match="timeout"):
            await model.request(ask())
    assert await openai_server.streams_closed()


async def test_a_refused_connection_is_a_connection_error_naming_the_cause() -> None:
    with OpenAITestServer() as server:
        base_url = server.base_url
    async with OpenAIModel("m", base_url=base_url, api_key="k", max_retries=0) as model:
        with pytest.raises(ModelConnectionError, match="connection failed"):
            await model.request(ask())


# -- cancellation -----------------------------------------------------------------------------


async def test_cancelling_mid_stream_closes_the_connection(
    openai_server: OpenAITestServer, model: OpenAIModel
) -> None:
    openai_server.add(stalled_stream("Hel", "lo"))
    first = anyio.Event()
    events: list[ModelEvent] = []

    async def consume() -> None:
        async for event in model.stream(ask()):
            events.append(event)
            first.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(consume)
        await first.wait()
        tg.cancel_scope.cancel()
    assert events[0] == TextDelta("Hel")
    assert await openai_server.streams_closed(timeout=5.0)
    assert openai_server.open_streams == 0


async def test_the_model_answers_again_after_a_cancelled_stream(
    openai_server: OpenAITestServer, model: OpenAIModel
) -> None:
    openai_server.add(stalled_stream("Hel"), text_answer("again"))
    with anyio.move_on_after(0.2):
        await collect_response(model.stream(ask()))
    assert await model.request(ask()) == AssistantMessage(content="again")


# -- event loops ------------------------------------------------------------------------------


def test_one_model_serves_one_event_loop_after_another(openai_server: OpenAITestServer) -> None:
    openai_server.add(text_answer("on asyncio"), text_answer("on trio"))
    model = OpenAIModel("m", base_url=openai_server.base_url, api_key="k")

    async def ask_and_close() -> str | None:
        try:
            return (await model.request(ask())).content
        finally:
            await model.aclose()

    answers = [anyio.run(ask_and_close, backend=name) for name in ("asyncio", "trio")]
    assert answers == ["on asyncio", "on trio"]
