"""Durable runs in a runtime: each run an engine's workflow, each phase of it a recorded step.

:class:`DurableRuns` is the :class:`~pai.core._durability.DurableHost` of one runtime. ``send``
and ``submit_tool_results`` hand a :class:`~pai.core._durability.RunSpec` to the engine, which
calls :meth:`DurableRuns.execute` (at once, and again after a crash, in this process or
another) and, for each step it has not recorded, :meth:`DurableRuns.perform`.

``execute`` is the workflow's code. It mirrors :meth:`AgentLoop.run
<pai.core._loop.AgentLoop.run>` phase by phase, but does no I/O and reads no clock: it decides
from the spec, the agent's definition and what its steps returned, and asks for each step by
name and a JSON payload. ``perform`` does a step's work with the loop's own methods, rebuilding
what it needs (the thread, the caller, the runtime context, the history) from the spec and the
payload, so any process with the same agents can perform any step:

=========================  ===============================================================
step                       records
=========================  ===============================================================
``pai.app/instructions``   the instructions' text, when they are a function
``pai.app/history``        how much of the thread the run read, what it stages, and which
                           submitted approvals it runs
``pai.model/{n}``          the model's answer on step ``n``, and the tools it was offered
``pai.tool/{n}/{i}/{t}``   tool call ``i`` of step ``n`` (tool ``t``): its result message (a
                           reference to a blob of the thread when it is large);
                           on step ``0``, pending call ``i`` that a submission approved
``pai.append/{n}``         that step ``n`` was appended (done once: compared on replay)
``pai.error/step_limit``   the step-limit error recorded in the thread
``pai.end``                that the run gave its thread back
=========================  ===============================================================

App functions run inside steps, so what they answered is recorded: instructions in their own
step, ``enabled`` predicates in the model step (with the tools they let through). The
``runtime_context`` is computed again in each process that performs a step of the run (once per
run there) and not recorded, since it may hold live objects: a database handle, a client.

Each step that reads or writes the thread holds its run lease as ``durable:<run id>``, taken with
``reclaim=True`` and kept when the step ends: the process performing the next step (this one or
another, after a crash) takes it at once, a run of another holder waits as for any run, and
``pai.end`` gives it back. A run whose engine pauses it longer than ``run_lease_ttl`` between
steps lets its thread go meanwhile.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Final, cast

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
    Steps,
    append_step,
    durable_call_id,
    end_step,
    error_step,
    history_step,
    instructions_step,
    model_step,
    tool_step,
)
from pai.core._errors import (
    DefinitionError,
    DurabilityError,
    StepLimitExceededError,
    ThreadNotFoundError,
)
from pai.core._execution import pending_calls
from pai.core._lifecycle import HistorySnapshot
from pai.core._loop import AgentLoop, Emit, Offered, Run, answers, awaiting, over_the_cap
from pai.core._messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    message_adapter,
)
from pai.core._model import NO_USAGE, ModelResponse, Usage
from pai.core._run_events import RunFinished, ToolCallResult
from pai.core._storage import BlobStore, RunLease, ThreadRecord

if TYPE_CHECKING:
    from pai.core._threads import Threads

_UNSAFE = re.compile(r"[^A-Za-z0-9_.:-]")


def _step_tool_name(name: str) -> str:
    """A tool name as it goes into a step name: the model chose it, so it is cut to 64
    characters of a safe alphabet (the step name is for reading; the position identifies)."""
    return _UNSAFE.sub("_", name[:64]) or "_"


_NO_HISTORY: Final = HistorySnapshot([], 0)
"""What a tool call's run reads of the history: nothing (tools see none)."""


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
        self._sessions: dict[str, _Session] = {}
        """What this process knows of the runs it performs steps of, oldest first."""
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
        result = await self._read_result(data)
        if emit is not None:
            await emit(RunFinished(result))
        return result

    async def _read_result(self, data: Json) -> RunResult:
        """The run's result, its messages read from the thread where the run wrote them."""
        try:
            start, end = (int(n) for n in data["written"])
            thread_id = str(data["thread_id"])
        except (KeyError, TypeError, ValueError) as error:
            raise _unreadable(error) from error
        there = await self._storage.get_messages(thread_id, start=start)
        return _decode_result(data, there[: end - start])

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

    # -- the workflow's code (the engine runs it, again after a crash): no I/O ------------------

    async def execute(self, spec: RunSpec, steps: Steps) -> Json:
        """Run (or replay) ``spec``: decide each step from what the earlier ones returned, and
        end with ``pai.end`` (also when the run fails), which gives the thread back."""
        agent = self._agent_of(spec)
        driven = _Driven()
        try:
            result = await self._drive(spec, steps, agent, driven)
        except Exception:
            # The thread is given back on failure too; if even that fails (the run was
            # cancelled), its lease expires after run_lease_ttl.
            with contextlib.suppress(Exception):
                await steps.step(end_step(), {"blobs": driven.blobs})
            raise
        await steps.step(end_step(), {"blobs": driven.blobs})
        return result

    async def _drive(self, spec: RunSpec, steps: Steps, agent: Agent, driven: _Driven) -> Json:
        self._loop.check_model(agent)
        instructions = agent.instructions
        if not isinstance(instructions, str):
            instructions = await steps.step(instructions_step())
            if not isinstance(instructions, str):
                raise DefinitionError(
                    f"the instructions function of agent {agent.name!r} returned "
                    f"{type(instructions).__name__}; it must return a str"
                )
        begun = await steps.step(history_step())
        visible, stored = int(begun["visible"]), int(begun["stored"])
        staged: list[Json] = list(begun["staged"])
        approved: list[Json] = list(begun.get("approved", ()))
        if approved:
            staged = await self._run_approved(steps, agent, staged, approved, driven)
        position = stored
        usage = NO_USAGE
        for step in range(1, agent.max_steps + 1):
            recorded = await steps.step(
                model_step(step),
                {
                    "step": step,
                    "instructions": instructions,
                    "visible": visible,
                    "stored": stored,
                    "position": position,
                    "staged": staged,
                },
            )
            offered: list[str] = list(recorded["offered"])
            response = _decode_response(recorded["response"])
            usage = usage + response.usage
            message = response.message
            all_calls = message.tool_calls
            cap = agent.max_tool_calls_per_step
            external: list[ToolCall] = []
            runnable: list[tuple[str, Json]] = []
            for index, call in enumerate(all_calls[:cap]):
                tool = agent.tools.get(call.name) if call.name in offered else None
                if tool is not None and (tool.execute is None or tool.needs_approval):
                    external.append(call)
                    continue
                runnable.append(
                    (
                        tool_step(step, index, _step_tool_name(call.name)),
                        {
                            "step": step,
                            "index": index,
                            "call": call.model_dump(mode="json"),
                            "offered": offered,
                        },
                    )
                )
            outputs = await _tool_steps(steps, runnable, agent.max_parallel_tool_calls, driven)
            # Tool results stay JSON here (a large one is a reference to a blob: the append
            # step reads it back).
            results: list[Json] = list(outputs)
            if len(all_calls) > cap:
                results.extend(
                    message_adapter.dump_python(
                        over_the_cap(agent, call, len(all_calls)), mode="json"
                    )
                    for call in all_calls[cap:]
                )
            step_messages = [
                *staged,
                message_adapter.dump_python(message, mode="json"),
                *results,
            ]
            await steps.step(
                append_step(step),
                {"position": position, "messages": step_messages, "results": len(results)},
            )
            position += len(step_messages)
            staged = []
            if external:
                result = awaiting(agent, spec.thread_id, message.content, (), step, external, usage)
            elif not message.tool_calls:
                result = RunResult(
                    spec.thread_id, "completed", message.content, (), step, (), usage
                )
            else:
                continue
            return _encode_result(result, stored, position)
        error = StepLimitExceededError(
            f"agent {agent.name!r} used all {agent.max_steps} steps in thread "
            f"{spec.thread_id!r} without a final answer; raise define_agent(max_steps=...) or "
            "check the model's tool calls"
        )
        await steps.step(error_step("step_limit"), {"message": str(error)})
        raise error

    async def _run_approved(
        self, steps: Steps, agent: Agent, staged: list[Json], approved: list[Json], driven: _Driven
    ) -> list[Json]:
        """Run the calls a submission approved, each a tool step of step 0 (before the first
        model step); the staged messages with their results, in the pending calls' order."""
        runnable = [
            (
                tool_step(0, int(each["index"]), _step_tool_name(each["call"]["name"])),
                {
                    "step": 0,
                    "index": int(each["index"]),
                    "call": each["call"],
                    "offered": [each["call"]["name"]],
                },
            )
            for each in approved
        ]
        outputs = await _tool_steps(steps, runnable, agent.max_parallel_tool_calls, driven)
        by_index = {
            int(each["index"]): output for each, output in zip(approved, outputs, strict=True)
        }
        others = iter(staged)
        return [
            by_index[index] if index in by_index else next(others)
            for index in range(len(staged) + len(approved))
        ]

    def _agent_of(self, spec: RunSpec) -> Agent:
        agent = self._agents.get(spec.agent_name)
        if agent is None:
            raise DurabilityError(
                f"durable run {spec.run_id!r} runs agent {spec.agent_name!r}, which this "
                f"runtime does not have (its agents: {sorted(self._agents)}); resume it with a "
                "runtime built from the same agent"
            )
        return agent

    # -- the steps' work (the engine calls it for each step it has not recorded) ----------------

    async def perform(self, spec: RunSpec, name: str, payload: Json) -> Json:
        """Do the work of step ``name`` of ``spec`` on ``payload``; its result as JSON."""
        kind = name.split("/", 1)[0]
        if kind == "pai.tool":
            session = await self._session(spec)
            return await self._kept(spec, name, await self._tool(spec, session, payload))
        if name == end_step():
            return await self._end(spec, payload)
        session = await self._session(spec)
        if kind == "pai.model":
            body = partial(self._model, spec, session, payload)
        elif kind == "pai.append":
            body = partial(self._append, spec, session, payload)
        elif name == history_step():
            body = partial(self._begin, spec, session)
        elif name == instructions_step():
            body = partial(self._instructions, session)
        elif kind == "pai.error":
            body = partial(self._record_limit, session, payload)
        else:
            raise DurabilityError(
                f"durable run {spec.run_id!r} asks for step {name!r}, which this release of PAI "
                "does not know; resume it with the release that started it"
            )
        return await self._threads.leases.run(
            session.thread.id,
            body,
            holder=_holder(spec),
            reclaim=True,
            release=False,
        )

    async def _session(self, spec: RunSpec) -> _Session:
        """What this process knows of the run: its agent, thread and caller (made once per run
        here; another process performing its steps makes its own)."""
        session = self._sessions.get(spec.run_id)
        if session is not None:
            return session
        agent = self._agent_of(spec)
        thread = await self._storage.get_thread(spec.thread_id)
        if thread is None:
            raise ThreadNotFoundError(spec.thread_id)
        caller = Caller(self._decode_identity(spec), spec.scope_key, spec.user_key)
        session = self._sessions.setdefault(spec.run_id, _Session(agent, thread, caller))
        while len(self._sessions) > _SESSIONS:
            self._sessions.pop(next(iter(self._sessions)))
        return session

    async def _context(self, session: _Session, lease: RunLease | None) -> Any:
        """The run's runtime context in this process (computed on first use, not recorded)."""
        if not session.has_context:
            pending = self._loop.runtime_context_of(
                session.agent, session.thread, session.caller, lease
            )
            session.context = None if pending is None else await pending
            session.has_context = True
        return session.context

    def _run_of(
        self,
        spec: RunSpec,
        session: _Session,
        context: Any,
        instructions: str = "",
        history: HistorySnapshot = _NO_HISTORY,
        lease: RunLease | None = None,
    ) -> Run:
        return Run(
            session.agent,
            session.thread,
            session.caller,
            context,
            instructions,
            history,
            [],
            [],
            self._emits.get(spec.run_id),
            lease=lease,
        )

    async def _instructions(self, session: _Session, lease: RunLease) -> Json:
        agent, thread, caller = session.agent, session.thread, session.caller
        run_input: InstructionsInput[Any] = InstructionsInput(
            thread.id,
            caller.scope_key,
            caller.identity,
            caller.user_key,
            await self._context(session, lease),
        )
        function = cast("Any", agent.instructions)
        return await self._loop.app_call(agent, thread, "instructions", function, run_input, lease)

    async def _begin(self, spec: RunSpec, session: _Session, lease: RunLease) -> Json:
        """Where the run starts in its thread, and what it stages (the first time only)."""
        thread = session.thread
        history = await self._threads.history.read(self._storage, thread)
        stored = self._threads.history.stored_count(thread.id)
        if spec.kind == "send":
            return {"visible": len(history), "stored": stored, "staged": list(spec.staged)}
        # The approved calls are recorded, not run: each runs later as a step of its own.
        staged: list[Json] = []
        approved: list[Json] = []
        pending = pending_calls(history)
        for index, answer in enumerate(answers(session.agent, thread, pending, spec.results)):
            if isinstance(answer, ToolCall):
                approved.append({"index": index, "call": answer.model_dump(mode="json")})
            else:
                staged.append(message_adapter.dump_python(answer, mode="json"))
        return {"visible": len(history), "stored": stored, "staged": staged, "approved": approved}

    async def _model(
        self, spec: RunSpec, session: _Session, payload: Json, lease: RunLease
    ) -> Json:
        visible, stored, position = payload["visible"], payload["stored"], payload["position"]
        staged = await self._messages(spec, payload["staged"])
        # The thread holds what the run read when it began, then what it appended since; the
        # messages a model reads leave errors out, and the run appends none.
        snapshot = await self._threads.history.read(self._storage, session.thread)
        needed = visible + position - stored
        if len(snapshot) < needed:
            raise DurabilityError(
                f"thread {spec.thread_id!r} holds fewer messages than durable run "
                f"{spec.run_id!r} read and wrote ({len(snapshot)} < {needed}): it was changed "
                "outside PAI; the run cannot be resumed (cancel it)"
            )
        history = snapshot.prefix(needed).extended(staged)
        run = self._run_of(
            spec,
            session,
            await self._context(session, lease),
            payload["instructions"],
            history,
            lease,
        )
        step = int(payload["step"])
        offered = await self._loop.offered(run, step)
        response = await self._loop.request(run, offered, step)
        return {"offered": sorted(offered.names), "response": _encode_response(response)}

    async def _tool(self, spec: RunSpec, session: _Session, payload: Json) -> Json:
        call = ToolCall.model_validate(payload["call"])
        names = frozenset[str](payload["offered"])
        run = self._run_of(spec, session, await self._context(session, None))
        call_id = durable_call_id(spec.run_id, int(payload["step"]), int(payload["index"]))
        token = DURABLE_CALL.set(DurableCall(call_id))
        try:
            result = await self._loop.run_tool_call(run, Offered((), names), call)
        finally:
            DURABLE_CALL.reset(token)
        return message_adapter.dump_python(result, mode="json")

    async def _append(
        self, spec: RunSpec, session: _Session, payload: Json, lease: RunLease
    ) -> Json:
        """Append the step's messages at their position once: when a crash came after the
        append and before the step was recorded, they are found there and not appended again."""
        thread_id = session.thread.id
        position: int = payload["position"]
        messages = await self._messages(spec, payload["messages"])
        emit = self._emits.get(spec.run_id)
        if emit is not None and payload["results"]:
            for result in messages[-int(payload["results"]) :]:
                await emit(ToolCallResult(cast("ToolResultMessage", result)))
        there = await self._storage.get_messages(thread_id, start=position)
        if not there:
            await self._storage.append_messages(thread_id, messages, lease=lease)
            return len(messages)
        found = [message_adapter.dump_python(m, mode="json") for m in there[: len(messages)]]
        if found == [message_adapter.dump_python(m, mode="json") for m in messages]:
            return len(messages)
        raise DurabilityError(
            f"thread {thread_id!r} changed under durable run {spec.run_id!r}: at message "
            f"{position} it holds other messages than the ones the run appended there (was it "
            "written outside PAI while the run was down?); the run cannot go on (cancel it)"
        )

    async def _record_limit(self, session: _Session, payload: Json, lease: RunLease) -> Json:
        error = StepLimitExceededError(payload["message"])
        await self._loop.record_error(session.thread.id, "runtime", error, lease)
        return None

    async def _kept(self, spec: RunSpec, name: str, value: Json) -> Json:
        """A step's result as the engine records it: itself, or, when its JSON text is over
        :data:`BLOB_OVER` bytes and the storage keeps blobs, a reference to a blob of the
        thread holding it (engines limit what they record: Temporal refuses over 2 MB)."""
        storage = self._storage
        if not isinstance(storage, BlobStore):
            return value
        data = json.dumps(value).encode()
        if len(data) <= BLOB_OVER:
            return value
        key = f"{_blob_prefix(spec)}{name}"
        await storage.put_blob(spec.thread_id, key, data)
        return {_BLOB: key, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}

    async def _messages(self, spec: RunSpec, recorded: list[Json]) -> list[Message]:
        """The messages ``recorded`` holds, each read back from its blob when it is a
        reference (see :meth:`_kept`)."""
        messages: list[Message] = []
        for item in recorded:
            if isinstance(item, dict) and _BLOB in item:
                item = await self._blob(spec, cast("dict[str, Any]", item))
            messages.append(message_adapter.validate_python(item))
        return messages

    async def _blob(self, spec: RunSpec, reference: dict[str, Any]) -> Json:
        storage = self._storage
        key = str(reference[_BLOB])
        data = (
            await storage.get_blob(spec.thread_id, key) if isinstance(storage, BlobStore) else None
        )
        if data is None or hashlib.sha256(data).hexdigest() != reference.get("sha256"):
            raise DurabilityError(
                f"durable run {spec.run_id!r} recorded a step result kept as blob {key!r} of "
                f"thread {spec.thread_id!r}, and the thread storage holds "
                f"{'no such blob' if data is None else 'other bytes under it'} (was the thread "
                "deleted, or the storage changed?); the run cannot go on (cancel it)"
            )
        return json.loads(data)

    async def _end(self, spec: RunSpec, payload: Json) -> Json:
        """Give the thread back (when this run still holds it), drop the run's blobs (when it
        kept any), and forget the run here."""
        self._sessions.pop(spec.run_id, None)
        if payload and payload["blobs"] and isinstance(self._storage, BlobStore):
            await self._storage.delete_blobs(spec.thread_id, _blob_prefix(spec))
        leases = self._threads.leases
        try:
            lease = await self._storage.acquire_run(
                spec.thread_id, holder=_holder(spec), ttl=leases.ttl, reclaim=True
            )
        except ThreadNotFoundError:
            return None  # deleted: nothing to give back
        if lease is not None:
            await self._storage.release_run(lease)
        return None


