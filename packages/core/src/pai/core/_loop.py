"""The agent loop and what runs inside a thread: runs (``send``, ``submit_tool_results``,
delegated runs), their tool calls, and commands.

A run holds its thread's run lease from before it reads the history until it ends (see
:mod:`pai.core._leases`): runs on one thread never overlap, in this process or another, and every
append of the run passes the lease, so nothing of a run that lost its thread is stored.

A run is a :class:`Run` (what every step reads and what the run wrote) and a sequence of steps;
each step is three phases, each one method of :class:`AgentLoop`::

    run = await loop.begin(agent, thread, caller, staged)        # runtime context, instructions
    for step in 1..max_steps:
        offered = await loop.offered(run, step)                  # enabled predicates
        response = await loop.request(run, offered, step)        # the model
        result = await loop.complete(run, offered, response, step)  # tool calls, one append
        if result is not None: return result
    await loop.step_limit(run)

A streamed run is the same run with an ``emit`` function: :meth:`AgentLoop.request` streams the
model and emits its events as they arrive, :meth:`AgentLoop.complete` emits the tool results, a
delegated run emits its own events wrapped in :class:`~pai.core.DelegatedRunEvent`, and the run
ends with :class:`~pai.core.RunFinished`. What is stored does not depend on it: a step is
appended when it completes, so a run cancelled while the model streams stores nothing of that
answer.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, cast

import anyio
import pydantic_core
from pydantic import BaseModel, ValidationError

from pai.core._acquisition import Acquisition
from pai.core._admin import Caller, RunResult
from pai.core._agent import Agent, InstructionsInput
from pai.core._awaitables import is_awaitable
from pai.core._context import (
    EnabledFn,
    RuntimeContextInput,
    ToolEnabledInput,
    new_runtime_context_input,
)
from pai.core._durability import DURABLE_CALL
from pai.core._errors import (
    CapabilityAcquireError,
    CapabilityBindingError,
    CommandInputError,
    DefinitionError,
    RunLeaseLostError,
    RuntimeContextError,
    StepLimitExceededError,
    ThreadDeletedError,
    ThreadNotFoundError,
    UnknownCommandError,
)
from pai.core._execution import (
    DelegateInput,
    execute_tool,
    pending_calls,
    tool_output_text,
    tool_specs,
    validation_summary,
)
from pai.core._lifecycle import HistorySnapshot, RuntimeErrorEvent
from pai.core._messages import (
    ErrorMessage,
    Message,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from pai.core._model import (
    NO_USAGE,
    Model,
    ModelRequest,
    ModelResponse,
    StreamingModel,
    ToolSpec,
    Usage,
    aclose_if_closable,
    collect_response,
    stream_model,
)
from pai.core._operations import CommandContext, ToolApproval, ToolContext
from pai.core._run_events import DelegatedRunEvent, RunEvent, RunFinished, ToolCallResult
from pai.core._storage import RunLease, ThreadRecord
from pai.core._threads import Threads

if TYPE_CHECKING:
    from pai.core._durable import DurableRuns

_MakeCheck: TypeAlias = Callable[
    [type[ToolEnabledInput[Any]], tuple[Any, ...]], ToolEnabledInput[Any]
]
_new_check = cast("_MakeCheck", tuple.__new__)  # pyright: ignore[reportUnknownMemberType]
"""``ToolEnabledInput(*fields)`` as NamedTuple's ``__new__`` makes it, without that Python-level
call (one is made on every model step of an agent with predicates)."""

Emit = Callable[[RunEvent], Awaitable[None]]
"""Where a streamed run's events go (``None`` for a run that is not streamed)."""


@dataclass(frozen=True, slots=True)
class Offered:
    """The tools offered to the model on one step: their specs, and their names."""

    specs: tuple[ToolSpec, ...]
    names: frozenset[str]


