"""The AI SDK's UI message stream (``POST /agents/{agent}/chat``), as ``useChat``'s default
transport speaks it: its body in (``{id, messages, trigger}``), UI message chunks out, as SSE
``data:`` lines ending with ``[DONE]``, with the header ``x-vercel-ai-ui-message-stream: v1``.

The chat id is the thread id. The client sends the whole conversation; the stored history is
the truth, so only the last user message is read: its text parts, and its file parts (``data:``
URLs) as attachments. Events of runs delegated to subagents are not sent; the delegating tool
call's output is.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any, Literal
from urllib.parse import unquote_to_bytes

import pydantic

from pai.core import RunEvent, RunResult, ToolCallResult
from pai.core.ext import (
    ResponseFinished,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from pai.http._errors import BadRequestError
from pai.http._wire import (
    Attachment,
    RunRequest,
    check_message_length,
    decode_base64,
    validation_problem,
)


class _Part(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")
    type: str
    text: str | None = None
    url: str | None = None
    mediaType: str | None = None
    filename: str | None = None


class _UIMessage(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")
    id: str = ""
    role: Literal["system", "user", "assistant"]
    parts: list[_Part]


class _ChatBody(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")
    id: str
    messages: list[_UIMessage]
    trigger: str = "submit-message"


class AiSdkProtocol:
    """The AI SDK UI message stream protocol (see the module documentation)."""

    name = "ai-sdk"
    headers: Mapping[str, str] = {"x-vercel-ai-ui-message-stream": "v1"}

    def parse(
        self, body: bytes, *, max_message_chars: int, max_attachment_bytes: int
    ) -> RunRequest:
        try:
            chat = _ChatBody.model_validate_json(body)
        except pydantic.ValidationError as error:
            raise BadRequestError(
                f"the body is not a useChat request: {validation_problem(error)}",
                status=422,
                code="invalid_input",
            ) from None
        if chat.trigger != "submit-message":
            raise BadRequestError(
                f"trigger {chat.trigger[:40]!r} is not supported: this server takes new messages "
                "only ('submit-message'); a thread's stored history cannot be regenerated",
                status=422,
                code="unsupported_trigger",
            )
        if not chat.messages or chat.messages[-1].role != "user":
            raise BadRequestError(
                "the last message must be the user's new message (role 'user')",
                status=422,
                code="invalid_input",
            )
        where = f"messages[{len(chat.messages) - 1}]"
        texts: list[str] = []
        attachments: list[Attachment] = []
        for index, part in enumerate(chat.messages[-1].parts):
            if part.type == "text":
                texts.append(part.text or "")
            elif part.type == "file":
                attachments.append(
                    _attachment(part, f"{where}.parts[{index}]", max_attachment_bytes)
                )
            # Other parts (step markers, data parts, reasoning) carry nothing the run reads.
        text = "".join(texts)
        check_message_length(text, max_message_chars)
        if not text.strip() and not attachments:
            raise BadRequestError(f"{where} has no text", status=422, code="invalid_input")
        return RunRequest(thread_id=chat.id, text=text, attachments=attachments)

    def encoder(self, *, thread_id: str, run_id: str) -> AiSdkEncoder:
        return AiSdkEncoder(run_id=run_id)


def _attachment(part: _Part, where: str, max_bytes: int) -> Attachment:
    url = part.url or ""
    if not url.startswith("data:") or "," not in url:
        raise BadRequestError(
            f"{where} is a file part whose url is not a data: URL; send the file's bytes inline "
            "(useChat does so for files picked in the page)",
            status=422,
            code="invalid_input",
        )
    header, _, payload = url[5:].partition(",")
    media_type = part.mediaType or header.split(";", 1)[0] or "application/octet-stream"
    if header.endswith(";base64"):
        data = decode_base64(payload, f"{where}.url", max_bytes)
    else:
        data = unquote_to_bytes(payload)  # a data: URL without ;base64 is percent-encoded
        if len(data) > max_bytes:
            raise BadRequestError(
                f"{where} is larger than {max_bytes:,} bytes (HttpLimits.max_attachment_bytes)",
                status=413,
                code="file_too_large",
            )
    return Attachment(filename=part.filename or "file", media_type=media_type, data=data)


def _frame(chunk: Mapping[str, Any]) -> str:
    return json.dumps(chunk, separators=(",", ":"), ensure_ascii=False)


_DONE = "[DONE]"


class AiSdkEncoder:
    """One run's events as UI message chunks (see :class:`pai.http._wire.Encoder`)."""

    def __init__(self, *, run_id: str) -> None:
        self._run_id = run_id
        self._text_id: str | None = None
        self._in_step = False
        self._step_answered = False
        """Whether the model's answer of the open step is complete (its tool results may follow)."""
        self._calls: dict[int, tuple[str, str]] = {}
        """Open tool calls of the current step, by index: (id, tool name)."""

    def start(self) -> list[str]:
        return [_frame({"type": "start", "messageId": self._run_id})]

    def _step(self) -> list[str]:
        """Open a step for the model's next event: a new one once the last was answered."""
        frames: list[str] = []
        if self._in_step and self._step_answered:
            frames.append(_frame({"type": "finish-step"}))
            self._in_step = False
        if not self._in_step:
            self._in_step = True
            self._step_answered = False
            frames.append(_frame({"type": "start-step"}))
        return frames

    def event(self, event: RunEvent) -> list[str]:
        if isinstance(event, TextDelta):
            if not event.text:
                return []
            frames = self._step()
            if self._text_id is None:
                self._text_id = uuid.uuid4().hex
                frames.append(_frame({"type": "text-start", "id": self._text_id}))
            frames.append(_frame({"type": "text-delta", "id": self._text_id, "delta": event.text}))
            return frames
        if isinstance(event, ToolCallStarted):
            frames = self._step() + self._end_text()
            self._calls[event.index] = (event.id, event.name)
            frames.append(
                _frame({"type": "tool-input-start", "toolCallId": event.id, "toolName": event.name})
            )
            return frames
        if isinstance(event, ToolCallArgumentsDelta):
            call = self._calls.get(event.index)
            if call is None or not event.delta:
                return []
            return [
                _frame(
                    {
                        "type": "tool-input-delta",
                        "toolCallId": call[0],
                        "inputTextDelta": event.delta,
                    }
                )
            ]
        if isinstance(event, ToolCallFinished):
            frames = self._step() + self._end_text()
            self._calls.pop(event.index, None)
            frames.append(
                _frame(
                    {
                        "type": "tool-input-available",
                        "toolCallId": event.call.id,
                        "toolName": event.call.name,
                        "input": event.call.arguments,
                    }
                )
            )
            return frames
        if isinstance(event, ResponseFinished):
            frames = self._end_text()
            frames.extend(self._fail_open_calls("the model ended its answer mid-call"))
            self._step_answered = True
            return frames
        if isinstance(event, ToolCallResult):
            result = event.result
            frames: list[str] = []
            if result.is_error:
                frames.append(
                    _frame(
                        {
                            "type": "tool-output-error",
                            "toolCallId": result.tool_call_id,
                            "errorText": result.content,
                        }
                    )
                )
            else:
                # The content the model reads: a client sees exactly what the model saw.
                frames.append(
                    _frame(
                        {
                            "type": "tool-output-available",
                            "toolCallId": result.tool_call_id,
                            "output": result.content,
                        }
                    )
                )
            return frames
        return []  # usage, delegated runs' events, the run's end (finish() sends it)

    def _end_step_after_results(self) -> list[str]:
        if not self._in_step:
            return []
        self._in_step = False
        return [_frame({"type": "finish-step"})]

    def finish(self, result: RunResult) -> list[str]:
        reason = "stop" if result.status == "completed" else "tool-calls"  # or awaiting approval
        return [
            *self._end_text(),
            *self._fail_open_calls("the run ended mid-call"),
            *self._end_step_after_results(),
            _frame({"type": "finish", "finishReason": reason}),
            _DONE,
        ]

    def error(self, message: str, *, code: str) -> list[str]:
        return [
            *self._end_text(),
            *self._fail_open_calls(message),
            *self._end_step_after_results(),
            _frame({"type": "error", "errorText": message}),
            _DONE,
        ]

    def _end_text(self) -> list[str]:
        if self._text_id is None:
            return []
        frame = _frame({"type": "text-end", "id": self._text_id})
        self._text_id = None
        return [frame]

    def _fail_open_calls(self, why: str) -> list[str]:
        frames = [
            _frame(
                {
                    "type": "tool-input-error",
                    "toolCallId": call_id,
                    "toolName": name,
                    "input": None,
                    "errorText": why,
                }
            )
            for call_id, name in self._calls.values()
        ]
        self._calls.clear()
        return frames


AI_SDK = AiSdkProtocol()
"""The AI SDK UI message stream protocol."""

__all__ = ["AI_SDK", "AiSdkEncoder", "AiSdkProtocol"]
