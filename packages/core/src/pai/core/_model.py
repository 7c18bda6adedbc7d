"""The model protocol: messages and tool specs in; a stream of events, or one answer, out.

Streaming is the primary path. A :class:`StreamingModel` yields :data:`ModelEvent` values (text
deltas, tool calls as they start, grow and finish, usage, the finish reason);
:func:`collect_response` folds such a stream into one :class:`ModelResponse`. A model that only
answers in one piece (:class:`Model`) is streamed by :func:`stream_model` from its answer.

The event order a stream follows::

    (TextDelta | ToolCallStarted | ToolCallArgumentsDelta | ToolCallFinished | UsageReported)*
    ResponseFinished

Every tool call is announced by a ``ToolCallStarted`` and closed by a ``ToolCallFinished`` with the
same ``index``; argument deltas in between carry the JSON text as it arrives. Usage events add up.
``ResponseFinished`` comes last, exactly once.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, TypeAlias, runtime_checkable

from pydantic import JsonValue

from pai.core._errors import ModelResponseError
from pai.core._messages import AssistantMessage, Message, ToolCall

__all__ = [
    "NO_USAGE",
    "FinishReason",
    "Model",
    "ModelEvent",
    "ModelRequest",
    "ModelResponse",
    "ResponseFinished",
    "StreamingModel",
    "TextDelta",
    "ToolCallArgumentsDelta",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolSpec",
    "Usage",
    "UsageReported",
    "collect_response",
    "response_events",
    "stream_model",
]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as the model sees it: its name in this agent, description and JSON schema."""

    name: str
    description: str
    input_schema: Mapping[str, JsonValue]


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """One step's request: the agent's instructions, the conversation so far, the tools offered.

    ``messages`` holds user, assistant and tool-result messages (never recorded errors).
    """

    instructions: str
    messages: Sequence[Message]
    tools: Sequence[ToolSpec]
    step: int


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens one model call (or several, added with ``+``) consumed.

    Example::

        Usage(input_tokens=12, output_tokens=3) + Usage(input_tokens=20, output_tokens=5)
        # Usage(input_tokens=32, output_tokens=8)
    """

    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        """Input and output tokens together."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
        )


NO_USAGE = Usage()
"""Zero tokens: one frozen value serves every answer, run and stream that reports none."""


FinishReason: TypeAlias = Literal["stop", "tool_calls", "length", "content_filter", "other"]
"""Why the model stopped: it was done, it called tools, it hit its output limit, a content filter
stopped it, or a reason this protocol does not name (``"other"``)."""


@dataclass(frozen=True, slots=True)
class TextDelta:
    """The next piece of the answer's text."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    """The model began a tool call. ``index`` identifies it among this answer's calls."""

    index: int
    id: str
    name: str


@dataclass(frozen=True, slots=True)
class ToolCallArgumentsDelta:
    """The next piece of a tool call's arguments, as JSON text."""

    index: int
    delta: str


@dataclass(frozen=True, slots=True)
class ToolCallFinished:
    """A tool call is complete; ``call`` holds its parsed arguments."""

    index: int
    call: ToolCall


@dataclass(frozen=True, slots=True)
class UsageReported:
    """Tokens consumed; a stream's usage events add up to the answer's usage."""

    usage: Usage


@dataclass(frozen=True, slots=True)
class ResponseFinished:
    """The answer is complete; the last event of every stream."""

    finish_reason: FinishReason


ModelEvent: TypeAlias = (
    TextDelta
    | ToolCallStarted
    | ToolCallArgumentsDelta
    | ToolCallFinished
    | UsageReported
    | ResponseFinished
)
"""Any event a model's stream yields (see the module docstring for their order)."""


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """One complete answer: the message the thread saves, the tokens it took, why it stopped.

    Example::

        response = await collect_response(model.stream(request))
        response.message.content, response.usage.output_tokens, response.finish_reason
    """

    message: AssistantMessage
    usage: Usage = NO_USAGE
    finish_reason: FinishReason = "stop"

    @property
    def content(self) -> str | None:
        """The answer's text, if any."""
        return self.message.content

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The answer's tool calls, in the order the model made them."""
        return self.message.tool_calls


@runtime_checkable
class Model(Protocol):
    """A language model that answers one request in one piece.

    Every model has this method: the runtime calls it. Models that can stream implement
    :class:`StreamingModel` as well, and derive ``request`` from their stream with
    :func:`collect_response`.

    Example::

        class EchoModel:
            async def request(self, request: ModelRequest) -> AssistantMessage:
                return AssistantMessage(content=str(request.messages[-1]))
    """

    async def request(self, request: ModelRequest) -> AssistantMessage:
        """Answer with text, tool calls, or both. An answer without tool calls ends the run."""
        ...


@runtime_checkable
class StreamingModel(Model, Protocol):
    """A model that streams its answer as :data:`ModelEvent` values.

    ``stream`` is an async iterator (usually an ``async def`` generator) following the event
    order in this module's docstring; it raises :class:`~pai.core.ModelError` subclasses for
    failures. ``respond`` is the same answer in one piece with its usage and finish reason
    (:func:`collect_response` of the stream, plus any retries the model makes), and ``request``
    its message alone.

    Example::

        class ShoutingModel:
            async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
                yield TextDelta("HELLO")
                yield UsageReported(Usage(input_tokens=1, output_tokens=1))
                yield ResponseFinished("stop")

            async def respond(self, request: ModelRequest) -> ModelResponse:
                return await collect_response(self.stream(request))

            async def request(self, request: ModelRequest) -> AssistantMessage:
                return (await self.respond(request)).message
    """

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Yield the answer's events, ending with :class:`ResponseFinished`."""
        ...

    async def respond(self, request: ModelRequest) -> ModelResponse:
        """The whole answer with its usage and finish reason."""
        ...


