""":class:`TemporalEngine`: PAI's durability engine on Temporal. It imports Temporal's SDK (and
:mod:`pai.durable_temporal._workflow`, which needs it) only when an engine starts or an admin
command runs: importing this package, and building an engine from ``pai.toml``, stay cheap.

Where things run. The engine's worker runs in a task of the runtime's asyncio loop; the
activity ``pai.step`` (a step's work, :meth:`DurableHost.perform`) runs on that loop, where PAI's
storage works. The workflow code (:meth:`DurableHost.execute`) runs where Temporal's worker runs
workflow code: in its workflow thread, on Temporal's deterministic event loop; it does no I/O.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Final

from pydantic import ValidationError

from pai.core import ConfigError, DurabilityError, UnknownDurableRunError
from pai.core.ext import DurableHost, DurableRunInfo, DurableRunStatus, RunSpec
from pai.durable_temporal._errors import TemporalEngineError, rebuild
from pai.durable_temporal._options import TemporalOptions

if TYPE_CHECKING:
    from temporalio.client import Client, WorkflowExecution, WorkflowHandle
    from temporalio.worker import Worker

    from pai.durable_temporal._workflow import Served

__all__ = ["STATUSES", "TemporalEngine"]

_log = logging.getLogger("pai.durable_temporal")

STATUSES: Final[Mapping[str, DurableRunStatus]] = {
    "RUNNING": "running",
    "CONTINUED_AS_NEW": "running",
    "COMPLETED": "succeeded",
    "FAILED": "failed",
    "TERMINATED": "failed",
    "TIMED_OUT": "failed",
    "CANCELED": "cancelled",
}
"""Temporal's workflow statuses as PAI's run statuses. ``RUNNING`` is running whether a worker
is executing one of its steps or none is alive (Temporal hands its next step to the first worker
that polls the task queue); ``TERMINATED`` and ``TIMED_OUT`` are failed. Temporal has no
pending state for a run: none is ``pending``."""

_QUERY_STATUS: Final[Mapping[str, str]] = {
    "RUNNING": "Running",
    "CONTINUED_AS_NEW": "ContinuedAsNew",
    "COMPLETED": "Completed",
    "FAILED": "Failed",
    "TERMINATED": "Terminated",
    "TIMED_OUT": "TimedOut",
    "CANCELED": "Canceled",
}
"""The same statuses as Temporal's list filter spells them (``ExecutionStatus="Running"``)."""


