"""The durable run the tests drive, in-process and as a worker process that kills itself.

The run: step 1 calls the tool ``append`` twice at once (lines ``a`` and ``b``), step 2 once
(``c``), step 3 answers ``done``. The tool's side effect appends ``<durable call id>\\t<line>``
to a file unless that call id is already there (an idempotent effect, keyed as PAI advises).

As a script::

    python dbos_crash_worker.py DIR run        # create thread "t", send "go"
    python dbos_crash_worker.py DIR recover    # resume: attach to the run recorded in DIR
    python dbos_crash_worker.py serve          # fork such workers on request (see serve())

``DIR`` holds the thread storage (``threads.sqlite``), DBOS's database (``dbos.sqlite``), the
tool's file (``lines.txt``), the run's spec (``spec.json``, written before the run starts), its
result (``result.json``) and ``events.log`` (``<unix time> <event>`` per line: ``started`` when
the process started, ``entered`` when the runtime was entered, one line per step body that ran).
With ``PAI_CRASH_AT=<point>`` the process kills itself with SIGKILL at that point (see
:data:`CRASH_POINTS`). ``PAI_DURABLE_EXECUTOR`` picks the executor id as in production;
``PAI_DBOS_URL`` and ``PAI_DBOS_SCHEMA`` put DBOS on another database (PostgreSQL);
``PAI_TAKEOVER_AFTER`` sets ``takeover_after`` (seconds, or ``none``).
"""

from __future__ import annotations

import time

STARTED = time.time()

import asyncio  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
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
from pai.core.ext import RunSpec, Storage  # noqa: E402
from pai.core.testing import FunctionModel, text, tool_call, tool_calls  # noqa: E402

CRASH_POINTS = (
    "instructions",
    "model:1",
    "tool:a:before",
    "tool:a:after",
    "tool:b:before",
    "tool:b:after",
    "append:1",
    "model:2",
    "tool:c:before",
    "tool:c:after",
    "append:2",
    "model:3",
    "append:3",
)
"""Where a worker can die: inside the instructions function, inside the model call of step
``n``, inside the tool body for line ``x`` before and after its side effect, and right after the
``n``-th append to the thread committed (before DBOS recorded the step)."""


class Line(BaseModel):
    line: str


class Scenario:
    """The run's world: where the tool writes, where events go, and where to die."""

    def __init__(self, folder: Path, crash_at: str | None = None) -> None:
        self.folder = folder
        self.lines = folder / "lines.txt"
        self.events = folder / "events.log"
        self.crash_at = crash_at

    def event(self, name: str) -> None:
        with self.events.open("a") as out:
            out.write(f"{time.time():.6f} {name}\n")

    def point(self, name: str) -> None:
        """Record that the run reached ``name``, and die there if told to."""
        self.event(name)
        if name == self.crash_at:
            os.kill(os.getpid(), signal.SIGKILL)

    def build(self, storage: Storage, engine: Any | None) -> AgentRuntime:
        async def append(ctx: ToolContext[Line, Any]) -> str:
            line = ctx.input.line
            self.point(f"tool:{line}:before")
            key = ctx.durable_call_id or f"plain/{line}"
            written = self.lines.read_text().splitlines() if self.lines.exists() else []
            if not any(entry.split("\t")[0] == key for entry in written):
                with self.lines.open("a") as out:
                    out.write(f"{key}\t{line}\n")
            self.point(f"tool:{line}:after")
            return f"appended {line}"

        def model(request: ModelRequest) -> Any:
            self.point(f"model:{request.step}")
            if request.step == 1:
                return tool_calls(
                    ("append", {"line": "a"}), ("append", {"line": "b"}), ids=["x", "y"]
                )
            if request.step == 2:
                return tool_call("append", {"line": "c"}, id="z")
            return text("done")

        def instructions(run: Any) -> str:
            self.point("instructions")
            return f"you help {run.scope_key}"

        agent = define_agent(
            name="main",
            model=FunctionModel(model),
            instructions=instructions,
            tools={
                "append": define_tool(
                    id="append", description="append a line", input_schema=Line, execute=append
                )
            },
        )
        return create_agent_runtime(
            agent=agent,
            storage=storage,
            scope_key=lambda identity: "acme",
            durability=engine,
        )


