"""The agent runtime: binds capabilities, runs operations and the agent loop, owns lifecycle."""

from __future__ import annotations

import contextlib
import inspect
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from types import GeneratorType, TracebackType
from typing import Any, Literal, Self, TypeVar, cast

import anyio
import pydantic_core
from pydantic import BaseModel, JsonValue, ValidationError

from pai.core._agent import Agent, InstructionsInput, Requirement
from pai.core._binding import AcquireInput, CapabilityBinding, DisposeInput, ScopeLabel
from pai.core._capability import Capability, facade_name, same_facade
from pai.core._errors import (
    CapabilityAcquireError,
    CapabilityBindingError,
    CommandInputError,
    DefinitionError,
    RuntimeClosedError,
    StepLimitExceededError,
    ThreadDeletedError,
    ThreadNotFoundError,
    UnknownCommandError,
)
from pai.core._lifecycle import (
    ActiveWork,
    OnRuntimeError,
    RootCache,
    RuntimeErrorEvent,
    RuntimeErrorSource,
)
from pai.core._messages import (
    AssistantMessage,
    ErrorMessage,
    Message,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from pai.core._model import Model, ModelRequest, ToolSpec
from pai.core._operations import (
    EMPTY_CAPABILITIES,
    Capabilities,
    CommandContext,
    Tool,
    ToolContext,
)
from pai.core._scope import CapabilityScopeInput, ScopeKind, instance_key
from pai.core._storage import Storage, ThreadRecord

T = TypeVar("T")
_log = logging.getLogger("pai.core")

ScopeKeyFn = Callable[[Any], str]
UserKeyFn = Callable[[Any], "str | None"]


class DelegateInput(BaseModel):
    """Input of the tool that hands a task to a subagent."""

    task: str


@dataclass(frozen=True, slots=True)
class RunResult:
    """What one agent run produced.

    ``status`` is ``"completed"`` when the model answered without tool calls, or
    ``"awaiting_tool_results"`` when it called tools that run outside the runtime (tools defined
    without ``execute``): answer them with :meth:`ThreadHandle.submit_tool_results`.
    """

    thread_id: str
    status: Literal["completed", "awaiting_tool_results"]
    text: str | None
    messages: Sequence[Message]
    steps: int
    pending_tool_calls: Sequence[ToolCall] = ()


@dataclass(frozen=True, slots=True)
class _Caller:
    identity: object
    scope_key: str
    user_key: str | None


def _is_awaitable(value: object) -> bool:
    # A class-level lookup is several times cheaper than inspect.isawaitable's ABC check, and this
    # runs on every acquire; generator-based coroutines still go through inspect.
    return hasattr(type(value), "__await__") or (
        isinstance(value, GeneratorType) and inspect.isawaitable(cast(object, value))
    )


def maybe_await(value: T | Awaitable[T]) -> Awaitable[T] | None:
    """``value`` if it is awaitable, else ``None``."""
    return cast("Awaitable[T]", value) if _is_awaitable(value) else None


async def resolve(value: T | Awaitable[T]) -> T:
    """Await ``value`` if it is awaitable; return it otherwise."""
    if _is_awaitable(value):
        return await cast("Awaitable[T]", value)
    return cast("T", value)


def tool_output_text(output: object) -> str:
    """The model-facing text of a tool's return value."""
    if isinstance(output, str):
        return output
    if isinstance(output, BaseModel):
        return output.model_dump_json()
    return pydantic_core.to_json(output).decode()


def validation_summary(error: ValidationError) -> str:
    """One line per failing field: ``path: problem``."""
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or '<input>'}: {e['msg']}" for e in error.errors()
    )


def _check_key(value: object, option: str) -> str:
    if not isinstance(value, str) or not value:
        raise CapabilityBindingError(
            f"{option} returned {value!r}; it must return a non-empty string key"
        )
    return value