class TemporalEngine:
    """Durable runs on Temporal: each run a Temporal workflow (``pai.durable_run``, its id the
    run's id), each of its steps an activity (``pai.step``) that any worker polling the task
    queue can perform, and take over from a worker that died.

    Pass it to a runtime; entering the runtime connects to Temporal and starts a worker on the
    task queue, in a task of the runtime's event loop::

        engine = TemporalEngine(target_host="temporal.internal:7233", task_queue="support")
        async with create_agent_runtime(agent=agent, durability=engine) as runtime:
            ...

    Options are a :class:`TemporalOptions` or its fields as keyword arguments. Runs left
    unfinished by a worker that died are resumed by Temporal itself, on whichever worker polls
    the task queue next (this process after a restart, or another one): a process does not
    resume runs by its own identity, as DBOS does. asyncio only: on trio, :meth:`start` raises
    :class:`~pai.core.DurabilityError`.
    """

    def __init__(self, options: TemporalOptions | None = None, /, **kwargs: Any) -> None:
        if options is not None and kwargs:
            raise TypeError(
                f"TemporalEngine takes a TemporalOptions or keyword options, not both (got "
                f"options and {sorted(kwargs)})"
            )
        if options is None:
            try:
                options = TemporalOptions(**kwargs)
            except ValidationError as error:
                raise ConfigError(_options_problem(error)) from None
        self.options: TemporalOptions = options
        """What this engine connects to and runs steps with."""
        self._host: DurableHost | None = None
        self._client: Client | None = None
        self._admin: Client | None = None
        self._worker: Worker | None = None
        self._serving: asyncio.Task[None] | None = None
        self._served: Served | None = None
        self._waiting: set[asyncio.Task[Any]] = set()
        self._closing = False

    @property
    def name(self) -> str:
        """``"temporal"``, the engine's name in configuration."""
        return "temporal"

    @property
    def started(self) -> bool:
        """Whether this engine's worker runs (between :meth:`start` and :meth:`aclose`)."""
        return self._host is not None

    def __repr__(self) -> str:
        return f"TemporalEngine({self.options!r})"

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self, host: DurableHost) -> None:
        """Connect to Temporal and start a worker for ``host`` on the task queue; Temporal then
        hands it steps of new runs and of runs other workers left unfinished."""
        loop = _asyncio_loop()
        if self._host is not None:
            if self._host is host:
                return
            raise TemporalEngineError(
                "this TemporalEngine already serves another runtime; give each runtime its own "
                "engine"
            )
        from temporalio.worker import Worker

        from pai.durable_temporal._workflow import DurableRun, Served, serve, step_activity

        client = await self._connect()
        options = self.options
        served = Served(host, options)
        worker = Worker(
            client,
            task_queue=options.task_queue,
            workflows=[DurableRun],
            activities=[step_activity(served)],
            identity=options.identity,
            # A run whose worker died has its next workflow task handed to the task queue after
            # this long (Temporal's default: 10 s), like a step without heartbeat.
            sticky_queue_schedule_to_start_timeout=timedelta(seconds=options.heartbeat_timeout),
            graceful_shutdown_timeout=timedelta(seconds=options.shutdown_grace),
        )
        self._client, self._worker, self._host, self._closing = client, worker, host, False
        self._served = served
        serve(options.task_queue, served)
        self._serving = loop.create_task(worker.run(), name="pai-durable-temporal worker")

    async def aclose(self) -> None:
        """Stop the worker: steps in flight get ``shutdown_grace`` seconds to finish, then are cancelled and
        retried by Temporal on another worker (or this one's next start). Callers waiting in
        :meth:`run` get a :class:`~pai.core.DurabilityError`; their runs go on in Temporal."""
        if self._host is None:
            return
        self._closing = True
        try:
            waiting = [task for task in self._waiting if not task.done()]
            for task in waiting:
                task.cancel()
            if waiting:
                await asyncio.wait(waiting)
            worker, serving = self._worker, self._serving
            if worker is not None and serving is not None and not serving.done():
                await worker.shutdown()
            if serving is not None:
                with contextlib.suppress(BaseException):
                    await serving
        finally:
            from pai.durable_temporal._workflow import unserve

            if self._served is not None:
                unserve(self.options.task_queue, self._served)
            self._host = self._worker = self._serving = self._served = None
            self._client = None
            self._waiting.clear()

    async def _connect(self) -> Client:
        from temporalio.client import Client

        options = self.options
        try:
            return await Client.connect(
                options.target_host,
                namespace=options.namespace,
                api_key=None if options.api_key is None else options.api_key.get_secret_value(),
                tls=options.use_tls,
                identity=options.identity,
            )
        except Exception as error:
            text = " ".join(str(error).split()) or type(error).__name__
            raise TemporalEngineError(
                f"could not connect to Temporal at {options.target_host} (namespace "
                f"{options.namespace!r}): {text}; check that the server runs and target_host, "
                "namespace, tls and api_key are right"
            ) from None

    # -- runs --------------------------------------------------------------------------------

    async def run(self, spec: RunSpec) -> Any:
        """Start the run ``spec`` as the workflow ``spec.run_id``, or attach to the workflow of
        that id (running, or finished: its outcome); its result, or the exception it raised."""
        client, serving = self._client, self._serving
        if self._host is None or client is None or serving is None:
            raise DurabilityError(
                f"TemporalEngine.run() for run {spec.run_id!r} before start(): enter the "
                "runtime (async with runtime) first"
            )
        from pai.durable_temporal._workflow import decode, encode

        text = encode(spec.to_json(), f"the input of durable run {spec.run_id!r}")
        waiter = asyncio.ensure_future(self._outcome(client, spec, text))
        self._waiting.add(waiter)
        try:
            done, _ = await asyncio.wait({waiter, serving}, return_when=asyncio.FIRST_COMPLETED)
            if waiter not in done:
                waiter.cancel()
                raise self._worker_failure(serving)
            result = waiter.result()
        except asyncio.CancelledError:
            waiter.cancel()
            current = asyncio.current_task()
            if self._closing and current is not None and not current.cancelling():
                raise DurabilityError(
                    f"durable run {spec.run_id!r} was interrupted: its runtime closed while it "
                    "ran; Temporal goes on with it on another worker, or this one's next start"
                ) from None
            raise
        finally:
            self._waiting.discard(waiter)
        return decode(result, f"the result of durable run {spec.run_id!r}")

    def _worker_failure(self, serving: asyncio.Task[None]) -> TemporalEngineError:
        error = None if serving.cancelled() else serving.exception()
        text = "it stopped" if error is None else f"{type(error).__name__}: {error}"
        return TemporalEngineError(
            f"the Temporal worker on task queue {self.options.task_queue!r} at "
            f"{self.options.target_host} failed: {text}; check the namespace and the server"
        )

    async def _outcome(self, client: Client, spec: RunSpec, text: str) -> str:
        from temporalio.client import WorkflowFailureError
        from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
        from temporalio.exceptions import WorkflowAlreadyStartedError

        from pai.durable_temporal._workflow import WORKFLOW_NAME

        handle: WorkflowHandle[Any, str]
        try:
            handle = await client.start_workflow(
                WORKFLOW_NAME,
                text,
                id=spec.run_id,
                task_queue=self.options.task_queue,
                result_type=str,
                # A running workflow of this id is attached to; a finished one is not started
                # again: its outcome is read below.
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                memo={"thread_id": spec.thread_id, "agent": spec.agent_name},
            )
        except WorkflowAlreadyStartedError:
            handle = client.get_workflow_handle(spec.run_id, result_type=str)
        try:
            return await handle.result()
        except WorkflowFailureError as error:
            raise _run_failure(spec.run_id, error.cause) from error

    # -- administering recorded runs (pai.core.ext.DurableRunAdmin) -------------------------------

    async def list_runs(
        self, *, status: str | None = None, limit: int = 100
    ) -> Sequence[DurableRunInfo]:
        """PAI's runs on this engine's task queue and namespace, newest first. Temporal's
        statuses read as PAI's (see :data:`STATUSES`): ``RUNNING`` → running, ``COMPLETED`` →
        succeeded, ``FAILED``, ``TERMINATED`` and ``TIMED_OUT`` → failed, ``CANCELED`` →
        cancelled; none is pending. The thread and agent come from the run's memo; the executor
        is the identity of the last worker that took a step of a running run (``None`` when
        none is in flight), and the error of a failed run is read from its outcome. Works
        without :meth:`start`, and resumes nothing."""
        known = ("pending", "running", "succeeded", "failed", "cancelled")
        if status is not None and status not in known:
            raise DurabilityError(
                f"unknown durable run status {status!r}; one of {', '.join(known)}"
            )
        if limit <= 0:
            return []
        wanted = (
            list(_QUERY_STATUS)
            if status is None
            else [name for name, word in STATUSES.items() if word == status]
        )
        if not wanted:
            return []
        from pai.durable_temporal._workflow import WORKFLOW_NAME

        query = (
            f'WorkflowType="{WORKFLOW_NAME}" AND TaskQueue="{self.options.task_queue}" AND ('
            + " OR ".join(f'ExecutionStatus="{_QUERY_STATUS[name]}"' for name in wanted)
            + ")"
        )
        client = await self._admin_client()
        try:
            rows = [row async for row in client.list_workflows(query, limit=limit)]
            rows.sort(key=lambda row: row.start_time, reverse=True)
            return [await self._run_info(client, row) for row in rows[:limit]]
        except DurabilityError:
            raise
        except Exception as error:
            raise self._admin_failure(error) from None

    async def cancel_run(self, run_id: str) -> None:
        """Ask Temporal to cancel the run: the step in flight is cancelled at its next heartbeat,
        the workflow code sees the cancellation at the step it waits on, and the run ends
        ``cancelled``. Temporal does not resume a cancelled workflow (see :meth:`resume_run`).
        :class:`~pai.core.UnknownDurableRunError` when there is no such run; a
        :class:`~pai.core.DurabilityError` when it already finished."""
        handle, state = await self._find(run_id)
        if state != "RUNNING":
            raise DurabilityError(
                f"durable run {run_id!r} already {STATUSES.get(state, state.lower())} (Temporal: "
                f"{state}); there is nothing to cancel"
            )
        try:
            await handle.cancel()
        except Exception as error:
            raise self._admin_failure(error) from None

    async def resume_run(self, run_id: str) -> None:
        """A running run needs nothing: Temporal resumes it by itself as soon as a worker polls
        its task queue (start a process with this engine's task queue), so this returns at once.
        A finished or cancelled run raises :class:`~pai.core.DurabilityError`: Temporal does not
        run a closed workflow again (send the message again for a new run).
        :class:`~pai.core.UnknownDurableRunError` when there is no such run."""
        _, state = await self._find(run_id)
        if state in ("RUNNING", "CONTINUED_AS_NEW"):
            return
        raise DurabilityError(
            f"durable run {run_id!r} is {STATUSES.get(state, state.lower())} (Temporal: {state}); "
            "Temporal resumes only runs that are still running (a worker polling the task queue "
            f"{self.options.task_queue!r} takes them over by itself), never a closed one"
        )

    async def aclose_admin(self) -> None:
        """Forget the admin connection the methods above opened (Temporal's client closes with
        it)."""
        self._admin = None

    async def _find(self, run_id: str) -> tuple[WorkflowHandle[Any, Any], str]:
        from temporalio.service import RPCError, RPCStatusCode

        client = await self._admin_client()
        handle = client.get_workflow_handle(run_id)
        try:
            described = await handle.describe()
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                raise UnknownDurableRunError(
                    run_id,
                    f"Temporal namespace {self.options.namespace!r} at {self.options.target_host}",
                ) from None
            raise self._admin_failure(error) from None
        except Exception as error:
            raise self._admin_failure(error) from None
        if described.workflow_type != _workflow_name():
            raise UnknownDurableRunError(
                run_id, f"Temporal namespace {self.options.namespace!r} (not a PAI run)"
            )
        state = "RUNNING" if described.status is None else described.status.name
        return handle, state

    async def _run_info(self, client: Client, row: WorkflowExecution) -> DurableRunInfo:
        memo = await row.memo()
        thread, agent = memo.get("thread_id"), memo.get("agent")
        state = "RUNNING" if row.status is None else row.status.name
        executor = error = None
        handle = client.get_workflow_handle(row.id, run_id=row.run_id)
        if state == "RUNNING":
            described = await handle.describe()
            identities = [
                pending.last_worker_identity
                for pending in described.raw_description.pending_activities
                if pending.last_worker_identity
            ]
            executor = identities[-1] if identities else None
        elif STATUSES.get(state) == "failed":
            error = await _failure_text(handle)
        return DurableRunInfo(
            run_id=row.id,
            status=STATUSES.get(state, "running"),
            thread_id=thread if isinstance(thread, str) else None,
            agent_name=agent if isinstance(agent, str) else None,
            created_at=row.start_time,
            updated_at=row.close_time or row.execution_time or row.start_time,
            executor=executor,
            error=error,
            engine_status=state,
        )

    async def _admin_client(self) -> Client:
        if self._client is not None:
            return self._client
        if self._admin is None:
            self._admin = await self._connect()
        return self._admin

    def _admin_failure(self, error: Exception) -> TemporalEngineError:
        text = " ".join(str(error).split()) or type(error).__name__
        return TemporalEngineError(
            f"could not read or change PAI's runs in Temporal at {self.options.target_host} "
            f"(namespace {self.options.namespace!r}): {type(error).__name__}: {text}"
        )


