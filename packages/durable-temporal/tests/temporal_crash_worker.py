"""A worker process of the crash tests: a durable run on Temporal whose steps log what they do,
and can kill their own process with SIGKILL at a point.

The run (a fake host, without a runtime): ``pai.app/history``, ``pai.model/1``, two tool calls
at once (lines ``a`` and ``b``), ``pai.append/1``, a third tool call (``c``), ``pai.append/2``,
``pai.end``. The tool's side effect appends ``<durable call id>\\t<line>`` to ``lines.txt``
unless that call id is already there (an idempotent effect, keyed as PAI advises).

As a script::

    python temporal_crash_worker.py DIR first TARGET QUEUE    # start the run (spec.json)
    python temporal_crash_worker.py DIR second TARGET QUEUE   # wait for DIR/go, then serve
                                                              # the queue and attach to the run

``DIR/events.log`` gets ``<unix time> <role> <event>`` lines: ``started``, ``serving`` (the
worker polls), ``body <step>`` when a step's work starts, and each kill point reached. With
``PAI_CRASH_AT=<point>`` the process kills itself with SIGKILL at that point (see
:data:`CRASH_POINTS`). The result is written to ``result.json`` by whichever role finished the
run.
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

from pai.core import RunSpec, Steps  # noqa: E402

HEARTBEAT_TIMEOUT = 2.0
"""The tests' heartbeat timeout: a dead worker's step is given to another within about this."""

CRASH_POINTS = (
    "history",
    "model:1",
    "tool:a:before",
    "tool:a:after",
    "tool:b:after",
    "append:1",
    "tool:c:before",
    "tool:c:after",
    "append:2",
    "end",
)
"""Where the first worker can die: inside a step's work (``tool:x:before``/``after``: around
the tool's side effect; the others right after the step's work was done, before Temporal
recorded it)."""

BODIES = (
    "pai.app/history",
    "pai.model/1",
    "pai.tool/1/0/append",
    "pai.tool/1/1/append",
    "pai.append/1",
    "pai.tool/2/0/append",
    "pai.append/2",
    "pai.end",
)
"""The step bodies of an uncrashed run, in order (the two tool calls of step 1 run at once)."""


class Scenario:
    def __init__(self, folder: Path, role: str, crash_at: str | None) -> None:
        self.folder = folder
        self.role = role
        self.crash_at = crash_at
        self.lines = folder / "lines.txt"

    def event(self, name: str) -> None:
        with (self.folder / "events.log").open("a") as out:
            out.write(f"{time.time():.6f} {self.role} {name}\n")

    def point(self, name: str) -> None:
        self.event(name)
        if name == self.crash_at:
            os.kill(os.getpid(), signal.SIGKILL)


class CrashHost:
    """The run's workflow code and its steps' work (see the module's docstring)."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario

    async def execute(self, spec: RunSpec, steps: Steps) -> Any:
        await steps.step("pai.app/history", {})
        await steps.step("pai.model/1", {})
        first = await steps.gather(
            [
                ("pai.tool/1/0/append", {"step": 1, "index": 0, "line": "a"}),
                ("pai.tool/1/1/append", {"step": 1, "index": 1, "line": "b"}),
            ],
            limit=4,
        )
        await steps.step("pai.append/1", {})
        second = await steps.step("pai.tool/2/0/append", {"step": 2, "index": 0, "line": "c"})
        await steps.step("pai.append/2", {})
        await steps.step("pai.end", {})
        return {"status": "completed", "tools": [*first, second]}

    async def perform(self, spec: RunSpec, name: str, payload: Any) -> Any:
        scenario = self.scenario
        scenario.event(f"body {name}")
        if name.startswith("pai.tool/"):
            line = payload["line"]
            scenario.point(f"tool:{line}:before")
            key = f"{spec.run_id}/{payload['step']}/{payload['index']}"  # a durable call id
            written = scenario.lines.read_text().splitlines() if scenario.lines.exists() else []
            if not any(entry.split("\t")[0] == key for entry in written):
                with scenario.lines.open("a") as out:
                    out.write(f"{key}\t{line}\n")
            scenario.point(f"tool:{line}:after")
            return f"appended {line}"
        short = {
            "pai.app/history": "history",
            "pai.model/1": "model:1",
            "pai.append/1": "append:1",
            "pai.append/2": "append:2",
            "pai.end": "end",
        }[name]
        scenario.point(short)
        return {"done": name}


def run_spec(queue: str) -> RunSpec:
    return RunSpec(
        run_id=f"run-on-{queue}",
        kind="send",
        thread_id="t",
        agent_name="main",
        scope_key="acme",
        user_key=None,
        staged=("go",),
    )


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
    engine = TemporalEngine(
        target_host=target,
        task_queue=queue,
        identity=role,
        heartbeat_timeout=HEARTBEAT_TIMEOUT,
        shutdown_grace=0,
    )
    await engine.start(CrashHost(scenario))
    scenario.event("serving")
    try:
        if role == "first":
            spec = run_spec(queue)
            spec_file.write_text(json.dumps(spec.to_json()))
        else:
            spec = RunSpec.from_json(json.loads(spec_file.read_text()))
        result = await engine.run(spec)
    finally:
        await engine.aclose()
    scenario.event("finished")
    (folder / "result.json").write_text(json.dumps(result))


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]))
    # Out without finalizing the interpreter: Temporal's core threads may still hold Python
    # objects then (seen as a fatal PyGILState_Release error at exit, after the run finished).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
