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
from typing import Any, Generic, NamedTuple, TypeAlias, final

from typing_extensions import TypeVar as DefaultTypeVar

from pai.core._errors import DefinitionError
from pai.core._operations import Tool

ContextT = DefaultTypeVar("ContextT", default=Any)


@dataclass(frozen=True, slots=True)
class RuntimeContextInput:
    """What an agent's ``runtime_context`` function receives, once per run.

    ``thread_id`` is the thread the run happens in (a child thread for a delegated run);
    ``agent_name`` the agent running there. The value is immutable, and consecutive runs of one
    caller in one thread may be handed the same object.
    """

    identity: object
    thread_id: str
    scope_key: str
    user_key: str | None
    agent_name: str


RuntimeContextFn: TypeAlias = Callable[[RuntimeContextInput], Any]
"""``runtime_context=``: a sync or async function of :class:`RuntimeContextInput`."""


class ToolEnabledInput(NamedTuple, Generic[ContextT]):
    """What a tool's ``enabled`` predicate receives, on every model step.

    ``runtime_context`` is this run's runtime context (``None`` when the agent has none);
    ``step`` counts the run's model steps from 1. One value serves every predicate of a step (a
    predicate is written for its tool, so it knows which one it decides).

    A named tuple rather than a frozen dataclass, because one is made on every model step and a
    tuple is made in a quarter of the time: immutable, compared by value, built with keywords
    (``ToolEnabledInput(runtime_context=..., thread_id=..., ...)``) to test a predicate, and
    derived with ``check._replace(step=2)``.
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


def _slot_setters(
    cls: type, names: tuple[str, ...]
) -> tuple[Callable[[object, object], None], ...]:
    # A slots class keeps each field in a member descriptor; its __set__ writes the slot directly
    # (no frozen __setattr__ in the way).
    return tuple(cls.__dict__[name].__set__ for name in names)


_new = object.__new__
RUN_FIELDS = ("identity", "thread_id", "scope_key", "user_key", "agent_name")
"""The fields of :class:`RuntimeContextInput`, in order, as :func:`new_runtime_context_input`
fills them."""
_RUN_SETTERS = _slot_setters(RuntimeContextInput, RUN_FIELDS)


def new_runtime_context_input(
    identity: object, thread_id: str, scope_key: str, user_key: str | None, agent_name: str
) -> RuntimeContextInput:
    """``RuntimeContextInput(...)``, made in a third of the time (once per run, on the hot path):
    the frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``."""
    run = _new(RuntimeContextInput)
    s_identity, s_thread, s_scope, s_user, s_agent = _RUN_SETTERS
    s_identity(run, identity)
    s_thread(run, thread_id)
    s_scope(run, scope_key)
    s_user(run, user_key)
    s_agent(run, agent_name)
    return run


__all__ = [
    "RUN_FIELDS",
    "ContextT",
    "EnabledFn",
    "RuntimeContextFn",
    "RuntimeContextInput",
    "ToolEnabledInput",
    "ToolEntry",
    "new_runtime_context_input",
]
