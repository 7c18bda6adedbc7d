"""AG-UI: a ``RunAgentInput`` in, AG-UI events out (``POST /agents/{agent}/ag-ui``).

The client sends the whole conversation with every run; the thread's stored history is the
truth, so only the new part is read: the last user message's text, or the tool messages that
answer the pending external tool calls. Events of runs delegated to subagents are not sent (AG-UI
has no place for a nested run's messages); the delegating tool call's result is.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any, cast

import pydantic
from ag_ui.core import (
    BaseEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

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


class AguiProtocol:
    """The AG-UI protocol (see the module documentation)."""

    name = "ag-ui"
    headers: Mapping[str, str] = {}

    def parse(
        self, body: bytes, *, max_message_chars: int, max_attachment_bytes: int
    ) -> RunRequest:
        try:
            run_input = RunAgentInput.model_validate_json(body)
        except pydantic.ValidationError as error:
            raise BadRequestError(
                f"the body is not an AG-UI RunAgentInput: {validation_problem(error)}",
                status=422,
                code="invalid_input",
            ) from None
        messages = run_input.messages
        if not messages:
            raise BadRequestError(
                "messages is empty: send the conversation with the new user message last",
                status=422,
                code="invalid_input",
            )
        last = messages[-1]
        if last.role == "tool":
            results: dict[str, object] = {}
            for message in reversed(messages):
                if message.role != "tool":
                    break
                results[message.tool_call_id] = message.content
            return RunRequest(
                thread_id=run_input.thread_id,
                run_id=run_input.run_id or None,
                text="",
                tool_results=dict(reversed(list(results.items()))),
            )
        if last.role != "user":
            raise BadRequestError(
                f"messages[{len(messages) - 1}] has role {last.role!r}: the last message must be "
                "the user's new message (role 'user'), or the tool messages answering the "
                "pending tool calls (role 'tool')",
                status=422,
                code="invalid_input",
            )
        content = last.content
        where = f"messages[{len(messages) - 1}].content"
        attachments: list[Attachment] = []
        if isinstance(content, str):
            text = content
        else:
            texts: list[str] = []
            for index, part in enumerate(content):
                if part.type == "text":
                    texts.append(part.text)
                    continue
                source = part.source
                if source.type != "data":
                    raise BadRequestError(
                        f"{where}[{index}] is a {part.type} part with a {source.type!r} source; "
                        "send the bytes inline (a 'data' source): the server fetches nothing",
                        status=415,
                        code="unsupported_content",
                    )
                name = _filename(part.metadata)
                attachments.append(
                    Attachment(
                        filename=name if isinstance(name, str) else f"{part.type}-{index}",
                        media_type=source.mime_type,
                        data=decode_base64(
                            source.value, f"{where}[{index}].source.value", max_attachment_bytes
                        ),
                    )
                )
            text = "".join(texts)
        check_message_length(text, max_message_chars)
        if not text.strip() and not attachments:
            raise BadRequestError(
                f"messages[{len(messages) - 1}] has no text", status=422, code="invalid_input"
            )
        return RunRequest(
            thread_id=run_input.thread_id,
            run_id=run_input.run_id or None,
            text=text,
            attachments=attachments,
        )

    def encoder(self, *, thread_id: str, run_id: str) -> AguiEncoder:
        return AguiEncoder(thread_id=thread_id, run_id=run_id)


def _filename(metadata: object) -> object:
    """The ``filename`` a part's metadata names, if any (AG-UI leaves metadata free-form)."""
    if isinstance(metadata, Mapping):
        return cast("Mapping[str, object]", metadata).get("filename")
    return None


def _frame(event: BaseEvent) -> str:
    return event.model_dump_json(by_alias=True, exclude_none=True)


