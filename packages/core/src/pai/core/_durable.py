"""Durable runs in a runtime: each run an engine's workflow, each phase of it a recorded step.

:class:`DurableRuns` is the :class:`~pai.core._durability.DurableHost` of one runtime. ``send``
and ``submit_tool_results`` hand a :class:`~pai.core._durability.RunSpec` to the engine, which
calls :meth:`DurableRuns.execute` (at once, and again after a crash, in this process or
another). ``execute`` mirrors :meth:`AgentLoop.run <pai.core._loop.AgentLoop.run>` phase by
phase, reusing its methods, but every phase that touches the world goes through a step:

=========================  ===============================================================
step                       records
=========================  ===============================================================
``pai.app/instructions``   the instructions' text, when they are a function
``pai.app/history``        how much of the thread the run read, and what it stages
``pai.model/{n}``          the model's answer on step ``n``, and the tools it was offered
``pai.tool/{n}/{i}/{t}``   tool call ``i`` of step ``n`` (tool ``t``): its result message
``pai.append/{n}``         that step ``n`` was appended (done once: compared on replay)
``pai.error/step_limit``   the step-limit error recorded in the thread
=========================  ===============================================================

What runs outside steps runs again on every replay and must answer the same: ``enabled``
predicates (the offered tools are recorded with the model step; a different answer raises
:class:`~pai.core.DurableReplayError` naming the tool) and ``runtime_context`` (not recorded,
since it may hold live objects: a database handle, a client).

The run holds its thread's run lease as ``durable:<run id>``, taken with ``reclaim=True``: the
process resuming a run whose process died takes the thread at once, and the dead one's lease is
fenced off.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, cast

import pydantic_core
from pydantic import TypeAdapter

from pai.core._admin import Caller, RunResult
from pai.core._agent import Agent, InstructionsInput
from pai.core._durability import (
    DURABLE_CALL,
    DurabilityEngine,
    DurableCall,
    Json,
    RunSpec,
    StepFn,
    Steps,
    append_step,
    durable_call_id,
    error_step,
    history_step,
    instructions_step,
    model_step,
    tool_step,
)
from pai.core._errors import (
    DefinitionError,
    DurabilityError,
    DurableReplayError,
    StepLimitExceededError,
    ThreadNotFoundError,
)
from pai.core._execution import pending_calls
from pai.core._loop import AgentLoop, Emit, Offered, Run, answers, over_the_cap
from pai.core._messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    message_adapter,
)
from pai.core._model import ModelResponse, Usage
from pai.core._run_events import RunFinished, ToolCallResult
from pai.core._storage import RunLease, ThreadRecord

if TYPE_CHECKING:
    from pai.core._threads import Threads

_UNSAFE = re.compile(r"[^A-Za-z0-9_.:-]")


def _step_tool_name(name: str) -> str:
    """A tool name as it goes into a step name: the model chose it, so it is cut to 64
    characters of a safe alphabet (the step name is for reading; the position identifies)."""
    return _UNSAFE.sub("_", name[:64]) or "_"


class DurableRuns:
    """The durable runs of one runtime: started on its engine, executed (and replayed) here."""

    def __init__(
        self,
        *,
        engine: DurabilityEngine,
        loop: AgentLoop,
        threads: Threads,
        agents: Mapping[str, Agent],
        identity_type: object | None = None,
    ) -> None:
        self.engine = engine
        self._loop = loop
        self._threads = threads
        self._storage = threads.storage
        self._agents = agents
        self._identity: TypeAdapter[Any] | None = (
            None if identity_type is None else TypeAdapter(cast("Any", identity_type))
        )
        self._started = False
        self._emits: dict[str, Emit] = {}
        """The live callers' event sinks of streamed runs started in this process, by run id (a
        run resumed after a crash streams to nobody)."""

    # -- starting -------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the engine once (it resumes what this process left unfinished)."""
        if self._started:
            return
        self._started = True
        try:
            await self.engine.start(self)
        except BaseException:
            self._started = False
            raise

    async def aclose(self) -> None:
        if self._started:
            self._started = False
            await self.engine.aclose()

    async def send(self, caller: Caller, thread_id: str, text: str, emit: Emit | None) -> RunResult:
        thread = await self._threads.get(caller, thread_id)
        staged = message_adapter.dump_python(UserMessage(content=text), mode="json")
        spec = RunSpec(
            run_id=uuid.uuid4().hex,
            kind="send",
            thread_id=thread.id,
            agent_name=thread.agent_name,
            scope_key=caller.scope_key,
            user_key=caller.user_key,
            identity=self._encode_identity(caller.identity),
            staged=(staged,),
        )
        return await self._start_run(spec, emit)

    async def submit(
        self, caller: Caller, thread_id: str, results: Mapping[str, object]
    ) -> RunResult:
        thread = await self._threads.get(caller, thread_id)
        spec = RunSpec(
            run_id=uuid.uuid4().hex,
            kind="submit",
            thread_id=thread.id,
            agent_name=thread.agent_name,
            scope_key=caller.scope_key,
            user_key=caller.user_key,
            identity=self._encode_identity(caller.identity),
            results={
                call_id: pydantic_core.to_jsonable_python(value)
                for call_id, value in results.items()
            },
        )
        return await self._start_run(spec, None)

    async def _start_run(self, spec: RunSpec, emit: Emit | None) -> RunResult:
        await self.start()
        if emit is not None:
            self._emits[spec.run_id] = emit
        try:
            data = await self.engine.run(spec)
        finally:
            self._emits.pop(spec.run_id, None)
        result = _decode_result(data)
        if emit is not None:
            await emit(RunFinished(result))
        return result

    def _encode_identity(self, identity: object) -> Json:
        if self._identity is not None:
            return self._identity.dump_python(identity, mode="json")
        try:
            encoded = pydantic_core.to_jsonable_python(identity)
        except pydantic_core.PydanticSerializationError as error:
            raise _identity_error(identity) from error
        if encoded != identity:
            raise _identity_error(identity)
        return encoded

    def _decode_identity(self, spec: RunSpec) -> object:
        if self._identity is None:
            return spec.identity
        return self._identity.validate_python(spec.identity)

    # -- executing (the engine calls this, again after a crash) ---------------------------------

    async def execute(self, spec: RunSpec, steps: Steps) -> Json:
        """Run (or replay) ``spec`` holding its thread's lease as ``durable:<run id>``."""
        agent = self._agents.get(spec.agent_name)
        if agent is None:
            raise DurabilityError(
                f"durable run {spec.run_id!r} runs agent {spec.agent_name!r}, which this "
                f"runtime does not have (its agents: {sorted(self._agents)}); resume it with a "
                "runtime built from the same agent"
            )
        thread = await self._storage.get_thread(spec.thread_id)
        if thread is None:
            raise ThreadNotFoundError(spec.thread_id)
        caller = Caller(self._decode_identity(spec), spec.scope_key, spec.user_key)
        return await self._threads.leases.run(
            thread.id,
            partial(self._run, spec, steps, agent, thread, caller),
            holder=f"durable:{spec.run_id}",
            reclaim=True,
        )

    async def _run(
        self,
        spec: RunSpec,
        steps: Steps,
        agent: Agent,
        thread: ThreadRecord,
        caller: Caller,
        lease: RunLease,
    ) -> Json:
        loop = self._loop
        loop.check_model(agent)
        # runtime_context may hold live objects: computed again on every (re)start, not recorded.
        pending = loop.runtime_context_of(agent, thread, caller, lease)
        run_context = None if pending is None else await pending
        instructions = agent.instructions
        if not isinstance(instructions, str):
            function = instructions
            run_input: InstructionsInput[Any] = InstructionsInput(
                thread.id, caller.scope_key, caller.identity, caller.user_key, run_context
            )

            async def instructions_body() -> Json:
                return await loop.app_call(
                    agent, thread, "instructions", function, run_input, lease
                )

            instructions = await steps.step(instructions_step(), instructions_body)
            if not isinstance(instructions, str):
                raise DefinitionError(
                    f"the instructions function of agent {agent.name!r} returned "
                    f"{type(instructions).__name__}; it must return a str"
                )
        begun = await steps.step(history_step(), partial(self._begin, spec, thread))
        visible, stored = int(begun["visible"]), int(begun["stored"])
        staged = [message_adapter.validate_python(m) for m in begun["staged"]]
        snapshot = await self._threads.history.read(self._storage, thread)
        if len(snapshot) < visible:
            raise DurabilityError(
                f"thread {thread.id!r} holds fewer messages than durable run {spec.run_id!r} "
                f"read when it began ({len(snapshot)} < {visible}): it was changed outside PAI; "
                "the run cannot be resumed (cancel it)"
            )
        history = snapshot.prefix(visible).extended(staged)
        run = Run(
            agent,
            thread,
            caller,
            run_context,
            instructions,
            history,
            staged,
            [],
            self._emits.get(spec.run_id),
            lease=lease,
        )
        position = stored
        for step in range(1, agent.max_steps + 1):
            offered = await loop.offered(run, step)
            usage = run.usage
            recorded = await steps.step(model_step(step), partial(self._model, run, offered, step))
            offered_then = sorted(recorded["offered"])
            if offered_then != sorted(offered.names):
                raise _replay_error(spec, agent, step, offered_then, sorted(offered.names))
            response = _decode_response(recorded["response"])
            run.usage = usage + response.usage
            result, position = await self._complete(
                spec, steps, run, offered, response, step, position
            )
            if result is not None:
                return _encode_result(result)
        error = StepLimitExceededError(
            f"agent {agent.name!r} used all {agent.max_steps} steps in thread {thread.id!r} "
            "without a final answer; raise define_agent(max_steps=...) or check the model's "
            "tool calls"
        )

        async def record_limit() -> Json:
            await loop.record_error(thread.id, "runtime", error, lease)
            return None

        await steps.step(error_step("step_limit"), record_limit)
        raise error

    async def _begin(self, spec: RunSpec, thread: ThreadRecord) -> Json:
        """Where the run starts in its thread, and what it stages (the first time only)."""
        history = await self._threads.history.read(self._storage, thread)
        stored = self._threads.history.stored_count(thread.id)
        if spec.kind == "send":
            staged = list(spec.staged)
        else:
            staged = [
                message_adapter.dump_python(m, mode="json")
                for m in answers(thread, pending_calls(history), spec.results)
            ]
        return {"visible": len(history), "stored": stored, "staged": staged}

    async def _model(self, run: Run, offered: Offered, step: int) -> Json:
        response = await self._loop.request(run, offered, step)
        return {"offered": sorted(offered.names), "response": _encode_response(response)}

    async def _complete(
        self,
        spec: RunSpec,
        steps: Steps,
        run: Run,
        offered: Offered,
        response: ModelResponse,
        step: int,
        position: int,
    ) -> tuple[RunResult | None, int]:
        """:meth:`AgentLoop.complete` with each tool call and the append as steps."""
        agent = run.agent
        message = response.message
        all_calls = message.tool_calls
        cap = agent.max_tool_calls_per_step
        external: list[ToolCall] = []
        runnable: list[tuple[str, StepFn]] = []
        for index, call in enumerate(all_calls[:cap]):
            tool = agent.tools.get(call.name) if call.name in offered.names else None
            if tool is not None and tool.execute is None:
                external.append(call)
                continue
            name = tool_step(step, index, _step_tool_name(call.name))
            body = partial(
                self._tool, run, offered, call, durable_call_id(spec.run_id, step, index)
            )
            runnable.append((name, body))
        if len(runnable) == 1:
            outputs = [await steps.step(*runnable[0])]
        elif runnable:
            outputs = await steps.gather(runnable, limit=agent.max_parallel_tool_calls)
        else:
            outputs = []
        results: list[Message] = [message_adapter.validate_python(o) for o in outputs]
        if len(all_calls) > cap:
            results.extend(over_the_cap(agent, call, len(all_calls)) for call in all_calls[cap:])
        if run.emit is not None:
            for result in results:
                await run.emit(ToolCallResult(cast("ToolResultMessage", result)))
        step_messages: list[Message] = [*run.staged, message, *results]
        await steps.step(
            append_step(step),
            partial(self._append, spec, run.thread.id, position, step_messages, run.lease),
        )
        position += len(step_messages)
        run.history = run.history.extended((message, *results))
        run.written.extend(step_messages)
        run.staged = []
        if external:
            status = "awaiting_tool_results"
        elif not message.tool_calls:
            status = "completed"
        else:
            return None, position
        return (
            RunResult(
                run.thread.id,
                status,
                message.content,
                run.written,
                step,
                tuple(external),
                run.usage,
            ),
            position,
        )

    async def _tool(self, run: Run, offered: Offered, call: ToolCall, call_id: str) -> Json:
        token = DURABLE_CALL.set(DurableCall(call_id))
        try:
            result = await self._loop.run_tool_call(run, offered, call)
        finally:
            DURABLE_CALL.reset(token)
        return message_adapter.dump_python(result, mode="json")

    async def _append(
        self,
        spec: RunSpec,
        thread_id: str,
        position: int,
        messages: Sequence[Message],
        lease: RunLease | None,
    ) -> Json:
        """Append ``messages`` at ``position`` once: when a crash came after the append and
        before the step was recorded, they are found there and not appended again."""
        there = await self._storage.get_messages(thread_id, start=position)
        if not there:
            await self._storage.append_messages(thread_id, messages, lease=lease)
            return len(messages)
        mine = [message_adapter.dump_python(m, mode="json") for m in messages]
        found = [message_adapter.dump_python(m, mode="json") for m in there[: len(messages)]]
        if found == mine:
            return len(messages)
        raise DurabilityError(
            f"thread {thread_id!r} changed under durable run {spec.run_id!r}: at message "
            f"{position} it holds other messages than the ones the run appended there (was it "
            "written outside PAI while the run was down?); the run cannot go on (cancel it)"
        )


