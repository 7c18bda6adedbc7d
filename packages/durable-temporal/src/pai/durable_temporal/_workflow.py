"""PAI's durable run as a Temporal workflow, and :class:`~pai.core.ext.Steps` over activities.

Only :mod:`pai.durable_temporal._engine` imports this module, when an engine starts: it imports
Temporal's SDK, which importing :mod:`pai.durable_temporal` does not.

The workflow ``pai.durable_run`` runs the host's workflow code (:meth:`DurableHost.execute`);
each step is one execution of the activity ``pai.step``, which calls
:meth:`DurableHost.perform` in whichever worker polls the task queue. Names are compatibility
data, like PAI's step names: a run recorded under them replays only under them.

How the workflow finds its host: Temporal wants a workflow class defined at module level, so
an engine registers its host and options for its task queue with :func:`serve` when it starts
(:func:`unserve` when it closes), and :class:`DurableRun` looks up the one registered for the task
queue of the run it executes. The activity is made per engine by :func:`step_activity`, closing
over that engine's host: a step is performed by the host of the worker that took it.

Everything that crosses Temporal is JSON text (the run's spec, each step's payload and result,
the run's result): Temporal's records never depend on Python classes, and a replay hands the
workflow code exactly what the first execution saw.

Failures. An exception raised by a step's work is recorded as a non-retryable
``ApplicationError`` whose ``type`` is the exception's class name: Temporal does not perform the
step again (PAI's core records a failed step in the thread; a retry would record it twice), and
the workflow code sees it raised again as that ``pai.core`` class when it is one (else as
:class:`~pai.durable_temporal.TemporalEngineError`). A step whose worker died (no heartbeat
within ``heartbeat_timeout``) or ran past ``step_timeout`` is retried, without limit, by another
worker. An exception escaping the workflow code fails the workflow the same way.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final

from temporalio import activity, workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    ApplicationErrorCategory,
    FailureError,
)

from pai.core import DurabilityError
from pai.core.ext import DurableHost, RunSpec
from pai.durable_temporal._errors import TemporalEngineError, rebuild
from pai.durable_temporal._options import TemporalOptions

__all__ = [
    "ACTIVITY_NAME",
    "PAYLOAD_LIMIT",
    "WORKFLOW_NAME",
    "DurableRun",
    "Served",
    "TemporalSteps",
    "check_size",
    "decode",
    "encode",
    "failure",
    "retry_policy",
    "serve",
    "step_activity",
    "unserve",
]

WORKFLOW_NAME: Final = "pai.durable_run"
"""The workflow type PAI's runs are recorded under (compatibility data)."""

ACTIVITY_NAME: Final = "pai.step"
"""The activity type of a run's steps (compatibility data)."""

PAYLOAD_LIMIT: Final = 2_000_000
"""The most bytes of JSON text a step's payload or result may have. Temporal refuses a payload
over 2 MB (its ``limit.blobSize.error``), and a refused activity result is retried forever as a
timeout: PAI refuses it first, with the step's name. A thread storage that keeps blobs
(:class:`~pai.core.ext.BlobStore`) keeps large tool results out of the records."""

_FIRST_RETRY: Final = timedelta(milliseconds=200)
_LONGEST_RETRY: Final = timedelta(seconds=5)


def encode(value: object, what: str) -> str:
    """``value`` as JSON text; :class:`~pai.core.DurabilityError` naming ``what`` when it is not
    JSON."""
    try:
        return json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise DurabilityError(
            f"{what} is {type(value).__name__}, which is not JSON: {error}; a durable run "
            "records only JSON (dict, list, str, numbers, booleans, None)"
        ) from None


def decode(text: object, what: str) -> Any:
    """What :func:`encode` made, read back."""
    if not isinstance(text, str):
        raise TemporalEngineError(
            f"{what}: Temporal recorded {type(text).__name__}, not the JSON text PAI records; "
            "was this workflow started by PAI?"
        )
    try:
        return json.loads(text)
    except ValueError as error:
        raise TemporalEngineError(
            f"{what}: Temporal recorded text that is not JSON: {error}"
        ) from None


