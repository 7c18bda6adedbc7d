"""Real crashes: a worker process running a durable run through a real runtime (SQLite thread
storage shared by both workers) kills itself with SIGKILL at a point of ``CRASH_POINTS`` (inside
the instructions function, a model call, a tool around its side effect, right after an append
committed, before Temporal recorded the step); a second worker process (the same task queue,
another identity), started as the first dies, completes the run. Every run completes, each line
is in the tool's file exactly once, the thread holds what an uncrashed run's holds, only the step
the first worker died in (and those after it) run again, and the time from the kill to the first
step the second worker starts is printed: Temporal gives a dead worker's step to another
within the heartbeat timeout (2 s here) and a second or so.

The chains run three at a time against the session's dev server, each on a task queue of its
own; each worker is a fresh ``python temporal_crash_worker.py`` process (the second imports
Temporal's SDK while the first runs, as a standby would).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from temporal_crash_worker import BODIES, CRASH_POINTS, HEARTBEAT_TIMEOUT

WORKER = Path(__file__).with_name("temporal_crash_worker.py")
TIMEOUT = 90
CONCURRENT = 3


@dataclass
class Chain:
    point: str | None
    folder: Path
    first: int | None = None
    second: int | None = None
    result: Any = None
    events: list[tuple[float, str, str]] = field(default_factory=list[tuple[float, str, str]])

    def explain(self) -> str:
        logs = ""
        for role in ("first", "second"):
            log = self.folder / f"{role}.log"
            if log.exists():
                logs += f"\n--- {role}\n{log.read_text()[-3000:]}"
        events = (self.folder / "events.log").read_text() if self.events else ""
        return f"first exited {self.first}, second {self.second}\n{events}{logs}"

    def bodies(self, role: str) -> list[str]:
        """The step bodies ``role`` ran (``tool:a``, ``model:2``, ...), in order."""
        names = [name for _, who, name in self.events if who == role]
        return [
            name.rsplit(":", 1)[0] if name.startswith("tool:") else name
            for name in names
            if name.split(" ")[0] not in ("started", "serving", "finished", "step")
            and not name.endswith(":after")
        ]

    def recovery(self) -> float | None:
        """Seconds from the first worker's kill to the first step whose work the second one
        started."""
        killed = [when for when, who, name in self.events if who == "first" and name == self.point]
        taken = [
            when for when, who, name in self.events if who == "second" and name.startswith("step ")
        ]
        if not killed or not taken:
            return None
        return taken[0] - killed[-1]


def worker(
    folder: Path, role: str, target: str, queue: str, crash_at: str | None
) -> subprocess.Popen[bytes]:
    env = {**os.environ}
    env.pop("PAI_CRASH_AT", None)
    if crash_at is not None:
        env["PAI_CRASH_AT"] = crash_at
    log = (folder / f"{role}.log").open("ab")
    return subprocess.Popen(
        [sys.executable, str(WORKER), str(folder), role, target, queue],
        env=env,
        stdout=log,
        stderr=log,
    )


def run_chain(target: str, chain: Chain) -> Chain:
    folder = chain.folder
    folder.mkdir(parents=True)
    queue = f"crash-{uuid.uuid4().hex[:8]}"
    second = worker(folder, "second", target, queue, None)
    first = worker(folder, "first", target, queue, chain.point)
    try:
        chain.first = first.wait(TIMEOUT)
        # The second worker starts serving the queue as soon as the first one died.
        (folder / "go").touch()
        chain.second = second.wait(TIMEOUT) if chain.point is not None else None
    finally:
        for process in (first, second):
            if process.poll() is None:
                process.kill()
                process.wait()
    result = folder / "result.json"
    if result.exists():
        chain.result = json.loads(result.read_text())
    for line in (folder / "events.log").read_text().splitlines():
        when, who, name = line.split(" ", 2)
        chain.events.append((float(when), who, name))
    return chain


@pytest.fixture(scope="module")
def chains(temporal: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Chain]:
    root = tmp_path_factory.mktemp("crash")
    todo = [Chain(None, root / "uncrashed")]
    todo += [Chain(point, root / point.replace(":", "-")) for point in CRASH_POINTS]
    # A few chains at a time: a worker spends most of a chain waiting on Temporal's timeouts.
    with ThreadPoolExecutor(max_workers=CONCURRENT) as pool:
        finished = list(pool.map(lambda chain: run_chain(temporal, chain), todo))
    return {"uncrashed" if c.point is None else c.point: c for c in finished}


def may_run_again(point: str) -> set[str]:
    """The bodies a worker killed at ``point`` may leave to be run again: that step's, the
    other tool call of step 1 when it died in one, and the ones after it."""
    body = point.rsplit(":", 1)[0] if point.startswith("tool:") else point
    if body in ("tool:a", "tool:b"):
        body = "tool:a"
    return set(BODIES[BODIES.index(body) :])


def test_the_uncrashed_run_completes(chains: dict[str, Chain]) -> None:
    chain = chains["uncrashed"]
    assert chain.first == 0, chain.explain()
    assert chain.result["status"] == "completed"
    assert chain.result["text"] == "done"
    assert sorted(chain.bodies("first")) == sorted(BODIES)


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_a_run_killed_there_is_completed_by_another_worker(
    chains: dict[str, Chain], point: str
) -> None:
    chain = chains[point]
    assert chain.first == -signal.SIGKILL, chain.explain()
    assert chain.second == 0, chain.explain()
    assert chain.result == chains["uncrashed"].result, chain.explain()
    entries = (chain.folder / "lines.txt").read_text().splitlines()
    assert sorted(entry.split("\t")[1] for entry in entries) == ["a", "b", "c"], chain.explain()
    assert len({entry.split("\t")[0] for entry in entries}) == 3
    again = chain.bodies("second")
    # Only the step the first worker died in, and the ones after it, ran again; none twice.
    assert set(again) <= may_run_again(point), chain.explain()
    assert len(again) == len(set(again)), chain.explain()
    assert set(chain.bodies("first")) | set(again) == set(BODIES)
    if point != BODIES[-1]:
        # (Killed after the last append committed, the retried step finds it done and appends
        # nothing: the run's remaining steps log no point.)
        assert again, chain.explain()
    recovery = chain.recovery()
    assert recovery is not None
    # Bounded by the heartbeat timeout (plus the server's timer and the retry's 0.2 s); generous
    # here, for a busy machine: the figures are printed below.
    assert recovery < 2 * HEARTBEAT_TIMEOUT + 4, chain.explain()


def test_recovery_time_is_reported(
    chains: dict[str, Chain], capsys: pytest.CaptureFixture[str]
) -> None:
    rows = []
    for point in CRASH_POINTS:
        measured = chains[point].recovery()
        shown = "  (no body ran again)" if measured is None else f"{measured:5.2f} s"
        rows.append(f"{point:16} {shown} from the kill to the step's start on the other worker")
    with capsys.disabled():
        print(
            f"\nrecovery after SIGKILL (heartbeat_timeout {HEARTBEAT_TIMEOUT:g} s):\n  "
            + "\n  ".join(rows)
        )