@dataclass(eq=False, slots=True)
class _Driven:
    """What the workflow's code learned from its steps that its last step needs."""

    blobs: bool = False
    """Whether a tool step's result was kept as a blob (so ``pai.end`` drops the run's)."""


async def _tool_steps(
    steps: Steps, runnable: list[tuple[str, Json]], limit: int, driven: _Driven
) -> list[Json]:
    """The results of the tool steps ``runnable``, in order (one awaited alone, several at most
    ``limit`` at a time); notes in ``driven`` whether one was kept as a blob."""
    if len(runnable) == 1:
        outputs = [await steps.step(*runnable[0])]
    elif runnable:
        outputs = await steps.gather(runnable, limit=limit)
    else:
        return []
    if any(isinstance(output, dict) and _BLOB in output for output in outputs):
        driven.blobs = True
    return outputs


@dataclass(eq=False, slots=True)
class _Session:
    agent: Agent
    thread: ThreadRecord
    caller: Caller
    context: Any = None
    has_context: bool = False


_SESSIONS: Final = 1_024
"""How many runs' sessions a process keeps (the oldest is made again when needed)."""


def _holder(spec: RunSpec) -> str:
    return f"durable:{spec.run_id}"


BLOB_OVER: Final = 256 * 1024
"""A tool step's result whose JSON text is longer (bytes) is kept as a blob of its thread, and
the step records a reference to it."""