def validate_binding_record(
    requirements: Mapping[str, Requirement], capabilities: Mapping[str, object]
) -> dict[str, CapabilityBinding[object]]:
    """Check a binding record against an agent's requirements; report every problem at once."""
    problems: list[tuple[str, str]] = []
    for cap_id in requirements.keys() - capabilities.keys():
        declared = ", ".join(requirements[cap_id].declared_by)
        problems.append(
            (
                cap_id,
                f"{cap_id!r} is not bound (declared by {declared}); add capabilities="
                f"{{{cap_id!r}: <binding>}}",
            )
        )
    bindings: dict[str, CapabilityBinding[object]] = {}
    for cap_id, value in capabilities.items():
        requirement = requirements.get(cap_id)
        binding = cast("CapabilityBinding[object]", value)
        if requirement is None:
            problems.append(
                (
                    cap_id,
                    f"{cap_id!r} is bound but no tool or command of the agent declares it; "
                    "remove it from capabilities=",
                )
            )
        elif not isinstance(value, CapabilityBinding):
            problems.append(
                (
                    cap_id,
                    f"{cap_id!r} is bound to {value!r}, which is not a capability binding; "
                    "use create_capability_binding() or a capability package's factory",
                )
            )
        elif binding.capability.id != cap_id:
            problems.append(
                (
                    cap_id,
                    f"{cap_id!r} is bound to a binding for capability "
                    f"{binding.capability.id!r}; bind a binding made for {cap_id!r}",
                )
            )
        elif not same_facade(requirement.capability.facade, binding.capability.facade):
            problems.append(
                (
                    cap_id,
                    f"{cap_id!r} is bound to a binding whose facade is "
                    f"{facade_name(binding.capability.facade)}, but the agent's operations need "
                    f"{facade_name(requirement.capability.facade)}; bind a binding made with "
                    f"the token the operations declare (or one whose facade is a subclass of "
                    f"{facade_name(requirement.capability.facade)})",
                )
            )
        else:
            bindings[cap_id] = binding
    if problems:
        problems.sort()
        lines = "\n".join(f"  - {text}" for _, text in problems)
        raise CapabilityBindingError(
            f"the capability bindings do not match what the agent needs:\n{lines}",
            ids=sorted({cap_id for cap_id, _ in problems}),
        )
    return bindings