@dataclass(eq=False, slots=True)
class Run:
    """One run of an agent in a thread: what each step reads, and what the run has written."""

    agent: Agent
    thread: ThreadRecord
    caller: Caller
    runtime_context: Any
    instructions: str
    history: HistorySnapshot
    """The thread's messages as the model reads them, this run's included (each step's request
    gets this snapshot as it is: nothing is copied, whatever the thread's length)."""
    staged: list[Message]
    """Messages of this run not stored yet (the user message, submitted results): the first
    step stores them with its own."""
    written: list[Message]
    """Everything this run stored, in order."""
    emit: Emit | None = None
    """Where the run's events go when it is streamed."""
    usage: Usage = NO_USAGE
    """Tokens the run's model calls used so far."""
    lease: RunLease | None = None
    """The thread's run lease the run holds: every append of the run passes it."""


_Predicate: TypeAlias = tuple[str, "EnabledFn[Any]", bool]
"""A tool's name, its ``enabled`` predicate, and whether that is an ``async def`` (known once per
agent, not asked of every result). A plain tuple: unpacked on every step, where a named tuple
takes the slower path."""


class AgentLoop:
    """Runs agents, their tools and their commands in the threads of one runtime."""

    def __init__(
        self,
        *,
        agent: Agent,
        agents: Mapping[str, Agent],
        threads: Threads,
        acquisition: Acquisition,
    ) -> None:
        self._agent = agent
        self._agents = agents
        self._threads = threads
        self._storage = threads.storage
        self._acquisition = acquisition
        self.durable: DurableRuns | None = None
        """Set when the runtime has a durability engine: runs go through it."""
        # What the model is offered never changes for an agent: build every JSON schema once.
        # Whether its model streams does not either: no protocol check per step.
        self._offers: dict[str, Offered] = {}
        self._streaming: dict[str, bool] = {}
        self._predicates: dict[str, tuple[_Predicate, ...]] = {}
        self._context_inputs: dict[str, tuple[Caller, str, RuntimeContextInput]] = {}
        for name, each in agents.items():
            specs = tuple(tool_specs(each))
            self._offers[name] = Offered(specs, frozenset(spec.name for spec in specs))
            self._streaming[name] = isinstance(each.model, StreamingModel)
            self._predicates[name] = tuple(
                (tool, enabled, inspect.iscoroutinefunction(enabled))
                for tool, enabled in each.tool_enabled.items()
            )

    # -- operations (what AdminClient's thread handles call) --------------------------------

    # send and submit_tool_results hand back the tracked work to await rather than awaiting it
    # in a coroutine of their own: one frame fewer for every run in flight.

    def send(
        self, caller: Caller, thread_id: str, text: str, emit: Emit | None = None
    ) -> Awaitable[RunResult]:
        if self.durable is not None:
            return self._threads.tracked(
                thread_id, self.durable.send(caller, thread_id, text, emit)
            )
        return self._threads.tracked(thread_id, self._send(caller, thread_id, text, emit))

    async def _send(
        self, caller: Caller, thread_id: str, text: str, emit: Emit | None
    ) -> RunResult:
        thread = await self._threads.get(caller, thread_id)
        agent = self._agents[thread.agent_name]
        staged: list[Message] = [UserMessage(content=text)]
        # A partial, not a lambda: a closure would make a cell of each of these variables, held
        # (with the function) by every run in flight, which the garbage collector walks.
        return await self._threads.leases.run(
            thread.id, partial(self.run, agent, thread, caller, staged, emit)
        )

    def submit_tool_results(
        self, caller: Caller, thread_id: str, results: Mapping[str, object]
    ) -> Awaitable[RunResult]:
        if self.durable is not None:
            return self._threads.tracked(thread_id, self.durable.submit(caller, thread_id, results))
        return self._threads.tracked(
            thread_id, self._submit_tool_results(caller, thread_id, results)
        )

    async def _submit_tool_results(
        self, caller: Caller, thread_id: str, results: Mapping[str, object]
    ) -> RunResult:
        thread = await self._threads.get(caller, thread_id)
        # Under the lease from the start: the pending calls are read by one run at a time.
        return await self._threads.leases.run(
            thread.id, partial(self._answer_tool_calls, caller, thread, results)
        )

    async def _answer_tool_calls(
        self,
        caller: Caller,
        thread: ThreadRecord,
        results: Mapping[str, object],
        lease: RunLease,
    ) -> RunResult:
        agent = self._agents[thread.agent_name]
        history = await self._threads.history.read(self._storage, thread)
        answered = answers(agent, thread, pending_calls(history), results)
        approved = [a for a in answered if isinstance(a, ToolCall)]
        if not approved:
            staged: list[Message] = cast("list[Message]", answered)
            return await self.run(agent, thread, caller, staged, lease=lease)
        # Approved calls run now, under the lease (so once: the append of this run answers
        # them, and a second submission finds them answered), with the run's context.
        run = await self.begin(agent, thread, caller, [], lease=lease)
        ran = iter(await self.run_approved(run, approved))
        staged = [next(ran) if isinstance(a, ToolCall) else a for a in answered]
        run.staged = staged
        run.history = run.history.extended(staged)
        return await self.steps(run)

    async def run_approved(self, run: Run, calls: Sequence[ToolCall]) -> list[Message]:
        """Run the approved ``calls`` (in parallel up to ``max_parallel_tool_calls``); their
        results in their order. They were offered when the model made them."""
        offered = Offered((), frozenset(call.name for call in calls))
        if len(calls) == 1:
            return [await self.run_tool_call(run, offered, calls[0])]
        return await self._run_parallel_tool_calls(run, offered, calls)

    async def run_command(
        self, caller: Caller, thread_id: str, name: str, raw_input: object
    ) -> object:
        self._threads.check_open()
        command = self._agent.commands.get(name)
        if command is None:
            raise UnknownCommandError(name, list(self._agent.commands))
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
        return await self._threads.tracked(
            thread_id, self._run_command(caller, thread_id, name, parsed)
        )

    async def _run_command(
        self, caller: Caller, thread_id: str, name: str, parsed: object
    ) -> object:
        command = self._agent.commands[name]
        thread = await self._threads.get(caller, thread_id)
        pending = self.runtime_context_of(self._agent, thread, caller)
        run_context = None if pending is None else await pending
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
            result = command.run(ctx)
            # Awaited here, not through resolve(): one coroutine fewer per command.
            return (await result) if is_awaitable(result) else result
        except Exception as error:
            await self.record_error(thread.id, "command", error)
            raise

    # -- a run and its steps ------------------------------------------------------------------

    async def run(
        self,
        agent: Agent,
        thread: ThreadRecord,
        caller: Caller,
        staged: list[Message],
        emit: Emit | None = None,
        lease: RunLease | None = None,
    ) -> RunResult:
        """Run ``agent`` in ``thread`` from ``staged`` until it answers, needs external tool
        results, or runs out of steps; with ``emit``, stream its events there. ``lease`` is the
        thread's run lease the caller holds (every append passes it)."""
        return await self.steps(await self.begin(agent, thread, caller, staged, emit, lease))

    async def steps(self, run: Run) -> RunResult:
        """Take the begun ``run``'s steps until it answers, needs tool results or approvals, or
        runs out of steps."""
        for step in range(1, run.agent.max_steps + 1):
            offered = await self.offered(run, step)
            response = await self.request(run, offered, step)
            result = await self.complete(run, offered, response, step)
            if result is not None:
                if run.emit is not None:
                    await run.emit(RunFinished(result))
                return result
        raise await self.step_limit(run)

    @staticmethod
    def check_model(agent: Agent) -> None:
        """A :class:`DefinitionError` when ``agent`` has no model object (none, or a name that
        was never resolved)."""
        if agent.model is None or isinstance(agent.model, str):
            raise DefinitionError(
                f"agent {agent.name!r} has no model; pass define_agent(model=...) (a model "
                "object or a name such as 'openai:gpt-4.1-mini'), configure one in pai.toml "
                '([model] provider = "openai", name = "gpt-4.1-mini"), or, in tests, '
                "create_test_runtime(model=...)"
            )

    async def begin(
        self,
        agent: Agent,
        thread: ThreadRecord,
        caller: Caller,
        staged: list[Message],
        emit: Emit | None = None,
        lease: RunLease | None = None,
    ) -> Run:
        """Start a run: its runtime context, its instructions, the thread's history."""
        self.check_model(agent)
        pending = self.runtime_context_of(agent, thread, caller, lease)
        run_context = None if pending is None else await pending
        instructions = agent.instructions
        if not isinstance(instructions, str):
            run_input: InstructionsInput[Any] = InstructionsInput(
                thread.id, caller.scope_key, caller.identity, caller.user_key, run_context
            )
            instructions = await self.app_call(
                agent, thread, "instructions", instructions, run_input, lease
            )
        history = (await self._threads.history.read(self._storage, thread)).extended(staged)
        return Run(
            agent, thread, caller, run_context, instructions, history, staged, [], emit, lease=lease
        )

    async def offered(self, run: Run, step: int) -> Offered:
        """The tools the model is offered on this step: every tool whose predicate says so."""
        agent = run.agent
        offered = self._offers[agent.name]
        predicates = self._predicates[agent.name]
        if not predicates:
            return offered
        caller = run.caller
        # One input serves every predicate of the step.
        check = _new_check(
            ToolEnabledInput,
            (
                run.runtime_context,
                run.thread.id,
                caller.scope_key,
                caller.user_key,
                caller.identity,
                agent.name,
                step,
            ),
        )
        disabled: list[str] | None = None
        for name, enabled, is_async in predicates:
            try:
                value: Any = enabled(check)
                # An ``async def`` predicate's coroutine is awaited without asking; any other
                # result is awaited when it is awaitable (a bool, the usual answer, never is).
                if is_async or (type(value) is not bool and is_awaitable(value)):
                    value = await value
            except Exception as error:
                failure = await self._app_failure(
                    agent, run.thread, "runtime_context", error, run.lease, name
                )
                raise failure from error
            if not value:
                if disabled is None:
                    disabled = []
                disabled.append(name)
        if disabled is None:
            return offered
        return Offered(
            tuple(spec for spec in offered.specs if spec.name not in disabled),
            offered.names.difference(disabled),
        )

    async def request(self, run: Run, offered: Offered, step: int) -> ModelResponse:
        """Ask the model for this step's answer (a failure is recorded in the thread): streamed
        when the run is, else ``respond()`` of a :class:`StreamingModel` (usage and finish
        reason kept), else ``request()``."""
        model = cast("Model", run.agent.model)  # begin() checked
        request = ModelRequest(
            instructions=run.instructions,
            messages=run.history,
            tools=offered.specs,
            step=step,
        )
        streaming = self._streaming[run.agent.name]
        try:
            if run.emit is not None:
                response = await _streamed(model, request, run.emit, streaming)
            elif streaming:
                response = await cast("StreamingModel", model).respond(request)
            else:
                message = await model.request(request)
                response = ModelResponse(
                    message, finish_reason="tool_calls" if message.tool_calls else "stop"
                )
        except Exception as error:
            await self.record_error(run.thread.id, "model", error, run.lease)
            raise
        if response.usage.input_tokens or response.usage.output_tokens:
            run.usage = run.usage + response.usage
        return response

    async def complete(
        self, run: Run, offered: Offered, answer: ModelResponse, step: int
    ) -> RunResult | None:
        """Run the step's tool calls and store the step (one append); the run's result when the
        step ends it (a final answer, or calls to external tools), ``None`` to go on."""
        agent = run.agent
        response = answer.message
        calls = response.tool_calls
        refused: Sequence[ToolCall] = ()
        if len(calls) > agent.max_tool_calls_per_step:
            refused = calls[agent.max_tool_calls_per_step :]
            calls = calls[: agent.max_tool_calls_per_step]
        external: list[ToolCall] = []
        runnable: list[ToolCall] = []
        for call in calls:
            tool = agent.tools.get(call.name) if call.name in offered.names else None
            pending = tool is not None and (tool.execute is None or tool.needs_approval)
            (external if pending else runnable).append(call)
        # A single call is awaited right here: no coroutine between the step and the tool.
        results: list[Message]
        if len(runnable) == 1:
            results = [await self.run_tool_call(run, offered, runnable[0])]
        elif runnable:
            results = await self._run_parallel_tool_calls(run, offered, runnable)
        else:
            results = []
        if refused:
            results.extend(over_the_cap(agent, call, len(response.tool_calls)) for call in refused)
        if run.emit is not None:
            for result in results:
                await run.emit(ToolCallResult(cast("ToolResultMessage", result)))
        step_messages: list[Message] = [*run.staged, response, *results]
        await self._storage.append_messages(run.thread.id, step_messages, lease=run.lease)
        run.history = run.history.extended((response, *results))
        run.written.extend(step_messages)
        run.staged = []
        if external:
            return awaiting(
                agent, run.thread.id, response.content, run.written, step, external, run.usage
            )
        if not response.tool_calls:
            return RunResult(
                run.thread.id, "completed", response.content, run.written, step, (), run.usage
            )
        return None

    async def step_limit(self, run: Run) -> StepLimitExceededError:
        """The error of a run that used every step (recorded in the thread)."""
        error = StepLimitExceededError(
            f"agent {run.agent.name!r} used all {run.agent.max_steps} steps in thread "
            f"{run.thread.id!r} without a final answer; raise define_agent(max_steps=...) or "
            "check the model's tool calls"
        )
        await self.record_error(run.thread.id, "runtime", error, run.lease)
        return error

    # -- tool calls ---------------------------------------------------------------------------

    async def _run_parallel_tool_calls(
        self, run: Run, offered: Offered, calls: Sequence[ToolCall]
    ) -> list[Message]:
        # Apart from complete(): the closure's cells would otherwise be made for every single
        # call too, and held while its tool runs.
        results: list[Message | None] = [None] * len(calls)
        # At most max_parallel_tool_calls workers, each taking the next call in the answer's
        # order when its last one is done (one iterator, shared: taking from it never waits).
        pending = enumerate(calls)

        async def worker() -> None:
            for index, call in pending:
                results[index] = await self.run_tool_call(run, offered, call)

        async with anyio.create_task_group() as tg:
            for _ in range(min(run.agent.max_parallel_tool_calls, len(calls))):
                tg.start_soon(worker)
        return [r for r in results if r is not None]

    async def run_tool_call(self, run: Run, offered: Offered, call: ToolCall) -> ToolResultMessage:
        agent, thread, caller = run.agent, run.thread, run.caller
        if call.name not in offered.names:
            # A stale or invented call, or a tool whose predicate said no on this step: it gets
            # an answer, and no capability is acquired for it.
            available = sorted(offered.names)
            if call.name in agent.tools:
                return _failed(
                    call,
                    f"Error: tool {call.name!r} is not available now; available tools: {available}",
                )
            return _failed(
                call, f"Error: there is no tool named {call.name!r}; available tools: {available}"
            )
        subagent = agent.subagents.get(call.name)
        if subagent is not None:
            return await self._delegate(run, subagent, call)
        tool = agent.tools[call.name]
        try:
            parsed = tool.input_schema.model_validate(call.arguments)
        except ValidationError as error:
            return _failed(
                call,
                f"Error: invalid input for tool {call.name!r}: {validation_summary(error)}. "
                "Call it again with input matching its schema.",
            )
        try:
            capabilities = await self._acquisition.acquire(tool.capabilities, thread, caller)
        except (CapabilityAcquireError, CapabilityBindingError) as error:
            await self._threads.report(
                RuntimeErrorEvent(
                    source="capability",
                    error=error,
                    message=str(error),
                    capability_id=error.ids[0] if error.ids else None,
                    thread_id=thread.id,
                )
            )
            return _failed(
                call,
                f"Error: tool {call.name!r} could not start because a capability it needs is "
                f"unavailable: {error}",
            )
        durable = DURABLE_CALL.get()
        ctx: ToolContext[Any, Any] = ToolContext(
            input=parsed,
            capabilities=capabilities,
            thread_id=thread.id,
            tool_call_id=call.id,
            scope_key=caller.scope_key,
            user_key=caller.user_key,
            identity=caller.identity,
            runtime_context=run.runtime_context,
            durable_call_id=None if durable is None else durable.id,
        )
        result, _ = await execute_tool(tool, ctx, call.name)
        return result

    async def _delegate(self, run: Run, subagent: Agent, call: ToolCall) -> ToolResultMessage:
        try:
            task = DelegateInput.model_validate(call.arguments).task
        except ValidationError as error:
            return _failed(
                call, f"Error: invalid input for {call.name!r}: {validation_summary(error)}"
            )
        child = await self._threads.create(
            run.caller, agent_name=subagent.name, thread_id=None, parent=run.thread
        )
        emit: Emit | None = None
        parent_emit = run.emit
        if parent_emit is not None:

            async def delegated(event: RunEvent) -> None:
                await parent_emit(DelegatedRunEvent(call.id, child.id, subagent.name, event))

            emit = delegated

        staged: list[Message] = [UserMessage(content=task)]
        try:
            result = await self._threads.tracked(
                child.id,
                self._threads.leases.run(
                    child.id,
                    partial(self.run, subagent, child, run.caller, staged, emit),
                ),
            )
        except (StepLimitExceededError, ThreadDeletedError, RunLeaseLostError) as error:
            return _failed(call, f"Error: subagent {call.name!r} did not finish: {error}")
        return ToolResultMessage(
            tool_call_id=call.id,
            tool_name=call.name,
            content=result.text or "",
            output={"thread_id": child.id, "text": result.text},
        )

    # -- app functions: runtime context, instructions, predicates -----------------------------

    def runtime_context_of(
        self, agent: Agent, thread: ThreadRecord, caller: Caller, lease: RunLease | None = None
    ) -> Awaitable[Any] | None:
        """The agent's runtime context for one run, to await; ``None`` when it has no function
        (then the context is ``None``, and no coroutine is made for it).

        Its function's input is immutable and made of the caller, the thread and the agent
        alone: the agent's last one serves the next run by the same caller in the same thread.
        """
        fn = agent.runtime_context
        if fn is None:
            return None
        last = self._context_inputs.get(agent.name)
        if last is not None and last[0] is caller and last[1] == thread.id:
            run = last[2]
        else:
            run = new_runtime_context_input(
                caller.identity, thread.id, caller.scope_key, caller.user_key, agent.name
            )
            self._context_inputs[agent.name] = (caller, thread.id, run)
        return self.app_call(agent, thread, "runtime_context", fn, run, lease)

    async def app_call(
        self,
        agent: Agent,
        thread: ThreadRecord,
        source: str,
        fn: Callable[[Any], object],
        arg: object,
        lease: RunLease | None,
    ) -> Any:
        """Run an app function of the run on ``arg``: its failure is recorded in the thread and
        raised as a :class:`RuntimeContextError`."""
        try:
            value = fn(arg)
            return (await value) if is_awaitable(value) else value
        except Exception as error:
            raise await self._app_failure(agent, thread, source, error, lease) from error

    async def _app_failure(
        self,
        agent: Agent,
        thread: ThreadRecord,
        source: str,
        error: Exception,
        lease: RunLease | None,
        tool: str | None = None,
    ) -> RuntimeContextError:
        """Record an app function's failure in the thread; the error to raise from ``error``.

        Predicates run on every step, so the message is only written on failure.
        """
        what = (
            f"the enabled predicate of tool {tool!r} of agent {agent.name!r}"
            if tool is not None
            else f"{source} of agent {agent.name!r}"
        )
        failure = RuntimeContextError(
            f"{what} raised {type(error).__name__}: {error}; the run in thread "
            f"{thread.id!r} did not continue and nothing of it was saved but this error"
        )
        await self.record_error(thread.id, source, failure, lease)
        return failure

    async def record_error(
        self, thread_id: str, source: str, error: BaseException, lease: RunLease | None = None
    ) -> None:
        """Record ``error`` in the thread; with the run's ``lease`` when a run failed (a lost
        lease raises, and the run's caller learns it lost the thread)."""
        message = ErrorMessage(source=source, error_type=type(error).__name__, message=str(error))
        # The thread may have been deleted meanwhile; then there is nothing to record into.
        with contextlib.suppress(ThreadNotFoundError):
            await self._storage.append_messages(thread_id, [message], lease=lease)


