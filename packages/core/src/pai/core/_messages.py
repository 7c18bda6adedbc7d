"""The conversation record: what a thread stores and what a model reads.

Messages are pydantic models with a ``role`` discriminator, so storage can save them as JSON and read
them back into the right class with :data:`message_adapter`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, TypeAdapter


class _Frozen(BaseModel):
    model_config: ClassVar[ConfigDict] = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class ToolCall(_Frozen):
    """A model's request to run one tool.

    Example::

        ToolCall(id="call-1", name="runScript", arguments={"command": "echo hi"})
    """

    id: str
    name: str
    arguments: Mapping[str, JsonValue] = Field(default_factory=dict[str, JsonValue])


class UserMessage(_Frozen):
    """Text from the person (or the delegating agent) talking to the agent."""

    role: Literal["user"] = "user"
    content: str


class AssistantMessage(_Frozen):
    """What the model said in one step: text, tool calls, or both."""

    role: Literal["assistant"] = "assistant"
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()


class ToolResultMessage(_Frozen):
    """The saved result of one tool call; replay reads this instead of running the tool again.

    ``content`` is the model-facing text; ``output`` is the tool's return value as JSON, when it
    succeeded.
    """

    role: Literal["tool"] = "tool"
    tool_call_id: str
    tool_name: str
    content: str
    output: JsonValue = None
    is_error: bool = False


class ErrorMessage(_Frozen):
    """A failure recorded in the thread (a failed model call, a step limit). Models never see it."""

    role: Literal["error"] = "error"
    source: str
    error_type: str
    message: str


Message = Annotated[
    UserMessage | AssistantMessage | ToolResultMessage | ErrorMessage,
    Field(discriminator="role"),
]
"""Any message a thread can hold."""

message_adapter: TypeAdapter[Message] = TypeAdapter(Message)
"""Validates and serializes :data:`Message` values (``message_adapter.dump_json(m)``)."""
