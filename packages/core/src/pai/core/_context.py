"""Per-run app data and per-request tool availability.

An agent's ``runtime_context`` function computes app data once per run (each ``send``, each
``submit_tool_results``, each delegated run, each command call); the value reaches the
instructions function, every tool and command context, and every tool's ``enabled`` predicate.

A tools entry of :func:`~pai.core.define_agent` is a :class:`~pai.core.Tool` or a
:class:`ToolEntry` pairing a tool with an ``enabled`` predicate, evaluated on every model step: a
disabled tool is not offered to the model, and a call to it is answered "not available" without
acquiring any capability.

Cancellation reaches these functions the anyio way: they run inside the run's task, so when the
run is cancelled (its thread deleted, its caller cancelled) the ``await`` they are suspended in
raises the backend's cancellation exception. No signal argument is needed; a function that must
clean up uses ``try/finally`` (or an ``anyio.CancelScope(shield=True)`` for async cleanup).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeAlias, final

from typing_extensions import TypeVar as DefaultTypeVar

from pai.core._errors import DefinitionError
from pai.core._operations import Tool

ContextT = DefaultTypeVar("ContextT", default=Any)


@dataclass(frozen=True, slots=True)
class RuntimeContextInput:
    """What an agent's ``runtime_context`` function receives, once per run.

    ``thread_id`` is the thread the run happens in (a child thread for a delegated run);
    ``agent_name`` the agent running there.
    """

    identity: object
    thread_id: str
    scope_key: str
    user_key: str | None
    agent_name: str


RuntimeContextFn: TypeAlias = Callable[[RuntimeContextInput], Any]
"""``runtime_context=``: a sync or async function of :class:`RuntimeContextInput`."""


@dataclass(frozen=True, slots=True)
class ToolEnabledInput(Generic[ContextT]):
    """What a tool's ``enabled`` predicate receives, on every model step.

    ``runtime_context`` is this run's runtime context (``None`` when the agent has none);
    ``step`` counts the run's model steps from 1. One value serves every predicate of a step (a
    predicate is written for its tool, so it knows which one it decides).
    """

    runtime_context: ContextT
    thread_id: str
    scope_key: str
    user_key: str | None
    identity: object
    agent_name: str
    step: int


EnabledFn: TypeAlias = Callable[[ToolEnabledInput[ContextT]], "bool | Awaitable[bool]"]
"""A tool's ``enabled`` predicate: sync or async, ``True`` to offer the tool on this step."""


@final
@dataclass(frozen=True, slots=True)
class ToolEntry(Generic[ContextT]):
    """A tool with a predicate deciding, per model step, whether the model is offered it.

    Example::

        def enterprise_only(s: ToolEnabledInput[Plan]) -> bool:
            return s.runtime_context.tier == "enterprise"

        agent = define_agent(
            name="clerk",
            runtime_context=lambda run: Plan(tier=lookup_tier(run.identity)),
            tools={"intake": ToolEntry(tool=intake, enabled=enterprise_only), "search": search},
        )
    """

    tool: Tool[Any, Any]
    enabled: EnabledFn[ContextT] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.tool, Tool):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise DefinitionError(
                f"ToolEntry(tool=...) must come from define_tool(), got {self.tool!r}"
            )
        if self.enabled is not None and not callable(self.enabled):
            raise DefinitionError(
                f"ToolEntry for tool {self.tool.id!r}: enabled must be a function of "
                f"ToolEnabledInput returning a bool (or None to always offer it), got "
                f"{self.enabled!r}"
            )


__all__ = [
    "ContextT",
    "EnabledFn",
    "RuntimeContextFn",
    "RuntimeContextInput",
    "ToolEnabledInput",
    "ToolEntry",
]