class AgentRuntime:
    """Runs one agent: its threads, operations, capability lifecycle and shutdown.

    Make one with :func:`create_agent_runtime`; use it as ``async with`` or call :meth:`aclose`.
    """

    def __init__(
        self,
        *,
        agent: Agent,
        storage: Storage,
        scope_key: ScopeKeyFn,
        user_key: UserKeyFn | None,
        bindings: Mapping[str, CapabilityBinding[object]],
        on_runtime_error: OnRuntimeError | None,
        settlement_window: float,
        owns_storage: bool,
    ) -> None:
        self.agent = agent
        self.storage = storage
        self._scope_key = scope_key
        self._user_key = user_key
        self.bindings: Mapping[str, CapabilityBinding[object]] = bindings
        self._on_runtime_error = on_runtime_error
        self.settlement_window = settlement_window
        self._owns_storage = owns_storage
        self._closed = False
        self._work = ActiveWork()
        self._roots = RootCache()
        self._agents_by_name = _index_agents(agent)

    # -- public surface ---------------------------------------------------------------------

    def admin(self, *, identity: object) -> AdminClient:
        """Server-side access for ``identity``: create threads, run the agent, call commands.

        Example::

            thread = await runtime.admin(identity=user).create_thread()
            result = await thread.send("list the files")
            await runtime.admin(identity=user).thread(thread.id).commands.reset_workspace({})
        """
        scope_key = _check_key(self._scope_key(identity), "scope_key")
        user_key: str | None = None
        if self._user_key is not None:
            raw = self._user_key(identity)
            user_key = None if raw is None else _check_key(raw, "user_key")
        return AdminClient(self, _Caller(identity, scope_key, user_key))

    async def aclose(self) -> None:
        """Await every binding's ``close()``, then close storage (if this runtime owns it).

        Close releases local resources only; durable state (containers, files) stays.
        """
        if self._closed:
            return
        self._closed = True
        async with anyio.create_task_group() as tg:
            for cap_id, binding in self.bindings.items():
                tg.start_soon(self._close_binding, cap_id, binding)
        if self._owns_storage:
            await self.storage.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def active_operations(self, thread_id: str) -> int:
        """How many operations are running in ``thread_id`` in this process."""
        return self._work.count(thread_id)

    # -- threads ----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeClosedError(
                f"the runtime of agent {self.agent.name!r} is closed; create a new runtime"
            )

    async def _get_thread(self, caller: _Caller, thread_id: str) -> ThreadRecord:
        self._check_open()
        thread = await self.storage.get_thread(thread_id)
        # A thread of another scope, or of another app agent sharing the storage, is not ours.
        if (
            thread is None
            or thread.scope_key != caller.scope_key
            or thread.agent_name not in self._agents_by_name
        ):
            raise ThreadNotFoundError(thread_id, caller.scope_key)
        return thread

    async def _create_thread(
        self,
        caller: _Caller,
        *,
        agent_name: str,
        thread_id: str | None,
        parent: ThreadRecord | None,
    ) -> ThreadRecord:
        self._check_open()
        record = ThreadRecord(
            id=thread_id if thread_id is not None else uuid.uuid4().hex,
            scope_key=caller.scope_key,
            agent_name=agent_name,
            parent_thread_id=parent.id if parent is not None else None,
        )
        await self.storage.create_thread(record)
        if parent is not None:
            root = self._roots.get(parent.id) if parent.parent_thread_id is not None else parent.id
            if root is not None:
                self._roots.put(record.id, root)
        return record

    async def _root_of(self, thread: ThreadRecord) -> str:
        if thread.parent_thread_id is None:
            return thread.id
        known = self._roots.get(thread.id)
        if known is not None:
            return known
        visited = [thread.id]
        current = thread.parent_thread_id
        while True:
            known = self._roots.get(current)
            if known is not None:
                root = known
                break
            record = await self.storage.get_thread(current)
            if record is None:
                raise ThreadNotFoundError(current)
            if record.parent_thread_id is None:
                root = record.id
                break
            visited.append(record.id)
            current = record.parent_thread_id
        for thread_id in visited:
            self._roots.put(thread_id, root)
        return root

    async def _delete_thread(self, caller: _Caller, thread_id: str) -> None:
        thread = await self._get_thread(caller, thread_id)
        deleted = list(await self.storage.delete_thread(thread_id))
        self._roots.forget(deleted)
        settled = await self._work.cancel_and_settle(deleted, self.settlement_window)
        if not settled:
            _log.warning(
                "work in thread %r did not stop within the %.1fs settlement window; disposing "
                "its capabilities anyway",
                thread_id,
                self.settlement_window,
            )
        disposals: list[tuple[str, CapabilityBinding[object], DisposeInput]] = []
        for cap_id, binding in self.bindings.items():
            if not binding.has_dispose:
                continue
            if binding.scope == "thread":
                for tid in deleted:
                    key = instance_key(cap_id, "thread", (caller.scope_key, tid))
                    disposals.append(
                        (cap_id, binding, DisposeInput("thread-deleted", key, tid, cap_id))
                    )
            elif binding.scope == "rootThread" and thread.parent_thread_id is None:
                key = instance_key(cap_id, "rootThread", (caller.scope_key, thread_id))
                disposals.append(
                    (cap_id, binding, DisposeInput("thread-deleted", key, thread_id, cap_id))
                )
        async with anyio.create_task_group() as tg:
            for cap_id, binding, dispose_input in disposals:
                tg.start_soon(self._dispose, cap_id, binding, dispose_input)

    async def _dispose(
        self, cap_id: str, binding: CapabilityBinding[object], dispose_input: DisposeInput
    ) -> None:
        try:
            await binding.dispose(dispose_input)
        except Exception as error:
            await self._report(
                RuntimeErrorEvent(
                    source="capability",
                    error=error,
                    message=f"dispose of capability {cap_id!r} for thread "
                    f"{dispose_input.thread_id!r} failed: {error!r}",
                    capability_id=cap_id,
                    thread_id=dispose_input.thread_id,
                    key=dispose_input.key,
                )
            )

    async def _close_binding(self, cap_id: str, binding: CapabilityBinding[object]) -> None:
        try:
            await binding.close()
        except Exception as error:
            await self._report(
                RuntimeErrorEvent(
                    source="capability",
                    error=error,
                    message=f"close of capability {cap_id!r} failed: {error!r}",
                    capability_id=cap_id,
                )
            )

    async def _report(self, event: RuntimeErrorEvent) -> None:
        if self._on_runtime_error is None:
            _log.error("%s", event.message, exc_info=event.error)
            return
        try:
            await resolve(self._on_runtime_error(event))
        except Exception:
            _log.exception("on_runtime_error raised while handling: %s", event.message)

    async def _tracked(self, thread_id: str, fn: Callable[[], Awaitable[T]]) -> T:
        def deleted() -> ThreadDeletedError:
            return ThreadDeletedError(
                f"thread {thread_id!r} was deleted while this operation ran; its work was "
                "cancelled. Await deletion before reusing the thread id."
            )

        return await self._work.run(thread_id, fn, deleted)

    # -- capabilities -----------------------------------------------------------------------

    async def _acquire(
        self, declared: Mapping[str, Capability[object]], thread: ThreadRecord, caller: _Caller
    ) -> Capabilities:
        if not declared:
            return EMPTY_CAPABILITIES
        bindings = {token.id: self.bindings[token.id] for token in declared.values()}
        root_id: str | None = None
        # Only rootThread and custom scopes need the root: the walk runs only when one of this
        # operation's bindings has such a scope.
        if any(_walks_to_root(binding) for binding in bindings.values()):
            root_id = await self._root_of(thread)
        # Derive every key before acquiring any, so a key that cannot be derived fails the
        # operation before any binding has been asked for a facade.
        inputs = [
            (cap_id, binding, self._acquire_input(binding, cap_id, thread, root_id, caller))
            for cap_id, binding in bindings.items()
        ]
        pending: list[tuple[str, Awaitable[object]]] = []
        by_id: dict[str, object] = {}
        failures: list[tuple[str, BaseException]] = []
        for cap_id, binding, acquire_input in inputs:
            try:
                facade = binding.acquire(acquire_input)
            except Exception as error:
                failures.append((cap_id, error))
                continue
            awaitable = maybe_await(facade)
            if awaitable is None:
                by_id[cap_id] = facade
            else:
                pending.append((cap_id, awaitable))
        if len(pending) == 1:
            cap_id, awaitable = pending[0]
            try:
                by_id[cap_id] = await awaitable
            except Exception as error:
                failures.append((cap_id, error))
        elif pending:
            # All of an operation's capabilities are acquired in parallel.
            async def one(cap_id: str, awaitable: Awaitable[object]) -> None:
                try:
                    by_id[cap_id] = await awaitable
                except Exception as error:
                    failures.append((cap_id, error))

            async with anyio.create_task_group() as tg:
                for cap_id, awaitable in pending:
                    tg.start_soon(one, cap_id, awaitable)
        if failures:
            failures.sort(key=lambda f: f[0])
            detail = "; ".join(f"{cap_id!r}: {error!r}" for cap_id, error in failures)
            raise CapabilityAcquireError(
                f"could not acquire capabilities for thread {thread.id!r}: {detail}",
                ids=[cap_id for cap_id, _ in failures],
            ) from failures[0][1]
        by_name = {name: by_id[token.id] for name, token in declared.items()}
        return Capabilities(by_name, by_id)

    def _acquire_input(
        self,
        binding: CapabilityBinding[object],
        cap_id: str,
        thread: ThreadRecord,
        root_id: str | None,
        caller: _Caller,
    ) -> AcquireInput:
        scope = binding.scope
        label: ScopeLabel
        if callable(scope):
            assert root_id is not None
            try:
                raw = scope(
                    CapabilityScopeInput(
                        thread_id=thread.id,
                        root_thread_id=root_id,
                        scope_key=caller.scope_key,
                        user_key=caller.user_key,
                        identity=caller.identity,
                    )
                )
            except Exception as error:
                raise CapabilityBindingError(
                    f"the custom scope of capability {cap_id!r} raised {error!r}; a scope "
                    "function must return a non-empty string key",
                    ids=[cap_id],
                ) from error
            if not isinstance(raw, str) or not raw:  # pyright: ignore[reportUnnecessaryIsInstance]
                raise CapabilityBindingError(
                    f"the custom scope of capability {cap_id!r} returned {raw!r}; a scope "
                    "function must return a non-empty string key",
                    ids=[cap_id],
                )
            label, key = "custom", raw
        else:
            label, key = (
                scope,
                instance_key(
                    cap_id, scope, self._key_parts(scope, cap_id, thread, root_id, caller)
                ),
            )
        return AcquireInput(
            key=key,
            capability_id=cap_id,
            scope=label,
            thread_id=thread.id,
            root_thread_id=root_id,
            scope_key=caller.scope_key,
            user_key=caller.user_key,
            identity=caller.identity,
        )

    @staticmethod
    def _key_parts(
        kind: ScopeKind, cap_id: str, thread: ThreadRecord, root_id: str | None, caller: _Caller
    ) -> tuple[str, ...]:
        if kind == "thread":
            return (caller.scope_key, thread.id)
        if kind == "rootThread":
            assert root_id is not None
            return (caller.scope_key, root_id)
        if kind == "user":
            if caller.user_key is None:
                raise CapabilityBindingError(
                    f"capability {cap_id!r} is bound with scope 'user', but no user key could be "
                    "derived for this identity; pass create_agent_runtime(user_key=lambda "
                    "identity: ...) returning a non-empty string for every identity that uses it",
                    ids=[cap_id],
                )
            return (caller.scope_key, caller.user_key)
        if kind == "scope":
            return (caller.scope_key,)
        return ()

    # -- commands ---------------------------------------------------------------------------

    async def _run_command(
        self, caller: _Caller, thread_id: str, name: str, raw_input: object
    ) -> object:
        self._check_open()
        command = self.agent.commands.get(name)
        if command is None:
            raise UnknownCommandError(name, list(self.agent.commands))
        if isinstance(raw_input, command.input):
            parsed = raw_input
        else:
            try:
                parsed = command.input.model_validate(raw_input)
            except ValidationError as error:
                raise CommandInputError(
                    f"input for command {name!r} is invalid: {validation_summary(error)}; "
                    f"pass a {command.input.__name__} or a mapping of its fields"
                ) from error

        async def body() -> object:
            thread = await self._get_thread(caller, thread_id)
            try:
                capabilities = await self._acquire(command.capabilities, thread, caller)
                ctx: CommandContext[Any] = CommandContext(
                    input=cast("BaseModel", parsed),
                    capabilities=capabilities,
                    thread_id=thread.id,
                    scope_key=caller.scope_key,
                    user_key=caller.user_key,
                    identity=caller.identity,
                )
                return await resolve(command.run(ctx))
            except Exception as error:
                await self._record_error(thread.id, "command", error)
                raise

        return await self._tracked(thread_id, body)

    async def _record_error(self, thread_id: str, source: str, error: BaseException) -> None:
        message = ErrorMessage(source=source, error_type=type(error).__name__, message=str(error))
        # The thread may have been deleted meanwhile; then there is nothing to record into.
        with contextlib.suppress(ThreadNotFoundError):
            await self.storage.append_messages(thread_id, [message])

    # -- the agent loop ---------------------------------------------------------------------

    async def _send(self, caller: _Caller, thread_id: str, text: str) -> RunResult:
        async def body() -> RunResult:
            thread = await self._get_thread(caller, thread_id)
            agent = self._agent_for(thread)
            return await self._loop(agent, thread, caller, [UserMessage(content=text)])

        return await self._tracked(thread_id, body)

    async def _submit_tool_results(
        self, caller: _Caller, thread_id: str, results: Mapping[str, object]
    ) -> RunResult:
        async def body() -> RunResult:
            thread = await self._get_thread(caller, thread_id)
            agent = self._agent_for(thread)
            history = await self.storage.get_messages(thread.id)
            pending = _pending_calls(history)
            by_id = {call.id: call for call in pending}
            unknown = sorted(results.keys() - by_id.keys())
            missing = sorted(by_id.keys() - results.keys())
            if unknown or missing:
                raise DefinitionError(
                    f"submit_tool_results for thread {thread.id!r} must answer exactly the "
                    f"pending tool calls {sorted(by_id)}; unknown: {unknown}, missing: {missing}"
                )
            staged: list[Message] = [
                ToolResultMessage(
                    tool_call_id=call.id,
                    tool_name=call.name,
                    content=tool_output_text(results[call.id]),
                    output=pydantic_core.to_jsonable_python(results[call.id]),
                )
                for call in pending
            ]
            return await self._loop(agent, thread, caller, staged)

        return await self._tracked(thread_id, body)

    def _agent_for(self, thread: ThreadRecord) -> Agent:
        return self._agents_by_name[thread.agent_name]

    async def _loop(
        self, agent: Agent, thread: ThreadRecord, caller: _Caller, staged: list[Message]
    ) -> RunResult:
        if agent.model is None:
            raise DefinitionError(
                f"agent {agent.name!r} has no model; pass define_agent(model=...) or "
                "create_test_runtime(model=...)"
            )
        history: list[Message] = [
            m for m in await self.storage.get_messages(thread.id) if m.role != "error"
        ]
        instructions = agent.instructions
        if not isinstance(instructions, str):
            instructions = await resolve(
                instructions(InstructionsInput(thread.id, caller.scope_key, caller.identity))
            )
        specs = _tool_specs(agent)
        written: list[Message] = []
        for step in range(1, agent.max_steps + 1):
            request = ModelRequest(
                instructions=instructions, messages=[*history, *staged], tools=specs, step=step
            )
            try:
                response = await agent.model.request(request)
            except Exception as error:
                await self._record_error(thread.id, "model", error)
                raise
            calls = list(response.tool_calls)
            external = [c for c in calls if _is_external(agent, c.name)]
            runnable = [c for c in calls if not _is_external(agent, c.name)]
            results = await self._run_tool_calls(agent, thread, caller, runnable)
            step_messages = [*staged, response, *results]
            await self.storage.append_messages(thread.id, step_messages)
            history.extend(step_messages)
            written.extend(step_messages)
            staged = []
            if external:
                return RunResult(
                    thread.id, "awaiting_tool_results", response.content, written, step, external
                )
            if not calls:
                return RunResult(thread.id, "completed", response.content, written, step)
        error = StepLimitExceededError(
            f"agent {agent.name!r} used all {agent.max_steps} steps in thread {thread.id!r} "
            "without a final answer; raise define_agent(max_steps=...) or check the model's "
            "tool calls"
        )
        await self._record_error(thread.id, "runtime", error)
        raise error

    async def _run_tool_calls(
        self, agent: Agent, thread: ThreadRecord, caller: _Caller, calls: Sequence[ToolCall]
    ) -> list[Message]:
        if len(calls) <= 1:
            return [await self._run_tool_call(agent, thread, caller, c) for c in calls]
        results: list[Message | None] = [None] * len(calls)

        async def one(index: int, call: ToolCall) -> None:
            results[index] = await self._run_tool_call(agent, thread, caller, call)

        async with anyio.create_task_group() as tg:
            for index, call in enumerate(calls):
                tg.start_soon(one, index, call)
        return [r for r in results if r is not None]

    async def _run_tool_call(
        self, agent: Agent, thread: ThreadRecord, caller: _Caller, call: ToolCall
    ) -> ToolResultMessage:
        def failed(text: str) -> ToolResultMessage:
            return ToolResultMessage(
                tool_call_id=call.id, tool_name=call.name, content=text, is_error=True
            )

        subagent = agent.subagents.get(call.name)
        if subagent is not None:
            return await self._delegate(subagent, thread, caller, call, failed)
        tool = agent.tools.get(call.name)
        if tool is None:
            names = sorted([*agent.tools, *agent.subagents])
            return failed(f"Error: there is no tool named {call.name!r}; available tools: {names}")
        try:
            parsed = tool.input_schema.model_validate(call.arguments)
        except ValidationError as error:
            return failed(
                f"Error: invalid input for tool {call.name!r}: {validation_summary(error)}. "
                "Call it again with input matching its schema."
            )
        try:
            capabilities = await self._acquire(tool.capabilities, thread, caller)
        except (CapabilityAcquireError, CapabilityBindingError) as error:
            await self._report(
                RuntimeErrorEvent(
                    source="capability",
                    error=error,
                    message=str(error),
                    capability_id=error.ids[0] if error.ids else None,
                    thread_id=thread.id,
                )
            )
            return failed(
                f"Error: tool {call.name!r} could not start because a capability it needs is "
                f"unavailable: {error}"
            )
        ctx = ToolContext(
            input=parsed,
            capabilities=capabilities,
            thread_id=thread.id,
            tool_call_id=call.id,
            scope_key=caller.scope_key,
            user_key=caller.user_key,
            identity=caller.identity,
        )
        result, _ = await execute_tool(tool, ctx, call.name)
        return result

    async def _delegate(
        self,
        subagent: Agent,
        thread: ThreadRecord,
        caller: _Caller,
        call: ToolCall,
        failed: Callable[[str], ToolResultMessage],
    ) -> ToolResultMessage:
        try:
            task = DelegateInput.model_validate(call.arguments).task
        except ValidationError as error:
            return failed(f"Error: invalid input for {call.name!r}: {validation_summary(error)}")
        child = await self._create_thread(
            caller, agent_name=subagent.name, thread_id=None, parent=thread
        )

        async def body() -> RunResult:
            return await self._loop(subagent, child, caller, [UserMessage(content=task)])

        try:
            result = await self._tracked(child.id, body)
        except (StepLimitExceededError, ThreadDeletedError) as error:
            return failed(f"Error: subagent {call.name!r} did not finish: {error}")
        return ToolResultMessage(
            tool_call_id=call.id,
            tool_name=call.name,
            content=result.text or "",
            output={"thread_id": child.id, "text": result.text},
        )


