""":class:`DbosEngine`: PAI's durability engine on DBOS. The only module that imports ``dbos``,
and only when an engine starts (``import dbos`` takes seconds; importing this package does not
pay for it).

Where runs execute. DBOS is a process singleton with background threads (a queue poller, a
notification listener) and an event loop of its own in a thread. An async workflow that DBOS
starts by itself (one it resumes after a crash, dispatched by its queue thread) runs on the
"main loop" DBOS adopts at launch: the asyncio loop running in the thread that called
``DBOS.launch()``, as long as that loop runs, and DBOS's own background loop otherwise. So
:meth:`DbosEngine.start` launches DBOS on the runtime's event loop thread (it blocks the loop
while DBOS opens its database and migrates it), and every run, started here or resumed, executes
on the runtime's loop, where PAI's storage works. A run DBOS hands to any other loop (the
runtime's loop has stopped without closing the runtime) is not executed: it stays pending and
the next start resumes it.

DBOS also makes its executor the default executor of the loops it runs on (``asyncio.to_thread``
then runs on DBOS's threads). :meth:`DbosEngine.aclose` gives the runtime's loop a fresh default
executor after DBOS shut its own down.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

import anyio.to_thread
from pydantic import ValidationError

from pai.core import ConfigError, DurabilityError, UnknownDurableRunError
from pai.core.ext import DurableHost, DurableRunInfo, DurableRunStatus, RunSpec
from pai.durable_dbos._errors import DbosEngineError
from pai.durable_dbos._executor import ExecutorLock, Heartbeats
from pai.durable_dbos._options import DbosOptions, mask_url
from pai.durable_dbos._workflow import (
    WORKFLOW_NAME,
    Reservation,
    StepBody,
    decode,
    encode,
    execute_run,
)

if TYPE_CHECKING:
    from dbos import DBOSClient, StepReservation, WorkflowHandleAsync, WorkflowStatus

__all__ = ["STATUSES", "DbosEngine"]

_T = TypeVar("_T")

_log = logging.getLogger("pai.durable_dbos")

_LOG_LEVEL: Final = "WARNING"
"""DBOS's own log level: its start-up lines would otherwise go to the console of ``pai chat``.
An app that wants them raises the ``dbos`` logger's level after the engine started."""

_LISTENER_INTERVAL: Final = 0.1
"""Seconds DBOS's notification listener sleeps between rounds on SQLite (DBOS's default: 1)."""

_STANDBY_POLL: Final = 0.05
"""Seconds between a standby's attempts to take its executor id."""

STATUSES: Final[Mapping[str, DurableRunStatus]] = {
    "ENQUEUED": "pending",
    "DELAYED": "pending",
    "PENDING": "running",
    "SUCCESS": "succeeded",
    "ERROR": "failed",
    "MAX_RECOVERY_ATTEMPTS_EXCEEDED": "failed",
    "CANCELLED": "cancelled",
}
"""DBOS's workflow statuses as PAI's run statuses. ``ENQUEUED`` (a resumed run, waiting for a
DBOS process's queue to take it) and ``DELAYED`` are pending. ``PENDING`` is DBOS's word for a
run that started and did not finish, whether its process is alive or died (DBOS records no
liveness): running. ``MAX_RECOVERY_ATTEMPTS_EXCEEDED`` (DBOS gave up resuming it) is failed,
and can still be resumed."""

_FINISHED: Final = ("SUCCESS", "ERROR")
"""The statuses DBOS neither cancels nor resumes (it leaves such a run as it is)."""

_active: DbosEngine | None = None
"""The engine DBOS serves in this process (DBOS is one per process)."""

_workflow: Callable[[str], Coroutine[Any, Any, str]] | None = None
"""PAI's workflow function as registered with DBOS (once per process: DBOS keeps its registry
across ``DBOS.destroy()``)."""