def _workflow_name() -> str:
    from pai.durable_temporal._workflow import WORKFLOW_NAME

    return WORKFLOW_NAME


async def _failure_text(handle: WorkflowHandle[Any, Any]) -> str | None:
    from temporalio.client import WorkflowFailureError

    try:
        await handle.result(follow_runs=False)
    except WorkflowFailureError as error:
        cause = error.cause
        from temporalio.exceptions import ApplicationError

        if isinstance(cause, ApplicationError):
            return f"{cause.type}: {cause.message}" if cause.type else cause.message
        return f"{type(cause).__name__}: {cause}"
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    return None


def _run_failure(run_id: str, cause: BaseException | None) -> Exception:
    """The exception a failed workflow stands for (see :func:`rebuild`)."""
    from temporalio.exceptions import (
        ActivityError,
        ApplicationError,
        CancelledError,
        TerminatedError,
        TimeoutError,
    )

    while isinstance(cause, ActivityError) and cause.cause is not None:
        cause = cause.cause
    if isinstance(cause, ApplicationError):
        return rebuild(cause.type, cause.message)
    if isinstance(cause, CancelledError):
        return DurabilityError(
            f"durable run {run_id!r} was cancelled (pai runs cancel) and took no further step; "
            "Temporal does not resume a cancelled run: send the message again"
        )
    if isinstance(cause, TerminatedError):
        return DurabilityError(f"durable run {run_id!r} was terminated in Temporal: {cause}")
    if isinstance(cause, TimeoutError):
        return DurabilityError(f"durable run {run_id!r} timed out in Temporal: {cause}")
    return TemporalEngineError(
        f"durable run {run_id!r} failed in Temporal: {type(cause).__name__}: {cause}"
    )


def _asyncio_loop() -> asyncio.AbstractEventLoop:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        raise DurabilityError(
            "pai-durable-temporal runs on asyncio only, and this runtime runs on another event "
            "loop (trio?): Temporal's worker and client run on an asyncio loop. Run the runtime "
            "on asyncio (asyncio.run, or anyio.run(..., backend='asyncio')), or run without "
            "durability"
        ) from None


def _options_problem(error: ValidationError) -> str:
    problems = "; ".join(
        f"{'.'.join(str(part) for part in item['loc']) or 'options'}: "
        f"{item['msg'].removeprefix('Value error, ')}"
        for item in error.errors(include_input=False, include_url=False)
    )
    return f"TemporalEngine options: {problems}"
