"""The model protocol: a stream of events is the answer; one helper folds it into a response."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable

import anyio
import pytest
from helpers import Who, build_agent, build_runtime

from pai.core import (
    AssistantMessage,
    FatalModelError,
    Model,
    ModelAuthenticationError,
    ModelBadRequestError,
    ModelConnectionError,
    ModelError,
    ModelNotFoundError,
    ModelOverloadedError,
    ModelRateLimitError,
    ModelRequest,
    ModelResponse,
    ModelResponseError,
    ModelTimeoutError,
    PaiError,
    RetryableModelError,
    ToolCall,
    Usage,
    UserMessage,
)
from pai.core.ext import (
    ModelEvent,
    ResponseFinished,
    StreamingModel,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallFinished,
    ToolCallStarted,
    UsageReported,
    collect_response,
    response_events,
    stream_model,
)
from pai.core.testing import (
    FunctionModel,
    ScriptedModel,
    ScriptExhaustedError,
    chunks,
    events,
    text,
    tool_call,
    tool_calls,
)

pytestmark = pytest.mark.anyio

REQUEST = ModelRequest(
    instructions="be brief", messages=[UserMessage(content="hi")], tools=[], step=1
)


async def _from(items: Iterable[ModelEvent]) -> AsyncIterator[ModelEvent]:
    for item in items:
        yield item


async def _all(stream: AsyncIterator[ModelEvent]) -> list[ModelEvent]:
    return [event async for event in stream]


async def _drain(stream: AsyncIterator[ModelEvent], into: list[ModelEvent]) -> None:
    async for event in stream:
        into.append(event)


# -- collect_response -------------------------------------------------------------------------


async def test_collect_response_joins_text_deltas_and_takes_the_finish_reason() -> None:
    response = await collect_response(
        _from([TextDelta("Hel"), TextDelta("lo"), ResponseFinished("length")])
    )
    assert (response.content, response.tool_calls, response.finish_reason) == (
        "Hello",
        (),
        "length",
    )


async def test_collect_response_adds_up_usage_events() -> None:
    response = await collect_response(
        _from(
            [
                UsageReported(Usage(input_tokens=10)),
                TextDelta("x"),
                UsageReported(Usage(output_tokens=3)),
                ResponseFinished("stop"),
            ]
        )
    )
    assert response.usage == Usage(input_tokens=10, output_tokens=3)
    assert response.usage.total_tokens == 13


async def test_collect_response_orders_parallel_tool_calls_by_index_not_by_finish() -> None:
    first = ToolCall(id="a", name="read", arguments={"path": "/a"})
    second = ToolCall(id="b", name="read", arguments={"path": "/b"})
    response = await collect_response(
        _from(
            [
                ToolCallStarted(index=0, id="a", name="read"),
                ToolCallStarted(index=1, id="b", name="read"),
                ToolCallArgumentsDelta(index=1, delta='{"path": "/b"}'),
                ToolCallArgumentsDelta(index=0, delta='{"path": "/a"}'),
                ToolCallFinished(index=1, call=second),
                ToolCallFinished(index=0, call=first),
                ResponseFinished("tool_calls"),
            ]
        )
    )
    assert response.tool_calls == (first, second)
    assert response.content is None
    assert response.finish_reason == "tool_calls"


async def test_collect_response_hands_each_event_to_on_event_as_it_arrives() -> None:
    seen: list[object] = []
    pulled: list[object] = []

    async def source() -> AsyncIterator[ModelEvent]:
        for event in (TextDelta("a"), TextDelta("b"), ResponseFinished("stop")):
            pulled.append(event)
            yield event

    async def on_event(event: ModelEvent) -> None:
        # Each event is seen before the next one is pulled from the stream.
        assert pulled[-1] == event
        seen.append(event)

    response = await collect_response(source(), on_event=on_event)

    assert seen == pulled
    assert response.content == "ab"


async def test_a_stream_without_a_finish_event_is_a_response_error() -> None:
    with pytest.raises(ModelResponseError, match="without a ResponseFinished"):
        await collect_response(_from([TextDelta("cut")]))


async def test_events_after_the_finish_event_are_a_response_error() -> None:
    with pytest.raises(ModelResponseError, match="went on after it finished"):
        await collect_response(_from([ResponseFinished("stop"), TextDelta("more")]))


async def test_a_tool_call_finished_that_never_started_is_a_response_error() -> None:
    call = ToolCall(id="a", name="read")
    with pytest.raises(ModelResponseError, match="never started"):
        await collect_response(
            _from([ToolCallFinished(index=0, call=call), ResponseFinished("stop")])
        )


async def test_a_tool_call_started_and_never_finished_is_a_response_error_naming_it() -> None:
    with pytest.raises(ModelResponseError, match="#0 'read'"):
        await collect_response(
            _from([ToolCallStarted(index=0, id="a", name="read"), ResponseFinished("tool_calls")])
        )


# -- response_events and stream_model ---------------------------------------------------------


async def test_response_events_collect_back_into_the_same_response() -> None:
    response = ModelResponse(
        message=AssistantMessage(
            content="let me look",
            tool_calls=(ToolCall(id="1", name="ls", arguments={"path": "/"}),),
        ),
        usage=Usage(input_tokens=4, output_tokens=6),
        finish_reason="tool_calls",
    )
    assert await collect_response(_from(response_events(response))) == response


def test_response_events_stream_tool_arguments_as_json_between_start_and_finish() -> None:
    call = ToolCall(id="1", name="ls", arguments={"path": "/"})
    assert response_events(AssistantMessage(tool_calls=(call,))) == (
        ToolCallStarted(index=0, id="1", name="ls"),
        ToolCallArgumentsDelta(index=0, delta='{"path": "/"}'),
        ToolCallFinished(index=0, call=call),
        ResponseFinished("tool_calls"),
    )


class OnePieceModel:
    """A model that only answers in one piece (no stream method)."""

    async def request(self, request: ModelRequest) -> AssistantMessage:
        return AssistantMessage(content="whole")


async def test_stream_model_streams_a_one_piece_model_from_its_answer() -> None:
    model = OnePieceModel()
    assert isinstance(model, Model)
    assert not isinstance(model, StreamingModel)
    assert await _all(stream_model(model, REQUEST)) == [
        TextDelta("whole"),
        ResponseFinished("stop"),
    ]


async def test_stream_model_uses_a_streaming_models_own_stream() -> None:
    model = ScriptedModel([chunks("a", "b")])
    assert await _all(stream_model(model, REQUEST)) == [
        TextDelta("a"),
        TextDelta("b"),
        ResponseFinished("stop"),
    ]


async def test_stream_model_closes_the_models_stream_when_the_consumer_stops_early() -> None:
    closed = anyio.Event()

    async def endless(request: ModelRequest) -> AsyncIterator[ModelEvent]:
        try:
            while True:
                yield TextDelta("x")
        finally:
            closed.set()

    stream = stream_model(FunctionModel(stream_fn=endless), REQUEST)
    assert await anext(stream) == TextDelta("x")
    await stream.aclose()  # type: ignore[attr-defined]
    assert closed.is_set()


# -- the scripted models stream ---------------------------------------------------------------


def test_the_scripted_models_are_streaming_models() -> None:
    assert isinstance(ScriptedModel([]), StreamingModel)
    assert isinstance(FunctionModel(lambda request: text("x")), StreamingModel)


async def test_scripted_chunks_stream_in_order_with_usage_before_the_finish() -> None:
    model = ScriptedModel([chunks("Hel", "lo", usage=Usage(input_tokens=5, output_tokens=2))])
    assert await _all(model.stream(REQUEST)) == [
        TextDelta("Hel"),
        TextDelta("lo"),
        UsageReported(Usage(input_tokens=5, output_tokens=2)),
        ResponseFinished("stop"),
    ]


async def test_a_scripted_message_streams_as_the_message_and_request_returns_it() -> None:
    answer = tool_calls(("ls", {"path": "/"}), ("cat", {"path": "/a"}), ids=["1", "2"])
    model = ScriptedModel([answer, answer])
    collected = await collect_response(model.stream(REQUEST))
    assert collected.message == answer
    assert collected.finish_reason == "tool_calls"
    assert await model.request(REQUEST) == answer


async def test_a_scripted_response_carries_its_usage_and_finish_reason() -> None:
    scripted = ModelResponse(text("cut short"), Usage(3, 100), "length")
    model = ScriptedModel([scripted, scripted])
    assert await collect_response(model.stream(REQUEST)) == scripted
    assert await model.respond(REQUEST) == scripted


async def test_a_scripted_error_is_raised_for_that_request_and_the_next_answer_follows() -> None:
    model = ScriptedModel([ModelRateLimitError("slow down", retry_after=2.0), text("ok")])
    with pytest.raises(ModelRateLimitError, match="slow down"):
        await model.request(REQUEST)
    assert await model.request(REQUEST) == text("ok")
    assert len(model.requests) == 2


async def test_a_scripted_cut_stream_yields_its_chunks_then_raises() -> None:
    model = ScriptedModel([chunks("Hel", cut=ModelConnectionError("connection reset"))])
    seen: list[ModelEvent] = []
    with pytest.raises(ModelConnectionError, match="connection reset"):
        await _drain(model.stream(REQUEST), seen)
    assert seen == [TextDelta("Hel")]


async def test_scripted_raw_events_are_replayed_verbatim() -> None:
    raw = (TextDelta("a"), UsageReported(Usage(1, 1)), ResponseFinished("content_filter"))
    model = ScriptedModel([events(*raw)])
    assert tuple(await _all(model.stream(REQUEST))) == raw


async def test_a_scripted_model_asked_past_its_script_says_how_long_the_script_is() -> None:
    model = ScriptedModel([text("one")])
    await model.request(REQUEST)
    with pytest.raises(ScriptExhaustedError, match="answer #2 but its script has 1"):
        await model.request(REQUEST)


async def test_a_function_model_streams_from_an_async_generator_function() -> None:
    async def spell(request: ModelRequest) -> AsyncIterator[ModelEvent]:
        for letter in "hi":
            yield TextDelta(letter)
        yield ResponseFinished("stop")

    model = FunctionModel(stream_fn=spell)
    assert await model.request(REQUEST) == text("hi")
    assert model.requests == [REQUEST]


async def test_a_function_model_may_answer_with_a_response_carrying_usage() -> None:
    async def answer(request: ModelRequest) -> ModelResponse:
        return ModelResponse(text("done"), Usage(input_tokens=7, output_tokens=1))

    response = await collect_response(FunctionModel(answer).stream(REQUEST))
    assert response.usage == Usage(input_tokens=7, output_tokens=1)


def test_a_function_model_needs_exactly_one_function() -> None:
    with pytest.raises(TypeError, match="exactly one of fn"):
        FunctionModel()


async def test_the_runtime_runs_a_streaming_scripted_model_through_a_tool_call() -> None:
    # The scripted stream's pieces reach the runtime as one saved assistant message.
    model = ScriptedModel([tool_call("nope", {}), chunks("all ", "done")])
    runtime = build_runtime(build_agent(model=model))
    thread = await runtime.admin(identity=Who()).create_thread()
    result = await thread.send("go")
    assert result.text == "all done"
    assert model.remaining == 0


# -- the error tree ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "retryable", "builtin"),
    [
        (ModelRateLimitError("x"), True, None),
        (ModelOverloadedError("x"), True, None),
        (ModelConnectionError("x"), True, ConnectionError),
        (ModelTimeoutError("x"), True, TimeoutError),
        (ModelBadRequestError("x"), False, ValueError),
        (ModelAuthenticationError("x"), False, PermissionError),
        (ModelNotFoundError("x"), False, LookupError),
        (ModelResponseError("x"), False, None),
    ],
)
def test_model_errors_say_whether_a_retry_can_help(
    error: ModelError, retryable: bool, builtin: type[Exception] | None
) -> None:
    assert isinstance(error, PaiError)
    assert error.retryable is retryable
    assert isinstance(error, RetryableModelError if retryable else FatalModelError)
    if builtin is not None:
        assert isinstance(error, builtin)
    assert str(error) == "x"


def test_a_retryable_error_carries_the_servers_retry_after_and_status() -> None:
    error = ModelRateLimitError("slow down", model="m", status_code=429, retry_after=1.5)
    assert (error.model, error.status_code, error.retry_after) == ("m", 429, 1.5)
