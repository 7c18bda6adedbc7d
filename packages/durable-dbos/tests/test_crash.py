"""The crash harness: worker processes killed with SIGKILL at every kill point of a durable run,
then started again with the same executor id; the restarted worker resumes the run.

For each point of ``dbos_crash_worker.CRASH_POINTS`` a worker runs the run (two tool calls at
once, one more, then an answer) on its own SQLite thread storage and DBOS database, and kills
itself there; the test sees it die by SIGKILL, starts a worker again without a kill point (the
same executor id, from ``PAI_DURABLE_EXECUTOR``), and that worker attaches to the run DBOS
resumes at launch. Every run must complete, every line must be in the tool's file exactly once,
the thread must hold what an uncrashed run's thread holds, and only the step the worker died in
(and those after it) may run again.

Workers are forked by one server process that imported DBOS once (``import dbos`` costs about two
seconds a process); each is a process of its own, killed for real. One chain also runs as fresh
``python dbos_crash_worker.py`` processes, the way a deployment restarts. The time from each
restart to the first resumed step is printed, not asserted.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from dbos_crash_worker import BODIES, CRASH_POINTS

WORKER = Path(__file__).with_name("dbos_crash_worker.py")
TIMEOUT = 120
ENV = {"PAI_DURABLE_EXECUTOR": "crash-harness", "PAI_RECOVERY_INTERVAL": "0.1"}
FRESH_POINT = "tool:c:after"
"""The kill point also run with fresh processes (not forked)."""


@dataclass
class Chain:
    """One kill point's worker (``point`` ``None``: the uncrashed run) and its restart."""

    point: str | None
    folder: Path
    first: int | None = None
    second: int | None = None
    result: Any = None
    events: list[tuple[float, str]] = field(default_factory=list[tuple[float, str]])

    def load(self) -> Chain:
        result = self.folder / "result.json"
        if result.exists():
            self.result = json.loads(result.read_text())
        events = self.folder / "events.log"
        if events.exists():
            for line in events.read_text().splitlines():
                when, name = line.split(" ", 1)
                self.events.append((float(when), name))
        return self

    def explain(self) -> str:
        log = self.folder / "worker.log"
        text = log.read_text()[-4000:] if log.exists() else ""
        return f"first worker exited {self.first}, restarted worker {self.second}\n{text}"


