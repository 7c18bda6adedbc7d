"""An in-memory durability engine for tests: a journal of steps, and crashes on demand."""

from __future__ import annotations

import json
from collections.abc import Generator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

import anyio

from pai.core._durability import (
    DURABLE_CALL,
    DurableCall,
    DurableHost,
    DurableRunInfo,
    DurableRunStatus,
    Json,
    RunSpec,
    UnknownDurableRunError,
    check_run_status,
)
from pai.core._errors import DurabilityError, DurableReplayError


@contextmanager
def durable_call(call_id: str) -> Generator[DurableCall]:
    """Run the block as the tool call ``call_id`` of a durable run: what
    :func:`~pai.core.current_durable_call` returns there (a fresh :class:`~pai.core.DurableCall`,
    as a replay of the call has). For testing a capability's effects without a runtime.

    Example::

        with durable_call("run/1/0"):
            await sandbox.run_command("echo once >> log")   # keyed: run/1/0/sandbox.command/0
    """
    call = DurableCall(call_id)
    token = DURABLE_CALL.set(call)
    try:
        yield call
    finally:
        DURABLE_CALL.reset(token)


class SimulatedCrash(BaseException):
    """Raised by a :class:`JournalEngine` at the step it was told to crash at: the run stops
    there as if its process had died (what the journal recorded stays; nothing else runs). A
    ``BaseException``, so no ``except Exception`` in the code under test swallows it."""


@dataclass(eq=False)
class _Journal:
    spec: RunSpec
    names: list[str] = field(default_factory=list[str])
    """The step names in the order the run first took them (a replay must take them again)."""
    payloads: list[str] = field(default_factory=list[str])
    """Each step's payload as JSON text, by position (a replay must ask with the same)."""
    results: dict[int, Json] = field(default_factory=dict[int, Json])
    """What each finished step returned, by position."""
    outcome: Json = None
    error: BaseException | None = None
    done: bool = False
    cancelled: bool = False
    executing: bool = False
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    updated_at: datetime = field(default_factory=lambda: datetime.now(UTC))

    def status(self) -> DurableRunStatus:
        if self.cancelled:
            return "cancelled"
        if self.done:
            return "failed" if self.error is not None else "succeeded"
        return "running" if self.executing else "pending"

    def info(self) -> DurableRunInfo:
        error = self.error
        return DurableRunInfo(
            run_id=self.spec.run_id,
            status=self.status(),
            thread_id=self.spec.thread_id,
            agent_name=self.spec.agent_name,
            created_at=self.created_at,
            updated_at=self.updated_at,
            executor="journal",
            error=None if error is None else f"{type(error).__name__}: {error}",
            engine_status=self.status(),
        )