def check_size(text: str, what: str) -> str:
    """``text`` when it fits in a Temporal payload (:data:`PAYLOAD_LIMIT`); a
    :class:`~pai.core.DurabilityError` naming ``what`` otherwise."""
    size = len(text.encode())
    if size > PAYLOAD_LIMIT:
        raise DurabilityError(
            f"{what} is {size} bytes of JSON, over the {PAYLOAD_LIMIT} bytes a Temporal payload "
            "may hold; a tool result this large is kept as a blob of its thread when the thread "
            "storage keeps blobs (pai.core.ext.BlobStore: the memory, SQLite and PostgreSQL "
            "storages do), else make the step's output smaller"
        )
    return text


def failure(error: BaseException) -> ApplicationError:
    """``error`` as Temporal records it: a non-retryable ``ApplicationError`` typed by the
    exception's class name."""
    if isinstance(error, ApplicationError):
        return error
    if isinstance(error, TemporalEngineError) and error.error_type:
        # A failure read back from a step: recorded again as what it was.
        error_type, message = error.error_type, error.error_message
    else:
        error_type, message = type(error).__name__, str(error) or type(error).__name__
    # Benign: a step's failure is the run's business (PAI records it in the thread), not a
    # fault of the worker, so Temporal's SDK logs it quietly.
    return ApplicationError(
        message, type=error_type, non_retryable=True, category=ApplicationErrorCategory.BENIGN
    )


def retry_policy() -> RetryPolicy:
    """How a step is retried: only when its attempt timed out (its worker died, or it ran past
    ``step_timeout``), without limit, after 0.2 s and then up to 5 s apart. Errors of the step's
    work are raised non-retryable, so Temporal never performs them again."""
    return RetryPolicy(
        initial_interval=_FIRST_RETRY,
        backoff_coefficient=2.0,
        maximum_interval=_LONGEST_RETRY,
        maximum_attempts=0,
    )


class TemporalSteps:
    """:class:`~pai.core.ext.Steps` in the workflow: each step one execution of ``pai.step``.

    Steps are numbered in the order they are asked for (:meth:`gather` numbers all of its calls,
    in the order given, before any runs); the activity id is ``<number>/<step name>``, so a
    replay that asks for other steps than were recorded is caught by Temporal's determinism
    check."""

    def __init__(self, spec_text: str, run_id: str, options: TemporalOptions) -> None:
        self._spec_text = spec_text
        self._options = options
        self._count = 0
        self.run_id: str = run_id
        """The run whose steps these are (for messages)."""

    async def step(self, name: str, payload: Any = None) -> Any:
        """Perform the step ``name`` on ``payload`` as an activity (or read what Temporal
        recorded of it)."""
        number = self._next()
        return await self._run(number, name, payload)

    async def gather(self, calls: Sequence[tuple[str, Any]], *, limit: int) -> list[Any]:
        """Perform ``calls`` at most ``limit`` at a time; their results in the order given.
        When one fails, the others still running are cancelled and its error is raised."""
        numbered = [(self._next(), name, payload) for name, payload in calls]
        # Deterministic in a workflow: Temporal's event loop runs the tasks in creation order.
        semaphore = asyncio.Semaphore(max(limit, 1))

        async def one(number: int, name: str, payload: Any) -> Any:
            async with semaphore:
                return await self._run(number, name, payload)

        tasks = [asyncio.ensure_future(one(*call)) for call in numbered]
        try:
            return list(await asyncio.gather(*tasks))
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

    def _next(self) -> int:
        self._count += 1
        return self._count

    async def _run(self, number: int, name: str, payload: Any) -> Any:
        what = f"step {name!r} of durable run {self.run_id!r}"
        payload_text = check_size(
            encode(payload, f"the payload of {what}"), f"the payload of {what}"
        )
        options = self._options
        try:
            result: str = await workflow.execute_activity(
                ACTIVITY_NAME,
                args=[self._spec_text, name, payload_text],
                result_type=str,
                activity_id=f"{number}/{name}",
                summary=name,
                start_to_close_timeout=timedelta(seconds=options.step_timeout),
                heartbeat_timeout=timedelta(seconds=options.heartbeat_timeout),
                retry_policy=retry_policy(),
            )
        except ActivityError as error:
            cause = error.cause
            if isinstance(cause, ApplicationError):
                raise rebuild(cause.type, cause.message) from None
            raise
        return decode(result, f"the result of {what}")


