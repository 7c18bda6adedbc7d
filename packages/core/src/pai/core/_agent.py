"""Agents: a model, instructions, tools, commands and subagents, with their inferred requirements."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeAlias, final

from pai.core._capability import Capability, facade_name, same_facade
from pai.core._context import ContextT, EnabledFn, RuntimeContextFn, ToolEntry
from pai.core._errors import CapabilityConflictError, DefinitionError
from pai.core._model import Model
from pai.core._operations import Command, Tool


@dataclass(frozen=True, slots=True)
class InstructionsInput(Generic[ContextT]):
    """What an instructions function receives for each run.

    ``runtime_context`` is the value the agent's ``runtime_context`` function computed for this
    run (``None`` when the agent has none); annotate ``InstructionsInput[Plan]`` to type it.
    """

    thread_id: str
    scope_key: str
    identity: object
    user_key: str | None = None
    runtime_context: ContextT = None  # pyright: ignore[reportAssignmentType]  # None when unset


Instructions: TypeAlias = str | Callable[[InstructionsInput[Any]], str | Awaitable[str]]
"""An agent's instructions: fixed text, or a sync or async function of each run's input."""


@dataclass(frozen=True, slots=True)
class Requirement:
    """One capability an agent needs, and the operations that declared it."""

    capability: Capability[object]
    declared_by: tuple[str, ...]


@final
@dataclass(frozen=True, eq=False)
class Agent:
    """An agent definition. Make one with :func:`define_agent`.

    ``requirements`` is the id-keyed map of every capability its tools, commands and subagents
    declare: exactly the ids a runtime must bind. ``tools`` maps each tool name to its tool;
    ``tool_enabled`` holds the ``enabled`` predicate of each tool given as a :class:`ToolEntry`
    with one (a tool without one is always offered).
    """

    name: str
    model: Model | str | None
    """A model, a ``"<provider>:<name>"`` the runtime resolves through the plugins, or ``None``
    for the ``[model]`` of the configuration."""
    instructions: Instructions
    tools: Mapping[str, Tool[Any, Any]]
    commands: Mapping[str, Command[Any, Any]]
    subagents: Mapping[str, Agent]
    max_steps: int
    max_tool_calls_per_step: int
    """Tool calls of one answer that run; the rest are refused as tool errors."""
    max_parallel_tool_calls: int
    """Tool calls of one step running at the same time."""
    tool_enabled: Mapping[str, EnabledFn[Any]]
    runtime_context: RuntimeContextFn | None
    requirements: Mapping[str, Requirement] = field(repr=False)

    @property
    def tool_entries(self) -> dict[str, Tool[Any, Any] | ToolEntry[Any]]:
        """The ``tools=`` mapping as given: a :class:`ToolEntry` where a predicate was set."""
        return {
            name: ToolEntry(tool=tool, enabled=self.tool_enabled[name])
            if name in self.tool_enabled
            else tool
            for name, tool in self.tools.items()
        }

    def with_model(self, model: Model) -> Agent:
        """A copy of this agent using ``model`` (tests swap in a scripted model this way)."""
        return define_agent(
            name=self.name,
            model=model,
            instructions=self.instructions,
            tools=self.tool_entries,
            commands=self.commands,
            subagents=self.subagents,
            max_steps=self.max_steps,
            max_tool_calls_per_step=self.max_tool_calls_per_step,
            max_parallel_tool_calls=self.max_parallel_tool_calls,
            runtime_context=self.runtime_context,
        )


def _fold(into: dict[str, Requirement], capability: Capability[object], operation: str) -> None:
    existing = into.get(capability.id)
    if existing is None:
        into[capability.id] = Requirement(capability, (operation,))
        return
    if not (
        same_facade(existing.capability.facade, capability.facade)
        and same_facade(capability.facade, existing.capability.facade)
    ):
        raise CapabilityConflictError(
            f"capability id {capability.id!r} is declared with two facade types: "
            f"{facade_name(existing.capability.facade)} by {existing.declared_by[0]} and "
            f"{facade_name(capability.facade)} by {operation}; one id must mean one facade, so "
            "import the same token in both or give one of them another id"
        )
    into[capability.id] = Requirement(existing.capability, (*existing.declared_by, operation))


def define_agent(
    *,
    name: str,
    model: Model | str | None = None,
    instructions: Instructions = "",
    tools: Mapping[str, Tool[Any, Any] | ToolEntry[Any]] | None = None,
    commands: Mapping[str, Command[Any, Any]] | None = None,
    subagents: Mapping[str, Agent] | None = None,
    max_steps: int = 20,
    runtime_context: RuntimeContextFn | None = None,
    max_tool_calls_per_step: int = 64,
    max_parallel_tool_calls: int = 8,
) -> Agent:
    """Define an agent; its capability requirements are inferred from what its operations declare.

    Each key of ``tools`` is the tool's name as the model sees it, and each value a tool or a
    :class:`ToolEntry` whose ``enabled`` predicate decides on every model step whether the model
    is offered the tool; each key of ``commands`` is the command's name at
    ``runtime.admin(...).thread(...).commands.<name>``; each key of ``subagents`` becomes a tool
    that delegates a task to that agent in a child thread.

    ``model`` is a model object, or a name ``"<provider>:<model>"`` (``"openai:gpt-4.1-mini"``)
    that the runtime resolves when it is built, through the model provider an installed plugin
    registers (options from ``[model.<provider>]`` of the configuration); without one, the
    runtime uses the ``[model]`` of the configuration.

    ``runtime_context`` (sync or async, given a :class:`RuntimeContextInput`) computes app data
    once per run: each ``send``, each ``submit_tool_results``, each delegated run of this agent
    and each command call. Its value reaches the instructions function
    (``InstructionsInput.runtime_context``), every tool and command (``ctx.runtime_context``) and
    every ``enabled`` predicate. If it raises, the run fails with
    :class:`~pai.core.RuntimeContextError` and the thread records the error and nothing else.
    A subagent uses its own ``runtime_context`` (``None`` without one).

    One answer of the model cannot flood the runtime: of its tool calls, the first
    ``max_tool_calls_per_step`` (64) are handled and each call past them gets an error result the
    model sees (stored in the thread like any tool error) naming the cap; at most
    ``max_parallel_tool_calls`` (8) of them run at the same time, the others waiting their turn
    in the answer's order. ``max_steps`` bounds the steps of a run.

    Example::

        agent = define_agent(
            name="coder",
            model=model,
            instructions="You write and run code.",
            tools={"runScript": run_script},
            commands={"reset_workspace": reset_workspace},
        )
        agent.requirements["sandbox"].declared_by  # ("tool 'runScript'", "command 'reset_workspace'")
    """
    entries = dict(tools or {})
    commands = dict(commands or {})
    subagents = dict(subagents or {})
    if not isinstance(name, str) or not name:  # pyright: ignore[reportUnnecessaryIsInstance]
        raise DefinitionError(f"define_agent(name=...) must be a non-empty string, got {name!r}")
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:  # pyright: ignore[reportUnnecessaryIsInstance]
        raise DefinitionError(
            f"agent {name!r}: max_steps must be a positive int, got {max_steps!r}"
        )
    for option, value in (
        ("max_tool_calls_per_step", max_tool_calls_per_step),
        ("max_parallel_tool_calls", max_parallel_tool_calls),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise DefinitionError(f"agent {name!r}: {option} must be a positive int, got {value!r}")
    if isinstance(model, type):  # a class passes the Protocol check (it has .request): catch it
        raise DefinitionError(
            f"agent {name!r}: model {model!r} is a class; pass an instance, "
            f"e.g. model={model.__name__}(...)"
        )
    if isinstance(model, str):
        provider, colon, model_name = model.partition(":")
        if not colon or not provider.strip() or not model_name.strip():
            raise DefinitionError(
                f"agent {name!r}: model {model!r} is not '<provider>:<model name>'; write it as, "
                "e.g., 'openai:gpt-4.1-mini', or pass a model object"
            )
    elif model is not None and not isinstance(model, Model):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise DefinitionError(
            f"agent {name!r}: model {model!r} has no async request(ModelRequest) method; "
            "pass a Model, a name such as 'openai:gpt-4.1-mini', or, for tests, "
            "pai.core.testing.ScriptedModel"
        )
    if runtime_context is not None and not callable(runtime_context):
        raise DefinitionError(
            f"agent {name!r}: runtime_context must be a function of RuntimeContextInput "
            f"(sync or async), got {runtime_context!r}"
        )
    by_name: dict[str, Tool[Any, Any]] = {}
    tool_enabled: dict[str, EnabledFn[Any]] = {}
    for key, entry in entries.items():
        if isinstance(entry, ToolEntry):
            by_name[key] = entry.tool
            if entry.enabled is not None:
                tool_enabled[key] = entry.enabled
        elif isinstance(entry, Tool):  # pyright: ignore[reportUnnecessaryIsInstance]
            by_name[key] = entry
        else:
            raise DefinitionError(
                f"agent {name!r}: tools[{key!r}] must come from define_tool() or be a "
                f"ToolEntry(tool=..., enabled=...), got {entry!r}"
            )
    for key, command in commands.items():
        if not isinstance(command, Command):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise DefinitionError(
                f"agent {name!r}: commands[{key!r}] must come from define_command(), got {command!r}"
            )
        if not key.isidentifier():
            raise DefinitionError(
                f"agent {name!r}: command name {key!r} must be a Python identifier, since it is "
                "called as .commands.<name>(...)"
            )
    for key, sub in subagents.items():
        if not isinstance(sub, Agent):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise DefinitionError(
                f"agent {name!r}: subagents[{key!r}] must come from define_agent(), got {sub!r}"
            )
        if key in by_name:
            raise DefinitionError(
                f"agent {name!r}: {key!r} names both a tool and a subagent; the model calls both "
                "by name, so rename one"
            )

    requirements: dict[str, Requirement] = {}
    for key, tool in by_name.items():
        for token in tool.capabilities.values():
            _fold(requirements, token, f"tool {key!r}")
    for key, command in commands.items():
        for token in command.capabilities.values():
            _fold(requirements, token, f"command {key!r}")
    for key, sub in subagents.items():
        for requirement in sub.requirements.values():
            for origin in requirement.declared_by:
                _fold(requirements, requirement.capability, f"subagent {key!r} {origin}")
    return Agent(
        name=name,
        model=model,
        instructions=instructions,
        tools=by_name,
        commands=commands,
        subagents=subagents,
        max_steps=max_steps,
        max_tool_calls_per_step=max_tool_calls_per_step,
        max_parallel_tool_calls=max_parallel_tool_calls,
        tool_enabled=tool_enabled,
        runtime_context=runtime_context,
        requirements=requirements,
    )