class JournalEngine:
    """A durability engine for tests, in memory: it records each run's steps in a journal, so a
    run can be "crashed" at any step (:meth:`crash_at`) and resumed (:meth:`recover`) by the
    same runtime or a new one built on the same storage, with the replay a real engine does.

    It is a :class:`~pai.core.ext.DurableRunAdmin` too: a run that crashed and awaits
    :meth:`recover` is ``pending``, one executing ``running``; a cancelled run takes no further
    step (its next one raises :class:`~pai.core.DurabilityError`) and :meth:`recover` skips it
    until :meth:`resume_run` makes it ``pending`` again.

    Like DBOS, it checks on replay that the run takes the same step at each position, and
    (stricter than DBOS, like Temporal) that every step's payload and result is JSON; stricter
    than both, that a replay asks for each recorded step with the payload it recorded. It does not survive
    its process: use ``pai-durable-dbos`` for that.

    Example::

        engine = JournalEngine()
        runtime = create_test_runtime(agent=agent, model=model, durability=engine)
        engine.crash_at("pai.append/1", when="after")
        with pytest.raises(SimulatedCrash):
            await thread.send("go")
        [result] = await engine.recover()      # resumes where the crash left it
    """

    def __init__(self) -> None:
        self.journals: dict[str, _Journal] = {}
        self.executed: list[tuple[str, str]] = []
        """``(run id, step name)`` of every step body that ran (replayed steps do not run)."""
        self._host: DurableHost | None = None
        self._crash: tuple[str, Literal["before", "after"]] | None = None

    @property
    def name(self) -> str:
        return "journal"

    async def start(self, host: DurableHost) -> None:
        """Serve ``host`` (a runtime started again after a "crash" serves the same journal)."""
        self._host = host

    async def aclose(self) -> None:
        self._host = None

    def crash_at(self, step: str, *, when: Literal["before", "after"] = "before") -> None:
        """Crash the next run that reaches the step named ``step``: ``"before"`` its body runs,
        or ``"after"`` it ran but before its result is recorded (then the body runs again on
        replay: a step is at least once). One crash per call."""
        self._crash = (step, when)

    def pending(self) -> list[str]:
        """The ids of runs that started and did not finish (crashed), and are not cancelled."""
        return [
            run_id
            for run_id, journal in self.journals.items()
            if not journal.done and not journal.cancelled
        ]

    # -- DurableRunAdmin ----------------------------------------------------------------------

    async def list_runs(
        self, *, status: str | None = None, limit: int = 100
    ) -> Sequence[DurableRunInfo]:
        """The journal's runs, newest first (at most ``limit``), of ``status`` when given."""
        wanted = check_run_status(status)
        runs = [journal.info() for journal in reversed(self.journals.values())]
        return [run for run in runs if wanted is None or run.status == wanted][: max(limit, 0)]

    async def cancel_run(self, run_id: str) -> None:
        """Cancel a run: its next step raises, and :meth:`recover` skips it."""
        journal = self._journal(run_id)
        if journal.done and not journal.cancelled:
            raise DurabilityError(
                f"durable run {run_id!r} already {journal.status()}; there is nothing to cancel"
            )
        journal.cancelled = True
        journal.updated_at = datetime.now(UTC)

    async def resume_run(self, run_id: str) -> None:
        """Make a cancelled run pending again: :meth:`recover` resumes it."""
        journal = self._journal(run_id)
        if journal.done:
            raise DurabilityError(
                f"durable run {run_id!r} already {journal.status()}; only a run that did not "
                "finish can be resumed"
            )
        journal.cancelled = False
        journal.updated_at = datetime.now(UTC)

    async def aclose_admin(self) -> None:
        """Nothing to close: the journal is in memory."""

    def _journal(self, run_id: str) -> _Journal:
        journal = self.journals.get(run_id)
        if journal is None:
            raise UnknownDurableRunError(run_id, "the journal engine")
        return journal

    async def run(self, spec: RunSpec) -> Json:
        journal = self.journals.get(spec.run_id)
        if journal is None:
            journal = self.journals[spec.run_id] = _Journal(
                RunSpec.from_json(json.loads(json.dumps(spec.to_json())))
            )
        elif journal.done:
            if journal.error is not None:
                raise journal.error
            return journal.outcome
        return await self._execute(journal)

    async def recover(self) -> list[Json]:
        """Resume every run that crashed, one after another; their results (a run that fails
        raises)."""
        return [await self._execute(self.journals[run_id]) for run_id in self.pending()]

    async def _execute(self, journal: _Journal) -> Json:
        host = self._host
        if host is None:
            raise DurabilityError("JournalEngine.run() before start(): enter the runtime first")
        if journal.cancelled:
            raise DurabilityError(
                f"durable run {journal.spec.run_id!r} was cancelled; resume it first"
            )
        steps = _JournalSteps(self, journal)
        journal.executing = True
        try:
            outcome = await host.execute(journal.spec, steps)
        except SimulatedCrash:
            raise
        except BaseExceptionGroup as group:
            crash = group.subgroup(SimulatedCrash)
            if crash is not None:
                raise _first(crash) from None
            self._finish(journal, error=group)
            raise
        except Exception as error:
            self._finish(journal, error=error)
            raise
        finally:
            journal.executing = False
        self._finish(journal, outcome=outcome)
        return outcome

    def _finish(
        self, journal: _Journal, *, outcome: Json = None, error: BaseException | None = None
    ) -> None:
        if journal.cancelled:
            return  # a cancelled run stays cancelled, as in DBOS
        journal.outcome, journal.error, journal.done = outcome, error, True
        journal.updated_at = datetime.now(UTC)

    def _maybe_crash(self, name: str, when: str) -> None:
        if self._crash == (name, when):
            self._crash = None
            raise SimulatedCrash(f"simulated crash {when} step {name!r}")


