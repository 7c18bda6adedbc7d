"""Driving ``dbos_crash_worker.py`` from tests: a chain is one worker killed at a point and a
worker restarted after it; :class:`ForkServer` forks the workers from one process that imported
DBOS once, :func:`fresh_worker` starts each as a new Python process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dbos_crash_worker import BODIES

WORKER = Path(__file__).with_name("dbos_crash_worker.py")
TIMEOUT = 120
ENV: Mapping[str, str] = {
    "PAI_DURABLE_EXECUTOR": "crash-harness",
    "PAI_RECOVERY_INTERVAL": "0.1",
}

Runner = Callable[[Path, str, "str | None"], int]
"""Runs a worker in a folder (``run`` or ``recover``, a kill point or none): its exit status."""


@dataclass
class Chain:
    """One kill point's worker (``point`` ``None``: an uncrashed run) and its restart."""

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

    def restart_index(self) -> int:
        """Where the restarted worker's events begin."""
        starts = [i for i, (_, name) in enumerate(self.events) if name.startswith("started")]
        return starts[1]

    def resumed_bodies(self) -> list[str]:
        """The step bodies the restarted worker ran (``tool:a``, ``model:2``, ...)."""
        names = [name for _, name in self.events[self.restart_index() :]]
        return [
            name.rsplit(":", 1)[0] if name.startswith("tool:") else name
            for name in names
            if name not in ("entered", "finished") and not name.startswith("started")
        ]

    def recovery(self) -> tuple[float, float] | None:
        """Seconds from the restarted worker's start, and from its DBOS launch, to the first
        step body it ran; ``None`` when none ran again."""
        after = self.events[self.restart_index() :]
        process_start = float(after[0][1].split()[1])
        entered = next(when for when, name in after if name == "entered")
        bodies = [when for when, name in after[1:] if name not in ("entered", "finished")]
        if not bodies:
            return None
        return bodies[0] - process_start, bodies[0] - entered


def may_run_again(point: str) -> tuple[str, ...]:
    """The bodies a worker killed at ``point`` may run after the restart: that step's, and the
    ones after it (a kill in step 1's tool calls may leave the other call unrecorded too)."""
    body = point.rsplit(":", 1)[0] if point.startswith("tool:") else point
    if body in ("tool:a", "tool:b"):
        body = "tool:a"
    return BODIES[BODIES.index(body) :]


class ForkServer:
    """``dbos_crash_worker.py serve``: forks a worker per request, answers its exit status."""

    def __init__(self, env: Mapping[str, str] | None = None, worker: Path = WORKER) -> None:
        """``worker``: the script to serve (``dbos_crash_worker.py`` unless told; another must
        speak the same protocol)."""
        self.env: dict[str, str] = {**ENV, **(env or {})}
        self.process = subprocess.Popen(
            [sys.executable, str(worker), "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        assert self.process.stdout.readline().strip() == "ready"

    def run(self, folder: Path, mode: str, crash_at: str | None) -> int:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        env = dict(self.env) if crash_at is None else {**self.env, "PAI_CRASH_AT": crash_at}
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
    """A worker as a new ``python dbos_crash_worker.py`` process (imports included)."""
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


def run_chain(chain: Chain, run: Runner, restart: str = "recover") -> Chain:
    """Run ``chain``'s worker; when it died by SIGKILL, restart it without a kill point, in mode
    ``restart``."""
    chain.folder.mkdir(parents=True, exist_ok=True)
    chain.first = run(chain.folder, "run", chain.point)
    if chain.point is not None and chain.first == -signal.SIGKILL:
        chain.second = run(chain.folder, restart, None)
    return chain.load()


def check_resumed(chain: Chain, expected: Chain) -> None:
    """What every killed-and-restarted chain must show (``expected``: the uncrashed run)."""
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
    resumed = chain.resumed_bodies()
    assert set(resumed) <= set(may_run_again(chain.point)), resumed


def recovery_report(chains: Mapping[str, Chain]) -> str:
    rows: list[str] = []
    for label, chain in chains.items():
        if chain.second != 0:
            continue
        measured = chain.recovery()
        if measured is None:
            rows.append(f"{label:24} no step body ran again (the kill came after the last)")
        else:
            rows.append(
                f"{label:24} {measured[0]:5.2f} s from the restart, {measured[1]:5.3f} s from "
                "DBOS's launch to the first resumed step"
            )
    return "\n  ".join(rows)
