"""A durable run on Temporal whose three tool calls each append a line inside a Docker sandbox,
as a worker process that kills itself with SIGKILL where ``PAI_CRASH_AT`` says (see
``test_crash_docker.py``).

The run: model step ``n`` (1-3) calls the tool ``append`` for line ``a``, ``b``, ``c``; step 4
answers ``done``. The tool runs ``echo X >> lines.txt; sleep 1; echo wrote X`` in the thread's
sandbox (a Docker container of the provider's namespace) with ``run_command``, which a durable
run makes exactly-once by receipts (``pai.sandbox``), and returns ``exit <code>: <stdout>``.

As a script::

    python temporal_docker_worker.py DIR first TARGET QUEUE    # create thread "t", send "go"
    python temporal_docker_worker.py DIR second TARGET QUEUE   # import, wait for DIR/go, then
                                                               # serve the queue and attach

Both workers share the thread storage ``DIR/threads.sqlite`` and the Docker namespace of
``DIR/config.json`` (``namespace``; ``sleep``: a line's command's sleep, 1 s unless given), and have
the Temporal identities of :data:`IDENTITIES`. The second one reads the run's state (``pai runs
ls``: ``list_runs()``) once told to go, before it builds its runtime and starts polling the task
queue. ``DIR/events.log`` gets ``<unix time> <role> <event>`` lines: ``started <time>``, ``go``
(the second worker was told the first died), ``serving`` (the worker polls the queue), ``step
<name>`` when a step's work starts in that worker, each kill point the run reached, ``observed
...`` when the mid-command watcher saw the command run, ``stdout <json>`` per chunk the tool's
``on_stdout`` got, ``result <json>`` per command, ``finished``. The role that finishes the run
writes ``result.json``: status, text, the thread's messages, the run as ``list_runs()`` shows it
(before the takeover too) and its steps from Temporal's history (activity id, attempt, identity
of the worker that completed it, in order of completion).
"""

from __future__ import annotations

import time

STARTED = time.time()

import asyncio  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
import tarfile  # noqa: E402
import threading  # noqa: E402
from collections.abc import Mapping  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from pydantic import BaseModel  # noqa: E402

from pai.core import (  # noqa: E402
    AgentRuntime,
    ModelRequest,
    SqliteStorage,
    ToolContext,
    create_agent_runtime,
    define_agent,
    define_tool,
    message_adapter,
)
from pai.core.ext import DurableHost, RunSpec, Steps  # noqa: E402
from pai.core.testing import FunctionModel, text, tool_call  # noqa: E402
from pai.sandbox import sandbox, sandbox_capability  # noqa: E402
from pai.sandbox_docker import DockerSandboxProvider  # noqa: E402

IMAGE = os.environ.get("PAI_DOCKER_TEST_IMAGE", "pai-test-busybox:latest")
LINES = ("a", "b", "c")
COMMAND = "echo {line} >> lines.txt; sleep {sleep}; echo wrote {line}"
"""What the tool runs for a line: the line is written at once, the command then sleeps (a second
unless ``config.json``'s ``sleep`` gives the line another: time for ``tool:X:command`` to kill
the worker mid-command) and prints."""

HEARTBEAT_TIMEOUT = 2.0
"""The tests' heartbeat timeout: a dead worker's step is given to another within about this."""

IDENTITIES = {"first": "pai:docker-first", "second": "pai:docker-second"}
"""Each role's Temporal identity (what ``list_runs()`` and the run's history name)."""


def _points() -> tuple[str, ...]:
    points = ["instructions"]
    for step, line in enumerate(LINES, 1):
        points += [
            f"model:{step}",
            f"tool:{line}:before",
            f"tool:{line}:command",
            f"tool:{line}:output",
            f"tool:{line}:after",
            f"append:{step}",
        ]
    return (*points, "model:4", "append:4")


CRASH_POINTS = _points()
"""Where a worker can die (21 points): inside the instructions function; inside the model call
of step ``n``; in the tool for line ``X``: before its command (``before``), while its command runs
in the container with its line written and no exit code recorded (``command``), when the
command's output reached the host (``output``: the command finished and recorded its exit code
in its claim, the host has not written the receipt), after ``run_command`` returned (``after``:
the receipt written, Temporal has not recorded the tool's step); right after the ``n``-th append
to the thread committed (before Temporal recorded the step)."""

BODIES: tuple[str, ...] = (
    "instructions",
    "model:1",
    "tool:a",
    "append:1",
    "model:2",
    "tool:b",
    "append:2",
    "model:3",
    "tool:c",
    "append:3",
    "model:4",
    "append:4",
)
"""The run's step bodies in the order of an uncrashed run."""

_STEP_OF_LENGTH = {3: 1, 5: 2, 7: 3, 8: 4}
"""Which step's append leaves the thread that long (user, assistant, tool result; then an
assistant and a tool result per step; the answer)."""