def _first(group: BaseExceptionGroup[SimulatedCrash]) -> SimulatedCrash:
    for error in group.exceptions:
        if isinstance(error, BaseExceptionGroup):
            return _first(error)
        return error
    raise AssertionError("an empty exception group")  # pragma: no cover


class _JournalSteps:
    def __init__(self, engine: JournalEngine, journal: _Journal) -> None:
        self._engine = engine
        self._journal = journal
        self._position = 0

    def _take(self, name: str, payload: Json) -> int:
        position = self._position
        self._position += 1
        journal = self._journal
        text = _json_text(
            payload, f"the payload of step {name!r} of durable run {journal.spec.run_id!r}"
        )
        names = journal.names
        if position < len(names):
            if names[position] != name:
                raise DurableReplayError(
                    f"durable run {journal.spec.run_id!r} took step {name!r} at position "
                    f"{position} on replay, where it recorded {names[position]!r}"
                )
            if journal.payloads[position] != text:
                raise DurableReplayError(
                    f"durable run {journal.spec.run_id!r} asked for step {name!r} on replay "
                    f"with another payload than it recorded: {text} (recorded: "
                    f"{journal.payloads[position]}); the run's workflow code is not "
                    "deterministic, or the agent's definition changed"
                )
        else:
            names.append(name)
            journal.payloads.append(text)
        return position

    async def step(self, name: str, payload: Json = None) -> Json:
        return await self._at(self._take(name, payload), name, payload)

    async def gather(self, calls: Sequence[tuple[str, Json]], *, limit: int) -> list[Json]:
        positions = [self._take(name, payload) for name, payload in calls]
        results: list[Json] = [None] * len(calls)
        limiter = anyio.CapacityLimiter(max(limit, 1))

        async def one(index: int) -> None:
            async with limiter:
                name, payload = calls[index]
                results[index] = await self._at(positions[index], name, payload)

        async with anyio.create_task_group() as tg:
            for index in range(len(calls)):
                tg.start_soon(one, index)
        return results

    async def _at(self, position: int, name: str, payload: Json) -> Json:
        journal = self._journal
        recorded = journal.results
        if position in recorded:
            return json.loads(json.dumps(recorded[position]))
        if journal.cancelled:
            raise DurabilityError(
                f"durable run {journal.spec.run_id!r} was cancelled before step {name!r}"
            )
        engine = self._engine
        host = engine._host  # pyright: ignore[reportPrivateUsage]
        assert host is not None  # _execute checked
        engine._maybe_crash(name, "before")  # pyright: ignore[reportPrivateUsage]
        # The work gets the payload as an engine that stores it would hand it over: decoded.
        value = await host.perform(journal.spec, name, json.loads(journal.payloads[position]))
        text = _json_text(value, f"step {name!r} of durable run {journal.spec.run_id!r}")
        engine.executed.append((journal.spec.run_id, name))
        engine._maybe_crash(name, "after")  # pyright: ignore[reportPrivateUsage]
        recorded[position] = json.loads(text)
        journal.updated_at = datetime.now(UTC)
        return json.loads(text)


def _json_text(value: Json, what: str) -> str:
    try:
        return json.dumps(value)
    except (TypeError, ValueError) as error:
        raise DurabilityError(
            f"{what} is {type(value).__name__}, which is not JSON: {error}"
        ) from error


__all__ = ["JournalEngine", "SimulatedCrash", "durable_call"]
