"""A model request as Chat Completions messages and tools, and streamed chunks as model events."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field

from pydantic import JsonValue

from pai.core import (
    AssistantMessage,
    ErrorMessage,
    FinishReason,
    ModelConnectionError,
    ModelEvent,
    ModelRequest,
    ModelResponseError,
    ResponseFinished,
    TextDelta,
    ToolCall,
    ToolCallArgumentsDelta,
    ToolCallFinished,
    ToolCallStarted,
    ToolResultMessage,
    Usage,
    UsageReported,
    UserMessage,
)

_FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
    "content_filter": "content_filter",
}


def chat_messages(request: ModelRequest) -> list[dict[str, JsonValue]]:
    """The conversation as Chat Completions messages: the instructions as the system message,
    then user, assistant (with its tool calls) and tool-result messages in order."""
    messages: list[dict[str, JsonValue]] = []
    if request.instructions:
        messages.append({"role": "system", "content": request.instructions})
    for message in request.messages:
        match message:
            case UserMessage(content=content):
                messages.append({"role": "user", "content": content})
            case AssistantMessage(content=content, tool_calls=calls):
                # Servers accept a null content only next to tool calls.
                text = content if content is not None or calls else ""
                entry: dict[str, JsonValue] = {"role": "assistant", "content": text}
                if calls:
                    entry["tool_calls"] = [
                        {
                            "id": call.id,
                            "type": "function",
                            "function": {
                                "name": call.name,
                                "arguments": json.dumps(dict(call.arguments)),
                            },
                        }
                        for call in calls
                    ]
                messages.append(entry)
            case ToolResultMessage(tool_call_id=call_id, content=content):
                messages.append({"role": "tool", "tool_call_id": call_id, "content": content})
            case ErrorMessage():
                pass  # recorded failures are for people, never for the model
    return messages


def chat_tools(request: ModelRequest) -> list[dict[str, JsonValue]]:
    """The offered tools as Chat Completions function tools, their input schemas as parameters."""
    return [
        {
            "type": "function",
            "function": {
                "name": spec.name,
                "description": spec.description,
                "parameters": dict(spec.input_schema),
            },
        }
        for spec in request.tools
    ]


@dataclass
class _OpenCall:
    id: str
    name: str
    arguments: list[str] = field(default_factory=list[str])


@dataclass
class ChunkReader:
    """Turns streamed chunk fields into model events, in the core's event order.

    Tool calls finish when the finish reason arrives; usage and ``ResponseFinished`` come when
    the stream ends (:meth:`end`), so usage reported after the finish chunk is included.
    """

    model: str
    _calls: dict[int, _OpenCall] = field(default_factory=dict[int, _OpenCall])
    _finished: bool = False
    finish_reason: FinishReason | None = None
    usage: Usage | None = None

    def text(self, content: str | None) -> Iterator[ModelEvent]:
        if content:
            yield TextDelta(content)

    def tool_call(
        self, index: int, call_id: str | None, name: str | None, arguments: str | None
    ) -> Iterator[ModelEvent]:
        open_call = self._calls.get(index)
        if open_call is None:
            if not name:
                raise ModelResponseError(
                    f"OpenAI model {self.model!r}: the stream started tool call #{index} "
                    "without a function name"
                )
            # Some OpenAI-compatible servers send no call ids: make one up, stable per answer.
            open_call = _OpenCall(id=call_id or f"call_{index}", name=name)
            self._calls[index] = open_call
            yield ToolCallStarted(index=index, id=open_call.id, name=open_call.name)
        if arguments:
            open_call.arguments.append(arguments)
            yield ToolCallArgumentsDelta(index=index, delta=arguments)

    def finish(self, reason: str) -> Iterator[ModelEvent]:
        self.finish_reason = _FINISH_REASONS.get(reason, "other")
        yield from self._finish_calls()

    def report_usage(self, input_tokens: int, output_tokens: int) -> None:
        self.usage = Usage(input_tokens=input_tokens, output_tokens=output_tokens)

    def end(self) -> Iterator[ModelEvent]:
        """The closing events; a stream that never said why it finished was cut short."""
        if self.finish_reason is None:
            raise ModelConnectionError(
                f"OpenAI model {self.model!r}: the stream ended before the answer finished "
                "(no finish reason); the connection was probably cut"
            )
        if self.usage is not None:
            yield UsageReported(self.usage)
        yield ResponseFinished(self.finish_reason)

    def _finish_calls(self) -> Iterator[ModelEvent]:
        if self._finished:  # a server that repeats the finish reason finishes each call once
            return
        self._finished = True
        for index in sorted(self._calls):
            call = self._calls[index]
            yield ToolCallFinished(index=index, call=self._parse(index, call))

    def _parse(self, index: int, call: _OpenCall) -> ToolCall:
        text = "".join(call.arguments).strip() or "{}"
        try:
            arguments: JsonValue = json.loads(text)
        except ValueError as error:
            raise ModelResponseError(
                f"OpenAI model {self.model!r}: the arguments of tool call #{index} "
                f"{call.name!r} are not JSON ({error}): {text[:200]!r}"
            ) from error
        if not isinstance(arguments, dict):
            raise ModelResponseError(
                f"OpenAI model {self.model!r}: the arguments of tool call #{index} "
                f"{call.name!r} are not a JSON object: {text[:200]!r}"
            )
        return ToolCall(id=call.id, name=call.name, arguments=arguments)