def workspace_files(container: Any) -> dict[str, bytes]:
    """The files under ``/workspace`` of a container (docker SDK), by path relative to it, read
    through the engine's archive API: nothing runs in the container (the docker SDK's
    ``exec_run`` can drop a short command's output)."""
    stream, _ = container.get_archive("/workspace")
    files: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as archive:
        for member in archive.getmembers():
            content = archive.extractfile(member) if member.isfile() else None
            if content is not None:
                files[member.name.removeprefix("workspace/")] = content.read()
    return files


def finished_commands(files: Mapping[str, bytes]) -> int:
    """How many commands recorded their exit code in their claim."""
    return sum(1 for path in files if path.startswith(".pai/receipts/") and path.endswith("/rc"))


class Line(BaseModel):
    line: str


class Scenario:
    """The run's world: where events go, which sandbox namespace, and where to die."""

    def __init__(
        self,
        folder: Path,
        role: str,
        namespace: str,
        crash_at: str | None = None,
        sleep: Mapping[str, float] | None = None,
    ) -> None:
        self.folder = folder
        self.sleep = dict(sleep or {})
        self.role = role
        self.events = folder / "events.log"
        self.namespace = namespace
        self.crash_at = crash_at
        self.provider = DockerSandboxProvider(image=IMAGE, namespace=namespace)

    def event(self, name: str) -> None:
        with self.events.open("a") as out:
            out.write(f"{time.time():.6f} {self.role} {name}\n")

    def point(self, name: str) -> None:
        """Record that the run reached ``name``, and die there if told to."""
        self.event(name)
        if name == self.crash_at:
            os.kill(os.getpid(), signal.SIGKILL)

    def die_mid_command(self, key: str, line: str) -> None:
        """For ``tool:X:command``: watch the container from a thread and die once the command
        wrote its line while its claim holds no exit code yet (the command is sleeping)."""
        import docker
        import docker.errors

        index = LINES.index(line)
        name = self.provider.container_name(key)

        def watch() -> None:
            client = docker.from_env()
            while True:
                try:
                    files = workspace_files(client.containers.get(name))
                except docker.errors.DockerException:
                    time.sleep(0.01)  # not created yet
                    continue
                seen = files.get("lines.txt", b"").decode().splitlines()
                finished = finished_commands(files)
                if line in seen and finished == index:
                    self.event(f"observed lines {seen}, {finished} finished commands")
                    self.point(f"tool:{line}:command")
                if finished > index:
                    self.event(f"missed: command {line} finished before the watcher saw it run")
                    return
                time.sleep(0.01)

        threading.Thread(target=watch, daemon=True).start()

    def build(self, storage: SqliteStorage, engine: Any) -> AgentRuntime:
        async def append(ctx: ToolContext[Line, Any]) -> str:
            line = ctx.input.line
            self.point(f"tool:{line}:before")
            box = ctx.capabilities.sandbox
            if self.crash_at == f"tool:{line}:command":
                self.die_mid_command(box.key, line)

            def on_stdout(chunk: str) -> None:
                self.event(f"stdout {json.dumps({'line': line, 'text': chunk})}")
                self.point(f"tool:{line}:output")

            result = await box.run_command(
                COMMAND.format(line=line, sleep=f"{self.sleep.get(line, 1):g}"), on_stdout=on_stdout
            )
            outcome = {
                "line": line,
                "exit_code": result.exit_code,
                "stdout": result.stdout,
                "stderr": result.stderr,
                "environment_reset": result.environment_reset,
            }
            self.event(f"result {json.dumps(outcome)}")
            self.point(f"tool:{line}:after")
            return f"exit {result.exit_code}: {result.stdout.strip()}"

        def model(request: ModelRequest) -> Any:
            self.point(f"model:{request.step}")
            if request.step <= len(LINES):
                line = LINES[request.step - 1]
                return tool_call("append", {"line": line}, id=f"call-{line}")
            return text("done")

        def instructions(run: Any) -> str:
            self.point("instructions")
            return f"you help {run.scope_key}"

        tool = define_tool(
            id="append",
            description="append a line in the sandbox",
            input_schema=Line,
            capabilities={"sandbox": sandbox},
            execute=append,
        )
        return create_agent_runtime(
            agent=define_agent(
                name="main",
                model=FunctionModel(model),
                instructions=instructions,
                tools={"append": tool},
            ),
            storage=storage,
            scope_key=lambda identity: "acme",
            durability=engine,
            capabilities={"sandbox": sandbox_capability(provider=self.provider)},
        )


class CrashingStorage(SqliteStorage):
    """SQLite thread storage that passes ``append:<n>`` once step ``n``'s append committed."""

    def __init__(self, path: Path, scenario: Scenario) -> None:
        super().__init__(path)
        self.scenario = scenario

    async def append_messages(self, thread_id: str, messages: Any, *, lease: Any = None) -> None:
        await super().append_messages(thread_id, messages, lease=lease)
        length = len(await self.get_messages(thread_id))
        self.scenario.point(f"append:{_STEP_OF_LENGTH.get(length, length)}")