async def execute_tool(
    tool: Tool[Any, Any], ctx: ToolContext[Any], name: str
) -> tuple[ToolResultMessage, object]:
    """Run a tool's ``execute``; return the saved, model-facing result and the raw output."""
    assert tool.execute is not None
    try:
        output = await resolve(tool.execute(ctx))
        content = tool_output_text(output)
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


def _walks_to_root(binding: CapabilityBinding[object]) -> bool:
    """Whether deriving this binding's key needs the thread's root (rootThread, custom)."""
    return binding.scope == "rootThread" or callable(binding.scope)


def _is_external(agent: Agent, name: str) -> bool:
    tool = agent.tools.get(name)
    return tool is not None and tool.execute is None


def _pending_calls(history: Sequence[Message]) -> list[ToolCall]:
    answered = {m.tool_call_id for m in history if isinstance(m, ToolResultMessage)}
    for message in reversed(history):
        if isinstance(message, AssistantMessage):
            return [c for c in message.tool_calls if c.id not in answered]
    return []


def _tool_specs(agent: Agent) -> list[ToolSpec]:
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


def _index_agents(agent: Agent) -> dict[str, Agent]:
    index: dict[str, Agent] = {}
    stack = [agent]
    while stack:
        current = stack.pop()
        index.setdefault(current.name, current)
        stack.extend(current.subagents.values())
    return index