def _identity_error(identity: object) -> DurabilityError:
    return DurabilityError(
        f"a durable run records its caller's identity so that another process can resume it, "
        f"and an identity of type {type(identity).__name__} does not come back the same from "
        "JSON; pass create_agent_runtime(durable_identity=<its type>) (a pydantic model, a "
        "dataclass, a TypedDict) so PAI can rebuild it, or use a JSON value (a str, a dict) "
        "as the identity"
    )


def _replay_error(
    spec: RunSpec, agent: Agent, step: int, then: list[str], now: list[str]
) -> DurableReplayError:
    changed = sorted(set(then) ^ set(now))
    culprits = [name for name in changed if name in agent.tool_enabled]
    what = (
        f"the enabled predicate of tool {culprits[0]!r}"
        if len(culprits) == 1
        else f"the enabled predicates of tools {culprits}"
        if culprits
        else f"the tools of agent {agent.name!r} (the agent's definition changed)"
    )
    return DurableReplayError(
        f"durable run {spec.run_id!r} of agent {agent.name!r} took another path on replay at "
        f"step {step}: {what} answered differently (offered then: {then}; now: {now}). "
        "Predicates run again when a run resumes and must answer the same for the same input: "
        "read only the run's input (not the clock, randomness or live state), or resume the "
        "run with the code that recorded it"
    )