class ForkServer:
    """``dbos_crash_worker.py serve``: forks a worker per request, answers its exit status."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(WORKER), "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        assert self.process.stdout.readline().strip() == "ready"

    def run(self, folder: Path, mode: str, crash_at: str | None) -> int:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        env = dict(ENV) if crash_at is None else {**ENV, "PAI_CRASH_AT": crash_at}
        request = {"folder": str(folder), "mode": mode, "env": env, "timeout": TIMEOUT}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        assert answer, "the fork server died"
        return int(json.loads(answer)["returncode"])

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)


def fresh_worker(folder: Path, mode: str, crash_at: str | None) -> int:
    env = {**os.environ, **ENV}
    env.pop("PAI_CRASH_AT", None)
    if crash_at is not None:
        env["PAI_CRASH_AT"] = crash_at
    with (folder / "worker.log").open("a") as log:
        done = subprocess.run(
            [sys.executable, str(WORKER), str(folder), mode],
            env=env,
            stdout=log,
            stderr=log,
            timeout=TIMEOUT,
            check=False,
        )
    return done.returncode


def run_chain(chain: Chain, run: Any) -> Chain:
    chain.folder.mkdir(parents=True)
    chain.first = run(chain.folder, "run", chain.point)
    if chain.point is not None and chain.first == -signal.SIGKILL:
        chain.second = run(chain.folder, "recover", None)
    return chain.load()


@pytest.fixture(scope="module")
def chains(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Chain]:
    root = tmp_path_factory.mktemp("crash")
    server = ForkServer()
    try:
        done = {"uncrashed": run_chain(Chain(None, root / "uncrashed"), server.run)}
        for point in CRASH_POINTS:
            done[point] = run_chain(Chain(point, root / point.replace(":", "-")), server.run)
    finally:
        server.close()
    done["fresh"] = run_chain(Chain(FRESH_POINT, root / "fresh"), fresh_worker)
    return done


def test_the_uncrashed_run_completes(chains: dict[str, Chain]) -> None:
    chain = chains["uncrashed"]
    assert chain.first == 0, chain.explain()
    assert chain.result["status"] == "completed"
    assert chain.result["text"] == "done"


@pytest.mark.parametrize("point", [*CRASH_POINTS, "fresh"])
def test_a_run_killed_there_resumes_to_the_uncrashed_history(
    chains: dict[str, Chain], point: str
) -> None:
    chain, expected = chains[point], chains["uncrashed"]
    assert chain.point is not None
    # The worker reached the point and died there, by SIGKILL.
    assert chain.first == -signal.SIGKILL, chain.explain()
    assert chain.point in [name for _, name in chain.events]
    # The restarted worker attached to the run DBOS resumed, and it completed.
    assert chain.second == 0, chain.explain()
    assert chain.result["status"] == "completed", chain.explain()
    assert chain.result["text"] == "done"
    # Each effect happened once, whatever ran twice.
    entries = (chain.folder / "lines.txt").read_text().splitlines()
    assert sorted(entry.split("\t")[1] for entry in entries) == ["a", "b", "c"]
    assert len({entry.split("\t")[0] for entry in entries}) == 3
    # The thread holds what the uncrashed run's thread holds.
    assert chain.result["messages"] == expected.result["messages"]
    # Only the step the worker died in, and the steps after it, ran again.
    assert set(resumed_bodies(chain)) <= set(may_run_again(chain.point)), resumed_bodies(chain)


def restart_index(chain: Chain) -> int:
    """Where the restarted worker's events begin."""
    starts = [i for i, (_, name) in enumerate(chain.events) if name.startswith("started")]
    return starts[1]


def resumed_bodies(chain: Chain) -> list[str]:
    """The step bodies the restarted worker ran (``tool:a``, ``model:2``, ...)."""
    names = [name for _, name in chain.events[restart_index(chain) :]]
    return [
        name.rsplit(":", 1)[0] if name.startswith("tool:") else name
        for name in names
        if name not in ("entered", "finished") and not name.startswith("started")
    ]


def may_run_again(point: str) -> tuple[str, ...]:
    """The bodies a worker killed at ``point`` may run after the restart: that step's, and the
    ones after it (a kill in step 1's tool calls may leave the other call unrecorded too)."""
    body = point.rsplit(":", 1)[0] if point.startswith("tool:") else point
    if body in ("tool:a", "tool:b"):
        body = "tool:a"
    return BODIES[BODIES.index(body) :]


def test_recovery_time_is_reported(
    chains: dict[str, Chain], capsys: pytest.CaptureFixture[str]
) -> None:
    """Printed, not asserted: from the restarted worker's start (for the fresh process, before
    it imported anything) and from DBOS's launch, to the first step body it ran again."""
    rows: list[str] = []
    for point in [*CRASH_POINTS, "fresh"]:
        chain = chains[point]
        if chain.second != 0:
            continue
        after = chain.events[restart_index(chain) :]
        process_start = float(after[0][1].split()[1])
        entered = next(when for when, name in after if name == "entered")
        bodies = [when for when, name in after[1:] if name not in ("entered", "finished")]
        label = f"{chain.point} (fresh)" if point == "fresh" else point
        if bodies:
            rows.append(
                f"{label:22} {bodies[0] - process_start:5.2f} s from the restart, "
                f"{bodies[0] - entered:5.3f} s from DBOS's launch to the first resumed step"
            )
        else:
            rows.append(f"{label:22} no step body ran again (the kill came after the last)")
    with capsys.disabled():
        print("\nrecovery after SIGKILL:\n  " + "\n  ".join(rows))
