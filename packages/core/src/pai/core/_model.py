"""The model protocol: messages and tool specs in, text and/or tool calls out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from pydantic import JsonValue

from pai.core._messages import AssistantMessage, Message
from pai.core._messages import AssistantMessage as ModelResponse

__all__ = ["Model", "ModelRequest", "ModelResponse", "ToolSpec"]


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


@runtime_checkable
class Model(Protocol):
    """A language model. Adapters for real providers implement this one method.

    Example::

        class EchoModel:
            async def request(self, request: ModelRequest) -> AssistantMessage:
                return AssistantMessage(content=str(request.messages[-1]))
    """

    async def request(self, request: ModelRequest) -> AssistantMessage:
        """Answer with text, tool calls, or both. An answer without tool calls ends the run."""
        ...
