"""Models for tests: a scripted one that replays answers, and one backed by a function."""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TypeAlias

from pydantic import JsonValue

from pai.core._awaitables import resolve
from pai.core._messages import AssistantMessage, ToolCall
from pai.core._model import ModelRequest

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


ScriptStep: TypeAlias = AssistantMessage | Callable[[ModelRequest], AssistantMessage]


class ScriptExhaustedError(AssertionError):
    """A scripted model was asked for more answers than its script has."""


class ScriptedModel:
    """A model that answers from a script, one entry per request; records every request.

    This is a test double, not a language model: it never looks at the conversation unless a
    script entry is a function of the request.

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

    async def request(self, request: ModelRequest) -> AssistantMessage:
        index = len(self.requests)
        self.requests.append(request)
        if index >= len(self._script):
            raise ScriptExhaustedError(
                f"ScriptedModel was asked for answer #{index + 1} but its script has "
                f"{len(self._script)}; add answers to the script"
            )
        step = self._script[index]
        return step if isinstance(step, AssistantMessage) else step(request)


class FunctionModel:
    """A model whose answers come from a function of the request (sync or async).

    Example::

        def echo(request: ModelRequest) -> AssistantMessage:
            return text(f"you said {request.messages[-1].content}")

        model = FunctionModel(echo)
    """

    def __init__(
        self, fn: Callable[[ModelRequest], AssistantMessage | Awaitable[AssistantMessage]]
    ) -> None:
        self._fn = fn
        self.requests: list[ModelRequest] = []

    async def request(self, request: ModelRequest) -> AssistantMessage:
        self.requests.append(request)
        return await resolve(self._fn(request))
