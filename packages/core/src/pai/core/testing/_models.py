"""Models for tests: a scripted one that replays answers, and one backed by a function.

Both are streaming models (:class:`~pai.core.ext.StreamingModel`): ``stream()`` yields the answer's
events and ``request()`` is the same answer collected in one piece.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypeAlias

from pydantic import JsonValue

from pai.core._awaitables import resolve
from pai.core._messages import AssistantMessage, ToolCall
from pai.core._model import (
    FinishReason,
    ModelEvent,
    ModelRequest,
    ModelResponse,
    ResponseFinished,
    TextDelta,
    Usage,
    UsageReported,
    aclose_if_closable,
    collect_response,
    response_events,
)

_call_ids = itertools.count(1)


def text(content: str) -> AssistantMessage:
    """A scripted answer with text and no tool calls (it ends the run)."""
    return AssistantMessage(content=content)


def tool_call(
    name: str, arguments: Mapping[str, JsonValue] | None = None, *, id: str | None = None
) -> AssistantMessage:
    """A scripted answer that calls one tool."""
    return tool_calls((name, arguments or {}), ids=None if id is None else [id])


def tool_calls(
    *calls: tuple[str, Mapping[str, JsonValue]], ids: Iterable[str] | None = None
) -> AssistantMessage:
    """A scripted answer that calls several tools in one step."""
    id_list = list(ids) if ids is not None else [f"call-{next(_call_ids)}" for _ in calls]
    return AssistantMessage(
        tool_calls=tuple(
            ToolCall(id=call_id, name=name, arguments=dict(arguments))
            for call_id, (name, arguments) in zip(id_list, calls, strict=True)
        )
    )


@dataclass(frozen=True, slots=True)
class ScriptedStream:
    """A scripted answer given as events; ``error``, when set, is raised after them.

    Build one with :func:`chunks` or :func:`events`.
    """

    events: tuple[ModelEvent, ...]
    error: Exception | None = None


def chunks(
    *pieces: str,
    usage: Usage | None = None,
    finish_reason: FinishReason = "stop",
    cut: Exception | None = None,
) -> ScriptedStream:
    """A scripted text answer streamed in ``pieces``, then its usage and finish reason.

    With ``cut=error`` the stream fails with ``error`` after the pieces instead of finishing,
    like a connection cut mid-answer.

    Example::

        ScriptedModel([chunks("Hel", "lo", usage=Usage(input_tokens=5, output_tokens=2))])
        ScriptedModel([chunks("Hel", cut=ModelConnectionError("connection reset"))])
    """
    streamed: list[ModelEvent] = [TextDelta(piece) for piece in pieces]
    if cut is not None:
        return ScriptedStream(tuple(streamed), cut)
    if usage is not None:
        streamed.append(UsageReported(usage))
    streamed.append(ResponseFinished(finish_reason))
    return ScriptedStream(tuple(streamed))


def events(*streamed: ModelEvent, error: Exception | None = None) -> ScriptedStream:
    """A scripted answer given event by event (nothing is added: end it with ResponseFinished);
    ``error``, when set, is raised after the events."""
    return ScriptedStream(tuple(streamed), error)


ScriptStep: TypeAlias = (
    AssistantMessage
    | ModelResponse
    | ScriptedStream
    | Exception
    | Callable[[ModelRequest], AssistantMessage | ModelResponse]
)
"""One scripted answer: a message, a response with usage, a stream of events, an error to raise
instead of answering, or a function of the request returning a message or response."""


class ScriptExhaustedError(AssertionError):
    """A scripted model was asked for more answers than its script has."""


class ScriptedModel:
    """A model that answers from a script, one entry per request; records every request.

    This is a test double, not a language model: it never looks at the conversation unless a
    script entry is a function of the request. An exception in the script is raised for that
    request (script a :class:`~pai.core.ModelRateLimitError` to test retries).

    Example::

        model = ScriptedModel([tool_call("runScript", {"command": "echo hi"}), text("done")])
        ...
        assert model.requests[1].messages[-1].content == "hi\\n"
    """

    def __init__(self, script: Iterable[ScriptStep]) -> None:
        self._script = list(script)
        self.requests: list[ModelRequest] = []

    @property
    def remaining(self) -> int:
        """How many scripted answers are left."""
        return len(self._script) - len(self.requests)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Yield the next scripted answer's events (or raise its scripted error)."""
        index = len(self.requests)
        self.requests.append(request)
        if index >= len(self._script):
            raise ScriptExhaustedError(
                f"ScriptedModel was asked for answer #{index + 1} but its script has "
                f"{len(self._script)}; add answers to the script"
            )
        step = self._script[index]
        if isinstance(step, Exception):
            raise step
        if isinstance(step, ScriptedStream):
            for event in step.events:
                yield event
            if step.error is not None:
                raise step.error
            return
        answer = step if isinstance(step, AssistantMessage | ModelResponse) else step(request)
        for event in response_events(answer):
            yield event

    async def respond(self, request: ModelRequest) -> ModelResponse:
        """The next scripted answer in one piece, with its usage and finish reason."""
        return await _collect(self.stream(request))

    async def request(self, request: ModelRequest) -> AssistantMessage:
        """The next scripted answer's message."""
        return (await self.respond(request)).message


async def _collect(stream: AsyncIterator[ModelEvent]) -> ModelResponse:
    try:
        return await collect_response(stream)
    finally:
        await aclose_if_closable(stream)


class FunctionModel:
    """A model whose answers come from a function of the request (sync or async), or whose
    streams come from an async generator function (``stream_fn``).

    Example::

        def echo(request: ModelRequest) -> AssistantMessage:
            return text(f"you said {request.messages[-1].content}")

        model = FunctionModel(echo)

        async def spell(request: ModelRequest) -> AsyncIterator[ModelEvent]:
            for letter in "hi":
                yield TextDelta(letter)
            yield ResponseFinished("stop")

        streaming = FunctionModel(stream_fn=spell)
    """

    def __init__(
        self,
        fn: Callable[
            [ModelRequest],
            AssistantMessage | ModelResponse | Awaitable[AssistantMessage | ModelResponse],
        ]
        | None = None,
        *,
        stream_fn: Callable[[ModelRequest], AsyncIterator[ModelEvent]] | None = None,
    ) -> None:
        if (fn is None) == (stream_fn is None):
            raise TypeError(
                "FunctionModel takes exactly one of fn (a function returning an answer) and "
                "stream_fn (an async generator function yielding events)"
            )
        self._fn = fn
        self._stream_fn = stream_fn
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Yield the function's answer as events."""
        self.requests.append(request)
        if self._stream_fn is not None:
            inner = self._stream_fn(request)
            try:
                async for event in inner:
                    yield event
            finally:
                await aclose_if_closable(inner)
            return
        assert self._fn is not None
        for event in response_events(await resolve(self._fn(request))):
            yield event

    async def respond(self, request: ModelRequest) -> ModelResponse:
        """The function's answer in one piece, with its usage and finish reason."""
        return await _collect(self.stream(request))

    async def request(self, request: ModelRequest) -> AssistantMessage:
        """The function's answer's message."""
        return (await self.respond(request)).message