_BLOB: Final = "pai.blob"
"""The key marking a recorded step result as a reference to a blob."""


def _blob_prefix(spec: RunSpec) -> str:
    return f"pai.durable/{spec.run_id}/"


def _identity_error(identity: object) -> DurabilityError:
    return DurabilityError(
        f"a durable run records its caller's identity so that another process can resume it, "
        f"and an identity of type {type(identity).__name__} does not come back the same from "
        "JSON; pass create_agent_runtime(durable_identity=<its type>) (a pydantic model, a "
        "dataclass, a TypedDict) so PAI can rebuild it, or use a JSON value (a str, a dict) "
        "as the identity"
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


def _encode_result(result: RunResult, start: int, end: int) -> Json:
    """The run's result as the engine records it: its messages by where they are in the thread
    (``start`` to ``end``), not by value, so a result stays small whatever the tools returned."""
    return {
        "thread_id": result.thread_id,
        "status": result.status,
        "text": result.text,
        "written": [start, end],
        "steps": result.steps,
        "pending": [call.model_dump(mode="json") for call in result.pending_tool_calls],
        "usage": [result.usage.input_tokens, result.usage.output_tokens],
        "approvals": [call.model_dump(mode="json") for call in result.pending_approvals],
    }


def _decode_result(data: Json, messages: Sequence[Message]) -> RunResult:
    try:
        tokens_in, tokens_out = data["usage"]
        return RunResult(
            data["thread_id"],
            data["status"],
            data["text"],
            messages,
            int(data["steps"]),
            tuple(ToolCall.model_validate(c) for c in data["pending"]),
            Usage(int(tokens_in), int(tokens_out)),
            tuple(ToolCall.model_validate(c) for c in data.get("approvals", ())),
        )
    except (KeyError, TypeError, ValueError) as error:
        raise _unreadable(error) from error


def _unreadable(error: Exception) -> DurabilityError:
    return DurabilityError(
        f"a durable run's result could not be read ({error!r}); it was not made by this "
        "release of PAI"
    )


__all__ = ["DurableRuns"]
