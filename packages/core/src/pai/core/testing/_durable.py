"""An in-memory durability engine for tests: a journal of steps, and crashes on demand."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import anyio

from pai.core._durability import DurableHost, Json, RunSpec, StepFn
from pai.core._errors import DurabilityError, DurableReplayError


class SimulatedCrash(BaseException):
    """Raised by a :class:`JournalEngine` at the step it was told to crash at: the run stops
    there as if its process had died (what the journal recorded stays; nothing else runs). A
    ``BaseException``, so no ``except Exception`` in the code under test swallows it."""


@dataclass(eq=False)
class _Journal:
    spec: RunSpec
    names: list[str] = field(default_factory=list[str])
    """The step names in the order the run first took them (a replay must take them again)."""
    results: dict[int, Json] = field(default_factory=dict[int, Json])
    """What each finished step returned, by position."""
    outcome: Json = None
    error: BaseException | None = None
    done: bool = False


class JournalEngine:
    """A durability engine for tests, in memory: it records each run's steps in a journal, so a
    run can be "crashed" at any step (:meth:`crash_at`) and resumed (:meth:`recover`) by the
    same runtime or a new one built on the same storage, with the replay a real engine does.

    Like DBOS, it checks on replay that the run takes the same step at each position, and
    (stricter than DBOS, like Temporal) that every step's result is JSON. It does not survive
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
        """The ids of runs that started and did not finish (crashed)."""
        return [run_id for run_id, journal in self.journals.items() if not journal.done]

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
        steps = _JournalSteps(self, journal)
        try:
            outcome = await host.execute(journal.spec, steps)
        except SimulatedCrash:
            raise
        except BaseExceptionGroup as group:
            crash = group.subgroup(SimulatedCrash)
            if crash is not None:
                raise _first(crash) from None
            journal.error, journal.done = group, True
            raise
        except Exception as error:
            journal.error, journal.done = error, True
            raise
        journal.outcome, journal.done = outcome, True
        return outcome

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

    def _take(self, name: str) -> int:
        position = self._position
        self._position += 1
        names = self._journal.names
        if position < len(names):
            if names[position] != name:
                raise DurableReplayError(
                    f"durable run {self._journal.spec.run_id!r} took step {name!r} at position "
                    f"{position} on replay, where it recorded {names[position]!r}"
                )
        else:
            names.append(name)
        return position

    async def step(self, name: str, fn: StepFn) -> Json:
        return await self._at(self._take(name), name, fn)

    async def gather(self, calls: Sequence[tuple[str, StepFn]], *, limit: int) -> list[Json]:
        positions = [self._take(name) for name, _ in calls]
        results: list[Json] = [None] * len(calls)
        limiter = anyio.CapacityLimiter(max(limit, 1))

        async def one(index: int) -> None:
            async with limiter:
                name, fn = calls[index]
                results[index] = await self._at(positions[index], name, fn)

        async with anyio.create_task_group() as tg:
            for index in range(len(calls)):
                tg.start_soon(one, index)
        return results

    async def _at(self, position: int, name: str, fn: StepFn) -> Json:
        recorded = self._journal.results
        if position in recorded:
            return json.loads(json.dumps(recorded[position]))
        engine = self._engine
        engine._maybe_crash(name, "before")  # pyright: ignore[reportPrivateUsage]
        value = await fn()
        try:
            text = json.dumps(value)
        except (TypeError, ValueError) as error:
            raise DurabilityError(
                f"step {name!r} of durable run {self._journal.spec.run_id!r} returned "
                f"{type(value).__name__}, which is not JSON: {error}"
            ) from error
        engine.executed.append((self._journal.spec.run_id, name))
        engine._maybe_crash(name, "after")  # pyright: ignore[reportPrivateUsage]
        recorded[position] = json.loads(text)
        return json.loads(text)


__all__ = ["JournalEngine", "SimulatedCrash"]
