"""A model request as Chat Completions messages and tools, and streamed chunks as model events."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, cast

from pydantic import JsonValue

from pai.core import (
    AssistantMessage,
    ErrorMessage,
    FinishReason,
    ModelConnectionError,
    ModelRequest,
    ModelResponseError,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
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
from pai.model_openai._errors import clip_server_text

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


DEFAULT_MAX_ANSWER_BYTES = 64 * 1024 * 1024
"""Bytes of one HTTP answer: OpenAI streams about 260 bytes a token, so the longest answer of a
current model (128k tokens) is about 35 MB."""

DEFAULT_MAX_ANSWER_CHARS = 1_000_000
"""Characters of text and tool-call arguments (names and ids too) one answer may hold: about
250,000 tokens, twice the longest answer of any current model."""

DEFAULT_MAX_TOOL_CALLS = 1024
"""Tool calls one answer may start. The agent's ``max_tool_calls_per_step`` (pai-core) is the cap
that decides what runs; this one only bounds what an answer holds in memory."""

_MAX_TOKENS = 10**12
"""More tokens than any answer reads or writes: a usage count above it is a lie."""


@dataclass
class _OpenCall:
    id: str
    name: str
    arguments: list[str] = field(default_factory=list[str])


@dataclass
class ChunkReader:
    """Turns streamed chunks into model events, in the core's event order, trusting nothing.

    Tool calls finish when the finish reason arrives; usage and ``ResponseFinished`` come when
    the stream ends (:meth:`end`), so usage reported after the finish chunk is included. The SDK
    does not validate what the server sent, so :meth:`feed` checks each field's type, and an
    answer's characters (``max_chars``) and tool calls (``max_tool_calls``) are capped.
    """

    model: str
    max_chars: int = DEFAULT_MAX_ANSWER_CHARS
    max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS
    _calls: dict[int, _OpenCall] = field(default_factory=dict[int, _OpenCall])
    _finished: bool = False
    _chars: int = 0
    finish_reason: FinishReason | None = None
    usage: Usage | None = None

    def feed(self, chunk: Any) -> list[ModelEvent]:
        """The events of one streamed ``ChatCompletionChunk`` (only its first choice is read)."""
        try:
            usage = chunk.usage
            if usage is not None:
                self.report_usage(
                    getattr(usage, "prompt_tokens", None), getattr(usage, "completion_tokens", None)
                )
            choices = chunk.choices
            if not choices:
                return []
            choice = choices[0]
            delta = choice.delta
            events = self.text(delta.content) if delta.content is not None else []
            calls = delta.tool_calls
            if calls:
                for call in calls:
                    function = call.function
                    events.extend(
                        self.tool_call(
                            call.index,
                            call.id,
                            function.name if function is not None else None,
                            function.arguments if function is not None else None,
                        )
                    )
            if choice.finish_reason is not None:
                events.extend(self.finish(choice.finish_reason))
        except (AttributeError, TypeError, IndexError, KeyError) as error:
            raise ModelResponseError(
                f"OpenAI model {self.model!r}: a chunk of the answer does not have the shape of "
                f"a chat completion chunk ({type(error).__name__}: "
                f"{clip_server_text(str(error), 300)})",
                model=self.model,
            ) from error
        return events

    def text(self, content: object) -> list[ModelEvent]:
        if type(content) is not str:
            raise self._wrong_type("content of a chunk", content, "a string")
        if not content:
            return []
        self._count(len(content))
        return [TextDelta(content)]

    def tool_call(
        self, index: object, call_id: object, name: object, arguments: object
    ) -> list[ModelEvent]:
        if type(index) is not int:
            raise self._wrong_type("index of a tool call", index, "an integer")
        events: list[ModelEvent] = []
        open_call = self._calls.get(index)
        if open_call is None:
            if not name:
                raise ModelResponseError(
                    f"OpenAI model {self.model!r}: the stream started tool call #{index} "
                    "without a function name",
                    model=self.model,
                )
            if type(name) is not str:
                raise self._wrong_type(f"name of tool call #{index}", name, "a string")
            if call_id is not None and type(call_id) is not str:
                raise self._wrong_type(f"id of tool call #{index}", call_id, "a string")
            if len(self._calls) >= self.max_tool_calls:
                raise ModelResponseError(
                    f"OpenAI model {self.model!r}: the answer started more than "
                    f"{self.max_tool_calls} tool calls, the max_tool_calls limit of one answer; "
                    "it was not read further. Raise OpenAIModel(max_tool_calls=...) if a real "
                    "answer makes that many (the agent's max_tool_calls_per_step decides how "
                    "many run)",
                    model=self.model,
                )
            # Some OpenAI-compatible servers send no call ids: make one up, stable per answer.
            open_call = _OpenCall(id=call_id or f"call_{index}", name=name)
            self._count(len(open_call.id) + len(name))
            self._calls[index] = open_call
            events.append(ToolCallStarted(index=index, id=open_call.id, name=open_call.name))
        if arguments:
            if type(arguments) is not str:
                raise self._wrong_type(f"arguments of tool call #{index}", arguments, "a string")
            self._count(len(arguments))
            open_call.arguments.append(arguments)
            events.append(ToolCallArgumentsDelta(index=index, delta=arguments))
        return events

    def finish(self, reason: object) -> list[ModelEvent]:
        self.finish_reason = (
            _FINISH_REASONS.get(reason, "other") if type(reason) is str else "other"
        )
        return self._finish_calls()

    def report_usage(self, input_tokens: object, output_tokens: object) -> None:
        """Keep the answer's usage; counts that are not whole numbers from 0 up are refused."""
        for name, value in (("prompt_tokens", input_tokens), ("completion_tokens", output_tokens)):
            if type(value) is not int or not 0 <= value <= _MAX_TOKENS:
                raise ModelResponseError(
                    f"OpenAI model {self.model!r}: the server reported usage {name}="
                    f"{clip_server_text(repr(value), 100)}, not a whole number of tokens from 0 "
                    f"to {_MAX_TOKENS}; usage adds up into totals, so the answer is refused",
                    model=self.model,
                )
        self.usage = Usage(
            input_tokens=cast(int, input_tokens), output_tokens=cast(int, output_tokens)
        )

    def end(self) -> list[ModelEvent]:
        """The closing events; a stream that never said why it finished was cut short."""
        if self.finish_reason is None:
            raise ModelConnectionError(
                f"OpenAI model {self.model!r}: the stream ended before the answer finished "
                "(no finish reason); the connection was probably cut",
                model=self.model,
            )
        events: list[ModelEvent] = []
        if self.usage is not None:
            events.append(UsageReported(self.usage))
        events.append(ResponseFinished(self.finish_reason))
        return events

    def _count(self, chars: int) -> None:
        self._chars += chars
        if self._chars > self.max_chars:
            raise ModelResponseError(
                f"OpenAI model {self.model!r}: the answer passed {self.max_chars} characters "
                "of text and tool-call arguments, the max_answer_chars limit; it was not read "
                "further. Raise OpenAIModel(max_answer_chars=...) if a real answer is that long",
                model=self.model,
            )

    def _wrong_type(self, what: str, value: object, expected: str) -> ModelResponseError:
        return ModelResponseError(
            f"OpenAI model {self.model!r}: the {what} is {type(value).__name__} "
            f"{clip_server_text(repr(value), 100)}, not {expected}",
            model=self.model,
        )

    def _finish_calls(self) -> list[ModelEvent]:
        if self._finished:  # a server that repeats the finish reason finishes each call once
            return []
        self._finished = True
        return [
            ToolCallFinished(index=index, call=self._parse(index, self._calls[index]))
            for index in sorted(self._calls)
        ]

    def _parse(self, index: int, call: _OpenCall) -> ToolCall:
        text = "".join(call.arguments).strip() or "{}"
        try:
            arguments: JsonValue = json.loads(text)
        except (ValueError, RecursionError) as error:
            raise ModelResponseError(
                f"OpenAI model {self.model!r}: the arguments of tool call #{index} "
                f"{clip_server_text(repr(call.name), 100)} are not JSON ({clip_server_text(str(error), 200)}): "
                f"{clip_server_text(repr(text[:200]), 300)}",
                model=self.model,
            ) from error
        if not isinstance(arguments, dict):
            raise ModelResponseError(
                f"OpenAI model {self.model!r}: the arguments of tool call #{index} "
                f"{clip_server_text(repr(call.name), 100)} are not a JSON object: {clip_server_text(repr(text[:200]), 300)}",
                model=self.model,
            )
        return ToolCall(id=call.id, name=call.name, arguments=arguments)
