"""Operations: tools (the model calls them) and commands (the server calls them).

Both declare the capabilities they consume; the runtime acquires those before the body runs and
hands the facades over at ``ctx.capabilities``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, final, overload

from pydantic import BaseModel
from typing_extensions import TypeVar as DefaultTypeVar

from pai.core._capability import Capability
from pai.core._errors import DefinitionError, UndeclaredCapabilityError

F = TypeVar("F")
InputT = TypeVar("InputT", bound=BaseModel)
OutputT = TypeVar("OutputT")
ContextT = DefaultTypeVar("ContextT", default=Any)
"""The type of an agent's runtime context (see ``define_agent(runtime_context=...)``).

It defaults to ``Any``: ``ToolContext[Input]`` reads ``ctx.runtime_context`` untyped, and
``ToolContext[Input, Plan]`` types it as ``Plan``."""


@final
class Capabilities:
    """The facades one operation was given, by local name and by token.

    ``ctx.capabilities[token]`` is statically typed as the token's facade;
    ``ctx.capabilities.<local name>`` is the short spelling (typed ``Any``).
    """

    __slots__ = ("_by_id", "_by_name")

    def __init__(self, by_name: Mapping[str, object], by_id: Mapping[str, object]) -> None:
        self._by_name = by_name
        self._by_id = by_id

    def __getitem__(self, token: Capability[F]) -> F:
        try:
            facade = self._by_id[token.id]
        except KeyError:
            raise UndeclaredCapabilityError(
                f"capability {token.id!r} was not declared by this operation; add it to the "
                f"operation's capabilities={{...}} (declared: {sorted(self._by_id) or 'none'})"
            ) from None
        return facade  # type: ignore[return-value]  # the runtime checked the binding's facade

    def __getattr__(self, name: str) -> Any:
        # object.__getattribute__, not self._by_name: on an instance whose slots are not filled yet
        # (copy.copy, pickle) self._by_name would re-enter __getattr__ and recurse forever.
        by_name: Mapping[str, object] = object.__getattribute__(self, "_by_name")
        try:
            return by_name[name]
        except KeyError:
            raise AttributeError(
                f"no capability named {name!r} on this operation; declared names: "
                f"{sorted(by_name) or 'none'}"
            ) from None

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)

    def __repr__(self) -> str:
        return f"Capabilities({sorted(self._by_name)})"


EMPTY_CAPABILITIES = Capabilities({}, {})


@dataclass(frozen=True, slots=True)
class ToolContext(Generic[InputT, ContextT]):
    """What a tool's ``execute`` receives.

    ``runtime_context`` is the value the agent's ``runtime_context`` function computed for this
    run (``None`` when the agent has none); annotate ``ctx: ToolContext[Input, Plan]`` to type it.
    """

    input: InputT
    capabilities: Capabilities
    thread_id: str
    tool_call_id: str
    scope_key: str
    user_key: str | None
    identity: object
    runtime_context: ContextT = None  # pyright: ignore[reportAssignmentType]  # None when unset
    durable_call_id: str | None = None
    """In a durable run, this call's id: the same every time the run is replayed after a crash
    (``tool_call_id`` is the model's, which need not be). Key a side effect outside PAI by it
    to make it happen once; ``None`` outside durable runs."""


@dataclass(frozen=True, slots=True)
class CommandContext(Generic[InputT, ContextT]):
    """What a command's ``run`` receives: trusted identity, the scoped facades, and the runtime
    context the agent computed for this call (``None`` when the agent has none)."""

    input: InputT
    capabilities: Capabilities
    thread_id: str
    scope_key: str
    user_key: str | None
    identity: object
    runtime_context: ContextT = None  # pyright: ignore[reportAssignmentType]  # None when unset


@final
@dataclass(frozen=True, eq=False, slots=True)
class Tool(Generic[InputT, OutputT]):
    """A tool the model can call. Make one with :func:`define_tool`."""

    id: str
    description: str
    input_schema: type[InputT]
    capabilities: Mapping[str, Capability[object]]
    execute: Callable[[ToolContext[InputT, Any]], Awaitable[OutputT] | OutputT] | None
    to_model_text: Callable[[OutputT], str] | None = None
    needs_approval: bool = False
    """Whether a human approves each call before it runs (see :class:`ToolApproval`)."""


class ToolApproval(BaseModel, frozen=True, extra="forbid"):
    """A human's answer to a call of a tool defined with ``needs_approval=True``.

    Pass it to ``thread.submit_tool_results({call_id: ToolApproval(approved=True)})``, next to
    the results of any external calls of the same step. An approved call runs then (once); a
    denied one is answered with an error the model reads, ``reason`` appended when given. Over
    HTTP, or from JSON, send the object ``{"approved": true, "reason": "..."}`` instead.
    """

    approved: bool
    """Whether the call may run."""
    reason: str | None = None
    """Why (the model reads it when the call is denied)."""


@final
@dataclass(frozen=True, eq=False, slots=True)
class Command(Generic[InputT, OutputT]):
    """A server-side command. Make one with :func:`define_command`."""

    input: type[InputT]
    capabilities: Mapping[str, Capability[object]]
    run: Callable[[CommandContext[InputT, Any]], Awaitable[OutputT] | OutputT]
    description: str | None


def _check_capabilities(
    owner: str, capabilities: Mapping[str, Capability[object]] | None
) -> dict[str, Capability[object]]:
    if capabilities is None:
        return {}
    if not isinstance(capabilities, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise DefinitionError(
            f"{owner}: capabilities must be a mapping of local name to token, e.g. "
            f"capabilities={{'sandbox': sandbox}}; got {capabilities!r}"
        )
    checked: dict[str, Capability[object]] = {}
    for name, token in capabilities.items():
        if not isinstance(name, str) or not name.isidentifier():  # pyright: ignore[reportUnnecessaryIsInstance]
            raise DefinitionError(
                f"{owner}: capability name {name!r} must be a Python identifier, since the "
                "operation reads it as ctx.capabilities.<name>"
            )
        if not isinstance(token, Capability):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise DefinitionError(
                f"{owner}: capabilities[{name!r}] must be a token from define_capability(), "
                f"got {token!r}"
            )
        checked[name] = token
    ids = [t.id for t in checked.values()]
    duplicated = sorted({i for i in ids if ids.count(i) > 1})
    if duplicated:
        raise DefinitionError(
            f"{owner}: capability id(s) {duplicated} are declared under more than one local name; "
            "declare each capability once"
        )
    return checked


def _check_model(owner: str, what: str, value: object) -> None:
    if not (isinstance(value, type) and issubclass(value, BaseModel)):
        raise DefinitionError(
            f"{owner}: {what} must be a pydantic BaseModel subclass, got {value!r}; "
            "e.g. class Input(BaseModel): command: str"
        )


@overload
def define_tool(
    *,
    id: str,
    description: str,
    input_schema: type[InputT],
    execute: Callable[[ToolContext[InputT, Any]], Awaitable[OutputT]],
    capabilities: Mapping[str, Capability[object]] | None = None,
    to_model_text: Callable[[OutputT], str] | None = None,
    needs_approval: bool = False,
) -> Tool[InputT, OutputT]: ...
@overload
def define_tool(
    *,
    id: str,
    description: str,
    input_schema: type[InputT],
    execute: Callable[[ToolContext[InputT, Any]], OutputT],
    capabilities: Mapping[str, Capability[object]] | None = None,
    to_model_text: Callable[[OutputT], str] | None = None,
    needs_approval: bool = False,
) -> Tool[InputT, OutputT]: ...
@overload
def define_tool(
    *,
    id: str,
    description: str,
    input_schema: type[InputT],
    execute: None = None,
    capabilities: None = None,
) -> Tool[InputT, None]: ...
def define_tool(
    *,
    id: str,
    description: str,
    input_schema: type[InputT],
    execute: Callable[[ToolContext[InputT, Any]], Any] | None = None,
    capabilities: Mapping[str, Capability[object]] | None = None,
    to_model_text: Callable[[Any], str] | None = None,
    needs_approval: bool = False,
) -> Tool[InputT, Any]:
    """Define a tool the model can call.

    ``capabilities`` maps local names to tokens; the facades arrive at ``ctx.capabilities.<name>``
    and ``ctx.capabilities[token]``. A tool without ``execute`` is answered outside the runtime
    (external output) and so cannot declare capabilities.

    What ``execute`` returns is saved in the thread twice: as JSON (the tool result's ``output``)
    and as the text the model reads (its ``content``). That text is the value itself for a
    ``str``, its JSON otherwise, or what ``to_model_text(output)`` returns: give it when the
    model should read something other than the structured result (a rendered document, say).
    Replays read the saved text; ``to_model_text`` raising or returning a non-``str`` is a
    failure of the tool call.

    With ``needs_approval=True`` a call the model makes is not run until a human approves it:
    the run ends with status ``"awaiting_approval"`` and the call among its
    ``pending_approvals``; answer it with ``thread.submit_tool_results({call_id:
    ToolApproval(approved=True)})`` (the call then runs) or ``approved=False`` (the model reads
    that the user denied it). Only a tool with ``execute`` can need approval.

    Example::

        class RunScriptInput(BaseModel):
            command: str

        run_script = define_tool(
            id="runScript",
            description="Run a command in this conversation's sandbox.",
            input_schema=RunScriptInput,
            capabilities={"sandbox": sandbox},
            execute=lambda ctx: ctx.capabilities.sandbox.run_command(ctx.input.command),
        )
    """
    owner = f"tool {id!r}"
    if not isinstance(id, str) or not id:  # pyright: ignore[reportUnnecessaryIsInstance]
        raise DefinitionError(f"define_tool(id=...) must be a non-empty string, got {id!r}")
    _check_model(owner, "input_schema", input_schema)
    declared = _check_capabilities(owner, capabilities)
    if execute is None and declared:
        raise DefinitionError(
            f"{owner} declares capabilities {sorted(declared)} but has no execute; facades exist "
            "only for tools the runtime executes, so add execute=... or drop capabilities"
        )
    if execute is not None and not callable(execute):
        raise DefinitionError(f"{owner}: execute must be callable, got {execute!r}")
    if needs_approval and execute is None:
        raise DefinitionError(
            f"{owner} has needs_approval=True but no execute: a tool without execute is already "
            "answered outside the runtime, so add execute=... (run once approved) or drop "
            "needs_approval"
        )
    if to_model_text is not None and not callable(to_model_text):
        raise DefinitionError(
            f"{owner}: to_model_text must be a function of the tool's output returning the text "
            f"the model reads, got {to_model_text!r}"
        )
    return Tool(
        id=id,
        description=description,
        input_schema=input_schema,
        capabilities=declared,
        execute=execute,
        to_model_text=to_model_text,
        needs_approval=bool(needs_approval),
    )


@overload
def define_command(
    *,
    input: type[InputT],
    run: Callable[[CommandContext[InputT, Any]], Awaitable[OutputT]],
    capabilities: Mapping[str, Capability[object]] | None = None,
    description: str | None = None,
) -> Command[InputT, OutputT]: ...
@overload
def define_command(
    *,
    input: type[InputT],
    run: Callable[[CommandContext[InputT, Any]], OutputT],
    capabilities: Mapping[str, Capability[object]] | None = None,
    description: str | None = None,
) -> Command[InputT, OutputT]: ...
def define_command(
    *,
    input: type[InputT],
    run: Callable[[CommandContext[InputT, Any]], Any],
    capabilities: Mapping[str, Capability[object]] | None = None,
    description: str | None = None,
) -> Command[InputT, Any]:
    """Define a server-side command; its name is its key in ``define_agent(commands=...)``.

    Example::

        reset_workspace = define_command(
            input=NoInput,
            capabilities={"sandbox": sandbox},
            run=lambda ctx: ctx.capabilities.sandbox.reset(),
        )
        await runtime.admin(identity=me).thread(thread_id).commands.reset_workspace({})
    """
    owner = "command"
    _check_model(owner, "input", input)
    declared = _check_capabilities(owner, capabilities)
    if not callable(run):
        raise DefinitionError(f"define_command(run=...) must be callable, got {run!r}")
    return Command(input=input, capabilities=declared, run=run, description=description)