class LoggingHost:
    """``host``, logging ``step <name>`` when a step's work starts in this process."""

    def __init__(self, host: DurableHost, scenario: Scenario) -> None:
        self.host = host
        self.scenario = scenario

    async def execute(self, spec: RunSpec, steps: Steps) -> Any:
        return await self.host.execute(spec, steps)

    async def perform(self, spec: RunSpec, name: str, payload: Any) -> Any:
        self.scenario.event(f"step {name}")
        return await self.host.perform(spec, name, payload)


async def run_info(engine: Any, run_id: str) -> dict[str, Any]:
    """The run's status and executor as ``pai runs ls`` reads them (``list_runs()``)."""
    try:
        [info] = [run for run in await engine.list_runs() if run.run_id == run_id]
    finally:
        await engine.aclose_admin()
    return {"status": info.status, "engine_status": info.engine_status, "executor": info.executor}


async def history_steps(target: str, run_id: str) -> list[dict[str, Any]]:
    """The run's steps as Temporal's history records them, in order of completion: activity id,
    the attempt that completed, and the identity of the worker that completed it; and last the
    identity of the worker that completed the workflow's final task (``workflow``)."""
    from temporalio.api.enums.v1 import EventType
    from temporalio.client import Client

    client = await Client.connect(target)
    history = await client.get_workflow_handle(run_id).fetch_history()
    scheduled: dict[int, str] = {}
    started: dict[int, int] = {}
    steps: list[dict[str, Any]] = []
    last_task = None
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            scheduled[event.event_id] = event.activity_task_scheduled_event_attributes.activity_id
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            attributes = event.activity_task_started_event_attributes
            started[attributes.scheduled_event_id] = attributes.attempt
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            attributes = event.activity_task_completed_event_attributes
            steps.append(
                {
                    "activity": scheduled[attributes.scheduled_event_id],
                    "attempt": started[attributes.scheduled_event_id],
                    "identity": attributes.identity,
                }
            )
        elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            last_task = event.workflow_task_completed_event_attributes.identity
        elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
            steps.append({"activity": "workflow", "attempt": 0, "identity": last_task})
    return steps


def dumped(messages: Any) -> list[Any]:
    return [message_adapter.dump_python(m, mode="json") for m in messages]


async def main(folder: Path, role: str, target: str, queue: str) -> None:
    from pai.durable_temporal import TemporalEngine

    config = json.loads((folder / "config.json").read_text())
    crash_at = os.environ.get("PAI_CRASH_AT") or None
    scenario = Scenario(folder, role, config["namespace"], crash_at, config.get("sleep"))
    scenario.event(f"started {STARTED:.6f}")
    spec_file = folder / "spec.json"
    outcome: dict[str, Any] = {}

    class RecordingEngine(TemporalEngine):
        async def start(self, host: DurableHost) -> None:
            await super().start(LoggingHost(host, scenario))

        async def run(self, spec: RunSpec) -> Any:
            if not spec_file.exists():
                spec_file.write_text(json.dumps(spec.to_json()))
            return await super().run(spec)

    def engine_of(cls: type[TemporalEngine]) -> TemporalEngine:
        return cls(
            target_host=target,
            task_queue=queue,
            identity=IDENTITIES[role],
            heartbeat_timeout=HEARTBEAT_TIMEOUT,
            shutdown_grace=0,
        )

    if role == "second":
        # Warm (Temporal's SDK and docker take a second or two to import, Temporal's runtime
        # and a connection more), then wait for the first to die; the runtime (and its sandbox
        # sessions) is made after that, as a worker started after the thread was would be.
        import docker  # noqa: F401

        import pai.durable_temporal._engine
        import pai.durable_temporal._workflow  # noqa: F401

        admin = engine_of(TemporalEngine)
        await admin.list_runs(limit=1)
        while not (folder / "go").exists():  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        scenario.event("go")
        run_id = json.loads(spec_file.read_text())["run_id"]
        outcome["before_takeover"] = await run_info(admin, run_id)

    engine = engine_of(RecordingEngine)
    storage = CrashingStorage(folder / "threads.sqlite", scenario)
    async with scenario.build(storage, engine) as runtime:
        scenario.event("serving")
        if role == "first":
            thread = await runtime.admin(identity="ann").create_thread(thread_id="t")
            result = await thread.send("go")
            outcome.update(status=result.status, text=result.text)
        else:
            spec = RunSpec.from_json(json.loads(spec_file.read_text()))
            data = await engine.run(spec)
            outcome.update(status=data["status"], text=data["text"])
        outcome["messages"] = dumped(await storage.get_messages("t"))
    await storage.aclose()
    run_id = json.loads(spec_file.read_text())["run_id"]
    outcome["run"] = await run_info(engine_of(TemporalEngine), run_id)
    outcome["history"] = await history_steps(target, run_id)
    scenario.event("finished")
    (folder / "result.json").write_text(json.dumps(outcome))


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]))
    # Out without finalizing the interpreter: Temporal's core threads may still hold Python
    # objects then (seen as a fatal PyGILState_Release error at exit, after the run finished).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