def _encode_response(response: ModelResponse) -> Json:
    return {
        "message": message_adapter.dump_python(response.message, mode="json"),
        "usage": [response.usage.input_tokens, response.usage.output_tokens],
        "finish_reason": response.finish_reason,
    }


def _decode_response(data: Json) -> ModelResponse:
    message = message_adapter.validate_python(data["message"])
    if not isinstance(message, AssistantMessage):
        raise DurabilityError(f"a recorded model step holds a {message.role} message")
    tokens_in, tokens_out = data["usage"]
    return ModelResponse(message, Usage(int(tokens_in), int(tokens_out)), data["finish_reason"])


def _encode_result(result: RunResult) -> Json:
    return {
        "thread_id": result.thread_id,
        "status": result.status,
        "text": result.text,
        "messages": [message_adapter.dump_python(m, mode="json") for m in result.messages],
        "steps": result.steps,
        "pending": [call.model_dump(mode="json") for call in result.pending_tool_calls],
        "usage": [result.usage.input_tokens, result.usage.output_tokens],
    }


def _decode_result(data: Json) -> RunResult:
    try:
        tokens_in, tokens_out = data["usage"]
        return RunResult(
            data["thread_id"],
            data["status"],
            data["text"],
            [message_adapter.validate_python(m) for m in data["messages"]],
            int(data["steps"]),
            tuple(ToolCall.model_validate(c) for c in data["pending"]),
            Usage(int(tokens_in), int(tokens_out)),
        )
    except (KeyError, TypeError, ValueError) as error:
        raise DurabilityError(
            f"a durable run's result could not be read ({error!r}); it was not made by this "
            "release of PAI"
        ) from error


__all__ = ["DurableRuns"]