class AguiEncoder:
    """One run's events as AG-UI events (see :class:`pai.http._wire.Encoder`)."""

    def __init__(self, *, thread_id: str, run_id: str) -> None:
        self._thread_id = thread_id
        self._run_id = run_id
        self._message_id: str | None = None
        self._step_message_id: str | None = None
        """The assistant message of the current step: its tool calls belong to it."""
        self._calls: dict[int, str] = {}
        """Open tool calls of the current step, by index: their ids."""

    def start(self) -> list[str]:
        return [_frame(RunStartedEvent(thread_id=self._thread_id, run_id=self._run_id))]

    def event(self, event: RunEvent) -> list[str]:
        if isinstance(event, TextDelta):
            if not event.text:
                return []
            frames: list[str] = []
            if self._message_id is None:
                self._message_id = uuid.uuid4().hex
                self._step_message_id = self._message_id
                frames.append(
                    _frame(TextMessageStartEvent(message_id=self._message_id, role="assistant"))
                )
            frames.append(
                _frame(TextMessageContentEvent(message_id=self._message_id, delta=event.text))
            )
            return frames
        if isinstance(event, ToolCallStarted):
            frames = self._end_text()
            self._calls[event.index] = event.id
            frames.append(
                _frame(
                    ToolCallStartEvent(
                        tool_call_id=event.id,
                        tool_call_name=event.name,
                        parent_message_id=self._step_message_id,
                    )
                )
            )
            return frames
        if isinstance(event, ToolCallArgumentsDelta):
            call_id = self._calls.get(event.index)
            if call_id is None or not event.delta:
                return []
            return [_frame(ToolCallArgsEvent(tool_call_id=call_id, delta=event.delta))]
        if isinstance(event, ToolCallFinished):
            frames = []
            if event.index not in self._calls:
                # A model that sends a whole call at once: open it, with its arguments.
                self._calls[event.index] = event.call.id
                frames.append(
                    _frame(
                        ToolCallStartEvent(
                            tool_call_id=event.call.id, tool_call_name=event.call.name
                        )
                    )
                )
                arguments = _arguments_json(event.call.arguments)
                if arguments:
                    frames.append(
                        _frame(ToolCallArgsEvent(tool_call_id=event.call.id, delta=arguments))
                    )
            call_id = self._calls.pop(event.index)
            frames.append(_frame(ToolCallEndEvent(tool_call_id=call_id)))
            return frames
        if isinstance(event, ResponseFinished):
            self._step_message_id = None
            return self._end_text() + self._end_calls()
        if isinstance(event, ToolCallResult):
            # The content the model reads: a client sees exactly what the model saw.
            return [
                _frame(
                    ToolCallResultEvent(
                        message_id=uuid.uuid4().hex,
                        tool_call_id=event.tool_call_id,
                        content=event.result.content,
                        role="tool",
                    )
                )
            ]
        return []  # usage, delegated runs' events, the run's end (finish() sends it)

    def finish(self, result: RunResult) -> list[str]:
        outcome: dict[str, Any] = {"status": result.status, "steps": result.steps}
        if result.pending_tool_calls:
            outcome["pendingToolCalls"] = [call.id for call in result.pending_tool_calls]
        if result.pending_approvals:
            outcome["pendingApprovals"] = [call.id for call in result.pending_approvals]
        return [
            *self._end_text(),
            *self._end_calls(),
            _frame(
                RunFinishedEvent(thread_id=self._thread_id, run_id=self._run_id, result=outcome)
            ),
        ]

    def error(self, message: str, *, code: str) -> list[str]:
        return [
            *self._end_text(),
            *self._end_calls(),
            _frame(RunErrorEvent(message=message, code=code)),
        ]

    def _end_text(self) -> list[str]:
        if self._message_id is None:
            return []
        frame = _frame(TextMessageEndEvent(message_id=self._message_id))
        self._message_id = None
        return [frame]

    def _end_calls(self) -> list[str]:
        frames = [
            _frame(ToolCallEndEvent(tool_call_id=call_id)) for call_id in self._calls.values()
        ]
        self._calls.clear()
        return frames


def _arguments_json(arguments: object) -> str:
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, separators=(",", ":"), ensure_ascii=False)


AGUI = AguiProtocol()
"""The AG-UI protocol."""

__all__ = ["AGUI", "AguiEncoder", "AguiProtocol"]
