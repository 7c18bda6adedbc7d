"""The durable run the tests drive through a real runtime, in-process and as worker processes
that kill themselves.

The run: step 1 calls the tool ``append`` twice at once (lines ``a`` and ``b``), step 2 once
(``c``), step 3 answers ``done``. The tool's side effect appends ``<durable call id>\\t<line>``
to ``lines.txt`` unless that call id is already there (an idempotent effect, keyed as PAI
advises).

As a script::

    python temporal_crash_worker.py DIR first TARGET QUEUE    # create thread "t", send "go"
    python temporal_crash_worker.py DIR second TARGET QUEUE   # import, wait for DIR/go, then
                                                              # serve the queue and attach

Both share the thread storage ``DIR/threads.sqlite``. ``DIR/events.log`` gets
``<unix time> <role> <event>`` lines: ``started``, ``serving`` (the worker polls the queue),
``step <name>`` when a step's work starts in that worker, each point a step's work reached (:data:`CRASH_POINTS`), ``finished``. With
``PAI_CRASH_AT=<point>`` the process kills itself with SIGKILL at that point. The role that
finishes the run writes ``result.json`` (status, text, the thread's messages); the first writes
the run's spec to ``spec.json`` before starting it.
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
from pai.core.ext import DurableHost, RunSpec, Steps, Storage  # noqa: E402
from pai.core.testing import FunctionModel, text, tool_call, tool_calls  # noqa: E402

HEARTBEAT_TIMEOUT = 2.0
"""The tests' heartbeat timeout: a dead worker's step is given to another within about this."""

CRASH_POINTS = (
    "instructions",
    "model:1",
    "tool:a:before",
    "tool:a:after",
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
``n``-th append to the thread committed (before Temporal recorded the step)."""

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
"""The run's step bodies as the events name them, in the order of an uncrashed run (``tool:a``
and ``tool:b`` run at once)."""

_STEP_OF_LENGTH = {4: 1, 6: 2, 7: 3}
"""Which step's append leaves the thread that long."""


class Line(BaseModel):
    line: str


class Scenario:
    """The run's world: where the tool writes, where events go, and where to die."""

    def __init__(self, folder: Path, role: str = "first", crash_at: str | None = None) -> None:
        self.folder = folder
        self.role = role
        self.crash_at = crash_at
        self.lines = folder / "lines.txt"

    def event(self, name: str) -> None:
        with (self.folder / "events.log").open("a") as out:
            out.write(f"{time.time():.6f} {self.role} {name}\n")

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
            agent=agent, storage=storage, scope_key=lambda identity: "acme", durability=engine
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


def dumped(messages: Any) -> list[Any]:
    return [message_adapter.dump_python(m, mode="json") for m in messages]


async def main(folder: Path, role: str, target: str, queue: str) -> None:
    from pai.durable_temporal import TemporalEngine

    scenario = Scenario(folder, role, os.environ.get("PAI_CRASH_AT") or None)
    scenario.event(f"started {STARTED:.6f}")
    spec_file = folder / "spec.json"
    if role == "second":
        # Warm (Temporal's SDK takes a second or two to import), then wait for the first to die.
        import pai.durable_temporal._engine
        import pai.durable_temporal._workflow  # noqa: F401

        while not (folder / "go").exists():  # noqa: ASYNC110
            await asyncio.sleep(0.01)

    class RecordingEngine(TemporalEngine):
        async def start(self, host: DurableHost) -> None:
            await super().start(LoggingHost(host, scenario))

        async def run(self, spec: RunSpec) -> Any:
            if not spec_file.exists():
                spec_file.write_text(json.dumps(spec.to_json()))
            return await super().run(spec)

    engine = RecordingEngine(
        target_host=target,
        task_queue=queue,
        identity=role,
        heartbeat_timeout=HEARTBEAT_TIMEOUT,
        shutdown_grace=0,
    )
    storage = CrashingStorage(folder / "threads.sqlite", scenario)
    async with scenario.build(storage, engine) as runtime:
        scenario.event("serving")
        if role == "first":
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


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]))
    # Out without finalizing the interpreter: Temporal's core threads may still hold Python
    # objects then (seen as a fatal PyGILState_Release error at exit, after the run finished).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
