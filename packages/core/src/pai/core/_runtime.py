"""The agent runtime: binds capabilities, runs operations and the agent loop, owns lifecycle."""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self, TypeVar, cast

import anyio
import pydantic_core
from pydantic import BaseModel, ValidationError

from pai.core._acquisition import Acquisition
from pai.core._admin import AdminClient, Caller, RunResult
from pai.core._agent import Agent, InstructionsInput
from pai.core._awaitables import maybe_await, resolve
from pai.core._binding import CapabilityBinding, DisposeInput
from pai.core._context import RuntimeContextInput, ToolEnabledInput
from pai.core._errors import (
    CapabilityAcquireError,
    CapabilityBindingError,
    CommandInputError,
    DefinitionError,
    RuntimeClosedError,
    RuntimeContextError,
    StepLimitExceededError,
    ThreadDeletedError,
    ThreadNotFoundError,
    UnknownCommandError,
)
from pai.core._execution import (
    DelegateInput,
    execute_tool,
    is_external,
    pending_calls,
    tool_output_text,
    tool_specs,
    validation_summary,
)
from pai.core._lifecycle import (
    ActiveWork,
    HistoryCache,
    OnRuntimeError,
    RootCache,
    RuntimeErrorEvent,
)
from pai.core._messages import (
    ErrorMessage,
    Message,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from pai.core._model import ModelRequest, ToolSpec
from pai.core._operations import (
    CommandContext,
    ToolContext,
)
from pai.core._scope import instance_key
from pai.core._storage import Storage, ThreadRecord

T = TypeVar("T")
_log = logging.getLogger("pai.core")

ScopeKeyFn = Callable[[Any], str]
UserKeyFn = Callable[[Any], "str | None"]


def _check_key(value: object, option: str) -> str:
    if not isinstance(value, str) or not value:
        raise CapabilityBindingError(
            f"{option} returned {value!r}; it must return a non-empty string key"
        )
    return value


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
        self._history = HistoryCache()
        self._acquisition = Acquisition(bindings, self._roots, storage)
        self._agents_by_name = _index_agents(agent)
        # What the model is offered never changes for an agent: build every JSON schema once.
        self._specs: dict[str, tuple[tuple[ToolSpec, ...], frozenset[str]]] = {}
        for name, each in self._agents_by_name.items():
            specs = tuple(tool_specs(each))
            self._specs[name] = (specs, frozenset(spec.name for spec in specs))

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
        user_key_error: BaseException | None = None
        if self._user_key is not None:
            # A user key only matters to user-scoped capabilities: a user_key function that
            # fails fails their acquisition (naming user_key), and nothing else.
            try:
                raw = self._user_key(identity)
            except Exception as error:
                user_key_error = error
            else:
                if isinstance(raw, str) and raw:
                    user_key = raw
                else:
                    user_key_error = ValueError(
                        f"user_key returned {raw!r}; it must return a non-empty string"
                    )
        return AdminClient(self, Caller(identity, scope_key, user_key, user_key_error))

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

    async def _get_thread(self, caller: Caller, thread_id: str) -> ThreadRecord:
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
        caller: Caller,
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
            root = self._roots.get(parent)
            if root is not None:
                self._roots.put(record, root)
        return record

    async def _delete_thread(self, caller: Caller, thread_id: str) -> None:
        thread = await self._get_thread(caller, thread_id)
        # Once the storage delete starts, the deletion runs to its end, disposal included, even
        # if the caller is cancelled meanwhile (a dropped request) or is the thread's own work:
        # the instances would leak otherwise. A cancelled caller sees its cancellation when
        # delete() returns, at most settlement_window plus the disposals later.
        with anyio.CancelScope(shield=True):
            deleted = list(await self.storage.delete_thread(thread_id))
            self._roots.forget(deleted)
            self._history.forget(deleted)
            await self._retire(caller, thread, deleted)

    async def _retire(self, caller: Caller, thread: ThreadRecord, deleted: list[str]) -> None:
        """Cancel the deleted threads' work, let it settle, and dispose the instances they own."""
        thread_id = thread.id
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

    # -- commands ---------------------------------------------------------------------------

    async def _run_command(
        self, caller: Caller, thread_id: str, name: str, raw_input: object
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
            run_context = await self._runtime_context(self.agent, thread, caller)
            try:
                capabilities = await self._acquisition.acquire(command.capabilities, thread, caller)
                ctx: CommandContext[Any, Any] = CommandContext(
                    input=cast("BaseModel", parsed),
                    capabilities=capabilities,
                    thread_id=thread.id,
                    scope_key=caller.scope_key,
                    user_key=caller.user_key,
                    identity=caller.identity,
                    runtime_context=run_context,
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

    async def _app_call(
        self,
        agent: Agent,
        thread: ThreadRecord,
        source: str,
        fn: Callable[[Any], object],
        arg: object,
        tool: str | None = None,
    ) -> Any:
        """Run an app function of the run (runtime_context, instructions, a predicate) on
        ``arg``: its failure is recorded in the thread and raised as a RuntimeContextError.

        On the hot path of every step, so the message is only written on failure.
        """
        try:
            value = fn(arg)
            awaitable = maybe_await(value)
            return value if awaitable is None else await awaitable
        except Exception as error:
            what = (
                f"the enabled predicate of tool {tool!r} of agent {agent.name!r}"
                if tool is not None
                else f"{source} of agent {agent.name!r}"
            )
            failure = RuntimeContextError(
                f"{what} raised {type(error).__name__}: {error}; the run in thread "
                f"{thread.id!r} did not continue and nothing of it was saved but this error"
            )
            await self._record_error(thread.id, source, failure)
            raise failure from error

    async def _runtime_context(self, agent: Agent, thread: ThreadRecord, caller: Caller) -> Any:
        """The agent's runtime context for one run (``None`` when it has no function)."""
        fn = agent.runtime_context
        if fn is None:
            return None
        run = RuntimeContextInput(
            identity=caller.identity,
            thread_id=thread.id,
            scope_key=caller.scope_key,
            user_key=caller.user_key,
            agent_name=agent.name,
        )
        return await self._app_call(agent, thread, "runtime_context", fn, run)

    # -- the agent loop ---------------------------------------------------------------------

    async def _send(self, caller: Caller, thread_id: str, text: str) -> RunResult:
        async def body() -> RunResult:
            thread = await self._get_thread(caller, thread_id)
            agent = self._agent_for(thread)
            return await self._loop(agent, thread, caller, [UserMessage(content=text)])

        return await self._tracked(thread_id, body)

    async def _submit_tool_results(
        self, caller: Caller, thread_id: str, results: Mapping[str, object]
    ) -> RunResult:
        async def body() -> RunResult:
            thread = await self._get_thread(caller, thread_id)
            agent = self._agent_for(thread)
            history = await self._history.read(self.storage, thread)
            pending = pending_calls(history)
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

    async def _offered(
        self, agent: Agent, thread: ThreadRecord, caller: Caller, run_context: Any, step: int
    ) -> tuple[tuple[ToolSpec, ...], frozenset[str]]:
        """The tools the model is offered on this step (every tool whose predicate says so), and
        their names."""
        offered = self._specs[agent.name]
        if not agent.tool_enabled:
            return offered
        check: ToolEnabledInput[Any] = ToolEnabledInput(
            runtime_context=run_context,
            thread_id=thread.id,
            scope_key=caller.scope_key,
            user_key=caller.user_key,
            identity=caller.identity,
            agent_name=agent.name,
            step=step,
        )
        disabled: list[str] = []
        for name, enabled in agent.tool_enabled.items():
            if not await self._app_call(agent, thread, "runtime_context", enabled, check, name):
                disabled.append(name)
        if not disabled:
            return offered
        specs = tuple(spec for spec in offered[0] if spec.name not in disabled)
        return specs, offered[1].difference(disabled)

    async def _loop(
        self, agent: Agent, thread: ThreadRecord, caller: Caller, staged: list[Message]
    ) -> RunResult:
        if agent.model is None:
            raise DefinitionError(
                f"agent {agent.name!r} has no model; pass define_agent(model=...) or "
                "create_test_runtime(model=...)"
            )
        run_context = await self._runtime_context(agent, thread, caller)
        instructions = agent.instructions
        if not isinstance(instructions, str):
            run_input: InstructionsInput[Any] = InstructionsInput(
                thread.id, caller.scope_key, caller.identity, caller.user_key, run_context
            )
            instructions = await self._app_call(
                agent, thread, "instructions", instructions, run_input
            )
        history = await self._history.read(self.storage, thread)
        written: list[Message] = []
        for step in range(1, agent.max_steps + 1):
            offered, names = await self._offered(agent, thread, caller, run_context, step)
            request = ModelRequest(
                instructions=cast("str", instructions),
                messages=[*history, *staged],
                tools=offered,
                step=step,
            )
            try:
                response = await agent.model.request(request)
            except Exception as error:
                await self._record_error(thread.id, "model", error)
                raise
            calls = list(response.tool_calls)
            external = [c for c in calls if c.name in names and is_external(agent, c.name)]
            runnable = [c for c in calls if not (c.name in names and is_external(agent, c.name))]
            results = await self._run_tool_calls(
                _Step(agent, thread, caller, run_context, names), runnable
            )
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

    async def _run_tool_calls(self, step: _Step, calls: Sequence[ToolCall]) -> list[Message]:
        if len(calls) <= 1:
            return [await self._run_tool_call(step, c) for c in calls]
        results: list[Message | None] = [None] * len(calls)

        async def one(index: int, call: ToolCall) -> None:
            results[index] = await self._run_tool_call(step, call)

        async with anyio.create_task_group() as tg:
            for index, call in enumerate(calls):
                tg.start_soon(one, index, call)
        return [r for r in results if r is not None]

    async def _run_tool_call(self, step: _Step, call: ToolCall) -> ToolResultMessage:
        agent, thread, caller = step.agent, step.thread, step.caller

        def failed(text: str) -> ToolResultMessage:
            return ToolResultMessage(
                tool_call_id=call.id, tool_name=call.name, content=text, is_error=True
            )

        if call.name not in step.offered:
            # A stale or invented call, or a tool whose predicate said no on this step: it gets
            # an answer, and no capability is acquired for it.
            available = sorted(step.offered)
            if call.name in agent.tools:
                return failed(
                    f"Error: tool {call.name!r} is not available now; available tools: {available}"
                )
            return failed(
                f"Error: there is no tool named {call.name!r}; available tools: {available}"
            )
        subagent = agent.subagents.get(call.name)
        if subagent is not None:
            return await self._delegate(subagent, thread, caller, call, failed)
        tool = agent.tools[call.name]
        try:
            parsed = tool.input_schema.model_validate(call.arguments)
        except ValidationError as error:
            return failed(
                f"Error: invalid input for tool {call.name!r}: {validation_summary(error)}. "
                "Call it again with input matching its schema."
            )
        try:
            capabilities = await self._acquisition.acquire(tool.capabilities, thread, caller)
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
        ctx: ToolContext[Any, Any] = ToolContext(
            input=parsed,
            capabilities=capabilities,
            thread_id=thread.id,
            tool_call_id=call.id,
            scope_key=caller.scope_key,
            user_key=caller.user_key,
            identity=caller.identity,
            runtime_context=step.run_context,
        )
        result, _ = await execute_tool(tool, ctx, call.name)
        return result

    async def _delegate(
        self,
        subagent: Agent,
        thread: ThreadRecord,
        caller: Caller,
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


@dataclass(frozen=True, slots=True)
class _Step:
    """What running one model step's tool calls needs."""

    agent: Agent
    thread: ThreadRecord
    caller: Caller
    run_context: Any
    offered: frozenset[str]


def _index_agents(agent: Agent) -> dict[str, Agent]:
    index: dict[str, Agent] = {}
    stack = [agent]
    while stack:
        current = stack.pop()
        index.setdefault(current.name, current)
        stack.extend(current.subagents.values())
    return index


__all__ = ["AgentRuntime", "ScopeKeyFn", "UserKeyFn"]
