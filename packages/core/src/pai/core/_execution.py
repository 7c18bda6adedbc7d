"""Running tools and presenting them to models: results, specs, delegation input."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pydantic_core
from pydantic import BaseModel, JsonValue, ValidationError

from pai.core._agent import Agent
from pai.core._awaitables import is_awaitable
from pai.core._messages import AssistantMessage, Message, ToolCall, ToolResultMessage
from pai.core._model import ToolSpec
from pai.core._operations import Tool, ToolContext


class DelegateInput(BaseModel):
    """Input of the tool that hands a task to a subagent."""

    task: str


def tool_output_text(output: object) -> str:
    """The model-facing text of a tool's return value."""
    if isinstance(output, str):
        return output
    if isinstance(output, BaseModel):
        return output.model_dump_json()
    return pydantic_core.to_json(output).decode()


def model_text(tool: Tool[Any, Any], output: object) -> str:
    """The text the model reads for ``output`` of ``tool``: its ``to_model_text``, or the default."""
    if tool.to_model_text is None:
        return tool_output_text(output)
    text = tool.to_model_text(output)
    if not isinstance(text, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(
            f"to_model_text of tool {tool.id!r} returned {type(text).__name__}, not str"
        )
    return text


def validation_summary(error: ValidationError) -> str:
    """One line per failing field: ``path: problem``."""
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or '<input>'}: {e['msg']}" for e in error.errors()
    )


async def execute_tool(
    tool: Tool[Any, Any], ctx: ToolContext[Any], name: str
) -> tuple[ToolResultMessage, object]:
    """Run a tool's ``execute``; return the saved, model-facing result and the raw output."""
    assert tool.execute is not None
    try:
        output = tool.execute(ctx)
        if is_awaitable(output):  # awaited here: no coroutine of resolve()'s per call
            output = await output
        content = model_text(tool, output)
        jsonable: JsonValue = pydantic_core.to_jsonable_python(output)
    except Exception as error:
        failed = ToolResultMessage(
            tool_call_id=ctx.tool_call_id,
            tool_name=name,
            content=f"Error: tool {name!r} failed: {type(error).__name__}: {error}",
            is_error=True,
        )
        return failed, None
    result = ToolResultMessage(
        tool_call_id=ctx.tool_call_id, tool_name=name, content=content, output=jsonable
    )
    return result, output


def is_external(agent: Agent, name: str) -> bool:
    tool = agent.tools.get(name)
    return tool is not None and tool.execute is None


def pending_calls(history: Sequence[Message]) -> list[ToolCall]:
    answered = {m.tool_call_id for m in history if isinstance(m, ToolResultMessage)}
    for message in reversed(history):
        if isinstance(message, AssistantMessage):
            return [c for c in message.tool_calls if c.id not in answered]
    return []


def tool_specs(agent: Agent) -> list[ToolSpec]:
    specs = [
        ToolSpec(name, tool.description, tool.input_schema.model_json_schema())
        for name, tool in agent.tools.items()
    ]
    specs.extend(
        ToolSpec(
            name,
            f"Delegate a task to the {sub.name!r} agent; it answers with its final text.",
            DelegateInput.model_json_schema(),
        )
        for name, sub in agent.subagents.items()
    )
    return specs