async def collect_response(
    events: AsyncIterable[ModelEvent],
    *,
    on_event: Callable[[ModelEvent], Awaitable[None]] | None = None,
) -> ModelResponse:
    """Fold a model's event stream into one :class:`ModelResponse`.

    Text deltas are joined, tool calls are taken from their ``ToolCallFinished`` events in the
    order of their ``index``, usage events are added up, and the finish reason comes from the
    final ``ResponseFinished``. A stream that breaks the event order (a call finished that never
    started, a call never finished, no ``ResponseFinished``, events after it) raises
    :class:`~pai.core.ModelResponseError`. ``on_event``, when given, is awaited with each event
    as it arrives, before it is folded in: to show the answer while collecting it.

    Example::

        response = await collect_response(model.stream(request))
        response = await collect_response(model.stream(request), on_event=show)
    """
    texts: list[str] = []
    started: dict[int, ToolCallStarted] = {}
    finished: dict[int, ToolCall] = {}
    usage = NO_USAGE
    finish: ResponseFinished | None = None
    async for event in events:
        if on_event is not None:
            await on_event(event)
        if finish is not None:
            raise ModelResponseError(
                f"the model's stream went on after it finished: {event!r} came after {finish!r}"
            )
        match event:
            case TextDelta(text=piece):
                texts.append(piece)
            case ToolCallStarted(index=index):
                if index in started:
                    raise ModelResponseError(
                        f"the model's stream started tool call #{index} twice: {event!r}"
                    )
                started[index] = event
            case ToolCallArgumentsDelta(index=index) | ToolCallFinished(index=index):
                if index not in started or index in finished:
                    state = "finished" if index in finished else "never started"
                    raise ModelResponseError(
                        f"the model's stream sent {event!r} for tool call #{index}, which was "
                        f"{state}"
                    )
                if isinstance(event, ToolCallFinished):
                    finished[index] = event.call
            case UsageReported(usage=reported):
                usage = usage + reported
            case ResponseFinished():
                finish = event
    if finish is None:
        raise ModelResponseError(
            "the model's stream ended without a ResponseFinished event; a streaming model must "
            "end every answer with one"
        )
    unfinished = sorted(set(started) - set(finished))
    if unfinished:
        names = ", ".join(f"#{i} {started[i].name!r}" for i in unfinished)
        raise ModelResponseError(f"the model's stream never finished tool call(s) {names}")
    message = AssistantMessage(
        content="".join(texts) if texts else None,
        tool_calls=tuple(finished[index] for index in sorted(finished)),
    )
    return ModelResponse(message=message, usage=usage, finish_reason=finish.finish_reason)


def response_events(response: ModelResponse | AssistantMessage) -> tuple[ModelEvent, ...]:
    """The events that stream ``response``: its text in one delta, each tool call (started, its
    arguments as one JSON delta, finished), its usage, and its finish reason.

    An :class:`~pai.core.AssistantMessage` streams with no usage and finish reason
    ``"tool_calls"`` when it calls tools, else ``"stop"``. ``collect_response`` of these events
    gives ``response`` back.
    """
    if isinstance(response, AssistantMessage):
        reason: FinishReason = "tool_calls" if response.tool_calls else "stop"
        response = ModelResponse(message=response, finish_reason=reason)
    events: list[ModelEvent] = []
    if response.message.content is not None:
        events.append(TextDelta(response.message.content))
    for index, call in enumerate(response.message.tool_calls):
        events.append(ToolCallStarted(index=index, id=call.id, name=call.name))
        events.append(ToolCallArgumentsDelta(index=index, delta=json.dumps(dict(call.arguments))))
        events.append(ToolCallFinished(index=index, call=call))
    if response.usage != NO_USAGE:
        events.append(UsageReported(response.usage))
    events.append(ResponseFinished(response.finish_reason))
    return tuple(events)


async def stream_model(model: Model, request: ModelRequest) -> AsyncIterator[ModelEvent]:
    """Stream ``model``'s answer to ``request``: natively when it is a :class:`StreamingModel`,
    else from its one-piece answer (see :func:`response_events`).

    Example::

        async for event in stream_model(model, request):
            if isinstance(event, TextDelta):
                print(event.text, end="")
    """
    if isinstance(model, StreamingModel):
        stream = model.stream(request)
        try:
            async for event in stream:
                yield event
        finally:
            await aclose_if_closable(stream)
        return
    for event in response_events(await model.request(request)):
        yield event


async def aclose_if_closable(resource: object) -> None:
    """Close ``resource`` when it can be closed (its ``aclose()``: an async generator, a model
    holding a client), releasing what it holds."""
    aclose: object = getattr(resource, "aclose", None)
    if callable(aclose):
        result = aclose()
        if isinstance(result, Awaitable):
            await result