class DbosEngine:
    """Durable runs on DBOS: each run a DBOS workflow, each of its steps a DBOS step, recorded in
    a SQLite file or a PostgreSQL database (the system database; DBOS needs nothing else).

    Pass it to a runtime; entering the runtime starts DBOS and resumes the runs this process
    (by its executor id) left unfinished when it last died::

        engine = DbosEngine(system_database_url="sqlite:///runs.sqlite")
        async with create_agent_runtime(agent=agent, durability=engine) as runtime:
            ...

    Options are a :class:`DbosOptions` or its fields as keyword arguments.

    One engine runs at a time in a process (DBOS is a process singleton): starting a second
    while one runs raises :class:`DbosEngineError`; after :meth:`aclose`, an engine (this one or
    another) can start again. asyncio only: on trio, :meth:`start` raises
    :class:`~pai.core.DurabilityError`.
    """

    def __init__(self, options: DbosOptions | None = None, /, **kwargs: Any) -> None:
        if options is not None and kwargs:
            raise TypeError(
                f"DbosEngine takes a DbosOptions or keyword options, not both (got options and "
                f"{sorted(kwargs)})"
            )
        if options is None:
            try:
                options = DbosOptions(**kwargs)
            except ValidationError as error:
                raise ConfigError(_options_problem(error)) from None
        self.options: DbosOptions = options
        """What this engine runs DBOS with."""
        self._lock = ExecutorLock(options)
        self._heartbeats = Heartbeats(options)
        self._watch: asyncio.Task[None] | None = None
        self._host: DurableHost | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closing = False
        self._owns_dbos = False
        self._client: DBOSClient | None = None

    @property
    def name(self) -> str:
        """``"dbos"``, the engine's name in configuration."""
        return "dbos"

    @property
    def started(self) -> bool:
        """Whether DBOS runs for this engine (between :meth:`start` and :meth:`aclose`)."""
        return self._host is not None

    def __repr__(self) -> str:
        return f"DbosEngine({self.options!r})"

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self, host: DurableHost) -> None:
        """Launch DBOS on this event loop for ``host``; DBOS then resumes this executor's
        unfinished runs, which execute on this loop through ``host``."""
        global _active
        loop = _asyncio_loop()
        if self._host is not None:
            if self._host is host:
                return
            raise DbosEngineError(
                "this DbosEngine already serves another runtime; give each runtime its own "
                "engine (and run one at a time per process: DBOS is a process singleton)"
            )
        if _active is not None:
            other = _active.options
            raise DbosEngineError(
                f"DBOS already runs in this process for another DbosEngine (executor id "
                f"{other.executor_id!r}, database {other.display_url}); DBOS is one per process: "
                "build one runtime (with all its agents) per process, or close the other "
                "runtime before starting this one"
            )
        _active = self
        self._owns_dbos = False
        try:
            if self.options.standby:
                # Warm first (the import is most of a cold start), then wait. Polled, not a
                # blocking flock in a thread: a cancelled wait must leave no thread behind that
                # takes the lock later.
                await anyio.to_thread.run_sync(_import_dbos)
                while not await anyio.to_thread.run_sync(self._lock.try_acquire):  # noqa: ASYNC110
                    await anyio.sleep(_STANDBY_POLL)
            else:
                await anyio.to_thread.run_sync(self._lock.acquire)
                await anyio.to_thread.run_sync(_import_dbos)
            # Creating or migrating DBOS's tables off the loop: launch() then only checks them.
            await anyio.to_thread.run_sync(self._migrate)
            self._host, self._loop, self._closing = host, loop, False
            self._launch()
            if self.options.takeover_after is not None:
                self._watch = loop.create_task(
                    self._watch_executors(self.options.takeover_after),
                    name="pai-durable-dbos heartbeat",
                )
        except BaseException:
            _active = None
            self._host = self._loop = None
            if self._owns_dbos:
                await anyio.to_thread.run_sync(_destroy)
                self._owns_dbos = False
            self._lock.release()
            raise

    def _migrate(self) -> None:
        from dbos import DBOS

        options = self.options
        try:
            if options.is_sqlite:
                DBOS.migrate(options.system_database_url)
            else:
                DBOS.migrate(options.system_database_url, schema=options.system_schema)
        except Exception as error:
            raise self._failure(error) from None

    def _failure(self, error: Exception) -> DbosEngineError:
        text = mask_url(" ".join(str(error).split())) or type(error).__name__
        return DbosEngineError(
            f"DBOS could not start on the system database {self.options.display_url}: "
            f"{type(error).__name__}: {text}; check that the database is reachable and that "
            "this user may create tables in it"
        )

    def _launch(self) -> None:
        """Configure and launch DBOS, on the event loop's thread (see the module's docstring)."""
        from dbos import DBOS, DBOSConfig

        options = self.options
        _register_workflow()
        _set_recovery_interval(options.recovery_interval)
        config: DBOSConfig = {
            "name": options.app_name,
            "system_database_url": options.system_database_url,
            "application_version": options.application_version,
            "executor_id": options.executor_id,
            "log_level": _LOG_LEVEL,
            # On SQLite a thread sleeps this long between polls for notifications (which PAI
            # does not use yet); DBOS.destroy() joins it, so it bounds how long aclose() takes.
            "notification_listener_polling_interval_sec": _LISTENER_INTERVAL,
        }
        if not options.is_sqlite:
            config["dbos_system_schema"] = options.system_schema
        try:
            DBOS(config=config)
        except Exception as error:
            raise self._failure(error) from None
        # DBOS() hands back the instance other code configured, if any, ignoring this config.
        if (DBOS.executor_id, DBOS.application_version) != (
            options.executor_id,
            options.application_version,
        ):
            raise DbosEngineError(
                f"DBOS was already configured in this process by other code (executor id "
                f"{DBOS.executor_id!r}, application version {DBOS.application_version!r}); "
                "DbosEngine configures DBOS itself. Let PAI's engine own DBOS in this process, "
                "or call DBOS.destroy() first"
            )
        self._owns_dbos = True
        try:
            DBOS.launch()
        except Exception as error:
            raise self._failure(error) from None

    async def aclose(self) -> None:
        """Stop DBOS. Runs still executing are interrupted where they are, unrecorded, and
        resumed by the next start of this executor id (in this process or after a restart)."""
        global _active
        if self._host is None:
            return
        self._closing = True
        try:
            watch, self._watch = self._watch, None
            if watch is not None:
                watch.cancel()
                await asyncio.wait([watch])
            await anyio.to_thread.run_sync(self._heartbeats.close)
            tasks = [task for task in self._tasks if not task.done()]
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.wait(tasks)
            await anyio.to_thread.run_sync(_destroy)
            self._owns_dbos = False
            # DBOS made its (now shut down) executor this loop's default executor.
            if self._loop is not None and not self._loop.is_closed():
                self._loop.set_default_executor(ThreadPoolExecutor(thread_name_prefix="asyncio"))
        finally:
            self._lock.release()
            self._host = self._loop = None
            self._tasks.clear()
            if _active is self:
                _active = None

    async def _watch_executors(self, after: float) -> None:
        """Write this executor's heartbeat every ``after / 5`` seconds, and take over the runs
        of executors silent for longer than ``after`` (see :mod:`pai.durable_dbos._executor`)."""
        interval = after / 5
        while True:
            try:
                now = time.time()
                await anyio.to_thread.run_sync(self._heartbeats.beat, now)
                for executor in await anyio.to_thread.run_sync(
                    self._heartbeats.claim_silent, now, after
                ):
                    await self._take_over(executor, after)
            except Exception as error:
                text = mask_url(" ".join(str(error).split())) or type(error).__name__
                _log.warning(
                    "pai-durable-dbos could not write executor %r's heartbeat or look for "
                    "silent executors in %s (%s: %s); trying again in %.1f s",
                    self.options.executor_id,
                    self.options.display_url,
                    type(error).__name__,
                    text,
                    interval,
                )
            await asyncio.sleep(interval)

    async def _take_over(self, executor: str, after: float) -> None:
        """Have DBOS resume the unfinished runs of the silent ``executor`` (claimed by this
        process): any live process's queue takes them, this one's included."""
        from dbos import DBOS

        rows = await DBOS.list_workflows_async(
            status=["PENDING"],
            executor_id=executor,
            name=WORKFLOW_NAME,
            app_version=self.options.application_version,
            load_input=False,
            load_output=False,
        )
        ids = [row.workflow_id for row in rows]
        if ids:
            await DBOS.resume_workflows_async(ids)
        _log.warning(
            "executor %r was silent for more than %s s: %d of its durable runs resumed by "
            "executor %r (%s)",
            executor,
            after,
            len(ids),
            self.options.executor_id,
            ", ".join(ids[:10]) + (" ..." if len(ids) > 10 else ""),
        )

    # -- runs --------------------------------------------------------------------------------

    async def run(self, spec: RunSpec) -> Any:
        """Start the run ``spec`` as the DBOS workflow ``spec.run_id``, or attach to the
        workflow of that id; its result, or the exception it raised."""
        if self._host is None:
            raise DurabilityError(
                f"DbosEngine.run() for run {spec.run_id!r} before start(): enter the runtime "
                "(async with runtime) first"
            )
        text = encode(spec.to_json(), f"the input of durable run {spec.run_id!r}")
        loop = asyncio.get_running_loop()
        # Started from an empty context: a run started inside another run's step (a tool that
        # sends to another thread) is a workflow of its own, not a DBOS child of that step.
        waiter = loop.create_task(self._start(spec.run_id, text), context=contextvars.Context())
        try:
            result = await waiter
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if self._closing and current is not None and not current.cancelling():
                raise DurabilityError(
                    f"durable run {spec.run_id!r} was interrupted: its runtime closed while it "
                    "ran; the next start of this executor resumes it"
                ) from None
            raise
        return decode(result, f"the result of durable run {spec.run_id!r}")

    async def _start(self, run_id: str, text: str) -> str:
        from dbos import DBOS, SetWorkflowID

        workflow = _register_workflow()
        handle: WorkflowHandleAsync[str]
        if await DBOS.get_workflow_status_async(run_id) is None:
            with SetWorkflowID(run_id):
                # A workflow of this id started meanwhile is attached to, not started again.
                handle = await DBOS.start_workflow_async(workflow, text)
        else:
            # Attach (a run resumed by DBOS, or started elsewhere): poll for its outcome.
            handle = await DBOS.retrieve_workflow_async(run_id, existing_workflow=False)
        try:
            return await handle.get_result(polling_interval_sec=self.options.recovery_interval)
        except Exception:
            status = await DBOS.get_workflow_status_async(run_id)
            if status is not None and status.status == "CANCELLED":
                # DBOS raises its own DBOSAwaitedWorkflowCancelledError (not public) here.
                raise DurabilityError(
                    f"durable run {run_id!r} was cancelled (pai runs cancel) and took no further "
                    f"step; `pai runs resume {run_id}` resumes it from its last recorded step"
                ) from None
            raise

    async def _serve(self, text: str) -> str:
        """The workflow's body in this process (fresh or resumed)."""
        host, loop = self._host, self._loop
        if host is None or self._closing or asyncio.get_running_loop() is not loop:
            _log.warning(
                "a durable run was handed to pai-durable-dbos off the runtime's event loop or "
                "while its runtime closes; it stays pending and resumes at the next start"
            )
            raise asyncio.CancelledError
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            return await execute_run(host, text, _STEPS)
        finally:
            if task is not None:
                self._tasks.discard(task)

    # -- administering recorded runs (pai.core.ext.DurableRunAdmin) -----------------------------------

    async def list_runs(
        self, *, status: str | None = None, limit: int = 100
    ) -> Sequence[DurableRunInfo]:
        """PAI's runs recorded in the system database, newest first (see :data:`STATUSES` for
        how DBOS's statuses read). Reads through a ``DBOSClient``: works without :meth:`start`,
        and resumes nothing. A SQLite file that does not exist holds no runs (and is not
        created)."""
        known = dict.fromkeys(STATUSES.values())
        if status is not None and status not in known:
            raise DurabilityError(
                f"unknown durable run status {status!r}; one of {', '.join(known)}"
            )
        client = await self._admin_client()
        if client is None:
            return []
        wanted = None if status is None else [k for k, v in STATUSES.items() if v == status]
        rows = await self._admin_call(
            partial(
                client.list_workflows,
                name=WORKFLOW_NAME,
                status=wanted,
                limit=max(limit, 1),
                sort_desc=True,
            )
        )
        return [_run_info(row) for row in rows][: max(limit, 0)]

    async def cancel_run(self, run_id: str) -> None:
        """Cancel the run: DBOS marks it ``CANCELLED`` and takes it off its queue; a process
        running it stops at its next step, and no start resumes it (until :meth:`resume_run`).
        A finished run raises :class:`~pai.core.DurabilityError` (DBOS would leave it as is);
        a cancelled one is left cancelled."""
        client, found = await self._find(run_id)
        if found.status in _FINISHED:
            raise DurabilityError(
                f"durable run {run_id!r} already {STATUSES[found.status]}; there is nothing to "
                "cancel"
            )
        await self._admin_call(partial(client.cancel_workflow, run_id))

    async def resume_run(self, run_id: str) -> None:
        """Resume the run (cancelled, given up on, or stuck): DBOS marks it ``ENQUEUED`` on its
        internal queue with its recovery attempts reset, and the next DBOS process of this
        application version to poll that queue (a running one at once, else the next to start,
        whatever its executor id) runs it from its last recorded step. Resuming a run a live
        process is still executing starts a second execution of it: resume only runs that are
        cancelled or whose process is gone. A finished run raises
        :class:`~pai.core.DurabilityError` (DBOS resumes neither a succeeded nor a failed run)."""
        client, found = await self._find(run_id)
        if found.status in _FINISHED:
            raise DurabilityError(
                f"durable run {run_id!r} already {STATUSES[found.status]}; DBOS resumes only a "
                "run that did not finish"
            )
        await self._admin_call(partial(client.resume_workflow, run_id))

    async def aclose_admin(self) -> None:
        """Close the admin connection the methods above opened."""
        client, self._client = self._client, None
        if client is not None:
            await anyio.to_thread.run_sync(client.destroy)

    async def _find(self, run_id: str) -> tuple[DBOSClient, WorkflowStatus]:
        client = await self._admin_client()
        rows: list[WorkflowStatus] = (
            []
            if client is None
            else await self._admin_call(
                partial(
                    client.list_workflows,
                    workflow_ids=[run_id],
                    name=WORKFLOW_NAME,
                    load_input=False,
                    load_output=False,
                )
            )
        )
        if client is None or not rows:
            raise UnknownDurableRunError(
                run_id, f"the DBOS system database {self.options.display_url}"
            )
        return client, rows[0]

    async def _admin_client(self) -> DBOSClient | None:
        """The client of the system database (made on first use), or ``None`` when it is a
        SQLite file that does not exist."""
        if self._client is not None:
            return self._client
        options = self.options
        if options.is_sqlite and not _sqlite_file(options.system_database_url).exists():
            return None

        def connect() -> DBOSClient:
            from dbos import DBOSClient

            # An unreachable database is an error, not a wait: a command must not hang.
            if options.is_sqlite:
                return DBOSClient(
                    system_database_url=options.system_database_url,
                    retry_connection_errors=False,
                )
            return DBOSClient(
                system_database_url=options.system_database_url,
                dbos_system_schema=options.system_schema,
                retry_connection_errors=False,
            )

        self._client = await self._admin_call(connect)
        return self._client

    async def _admin_call(self, call: Callable[[], _T]) -> _T:
        """``call`` (a blocking DBOS call) off the event loop; a failure of DBOS's (not an
        unknown run) as a :class:`DbosEngineError` with the URL masked."""
        try:
            return await anyio.to_thread.run_sync(call)
        except DurabilityError:
            raise
        except Exception as error:
            text = mask_url(" ".join(str(error).split())) or type(error).__name__
            raise DbosEngineError(
                f"could not read or change PAI's runs in the DBOS system database "
                f"{self.options.display_url}: {type(error).__name__}: {text}; check that it is "
                "reachable and that a DbosEngine has started on it once (which creates DBOS's "
                "tables)"
            ) from None