class _Commands:
    """``handle.commands.<name>(input)``: each attribute runs the agent command of that name."""

    __slots__ = ("_handle",)

    def __init__(self, handle: ThreadHandle) -> None:
        self._handle = handle

    def __getattr__(self, name: str) -> Callable[[object], Awaitable[Any]]:
        if name.startswith("__"):
            raise AttributeError(name)

        async def call(input: object = None) -> Any:
            return await self._handle.run_command(name, {} if input is None else input)

        return call


class ThreadHandle:
    """One thread, seen by one caller. Cheap to make: no I/O until you use it."""

    def __init__(self, runtime: AgentRuntime, caller: _Caller, thread_id: str) -> None:
        self._runtime = runtime
        self._caller = caller
        self.id = thread_id

    @property
    def commands(self) -> Any:
        """Run a command by attribute: ``await handle.commands.reset_workspace({})``."""
        return _Commands(self)

    async def run_command(self, name: str, input: object) -> Any:
        """Run the agent's command ``name`` in this thread; failures raise to you."""
        return await self._runtime._run_command(self._caller, self.id, name, input)  # pyright: ignore[reportPrivateUsage]

    async def send(self, text: str) -> RunResult:
        """Add a user message and run the agent until it answers (or needs external results)."""
        return await self._runtime._send(self._caller, self.id, text)  # pyright: ignore[reportPrivateUsage]

    async def submit_tool_results(self, results: Mapping[str, object]) -> RunResult:
        """Answer the pending external tool calls (by call id) and continue the run."""
        return await self._runtime._submit_tool_results(self._caller, self.id, results)  # pyright: ignore[reportPrivateUsage]

    async def messages(self) -> Sequence[Message]:
        """Every message stored in this thread, recorded errors included."""
        await self._runtime._get_thread(self._caller, self.id)  # pyright: ignore[reportPrivateUsage]
        return await self._runtime.storage.get_messages(self.id)

    async def record(self) -> ThreadRecord:
        """The stored thread record. Raises :class:`ThreadNotFoundError` if there is none."""
        return await self._runtime._get_thread(self._caller, self.id)  # pyright: ignore[reportPrivateUsage]

    async def children(self) -> Sequence[ThreadRecord]:
        """Threads delegated from this one."""
        await self._runtime._get_thread(self._caller, self.id)  # pyright: ignore[reportPrivateUsage]
        return await self._runtime.storage.list_threads(
            self._caller.scope_key, parent_thread_id=self.id
        )

    async def delete(self) -> None:
        """Delete the thread (and its delegated threads), cancel their work, dispose instances."""
        await self._runtime._delete_thread(self._caller, self.id)  # pyright: ignore[reportPrivateUsage]

    def __repr__(self) -> str:
        return f"ThreadHandle({self.id!r})"