async def _streamed(
    model: Model, request: ModelRequest, emit: Emit, streaming: bool
) -> ModelResponse:
    """The model's answer, streamed: each event emitted as it arrives, then collected.

    ``streaming`` says the model is a :class:`StreamingModel` (known per agent from the start),
    which spares the protocol check ``stream_model`` would make on every step."""
    events = (
        cast("StreamingModel", model).stream(request) if streaming else stream_model(model, request)
    )
    try:
        return await collect_response(events, on_event=emit)
    finally:
        await aclose_if_closable(events)


def awaiting(
    agent: Agent,
    thread_id: str,
    text: str | None,
    written: Sequence[Message],
    step: int,
    pending: Sequence[ToolCall],
    usage: Usage,
) -> RunResult:
    """The result of a run whose step left ``pending`` calls: external tools' calls, calls that
    need approval, or both (then it awaits tool results, answered with the approvals)."""
    approvals = tuple(call for call in pending if needs_approval(agent, call.name))
    status: Literal["awaiting_tool_results", "awaiting_approval"] = (
        "awaiting_approval" if len(approvals) == len(pending) else "awaiting_tool_results"
    )
    return RunResult(thread_id, status, text, written, step, tuple(pending), usage, approvals)


def needs_approval(agent: Agent, name: str) -> bool:
    """Whether a call of ``name`` by ``agent`` waits for a human's approval."""
    tool = agent.tools.get(name)
    return tool is not None and tool.execute is not None and tool.needs_approval