def _sqlite_file(url: str) -> Path:
    rest = url.split("://", 1)[1]
    return Path(rest[1:].split("?", 1)[0])


def _time(ms: object) -> datetime | None:
    if isinstance(ms, int | float) and not isinstance(ms, bool):
        return datetime.fromtimestamp(ms / 1000, UTC)
    return None


def _run_info(row: WorkflowStatus) -> DurableRunInfo:
    """A DBOS workflow of PAI's as a run: its thread and agent read from the recorded input (the
    JSON text of ``RunSpec.to_json()``), left ``None`` when it is not one."""
    thread_id = agent_name = None
    inputs: Any = row.input
    try:
        spec = json.loads(inputs["args"][0])
        if isinstance(spec, dict):
            fields: dict[str, Any] = spec  # pyright: ignore[reportUnknownVariableType]
            thread, agent = fields.get("thread_id"), fields.get("agent_name")
            thread_id = thread if isinstance(thread, str) else None
            agent_name = agent if isinstance(agent, str) else None
    except (TypeError, KeyError, IndexError, ValueError):
        pass
    error: object = row.error
    text = None
    if isinstance(error, BaseException):
        text = f"{type(error).__name__}: {error}"
    elif error is not None:
        text = str(error)
    return DurableRunInfo(
        run_id=row.workflow_id,
        status=STATUSES.get(str(row.status), "running"),
        thread_id=thread_id,
        agent_name=agent_name,
        created_at=_time(row.created_at),
        updated_at=_time(row.updated_at),
        executor=row.executor_id,
        error=text,
        engine_status=str(row.status),
    )


