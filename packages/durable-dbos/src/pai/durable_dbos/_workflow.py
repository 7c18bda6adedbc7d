"""PAI's durable run as a DBOS workflow, and :class:`~pai.core.ext.Steps` over DBOS steps.

This module does not import DBOS: :mod:`pai.durable_dbos._engine` hands it the two DBOS calls
it needs as a :class:`StepApi` (``DBOS.run_step_async``, and ``DBOS.reserve_step`` for
:meth:`DbosSteps.gather`).

What DBOS records is JSON text: the workflow's input is ``RunSpec.to_json()`` as a string, each
step's output the JSON text of what its body returned, and the workflow's output the JSON text of
what the host returned. So a replay hands the run exactly what the first execution saw (a tuple
came back as a list both times), and the records do not depend on pickled Python classes.

DBOS numbers a workflow's steps in the order they are *started*; on replay it checks that the
step at each number has the name it recorded (``DBOSUnexpectedStepError`` otherwise).
:meth:`DbosSteps.gather` reserves the numbers of all its steps, in the order given, before it
starts any, so concurrent tool calls keep their positions whatever order they finish in.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Protocol

import anyio

from pai.core import DurabilityError
from pai.core.ext import DurableHost, RunSpec
from pai.durable_dbos._errors import DbosEngineError

__all__ = [
    "WORKFLOW_NAME",
    "DbosSteps",
    "Reservation",
    "StepApi",
    "StepBody",
    "decode",
    "encode",
    "execute_run",
    "recordable",
]

WORKFLOW_NAME = "pai.durable_run"
"""The name DBOS records PAI's runs under (compatibility data, like the step names)."""

StepBody = Callable[[], Coroutine[Any, Any, str]]
"""What DBOS runs as a step: no arguments, the JSON text of the step's result."""


class Reservation(Protocol):
    """A step number drawn before the step runs (``dbos.StepReservation``)."""

    async def run(self, name: str, body: StepBody) -> str:
        """Run ``body`` as the step ``name`` at the reserved number (or return what it
        recorded)."""
        ...


class StepApi(Protocol):
    """The DBOS calls a run's steps go through (implemented in ``_engine``)."""

    async def run_step(self, name: str, body: StepBody) -> str:
        """Run ``body`` as the workflow's next step ``name`` (or return what it recorded)."""
        ...

    def reserve(self) -> Reservation:
        """Draw the workflow's next step number now, to run a step at it later."""
        ...


def encode(value: object, what: str) -> str:
    """``value`` as JSON text; :class:`~pai.core.DurabilityError` naming ``what`` when it is not
    JSON."""
    try:
        return json.dumps(value)
    except (TypeError, ValueError) as error:
        raise DurabilityError(
            f"{what} returned {type(value).__name__}, which is not JSON: {error}; a durable "
            "run records only JSON (dict, list, str, numbers, booleans, None)"
        ) from error


def decode(text: object, what: str) -> Any:
    """What :func:`encode` made, read back."""
    if not isinstance(text, str):
        raise DbosEngineError(
            f"{what}: DBOS recorded {type(text).__name__}, not the JSON text PAI records; was "
            "this workflow recorded by PAI?"
        )
    return json.loads(text)


def recordable(error: Exception, what: str) -> Exception:
    """``error`` if DBOS can record it (it survives pickling), else a :class:`DbosEngineError`
    carrying its type and message (raised ``from error``: this process sees the original as its
    cause). DBOS pickles a failed step's or run's exception to raise it again on replay and to
    callers that attach; an exception that does not come back from pickle would break the
    recording itself."""
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:
        substitute = DbosEngineError(
            f"{what} failed with {type(error).__module__}.{type(error).__qualname__}: {error} "
            "(recorded as this error: the original does not survive pickling, which DBOS "
            "records exceptions with)"
        )
        return substitute
    return error


class DbosSteps:
    """:class:`~pai.core.ext.Steps` over DBOS: each call a DBOS step whose body is the host's
    :meth:`~pai.core.DurableHost.perform`, recording the JSON text of its result."""

    def __init__(self, api: StepApi, host: DurableHost, spec: RunSpec) -> None:
        self._api = api
        self._host = host
        self._spec = spec
        self.run_id: str = spec.run_id
        """The run whose steps these are (for messages)."""

    async def step(self, name: str, payload: Any = None) -> Any:
        """Perform the step ``name`` on ``payload`` (or return what it recorded)."""
        body = self._body(name, payload)
        return decode(await self._api.run_step(name, body), self._what(name))

    async def gather(self, calls: Sequence[tuple[str, Any]], *, limit: int) -> list[Any]:
        """Perform ``calls`` at most ``limit`` at a time, their step numbers drawn in the order
        given before any of them starts; their results in that order."""
        reservations = [self._api.reserve() for _ in calls]
        results: list[Any] = [None] * len(calls)
        limiter = anyio.CapacityLimiter(max(limit, 1))

        async def one(index: int) -> None:
            name, payload = calls[index]
            async with limiter:
                text = await reservations[index].run(name, self._body(name, payload))
            results[index] = decode(text, self._what(name))

        async with anyio.create_task_group() as group:
            for index in range(len(calls)):
                group.start_soon(one, index)
        return results

    def _body(self, name: str, payload: Any) -> StepBody:
        what = self._what(name)
        # What the work gets is what an engine storing the payload would hand over: decoded
        # JSON (DBOS records only the result, and the workflow's code asks again on replay).
        text = encode(payload, f"the payload of {what}")
        host, spec = self._host, self._spec

        async def body() -> str:
            try:
                value = await host.perform(spec, name, json.loads(text))
            except Exception as error:
                substitute = recordable(error, what)
                if substitute is error:
                    raise
                raise substitute from error
            return encode(value, what)

        return body

    def _what(self, name: str) -> str:
        return f"step {name!r} of durable run {self.run_id!r}"


async def execute_run(host: DurableHost, spec_text: str, api: StepApi) -> str:
    """The workflow's body: the run ``spec_text`` (``RunSpec.to_json()`` as JSON text) executed
    (or replayed) by ``host``; the JSON text of its result."""
    spec = RunSpec.from_json(decode(spec_text, "a durable run's input"))
    what = f"durable run {spec.run_id!r}"
    try:
        result = await host.execute(spec, DbosSteps(api, host, spec))
    except Exception as error:
        substitute = recordable(error, what)
        if substitute is error:
            raise
        raise substitute from error
    return encode(result, what)
