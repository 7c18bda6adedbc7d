"""The seam between PAI's agent loop and a durable-execution engine (DBOS, Temporal).

A durable run is an engine's *workflow*: its input is a :class:`RunSpec`, and everything it does
that touches the world (the model, a tool call, an append to the thread, an app function whose
answer the run must keep) is a named *step* the engine records. When the process running it
dies, the engine runs the workflow again, in this process after a restart or in another one;
each recorded step returns what it returned the first time, and only the steps that never
finished run.

The runtime side is :class:`DurableHost`, in two halves an engine calls apart:

- :meth:`DurableHost.execute` is the workflow's code. It is deterministic and does no I/O: it
  reads only the spec, the agent's definition and what its steps returned, and asks for each
  step by name and a JSON payload through :class:`Steps`. An engine that replays workflow code
  in a sandbox of its own (Temporal) can run it there.
- :meth:`DurableHost.perform` is a step's work, where the I/O happens: given the spec, the
  step's name and its payload, it needs nothing else, so any process whose runtime has the same
  agents can perform any step (an engine that sends steps to other workers as activities).

An engine adapter (``pai-durable-dbos``, ``pai-durable-temporal``) implements
:class:`DurabilityEngine` and :class:`Steps`, whose ``step(name, payload)`` is "record
``host.perform(spec, name, payload)`` under ``name``".

What crosses the seam is JSON (``dict``, ``list``, ``str``, numbers, booleans, ``None``), so an
engine that stores JSON (Temporal) and one that pickles (DBOS) record the same thing.

Step names are compatibility data: a run recorded by one release must replay in the next. They
are pinned by a test; change them only with a migration note.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, Literal, Protocol, TypeAlias, get_args, runtime_checkable

from pai.core._errors import DurabilityError

Json: TypeAlias = Any
"""A JSON value: ``dict[str, Json]``, ``list[Json]``, ``str``, ``int``, ``float``, ``bool`` or
``None`` (``Any`` for the type checker: recursive aliases do not survive every engine's SDK)."""

SPEC_VERSION: Final = 1
"""The :class:`RunSpec` layout. A spec of another version is refused with a clear error."""


@dataclass(eq=False, slots=True)
class DurableCall:
    """The tool call of a durable run running in this context: its ``id`` (the same every time
    the run is replayed) and a counter of the effects it has keyed so far.

    A capability that makes effects a replay must not repeat (a sandbox's commands) keys each by
    :meth:`next_key`: the n-th effect of a call gets the same key on every replay, as long as
    the call makes its effects in the same order (one after another, not concurrently).
    """

    id: str
    effects: int = 0

    def next_key(self, kind: str) -> str:
        """The key of this call's next effect of ``kind`` (``"sandbox.command"``):
        ``"{id}/{kind}/{n}"``, ``n`` counting every kind from 0."""
        key = f"{self.id}/{kind}/{self.effects}"
        self.effects += 1
        return key


DURABLE_CALL: contextvars.ContextVar[DurableCall | None] = contextvars.ContextVar(
    "pai_durable_call", default=None
)
"""The durable tool call running in this context (``None`` outside durable runs): read it with
:func:`current_durable_call`."""


def current_durable_call() -> DurableCall | None:
    """The tool call of a durable run that the calling code runs in, or ``None`` (outside
    durable runs, and outside tool calls). Capability authors key effects by it."""
    return DURABLE_CALL.get()


# -- step names (pinned by tests: recorded runs replay only under the same names) ---------------


def history_step() -> str:
    """Reads how many messages the thread held when the run began (and, for submitted tool
    results, what the run stages)."""
    return "pai.app/history"


def instructions_step() -> str:
    """The agent's instructions when they are a function (their text is recorded)."""
    return "pai.app/instructions"


def model_step(step: int) -> str:
    """The model's answer on step ``step`` (1-based), with the tools it was offered."""
    return f"pai.model/{step}"


def tool_step(step: int, index: int, tool: str) -> str:
    """Tool call ``index`` (0-based, in the answer's order) of step ``step``."""
    return f"pai.tool/{step}/{index}/{tool}"


def append_step(step: int) -> str:
    """Step ``step``'s messages appended to the thread (idempotent: done once)."""
    return f"pai.append/{step}"


def end_step() -> str:
    """The run ended (however it ended): its hold on the thread is given back."""
    return "pai.end"


def error_step(source: str) -> str:
    """A failure of the run recorded in its thread (``source``: ``"runtime"`` for the step
    limit)."""
    return f"pai.error/{source}"


def durable_call_id(run_id: str, step: int, index: int) -> str:
    """The id of a tool call in a durable run: the same on every replay (the model's own call
    ids need not be unique, nor the same when asked again)."""
    return f"{run_id}/{step}/{index}"


# -- the run's input ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunSpec:
    """What a durable run needs to start, or to start again in another process: JSON only.

    ``kind`` is ``"send"`` (``staged`` holds the user's message) or ``"submit"`` (``results``
    answers the thread's pending tool calls). ``identity`` is the caller's identity as JSON;
    ``scope_key`` and ``user_key`` were derived from it when the run was started.
    """

    run_id: str
    kind: Literal["send", "submit"]
    thread_id: str
    agent_name: str
    scope_key: str
    user_key: str | None
    identity: Json = None
    staged: tuple[Json, ...] = ()
    results: Mapping[str, Json] = field(default_factory=dict[str, Json])

    def to_json(self) -> dict[str, Json]:
        """The spec as the engine records it."""
        return {
            "version": SPEC_VERSION,
            "run_id": self.run_id,
            "kind": self.kind,
            "thread_id": self.thread_id,
            "agent_name": self.agent_name,
            "scope_key": self.scope_key,
            "user_key": self.user_key,
            "identity": self.identity,
            "staged": list(self.staged),
            "results": dict(self.results),
        }

    @classmethod
    def from_json(cls, data: object) -> RunSpec:
        """A spec from what :meth:`to_json` made; :class:`DurabilityError` naming the field
        otherwise (a run recorded by another release, or not by PAI)."""
        if not isinstance(data, dict):
            raise DurabilityError(
                f"a durable run's input must be a JSON object made by RunSpec.to_json(), got "
                f"{type(data).__name__}; was this workflow started by PAI?"
            )
        fields: dict[str, Any] = data  # pyright: ignore[reportUnknownVariableType]
        version = fields.get("version")
        if version != SPEC_VERSION:
            raise DurabilityError(
                f"durable run {fields.get('run_id')!r} was recorded with run spec version "
                f"{version!r}; this release reads version {SPEC_VERSION}. Finish or cancel such "
                "runs with the release that started them before upgrading"
            )

        def text(key: str, *, optional: bool = False) -> Any:
            value = fields.get(key)
            if value is None and optional:
                return None
            if not isinstance(value, str) or not value:
                raise DurabilityError(
                    f"durable run spec field {key!r} must be a non-empty string, got {value!r}"
                )
            return value

        kind = fields.get("kind")
        if kind not in ("send", "submit"):
            raise DurabilityError(
                f"durable run spec field 'kind' must be 'send' or 'submit', got {kind!r}"
            )
        staged = fields.get("staged", [])
        results = fields.get("results", {})
        if not isinstance(staged, list) or not isinstance(results, dict):
            raise DurabilityError(
                "durable run spec fields 'staged' and 'results' must be a list and an object"
            )
        return cls(
            run_id=text("run_id"),
            kind=kind,
            thread_id=text("thread_id"),
            agent_name=text("agent_name"),
            scope_key=text("scope_key"),
            user_key=text("user_key", optional=True),
            identity=fields.get("identity"),
            staged=tuple(staged),  # pyright: ignore[reportUnknownArgumentType]
            results=dict(results),  # pyright: ignore[reportUnknownArgumentType]
        )


# -- what an engine adapter implements ------------------------------------------------------------


@runtime_checkable
class Steps(Protocol):
    """The only I/O a durable run's workflow code does: each call is a step the engine records by
    ``name``, its work done by :meth:`DurableHost.perform` on ``payload``.

    A step runs at least once: when the process dies after its work finished but before the
    engine recorded it, the work is done again on replay. Payloads and results are JSON.
    """

    async def step(self, name: str, payload: Json = None) -> Json:
        """Have the host perform the step ``name`` on ``payload`` (or return what it recorded),
        and record its result. An exception the work raises is what the step raises; engines
        may record it too, and do not perform a failed step again."""
        ...

    async def gather(self, calls: Sequence[tuple[str, Json]], *, limit: int) -> list[Json]:
        """Perform the steps ``calls`` (name and payload each), at most ``limit`` at a time;
        their results in the order given. A replay must see the same steps in the same order
        whatever order they finished in the first time (an engine that numbers steps numbers
        them in the order given, before any runs)."""
        ...


@runtime_checkable
class DurableHost(Protocol):
    """The runtime side of the seam: a run's workflow code, and the work of its steps."""

    async def execute(self, spec: RunSpec, steps: Steps) -> Json:
        """Run (or replay) the run ``spec``: the workflow's code, deterministic, doing nothing
        but through ``steps``. Its result as JSON (a :class:`~pai.core.RunResult` as the host
        encodes it)."""
        ...

    async def perform(self, spec: RunSpec, name: str, payload: Json) -> Json:
        """The work of the step ``name`` of run ``spec`` on ``payload``; its result as JSON.
        Engines call it inside a recorded step (a DBOS step, a Temporal activity), in any
        process whose runtime has the run's agent."""
        ...


@runtime_checkable
class DurabilityEngine(Protocol):
    """A durable-execution engine as PAI uses it; the adapters implement it.

    The runtime calls :meth:`start` once (when it is entered, or before its first durable run),
    :meth:`run` for each run, and :meth:`aclose` when it closes.
    """

    @property
    def name(self) -> str:
        """The engine's name in configuration (``"dbos"``, ``"temporal"``)."""
        ...

    async def start(self, host: DurableHost) -> None:
        """Get ready to run workflows with ``host``, and resume the runs this process (by its
        engine identity) left unfinished when it last died."""
        ...

    async def run(self, spec: RunSpec) -> Json:
        """Start the run ``spec`` (its workflow id is ``spec.run_id``) or, when a run of that id
        exists, attach to it; its result (what :meth:`DurableHost.execute` returned), or the
        exception the run raised."""
        ...

    async def aclose(self) -> None:
        """Stop taking work; runs still in flight are resumed by the next start."""
        ...


# -- administering recorded runs (optional) -------------------------------------------------------

DurableRunStatus: TypeAlias = Literal["pending", "running", "succeeded", "failed", "cancelled"]
"""A durable run's state, the same words for every engine: ``pending`` (waiting for the engine to
start or resume it), ``running`` (started and not finished; an engine that cannot tell a live
run from one whose process died says ``running`` for both), ``succeeded``, ``failed`` and
``cancelled``. Each engine says how its own states map to these."""

DURABLE_RUN_STATUSES: Final[tuple[DurableRunStatus, ...]] = get_args(DurableRunStatus)
"""The statuses of :data:`DurableRunStatus`, in the order above."""


class UnknownDurableRunError(DurabilityError, LookupError):
    """No durable run of the id given is recorded by the engine."""

    def __init__(self, run_id: str, where: str) -> None:
        super().__init__(
            f"no durable run {run_id!r} is recorded in {where}; `pai runs ls` lists the runs"
        )
        self.run_id: str = run_id


def check_run_status(status: str | None) -> DurableRunStatus | None:
    """``status`` if it is one of :data:`DURABLE_RUN_STATUSES` (or ``None``); a
    :class:`DurabilityError` naming them otherwise."""
    if status is None or status in DURABLE_RUN_STATUSES:
        return status
    raise DurabilityError(
        f"unknown durable run status {status!r}; one of {', '.join(DURABLE_RUN_STATUSES)}"
    )


@dataclass(frozen=True, slots=True)
class DurableRunInfo:
    """A durable run as its engine recorded it (what ``pai runs ls`` shows)."""

    run_id: str
    status: DurableRunStatus
    thread_id: str | None = None
    """The thread the run is on, read from its recorded :class:`RunSpec` (``None`` when the
    input is not one PAI recorded)."""
    agent_name: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    executor: str | None = None
    """The process (engine identity) that last ran it, if the engine records one."""
    error: str | None = None
    """Why it failed (``type: message``), for a failed run."""
    engine_status: str = ""
    """The engine's own word for the status (DBOS: ``PENDING``, ``SUCCESS``, ...)."""

    def to_json(self) -> dict[str, Json]:
        """The run as JSON (times as ISO 8601 text), with stable keys."""
        return {
            "id": self.run_id,
            "status": self.status,
            "thread": self.thread_id,
            "agent": self.agent_name,
            "created_at": None if self.created_at is None else self.created_at.isoformat(),
            "updated_at": None if self.updated_at is None else self.updated_at.isoformat(),
            "executor": self.executor,
            "error": self.error,
            "engine_status": self.engine_status,
        }


@runtime_checkable
class DurableRunAdmin(Protocol):
    """What an engine implements, besides :class:`DurabilityEngine`, to have its recorded runs
    listed, cancelled and resumed (``pai runs``). Optional: ``isinstance(engine,
    DurableRunAdmin)`` tells.

    These methods work on an engine that was never started: they open a connection of their own
    to the engine's records and recover nothing (starting an engine resumes its runs; an admin
    command must not). :meth:`aclose_admin` closes that connection.
    """

    async def list_runs(
        self, *, status: str | None = None, limit: int = 100
    ) -> Sequence[DurableRunInfo]:
        """The recorded runs, newest first, at most ``limit``; only those of ``status`` (one of
        :data:`DURABLE_RUN_STATUSES`) when given."""
        ...

    async def cancel_run(self, run_id: str) -> None:
        """Cancel the run ``run_id``: it takes no further step (a process running it stops at
        its next step) and is not resumed. :class:`UnknownDurableRunError` when there is no such
        run; a :class:`DurabilityError` when it already finished."""
        ...

    async def resume_run(self, run_id: str) -> None:
        """Have the run ``run_id`` (cancelled, or stuck) resumed from its last recorded step.
        :class:`UnknownDurableRunError` when there is no such run; a :class:`DurabilityError`
        when the engine cannot resume it (it finished)."""
        ...

    async def aclose_admin(self) -> None:
        """Close the connection the methods above opened (nothing when none was)."""
        ...


def check_engine(value: object, where: str) -> DurabilityEngine:
    """``value`` if it is a :class:`DurabilityEngine`; a :class:`DurabilityError` naming
    ``where`` otherwise."""
    if not isinstance(value, DurabilityEngine):
        raise DurabilityError(
            f"{where}: {value!r} is not a durability engine (it needs name, start(), run() and "
            "aclose()); pass the engine of an adapter, e.g. pai.durable_dbos.DbosEngine(...), or "
            'configure [durability] engine = "dbos" in pai.toml'
        )
    return value


__all__ = [
    "DURABLE_CALL",
    "DURABLE_RUN_STATUSES",
    "SPEC_VERSION",
    "DurabilityEngine",
    "DurableCall",
    "DurableHost",
    "DurableRunAdmin",
    "DurableRunInfo",
    "DurableRunStatus",
    "Json",
    "RunSpec",
    "Steps",
    "UnknownDurableRunError",
    "append_step",
    "check_engine",
    "check_run_status",
    "current_durable_call",
    "durable_call_id",
    "end_step",
    "error_step",
    "history_step",
    "instructions_step",
    "model_step",
    "tool_step",
]
