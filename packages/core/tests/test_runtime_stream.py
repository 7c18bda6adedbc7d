"""Streaming through the runtime: ``thread.stream(text)`` yields the model's events, tool results,
delegated runs' events and the end of the run; it saves what ``send`` saves; usage adds up; a run
cancelled mid-stream saves nothing of the partial answer."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import AsyncIterator

import anyio
import pytest
from pydantic import BaseModel

from pai.core import (
    AgentRuntime,
    AssistantMessage,
    DelegatedRunEvent,
    InMemoryStorage,
    ModelRequest,
    ModelResponse,
    RunEvent,
    RunFinished,
    ThreadDeletedError,
    ThreadNotFoundError,
    ToolCallResult,
    ToolContext,
    ToolResultMessage,
    Usage,
    UserMessage,
    define_agent,
    define_tool,
)
from pai.core.ext import (
    ModelEvent,
    ResponseFinished,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallFinished,
    ToolCallStarted,
    UsageReported,
)
from pai.core.testing import (
    ScriptedModel,
    create_test_runtime,
    events,
    text,
    tool_call,
    tool_calls,
)

pytestmark = pytest.mark.anyio


class EchoInput(BaseModel):
    word: str


async def echo_execute(ctx: ToolContext[EchoInput]) -> str:
    return ctx.input.word.upper()


echo = define_tool(
    id="echo", description="Shout a word.", input_schema=EchoInput, execute=echo_execute
)


def script() -> list[object]:
    return [
        events(
            TextDelta("Let me "),
            TextDelta("shout."),
            ToolCallStarted(0, "c1", "echo"),
            ToolCallArgumentsDelta(0, '{"word": '),
            ToolCallArgumentsDelta(0, '"hi"}'),
            ToolCallFinished(0, tool_call("echo", {"word": "hi"}, id="c1").tool_calls[0]),
            UsageReported(Usage(input_tokens=10, output_tokens=4)),
            ResponseFinished("tool_calls"),
        ),
        events(
            TextDelta("HI"),
            UsageReported(Usage(input_tokens=20, output_tokens=1)),
            ResponseFinished("stop"),
        ),
    ]


def agent_with(model: object) -> object:
    return define_agent(name="main", model=model, tools={"echo": echo})  # type: ignore[arg-type]


async def streamed(
    text_in: str = "go", model: object = None
) -> tuple[list[RunEvent], list[object]]:
    agent = agent_with(model if model is not None else ScriptedModel(script()))  # type: ignore[arg-type]
    async with create_test_runtime(agent=agent) as runtime:  # type: ignore[arg-type]
        thread = await runtime.admin(identity=None).create_thread()
        seen = [event async for event in thread.stream(text_in)]
        return seen, list(await thread.messages())


async def test_a_stream_yields_model_events_tool_results_and_the_end_in_order() -> None:
    seen, _ = await streamed()

    kinds = [type(event).__name__ for event in seen]
    assert kinds == [
        "TextDelta",
        "TextDelta",
        "ToolCallStarted",
        "ToolCallArgumentsDelta",
        "ToolCallArgumentsDelta",
        "ToolCallFinished",
        "UsageReported",
        "ResponseFinished",
        "ToolCallResult",
        "TextDelta",
        "UsageReported",
        "ResponseFinished",
        "RunFinished",
    ]
    result = seen[8]
    assert isinstance(result, ToolCallResult)
    assert (result.tool_call_id, result.result.content) == ("c1", "HI")


async def test_the_last_event_carries_the_run_result_with_usage_summed() -> None:
    seen, _ = await streamed()

    last = seen[-1]
    assert isinstance(last, RunFinished)
    assert last.result.status == "completed"
    assert last.result.text == "HI"
    assert last.result.steps == 2
    assert last.result.usage == Usage(input_tokens=30, output_tokens=5)


async def test_send_sums_the_usage_of_a_streaming_model_per_run() -> None:
    async with create_test_runtime(agent=agent_with(ScriptedModel(script()))) as runtime:  # type: ignore[arg-type]
        thread = await runtime.admin(identity=None).create_thread()
        result = await thread.send("go")

    assert result.usage == Usage(input_tokens=30, output_tokens=5)


async def test_send_calls_respond_on_a_streaming_model() -> None:
    class RespondingModel:
        def __init__(self) -> None:
            self.calls: list[str] = []

        async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
            self.calls.append("stream")
            yield ResponseFinished("stop")

        async def respond(self, request: ModelRequest) -> ModelResponse:
            self.calls.append("respond")
            return ModelResponse(AssistantMessage(content="ok"), Usage(1, 2), "length")

        async def request(self, request: ModelRequest) -> AssistantMessage:
            self.calls.append("request")
            return AssistantMessage(content="ok")

    model = RespondingModel()
    async with create_test_runtime(agent=agent_with(model)) as runtime:  # type: ignore[arg-type]
        thread = await runtime.admin(identity=None).create_thread()
        result = await thread.send("go")

    assert model.calls == ["respond"]
    assert result.usage == Usage(1, 2)


async def test_a_streamed_run_saves_exactly_what_a_sent_run_saves() -> None:
    _, streamed_messages = await streamed()
    async with create_test_runtime(agent=agent_with(ScriptedModel(script()))) as runtime:  # type: ignore[arg-type]
        thread = await runtime.admin(identity=None).create_thread()
        await thread.send("go")
        sent_messages = list(await thread.messages())

    assert streamed_messages == sent_messages
    assert [type(m).__name__ for m in sent_messages] == [
        "UserMessage",
        "AssistantMessage",
        "ToolResultMessage",
        "AssistantMessage",
    ]


async def test_a_model_that_only_requests_is_streamed_from_its_answer() -> None:
    seen, _ = await streamed(model=ScriptedModel([text("plain")]))

    assert seen[0] == TextDelta("plain")
    assert isinstance(seen[-1], RunFinished)


async def test_a_delegated_run_streams_its_events_wrapped_with_its_thread() -> None:
    helper = define_agent(name="helper", model=ScriptedModel([text("done by helper")]))
    agent = define_agent(
        name="main",
        model=ScriptedModel([tool_call("helper", {"task": "help"}, id="d1"), text("thanks")]),
        subagents={"helper": helper},
    )
    async with create_test_runtime(agent=agent) as runtime:
        thread = await runtime.admin(identity=None).create_thread()
        seen = [event async for event in thread.stream("go")]
        (child,) = await thread.children()

    delegated = [event for event in seen if isinstance(event, DelegatedRunEvent)]
    assert {(e.tool_call_id, e.thread_id, e.agent_name) for e in delegated} == {
        ("d1", child.id, "helper")
    }
    assert delegated[0].event == TextDelta("done by helper")
    assert isinstance(delegated[-1].event, RunFinished)
    started = next(i for i, e in enumerate(seen) if isinstance(e, ToolCallStarted))
    first_delegated = seen.index(delegated[0])
    result = next(i for i, e in enumerate(seen) if isinstance(e, ToolCallResult))
    assert started < first_delegated < result
    assert isinstance(seen[result], ToolCallResult)
    assert seen[result].result.content == "done by helper"  # type: ignore[union-attr]


async def test_a_failing_model_raises_from_the_stream_as_send_would() -> None:
    agent = agent_with(ScriptedModel([events(TextDelta("par"), error=RuntimeError("boom"))]))
    async with create_test_runtime(agent=agent) as runtime:  # type: ignore[arg-type]
        thread = await runtime.admin(identity=None).create_thread()
        seen: list[RunEvent] = []

        async def read() -> None:
            async for event in thread.stream("go"):
                seen.append(event)

        with pytest.raises(RuntimeError, match="boom"):
            await read()

    assert seen == [TextDelta("par")]


class StreamsOnly:
    """A model for streamed runs: asking it for a whole answer fails the test."""

    async def respond(self, request: ModelRequest) -> ModelResponse:
        raise AssertionError("a streamed run streams")

    async def request(self, request: ModelRequest) -> AssistantMessage:
        raise AssertionError("a streamed run streams")


class GatedModel(StreamsOnly):
    """Streams a first piece, then waits (until cancelled) before the rest of its answer."""

    def __init__(self) -> None:
        self.first_piece_sent = anyio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        yield TextDelta("partial ")
        self.first_piece_sent.set()
        await anyio.sleep_forever()
        yield ResponseFinished("stop")


async def test_a_run_cancelled_mid_stream_saves_nothing_of_the_partial_answer() -> None:
    model = GatedModel()
    storage = InMemoryStorage()
    async with create_test_runtime(agent=agent_with(model), storage=storage) as runtime:  # type: ignore[arg-type]
        thread = await runtime.admin(identity=None).create_thread()
        seen: list[RunEvent] = []
        with anyio.CancelScope() as scope:
            async for event in thread.stream("go"):
                seen.append(event)
                scope.cancel()
        messages = await thread.messages()

    assert seen == [TextDelta("partial ")]
    assert list(messages) == []


async def test_a_reader_cancelled_while_waiting_sees_the_bare_cancellation_exception() -> None:
    # The run's task is cancelled with the reader; what leaves the stream is the backend's own
    # cancellation exception, not a group of them, so an ``except`` for it still matches.
    model = GatedModel()
    caught: list[BaseException] = []
    async with create_test_runtime(agent=agent_with(model)) as runtime:  # type: ignore[arg-type]
        thread = await runtime.admin(identity=None).create_thread()
        with anyio.CancelScope() as scope:
            try:
                async for _ in thread.stream("go"):
                    scope.cancel()  # cancelled while the run waits in the model
            except anyio.get_cancelled_exc_class() as cancelled:
                caught.append(cancelled)
                raise
        messages = await thread.messages()

    assert scope.cancelled_caught
    assert [type(error) for error in caught] == [anyio.get_cancelled_exc_class()]
    assert list(messages) == []


class GatedThenAnswers:
    """A first stream that waits after its first piece (until cancelled), then plain answers."""

    def __init__(self) -> None:
        self.gated = GatedModel()
        self.calls = 0

    async def request(self, request: ModelRequest) -> AssistantMessage:
        raise AssertionError("streams")

    async def respond(self, request: ModelRequest) -> ModelResponse:
        return ModelResponse(AssistantMessage(content="second answer"))

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.calls += 1
        if self.calls == 1:
            return self.gated.stream(request)
        return _answer("second answer")


async def test_a_break_out_of_a_stream_leaves_the_caller_running_and_the_thread_usable() -> None:
    # The generator is abandoned mid-run, and closed later by the event loop from another task.
    # The caller's task is not cancelled (on asyncio, a task group inside the generator used to
    # cancel it), the event loop does not fail (on trio it was an internal error), and the run
    # is cancelled: nothing of it is stored and the thread takes the next message.
    model = GatedThenAnswers()
    async with create_test_runtime(agent=agent_with(model)) as runtime:  # type: ignore[arg-type]
        thread = await runtime.admin(identity=None).create_thread()
        async for event in thread.stream("first"):
            assert event == TextDelta("partial ")
            break
        await _until_no_operation_runs(runtime, thread.id)
        again = [event async for event in thread.stream("second")]
        messages = await thread.messages()

    assert isinstance(again[-1], RunFinished)
    assert list(messages) == [
        UserMessage(content="second"),
        AssistantMessage(content="second answer"),
    ]


async def test_an_error_in_the_loop_body_propagates_and_cancels_the_run() -> None:
    model = GatedThenAnswers()
    async with create_test_runtime(agent=agent_with(model)) as runtime:  # type: ignore[arg-type]
        thread = await runtime.admin(identity=None).create_thread()

        async def read() -> None:
            async for _ in thread.stream("first"):
                raise LookupError("the reader's own")

        with pytest.raises(LookupError, match="the reader's own"):
            await read()
        await _until_no_operation_runs(runtime, thread.id)
        result = await thread.send("second")

    assert result.text == "second answer"


async def _until_no_operation_runs(runtime: AgentRuntime, thread_id: str) -> None:
    # The event loop closes an abandoned stream in a task of its own, at a time of its choosing:
    # there is nothing to wait on but the count of the thread's operations.
    with anyio.fail_after(5):
        while runtime.active_operations(thread_id):  # noqa: ASYNC110
            await anyio.sleep(0.01)


run_label: contextvars.ContextVar[str] = contextvars.ContextVar("run_label", default="unset")


async def test_the_streamed_run_sees_the_callers_context_variables() -> None:
    seen: list[str] = []

    class Recording(StreamsOnly):
        def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
            seen.append(run_label.get())
            return _answer("hi")

    async with create_test_runtime(agent=agent_with(Recording())) as runtime:  # type: ignore[arg-type]
        thread = await runtime.admin(identity=None).create_thread()
        token = run_label.set("request 42")
        try:
            events_seen = [event async for event in thread.stream("go")]
        finally:
            run_label.reset(token)

    assert isinstance(events_seen[-1], RunFinished)
    assert seen == ["request 42"]


async def test_a_closed_stream_cancels_the_run_and_the_thread_takes_the_next_message() -> None:
    async with create_test_runtime(agent=agent_with(GatedThenAnswers())) as runtime:  # type: ignore[arg-type]
        thread = await runtime.admin(identity=None).create_thread()
        async with contextlib.aclosing(thread.stream("first")) as stream:
            async for _ in stream:
                break
        assert runtime.active_operations(thread.id) == 0  # closing waited for the run to end
        again = [event async for event in thread.stream("second")]
        messages = await thread.messages()

    assert isinstance(again[-1], RunFinished)
    assert list(messages) == [
        UserMessage(content="second"),
        AssistantMessage(content="second answer"),
    ]


async def _answer(content: str) -> AsyncIterator[ModelEvent]:
    yield TextDelta(content)
    yield ResponseFinished("stop")


async def test_a_tool_result_event_matches_the_stored_result() -> None:
    _, messages = await streamed()
    seen, _ = await streamed()

    stored = [m for m in messages if isinstance(m, ToolResultMessage)]
    assert [e.result for e in seen if isinstance(e, ToolCallResult)] == stored


async def test_each_event_reaches_the_reader_before_the_model_is_asked_for_the_next() -> None:
    # The first token is not held back while the run reads on: the reader sees each event
    # before the model's stream is resumed for the one after it.
    asked: list[int] = []

    class CountingModel(StreamsOnly):
        async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
            for index in range(5):
                asked.append(index)
                yield TextDelta(str(index))
            asked.append(5)
            yield ResponseFinished("stop")

    seen: list[tuple[str, int]] = []  # (the event's text, what the model was last asked for)
    for _ in range(20):  # trio may run tasks woken together in either order: try it often
        asked.clear()
        async with create_test_runtime(agent=agent_with(CountingModel())) as runtime:  # type: ignore[arg-type]
            thread = await runtime.admin(identity=None).create_thread()
            async for event in thread.stream("go"):
                if isinstance(event, TextDelta):
                    seen.append((event.text, asked[-1]))

    assert seen == [(str(index), index) for index in range(5)] * 20


async def test_the_reader_sees_each_event_before_the_model_is_read_further() -> None:
    log: list[str] = []

    class LoggingModel(StreamsOnly):
        async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
            for piece in ("a", "b", "c"):
                log.append(f"model gives {piece}")
                yield TextDelta(piece)
            yield ResponseFinished("stop")

    async with create_test_runtime(agent=agent_with(LoggingModel())) as runtime:  # type: ignore[arg-type]
        thread = await runtime.admin(identity=None).create_thread()
        async for event in thread.stream("go"):
            if isinstance(event, TextDelta):
                log.append(f"reader sees {event.text}")
                await anyio.sleep(0.01)  # a slow reader: the run waits for it

    assert log == [
        "model gives a", "reader sees a",
        "model gives b", "reader sees b",
        "model gives c", "reader sees c",
    ]  # fmt: skip


async def test_two_delegated_runs_at_once_stream_every_event_each_in_its_order() -> None:
    pieces = [f"p{i} " for i in range(20)]

    def streaming_helper(name: str) -> object:
        return define_agent(
            name=name,
            model=ScriptedModel(
                [events(*(TextDelta(f"{name}:{p}") for p in pieces), ResponseFinished("stop"))]
            ),
        )

    agent = define_agent(
        name="main",
        model=ScriptedModel(
            [
                tool_calls(("left", {"task": "a"}), ("right", {"task": "b"}), ids=["l1", "r1"]),
                text("both done"),
            ]
        ),
        subagents={"left": streaming_helper("left"), "right": streaming_helper("right")},  # type: ignore[dict-item]
    )
    async with create_test_runtime(agent=agent) as runtime:
        thread = await runtime.admin(identity=None).create_thread()
        seen = [event async for event in thread.stream("go")]

    for name, call_id in (("left", "l1"), ("right", "r1")):
        texts = [
            e.event.text
            for e in seen
            if isinstance(e, DelegatedRunEvent)
            and e.tool_call_id == call_id
            and isinstance(e.event, TextDelta)
        ]
        assert texts == [f"{name}:{p}" for p in pieces]
    # The two runs streamed at the same time: their events interleave.
    ids = [e.tool_call_id for e in seen if isinstance(e, DelegatedRunEvent)]
    assert ids not in (sorted(ids), sorted(ids, reverse=True))
    assert isinstance(seen[-1], RunFinished)
    assert seen[-1].result.text == "both done"


async def test_deleting_the_thread_while_the_reader_holds_an_event_ends_the_stream() -> None:
    # The run waits for the reader to take its next event; the deletion cancels that wait at
    # once (no settlement window to sit out), and the reader's next step raises the deletion.
    model = ScriptedModel([events(TextDelta("one"), TextDelta("two"), ResponseFinished("stop"))])
    async with create_test_runtime(
        agent=agent_with(model),  # type: ignore[arg-type]
        settlement_window=60,
    ) as runtime:
        thread = await runtime.admin(identity=None).create_thread()
        seen: list[RunEvent] = []

        async def read_and_delete() -> None:
            async with contextlib.aclosing(thread.stream("go")) as stream:
                async for event in stream:
                    seen.append(event)
                    if event == TextDelta("one"):
                        await thread.delete()

        with anyio.fail_after(10), pytest.raises(ThreadDeletedError):
            await read_and_delete()
        with pytest.raises(ThreadNotFoundError):
            await thread.messages()

    assert seen == [TextDelta("one")]
