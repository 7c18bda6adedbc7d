"""A durable run on DBOS whose three tool calls each append a line inside a Docker sandbox, as a
worker process that kills itself with SIGKILL where ``PAI_CRASH_AT`` says (see
``test_crash_docker.py``).

The run: model step ``n`` (1-3) calls the tool ``append`` for line ``a``, ``b``, ``c``; step 4
answers ``done``. The tool runs ``echo X >> lines.txt; sleep 1; echo wrote X`` in the thread's
sandbox (a Docker container of the provider's namespace) with ``run_command``, which a durable
run makes exactly-once by receipts (``pai.sandbox``), and returns ``exit <code>: <stdout>``.

As a script::

    python dbos_docker_worker.py DIR run        # create thread "t", send "go" (executor w1)
    python dbos_docker_worker.py DIR recover    # restart as w1: DBOS resumes the run at launch
    python dbos_docker_worker.py DIR takeover   # as w2: resume w1's run (resume_run), attach
    python dbos_docker_worker.py serve          # fork such workers on request (see serve())

``DIR`` holds ``config.json`` (``namespace``: the Docker provider's namespace; ``schema``: the
PostgreSQL schema of DBOS's tables), the thread storage, DBOS's SQLite file (unless
``PAI_DBOS_URL`` names another database), the run's spec (``spec.json``), its result
(``result.json``) and ``events.log`` (``<unix time> <event>`` per line: ``started <time>``,
``entered``, each kill point the run reached, ``result <json>`` per command, ``finished``).
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
from pai.core.ext import RunSpec  # noqa: E402
from pai.core.testing import FunctionModel, text, tool_call  # noqa: E402
from pai.sandbox import sandbox, sandbox_capability  # noqa: E402
from pai.sandbox_docker import DockerSandboxProvider  # noqa: E402

IMAGE = os.environ.get("PAI_DOCKER_TEST_IMAGE", "pai-test-busybox:latest")
LINES = ("a", "b", "c")
COMMAND = "echo {line} >> lines.txt; sleep 1; echo wrote {line}"
"""What the tool runs for a line: the line is written at once, the command then sleeps a second
(time for ``tool:X:command`` to kill the worker mid-command) and prints."""

EXECUTORS = {"run": "pai:docker-w1", "recover": "pai:docker-w1", "takeover": "pai:docker-w2"}
"""The executor id of each mode: ``recover`` restarts the dead worker's id, ``takeover`` is
another worker."""


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
the receipt written, the tool's step not recorded); right after the ``n``-th append to the thread
committed (before DBOS recorded the step)."""

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

    def __init__(self, folder: Path, namespace: str, crash_at: str | None = None) -> None:
        self.folder = folder
        self.events = folder / "events.log"
        self.namespace = namespace
        self.crash_at = crash_at
        self.provider = DockerSandboxProvider(image=IMAGE, namespace=namespace)

    def event(self, name: str) -> None:
        with self.events.open("a") as out:
            out.write(f"{time.time():.6f} {name}\n")

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

            result = await box.run_command(COMMAND.format(line=line), on_stdout=on_stdout)
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


async def _run_info(engine: Any, run_id: str) -> dict[str, Any]:
    """The run's status and executor as ``pai runs ls`` reads them (through DBOSClient)."""
    try:
        [info] = [run for run in await engine.list_runs() if run.run_id == run_id]
    finally:
        await engine.aclose_admin()
    return {"status": info.status, "engine_status": info.engine_status, "executor": info.executor}


async def main(folder: Path, mode: str, started: float = STARTED) -> None:
    from pai.durable_dbos import DbosEngine

    config = json.loads((folder / "config.json").read_text())
    scenario = Scenario(folder, config["namespace"], os.environ.get("PAI_CRASH_AT") or None)
    scenario.event(f"started {started:.6f}")
    spec_file = folder / "spec.json"

    class RecordingEngine(DbosEngine):
        async def run(self, spec: RunSpec) -> Any:
            if not spec_file.exists():
                spec_file.write_text(json.dumps(spec.to_json()))
            return await super().run(spec)

    def engine_of(cls: type[DbosEngine]) -> DbosEngine:
        return cls(
            system_database_url=os.environ.get("PAI_DBOS_URL")
            or f"sqlite:///{folder / 'dbos.sqlite'}",
            system_schema=config.get("schema", "dbos"),
            executor_id=EXECUTORS[mode],
            recovery_interval=float(os.environ.get("PAI_RECOVERY_INTERVAL", "0.1")),
        )

    outcome: dict[str, Any] = {}
    if mode == "takeover":
        # Another worker takes the dead worker's run over: resume_run (pai runs resume) puts it
        # on DBOS's queue, which this worker's DBOS polls once launched.
        run_id = json.loads(spec_file.read_text())["run_id"]
        admin = engine_of(DbosEngine)
        outcome["before_takeover"] = await _run_info(admin, run_id)
        try:
            await admin.resume_run(run_id)
        finally:
            await admin.aclose_admin()
    engine = engine_of(RecordingEngine)
    storage = CrashingStorage(folder / "threads.sqlite", scenario)
    async with scenario.build(storage, engine) as runtime:
        scenario.event("entered")
        if mode == "run":
            thread = await runtime.admin(identity="ann").create_thread(thread_id="t")
            result = await thread.send("go")
            outcome.update(status=result.status, text=result.text)
        else:
            spec = RunSpec.from_json(json.loads(spec_file.read_text()))
            data = await engine.run(spec)
            outcome.update(status=data["status"], text=data["text"])
        outcome["messages"] = [
            message_adapter.dump_python(m, mode="json") for m in await storage.get_messages("t")
        ]
    await storage.aclose()
    run_id = json.loads(spec_file.read_text())["run_id"]
    outcome["run"] = await _run_info(engine_of(DbosEngine), run_id)
    scenario.event("finished")
    (folder / "result.json").write_text(json.dumps(outcome))


def serve() -> None:
    """A fork server (as ``dbos_crash_worker.py serve``, whose protocol ``ForkServer`` speaks):
    import everything once, then for each request on stdin (a JSON object: ``folder``,
    ``mode``, ``env``, ``timeout``) fork a worker that runs :func:`main` with that environment,
    wait for it, and answer its exit status (``-9``: killed by SIGKILL)."""
    import dbos  # noqa: F401
    import docker  # noqa: F401

    import pai.durable_dbos._engine  # noqa: F401

    print("ready", flush=True)
    for request_line in sys.stdin:
        request = json.loads(request_line)
        folder = Path(request["folder"])
        pid = os.fork()
        if pid == 0:  # the worker
            started = time.time()
            code = 1
            try:
                log = os.open(folder / "worker.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
                os.dup2(log, 1)
                os.dup2(log, 2)
                os.environ.pop("PAI_CRASH_AT", None)
                os.environ.update(request["env"])
                signal.alarm(int(request.get("timeout", 120)))
                asyncio.run(main(folder, request["mode"], started))
                code = 0
            except BaseException:
                import traceback

                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        print(json.dumps({"returncode": code}), flush=True)


if __name__ == "__main__":
    if sys.argv[1:] == ["serve"]:
        serve()
    else:
        asyncio.run(main(Path(sys.argv[1]), sys.argv[2]))