def answers(
    agent: Agent, thread: ThreadRecord, pending: Sequence[ToolCall], results: Mapping[str, object]
) -> list[ToolResultMessage | ToolCall]:
    """What ``results`` (by call id) give the thread's ``pending`` tool calls, in their order: a
    result message for each external call and each denied one, the call itself for each
    approved one (to run); a :class:`DefinitionError` unless they answer exactly those calls,
    each the way it needs."""
    by_id = {call.id: call for call in pending}
    unknown = sorted(results.keys() - by_id.keys())
    missing = sorted(by_id.keys() - results.keys())
    if unknown or missing:
        raise DefinitionError(
            f"submit_tool_results for thread {thread.id!r} must answer exactly the "
            f"pending tool calls {sorted(by_id)}; unknown: {unknown}, missing: {missing}"
        )
    answered: list[ToolResultMessage | ToolCall] = []
    for call in pending:
        value = results[call.id]
        if needs_approval(agent, call.name):
            approval = _approval(thread, call, value)
            if approval.approved:
                answered.append(call)
            else:
                reason = f": {approval.reason}" if approval.reason else ""
                answered.append(
                    _failed(call, f"Error: the user denied this call to '{call.name}'{reason}")
                )
            continue
        if isinstance(value, ToolApproval):
            raise DefinitionError(
                f"submit_tool_results for thread {thread.id!r}: call {call.id!r} of tool "
                f"{call.name!r} does not need approval, so it takes the tool's result (any JSON "
                "value), not a ToolApproval"
            )
        answered.append(
            ToolResultMessage(
                tool_call_id=call.id,
                tool_name=call.name,
                content=tool_output_text(value),
                output=pydantic_core.to_jsonable_python(value),
            )
        )
    return answered