# -- DBOS, behind the few calls PAI makes ------------------------------------------------------


def _import_dbos() -> None:
    import dbos  # noqa: F401  # pyright: ignore[reportUnusedImport]


def _register_workflow() -> Callable[[str], Coroutine[Any, Any, str]]:
    global _workflow
    if _workflow is None:
        from dbos import DBOS

        async def pai_durable_run(spec_text: str) -> str:
            engine = _active
            if engine is None:
                _log.warning(
                    "a durable run was resumed with no DbosEngine started; it stays pending"
                )
                raise asyncio.CancelledError
            return await engine._serve(spec_text)  # pyright: ignore[reportPrivateUsage]

        _workflow = DBOS.workflow(name=WORKFLOW_NAME)(pai_durable_run)
    return _workflow


def _set_recovery_interval(seconds: float) -> None:
    """How often DBOS's internal queue is polled. DBOS resumes a run (at launch, or by
    ``resume_workflow``) by putting it on that queue, which its queue thread polls every second,
    and DBOS has no public setting for it: this sets the queue's private
    ``_polling_interval_sec`` (read by the poller on each round) before launch. When DBOS no
    longer has it, resumption keeps DBOS's own interval."""
    try:
        from dbos._dbos import (
            _get_or_create_dbos_registry,  # pyright: ignore[reportPrivateUsage]
        )

        queue = _get_or_create_dbos_registry().get_internal_queue()
        if not isinstance(getattr(queue, "_polling_interval_sec", None), float | int):
            raise AttributeError("_polling_interval_sec")
        queue._polling_interval_sec = seconds  # pyright: ignore[reportPrivateUsage]
    except (ImportError, AttributeError) as error:
        _log.warning(
            "recovery_interval=%s not applied (this DBOS lacks %s); DBOS polls for runs to "
            "resume at its own interval",
            seconds,
            error,
        )