class AdminClient:
    """Trusted, server-side access to a runtime for one identity."""

    def __init__(self, runtime: AgentRuntime, caller: _Caller) -> None:
        self._runtime = runtime
        self._caller = caller

    @property
    def scope_key(self) -> str:
        """The scope key derived from this identity."""
        return self._caller.scope_key

    async def create_thread(self, *, thread_id: str | None = None) -> ThreadHandle:
        """Create a top-level thread (a fresh id unless you pass one)."""
        record = await self._runtime._create_thread(  # pyright: ignore[reportPrivateUsage]
            self._caller, agent_name=self._runtime.agent.name, thread_id=thread_id, parent=None
        )
        return ThreadHandle(self._runtime, self._caller, record.id)

    def thread(self, thread_id: str) -> ThreadHandle:
        """A handle on an existing thread; a missing id fails on first use."""
        return ThreadHandle(self._runtime, self._caller, thread_id)

    async def list_threads(self) -> Sequence[ThreadRecord]:
        """This scope's top-level threads, oldest first."""
        self._runtime._check_open()  # pyright: ignore[reportPrivateUsage]
        return await self._runtime.storage.list_threads(self._caller.scope_key)


def create_agent_runtime(
    *,
    agent: Agent,
    scope_key: ScopeKeyFn,
    storage: Storage | None = None,
    user_key: UserKeyFn | None = None,
    capabilities: Mapping[str, CapabilityBinding[object]] | None = None,
    on_runtime_error: OnRuntimeError | None = None,
    settlement_window: float = 5.0,
    model: Model | None = None,
    owns_storage: bool = True,
) -> AgentRuntime:
    """Build the runtime for ``agent``; the binding record is checked here, all problems at once.

    ``scope_key`` maps an identity to its app scope (tenant, workspace); ``user_key`` to a user,
    for ``"user"``-scoped capabilities. ``storage`` defaults to an in-memory SQLite database.
    ``settlement_window`` is how long thread deletion waits for cancelled work before disposing
    that thread's capability instances. ``on_runtime_error`` receives failures the runtime absorbs
    (a ``dispose`` that raised, say); by default they are logged. ``model`` replaces the agent's
    model. ``owns_storage=False`` leaves ``storage`` open on :meth:`AgentRuntime.aclose` (for
    storage shared between runtimes, as :func:`create_pai` does).

    Example::

        runtime = create_agent_runtime(
            agent=agent,
            scope_key=lambda identity: identity.workspace_id,
            capabilities={"sandbox": sandbox_capability(provider=provider)},
        )
        async with runtime:
            thread = await runtime.admin(identity=me).create_thread()
            print((await thread.send("hello")).text)
    """
    if not callable(scope_key):
        raise CapabilityBindingError(
            f"scope_key must be a function from identity to a string, got {scope_key!r}"
        )
    if user_key is not None and not callable(user_key):
        raise CapabilityBindingError(
            f"user_key must be a function from identity to a string or None, got {user_key!r}"
        )
    if settlement_window < 0:
        raise DefinitionError(f"settlement_window must be >= 0 seconds, got {settlement_window!r}")
    if model is not None:
        agent = agent.with_model(model)
    bindings = validate_binding_record(agent.requirements, dict(capabilities or {}))
    if storage is None:
        from pai.core._storage_sqlite import SqliteStorage

        storage = SqliteStorage(":memory:")
    return AgentRuntime(
        agent=agent,
        storage=storage,
        scope_key=scope_key,
        user_key=user_key,
        bindings=bindings,
        on_runtime_error=on_runtime_error,
        settlement_window=settlement_window,
        owns_storage=owns_storage,
    )


__all__ = [
    "AdminClient",
    "AgentRuntime",
    "DelegateInput",
    "RunResult",
    "RuntimeErrorEvent",
    "RuntimeErrorSource",
    "ThreadHandle",
    "create_agent_runtime",
]