BODIES = (
    "instructions",
    "model:1",
    "tool:a",
    "tool:b",
    "append:1",
    "model:2",
    "tool:c",
    "append:2",
    "model:3",
    "append:3",
)
"""The run's step bodies the worker logs, in the order of an uncrashed run (``tool:a`` and
``tool:b`` run at once)."""

_STEP_OF_LENGTH = {4: 1, 6: 2, 7: 3}
"""Which step's append leaves the thread that long (user, assistant and two tool results; an
assistant and a tool result; the answer)."""


class CrashingStorage(SqliteStorage):
    """SQLite thread storage that passes ``append:<n>`` once step ``n``'s append committed."""

    def __init__(self, path: Path, scenario: Scenario) -> None:
        super().__init__(path)
        self.scenario = scenario

    async def append_messages(self, thread_id: str, messages: Any, *, lease: Any = None) -> None:
        await super().append_messages(thread_id, messages, lease=lease)
        length = len(await self.get_messages(thread_id))
        self.scenario.point(f"append:{_STEP_OF_LENGTH.get(length, length)}")


def dumped(messages: Any) -> list[Any]:
    return [message_adapter.dump_python(m, mode="json") for m in messages]


async def main(folder: Path, mode: str, started: float = STARTED) -> None:
    from pai.durable_dbos import DbosEngine

    scenario = Scenario(folder, os.environ.get("PAI_CRASH_AT") or None)
    scenario.event(f"started {started:.6f}")
    spec_file = folder / "spec.json"

    class RecordingEngine(DbosEngine):
        async def run(self, spec: RunSpec) -> Any:
            if not spec_file.exists():
                spec_file.write_text(json.dumps(spec.to_json()))
            return await super().run(spec)

    engine = RecordingEngine(
        system_database_url=os.environ.get("PAI_DBOS_URL") or f"sqlite:///{folder / 'dbos.sqlite'}",
        system_schema=os.environ.get("PAI_DBOS_SCHEMA", "dbos"),
        recovery_interval=float(os.environ.get("PAI_RECOVERY_INTERVAL", "0.1")),
        **_takeover(),
    )
    storage = CrashingStorage(folder / "threads.sqlite", scenario)
    async with scenario.build(storage, engine) as runtime:
        scenario.event("entered")
        if mode == "run":
            thread = await runtime.admin(identity="ann").create_thread(thread_id="t")
            result = await thread.send("go")
            outcome: Any = {"status": result.status, "text": result.text}
        else:
            spec = RunSpec.from_json(json.loads(spec_file.read_text()))
            data = await engine.run(spec)
            outcome = {"status": data["status"], "text": data["text"]}
        outcome["messages"] = dumped(await storage.get_messages("t"))
    await storage.aclose()
    scenario.event("finished")
    (folder / "result.json").write_text(json.dumps(outcome))


def _takeover() -> dict[str, Any]:
    value = os.environ.get("PAI_TAKEOVER_AFTER")
    if value is None:
        return {}
    return {"takeover_after": None if value == "none" else float(value)}


def serve() -> None:
    """A fork server: import everything once (``import dbos`` takes seconds), then for each
    request on stdin (a JSON object: ``folder``, ``mode``, ``env``) fork a worker process that
    runs :func:`main` with that environment, wait for it, and answer its exit status as
    ``subprocess`` reports it (``-9``: killed by SIGKILL). A worker is a process of its own,
    killed for real; only the imports are shared, made before any thread or event loop exists.
    """
    import dbos  # noqa: F401

    import pai.durable_dbos._engine  # noqa: F401

    print("ready", flush=True)
    for line in sys.stdin:
        request = json.loads(line)
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