@dataclass(frozen=True, eq=False)
class Served:
    """What a worker of this process serves a task queue with: its host and its options."""

    host: DurableHost
    options: TemporalOptions


_served: dict[str, list[Served]] = {}
"""Per task queue, the engines of this process serving it, latest last: the workflow code of a
run on that queue is the latest one's ``host.execute`` (every host serving one task queue has
the same agents, so the same workflow code)."""


def serve(task_queue: str, served: Served) -> None:
    """Register ``served`` for the workflows of ``task_queue`` run in this process."""
    _served.setdefault(task_queue, []).append(served)


def unserve(task_queue: str, served: Served) -> None:
    """Undo :func:`serve`."""
    found = _served.get(task_queue, [])
    if served in found:
        found.remove(served)
    if not found:
        _served.pop(task_queue, None)


# Not sandboxed: the workflow code is PAI's own (DurableHost.execute), deterministic by contract
# and doing no I/O, and it reaches the agents' definitions, which Temporal's sandbox would import
# again for every run and may refuse (it restricts modules it does not know to be deterministic).
# Temporal still checks each replay against the run's history.
@workflow.defn(name=WORKFLOW_NAME, sandboxed=False)
class DurableRun:
    """The workflow ``pai.durable_run``: the run whose spec is its input, executed (or replayed)
    by the host registered for its task queue."""

    @workflow.run
    async def run(self, spec_text: str) -> str:
        """Run the host's workflow code; the JSON text of its result."""
        task_queue = workflow.info().task_queue
        found = _served.get(task_queue)
        if not found:
            # Not a failure of the run: the workflow task is retried, by this worker once an
            # engine serves the queue again, or by another worker.
            raise RuntimeError(
                f"no TemporalEngine serves task queue {task_queue!r} in this process"
            )
        served = found[-1]
        try:
            # An input PAI cannot read fails the run (Temporal would retry a failed workflow
            # task for ever).
            spec = RunSpec.from_json(decode(spec_text, "a durable run's input"))
            result = await served.host.execute(
                spec, TemporalSteps(spec_text, spec.run_id, served.options)
            )
            return encode(result, f"the result of durable run {spec.run_id!r}")
        except (FailureError, workflow.NondeterminismError):
            raise
        except Exception as error:
            raise failure(error) from None


def step_activity(served: Served) -> Callable[..., Any]:
    """The activity ``pai.step`` performing steps with ``served.host``, heartbeating every third
    of ``heartbeat_timeout`` while the step's work runs."""
    beat_every = served.options.heartbeat_timeout / 3
    host = served.host

    @activity.defn(name=ACTIVITY_NAME)
    async def step(spec_text: str, name: str, payload_text: str) -> str:
        what = f"step {name!r} of a durable run"
        beating = asyncio.ensure_future(_heartbeat(beat_every))
        try:
            spec = RunSpec.from_json(decode(spec_text, f"the input of {what}"))
            what = f"step {name!r} of durable run {spec.run_id!r}"
            result = await host.perform(spec, name, decode(payload_text, f"the payload of {what}"))
            return check_size(encode(result, f"the result of {what}"), f"the result of {what}")
        except Exception as error:
            raise failure(error) from None
        finally:
            beating.cancel()

    return step


async def _heartbeat(every: float) -> None:
    """Heartbeat the activity of this context every ``every`` seconds, from now on."""
    while True:
        activity.heartbeat()
        await asyncio.sleep(every)
