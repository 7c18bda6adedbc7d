"""What a streamed run yields: the model's events as they arrive, tool results, delegated runs'
events, and the end of the run.

``async for event in thread.stream("...")`` yields, step by step::

    (TextDelta | ToolCallStarted | ToolCallArgumentsDelta | ToolCallFinished | UsageReported)*
    ResponseFinished                       the model's answer of this step is complete
    (ToolCallResult | DelegatedRunEvent)*  tool results in call order, after every call ran;
                                           a delegated run's events while it runs
    ... the next step ...
    RunFinished                            the last event: the run's RunResult

The model events are the model protocol's own (:mod:`pai.core._model`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

from pai.core._messages import ToolResultMessage
from pai.core._model import ModelEvent

if TYPE_CHECKING:
    from pai.core._admin import RunResult


@dataclass(frozen=True, slots=True)
class ToolCallResult:
    """A tool call's result, as the thread stores it (``result.is_error`` for a failed call)."""

    result: ToolResultMessage

    @property
    def tool_call_id(self) -> str:
        """The id of the call this answers."""
        return self.result.tool_call_id

    @property
    def tool_name(self) -> str:
        """The tool's name as the model called it."""
        return self.result.tool_name


@dataclass(frozen=True, slots=True)
class DelegatedRunEvent:
    """An event of a run delegated to a subagent: ``event`` happened in the child thread
    ``thread_id`` (agent ``agent_name``), for the parent's tool call ``tool_call_id``."""

    tool_call_id: str
    thread_id: str
    agent_name: str
    event: RunEvent


@dataclass(frozen=True, slots=True)
class RunFinished:
    """The run ended; ``result`` is what ``send`` would have returned."""

    result: RunResult


RunEvent: TypeAlias = ModelEvent | ToolCallResult | DelegatedRunEvent | RunFinished
"""Any event a streamed run yields (see the module docstring for their order)."""


__all__ = ["DelegatedRunEvent", "RunEvent", "RunFinished", "ToolCallResult"]