def _destroy() -> None:
    from dbos import DBOS

    DBOS.destroy(destroy_registry=False)


class _Reservation:
    def __init__(self, reservation: StepReservation) -> None:
        self._reservation = reservation

    async def run(self, name: str, body: StepBody) -> str:
        return await self._reservation.run_async({"name": name}, body)


class _DbosStepApi:
    async def run_step(self, name: str, body: StepBody) -> str:
        from dbos import DBOS

        return await DBOS.run_step_async({"name": name}, body)

    def reserve(self) -> Reservation:
        from dbos import DBOS

        return _Reservation(DBOS.reserve_step())


_STEPS: Final = _DbosStepApi()


def _asyncio_loop() -> asyncio.AbstractEventLoop:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        raise DurabilityError(
            "pai-durable-dbos runs on asyncio only, and this runtime runs on another event "
            "loop (trio?): DBOS executes its workflows and steps on an asyncio loop. Run the "
            "runtime on asyncio (asyncio.run, or anyio.run(..., backend='asyncio')), or run "
            "without durability"
        ) from None


def _options_problem(error: ValidationError) -> str:
    problems = "; ".join(
        f"{'.'.join(str(part) for part in item['loc']) or 'options'}: "
        f"{item['msg'].removeprefix('Value error, ')}"
        for item in error.errors(include_input=False, include_url=False)
    )
    return f"DbosEngine options: {problems}"