def _approval(thread: ThreadRecord, call: ToolCall, value: object) -> ToolApproval:
    """``value`` as the approval of ``call``: a :class:`ToolApproval`, or its JSON (an object,
    or a string of one, as HTTP clients send it)."""
    if isinstance(value, ToolApproval):
        return value
    if isinstance(value, (str, bytes)):
        with contextlib.suppress(ValueError):
            value = pydantic_core.from_json(value)
    if isinstance(value, Mapping):
        with contextlib.suppress(ValidationError):
            return ToolApproval.model_validate(value)
    raise DefinitionError(
        f"submit_tool_results for thread {thread.id!r}: call {call.id!r} of tool {call.name!r} "
        f"needs approval, so it takes ToolApproval(approved=True) or ToolApproval(approved=False, "
        f'reason=...) (over JSON: {{"approved": true}}), got {value!r}'
    )


def over_the_cap(agent: Agent, call: ToolCall, made: int) -> ToolResultMessage:
    cap = agent.max_tool_calls_per_step
    return _failed(
        call,
        f"Error: this answer made {made} tool calls and at most {cap} run in one step, so this "
        f"call to {call.name!r} was not run. Call it again in a later step if it is still "
        f"needed. (The app can raise the cap: define_agent(max_tool_calls_per_step=...), "
        f"agent {agent.name!r}.)",
    )


def _failed(call: ToolCall, text: str) -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=call.id, tool_name=call.name, content=text, is_error=True)


__all__ = ["AgentLoop", "Offered", "Run"]
