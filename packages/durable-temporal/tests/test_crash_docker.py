"""Exactly-once sandbox commands under real crashes on Temporal, in a Docker sandbox: a worker
process whose run makes three tool calls, each appending a line in a Docker container
(``temporal_docker_worker.py``), kills itself with SIGKILL at each of 21 points (every phase
boundary, and inside each tool call: before its command, while its command runs, when its
output reached the host, after it returned); a second worker process (the same task queue,
another identity, the same thread storage and Docker namespace) takes the dead worker's step
over once Temporal gives up on its heartbeat, and completes the run.

Every run completes; the second worker finds the same container (the provider names it by
namespace and key, the key by the thread's scope), each line is in the sandbox file exactly
once, and the thread equals the uncrashed run's. Only the step the first worker died in and
the ones after it run again, on the second worker: ``list_runs()`` shows the run running on the
first worker's identity before the takeover and succeeded after it, and Temporal's history has
every later step (the killed one on its second attempt) and the run's last workflow task
completed by the second worker's identity. A command the worker died in while it ran is not run
again: Docker's exec outlives the host process, so the second worker re-attaches to it (its
claim says so) and takes its real result (exit 0, its output), as on DBOS. Unlike on DBOS, the
command (a second's sleep) has always finished by then: Temporal hands the step over only after
the heartbeat timeout (2 s), so the re-attach reads the exit code the command left in its claim.
Three more chains kill the worker in a command that sleeps 8 s: there the re-attach waits for
the running command, and takes its result too. The time from the kill to the step starting on
the second worker is printed (it builds its runtime once the first died, which on a busy
machine takes a second or more of it).

Each kill point has its own task queue, thread storage and Docker namespace, so several run at
once against the session's dev server. Without a Docker engine with the test image
(``PAI_DOCKER_TEST_IMAGE``, default ``pai-test-busybox:latest``) the tests skip saying why, or
fail with ``PAI_REQUIRE_DOCKER=1``. The containers are removed after the module, and none may be
left.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from temporal_docker_worker import (
    BODIES,
    CRASH_POINTS,
    HEARTBEAT_TIMEOUT,
    IDENTITIES,
    IMAGE,
    LINES,
    workspace_files,
)

WORKER = Path(__file__).with_name("temporal_docker_worker.py")
TIMEOUT = 120
CONCURRENT = 4
"""Kill points run at once: a chain mostly waits on Docker, its commands' sleeps and Temporal's
heartbeat timeout."""
LABEL = "pai.namespace"
ELAPSED: list[float] = []
"""How long the module's chains took, all in all."""

BEFORE_SANDBOX = ("instructions", "model:1", "tool:a:before")
"""The points where the first worker dies before its first command created the container."""
MID_COMMAND = tuple(point for point in CRASH_POINTS if point.endswith(":command"))
LONG = 8.0
"""The sleep of the command the first worker is killed in, in a second chain per mid-command
kill point: with a second's sleep the command has finished before Temporal hands its step to the
other worker (the heartbeat timeout, 2 s, after the kill), so that worker finds its exit code at
once; with this one it still runs, and the worker's re-attach waits for it."""


@pytest.fixture(scope="module")
def docker_client() -> Iterator[Any]:
    """The docker SDK client; skips (or fails, with PAI_REQUIRE_DOCKER=1) without an engine and
    the test image, as ``pai-sandbox-docker``'s tests do."""
    try:
        import docker

        client = docker.from_env()
        client.ping()
        client.images.get(IMAGE)
    except Exception as error:
        reason = f"no usable Docker engine with image {IMAGE!r}: {error}"
        if os.environ.get("PAI_REQUIRE_DOCKER") == "1":
            pytest.fail(f"PAI_REQUIRE_DOCKER=1 but {reason}")
        pytest.skip(reason)
    yield client
    client.close()


def _ours(client: Any, namespaces: set[str]) -> list[Any]:
    found = client.containers.list(all=True, filters={"label": LABEL})
    return [c for c in found if c.labels.get(LABEL) in namespaces]


def _container_ids(client: Any, namespace: str) -> list[str]:
    return [
        c.id for c in client.containers.list(all=True, filters={"label": f"{LABEL}={namespace}"})
    ]


@dataclass
class Chain:
    """One kill point's first worker (``point`` ``None``: an uncrashed run) and the second
    worker that completes its run, with their sandbox."""

    point: str | None
    folder: Path
    sleep: float = 1
    """The sleep (seconds) of the command the first worker is killed in (the others': 1)."""
    namespace: str = ""
    first: int | None = None
    second: int | None = None
    result: Any = None
    events: list[tuple[float, str, str]] = field(default_factory=list[tuple[float, str, str]])
    crashed_containers: list[str] = field(default_factory=list[str])
    containers: list[str] = field(default_factory=list[str])
    lines: str = ""
    receipts: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    claim_codes: list[str] = field(default_factory=list[str])
    seconds: float = 0.0

    def explain(self) -> str:
        logs = ""
        for role in ("first", "second"):
            log = self.folder / f"{role}.log"
            if log.exists():
                logs += f"\n--- {role}\n{log.read_text()[-3000:]}"
        events = self.folder / "events.log"
        shown = events.read_text()[-6000:] if events.exists() else ""
        return f"first exited {self.first}, second {self.second}\n{shown}{logs}"

    def names(self, role: str | None = None) -> list[str]:
        return [name for _, who, name in self.events if role is None or who == role]

    def results(self, role: str) -> list[dict[str, Any]]:
        """The commands' results the tool logged in ``role``'s worker."""
        return [
            json.loads(name[len("result ") :])
            for name in self.names(role)
            if name.startswith("result ")
        ]

    def callbacks(self) -> dict[str, list[str]]:
        """What the second worker's ``on_stdout`` got, per line."""
        seen: dict[str, list[str]] = {}
        for name in self.names("second"):
            if name.startswith("stdout "):
                chunk = json.loads(name[len("stdout ") :])
                seen.setdefault(chunk["line"], []).append(chunk["text"])
        return seen

    def resumed_bodies(self) -> list[str]:
        """The step bodies the second worker ran (``tool:a``, ``model:2``, ...), in order."""
        return [
            name.rsplit(":", 1)[0] if name.endswith(":before") else name
            for name in self.names("second")
            if name in BODIES or name.endswith(":before")
        ]

    @property
    def label(self) -> str:
        name = self.point or "uncrashed"
        return name if self.sleep == 1 else f"{name} (sleep {self.sleep:g})"

    def when(self, role: str, name: str, prefix: bool = False) -> float | None:
        """When ``role`` first logged ``name`` (or an event starting with it)."""
        for when, who, event in self.events:
            if who == role and (event.startswith(name) if prefix else event == name):
                return when
        return None

    def recovery(self) -> tuple[float, float] | None:
        """Seconds from the first worker's kill to the first step whose work the second one
        started, and to the second's polling the task queue (it builds its runtime once told
        the first died)."""
        killed = self.when("first", str(self.point))
        taken = self.when("second", "step ", prefix=True)
        serving = self.when("second", "serving")
        if killed is None or taken is None or serving is None:
            return None
        return taken - killed, serving - killed

    def live_reattach(self) -> bool | None:
        """Whether the second worker's tool began while the command the first died in still
        slept (its line observed at most a second, the command's sleep, before)."""
        line = str(self.point).split(":")[1]
        observed = self.when("first", "observed", prefix=True)
        began = self.when("second", f"tool:{line}:before")
        if observed is None or began is None:
            return None
        return began < observed + self.sleep


def _worker(
    folder: Path, role: str, target: str, queue: str, crash_at: str | None
) -> subprocess.Popen[bytes]:
    env = {**os.environ}
    env.pop("PAI_CRASH_AT", None)
    if crash_at is not None:
        env["PAI_CRASH_AT"] = crash_at
    with (folder / f"{role}.log").open("ab") as log:
        return subprocess.Popen(
            [sys.executable, str(WORKER), str(folder), role, target, queue],
            env=env,
            stdout=log,
            stderr=log,
        )


def _sandbox_state(client: Any, namespace: str) -> tuple[list[str], str, list[Any], list[str]]:
    """The namespace's container ids, and its lines file, receipts and claims' exit codes."""
    containers = _container_ids(client, namespace)
    if len(containers) != 1:
        return containers, "", [], []
    files = workspace_files(client.containers.get(containers[0]))
    receipts = [
        json.loads(content)
        for path, content in sorted(files.items())
        if path.startswith(".pai/receipts/") and path.endswith(".json")
    ]
    codes = [
        content.decode().strip()
        for path, content in sorted(files.items())
        if path.startswith(".pai/receipts/") and path.endswith("/rc")
    ]
    return containers, files.get("lines.txt", b"").decode(), receipts, codes


def run_chain(target: str, client: Any, chain: Chain) -> Chain:
    """The first worker (with a kill point, a standby second worker that starts serving the
    task queue once the first died); then what the sandbox holds."""
    folder = chain.folder
    folder.mkdir(parents=True)
    line = chain.point.split(":")[1] if chain.point and chain.point.startswith("tool:") else "a"
    config = {"namespace": chain.namespace, "sleep": {line: chain.sleep}}
    (folder / "config.json").write_text(json.dumps(config))
    queue = f"docker-crash-{uuid.uuid4().hex[:8]}"
    began = time.monotonic()
    processes: list[subprocess.Popen[bytes]] = []
    try:
        second = None
        if chain.point is not None:
            second = _worker(folder, "second", target, queue, None)
            processes.append(second)
        first = _worker(folder, "first", target, queue, chain.point)
        processes.append(first)
        chain.first = first.wait(TIMEOUT)
        chain.crashed_containers = _container_ids(client, chain.namespace)
        if second is not None:
            (folder / "go").touch()
            chain.second = second.wait(TIMEOUT)
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    chain.seconds = time.monotonic() - began
    result = folder / "result.json"
    if result.exists():
        chain.result = json.loads(result.read_text())
    events = folder / "events.log"
    if events.exists():
        for line in events.read_text().splitlines():
            when, who, name = line.split(" ", 2)
            chain.events.append((float(when), who, name))
    chain.containers, chain.lines, chain.receipts, chain.claim_codes = _sandbox_state(
        client, chain.namespace
    )
    return chain


@pytest.fixture(scope="module")
def chains(
    temporal: str, docker_client: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Chain]]:
    """The uncrashed run and a chain per kill point, ``CONCURRENT`` at a time, each in a fresh
    Docker namespace; their containers are removed afterwards, and none may be left."""
    root = tmp_path_factory.mktemp("docker-crash")
    todo = [Chain(None, root / "uncrashed")]
    todo += [Chain(point, root / point.replace(":", "-")) for point in CRASH_POINTS]
    todo += [Chain(point, root / f"long-{point.replace(':', '-')}", LONG) for point in MID_COMMAND]
    for chain in todo:
        chain.namespace = f"pai-test-{uuid.uuid4().hex[:12]}"
    namespaces = {chain.namespace for chain in todo}
    began = time.monotonic()
    try:
        with ThreadPoolExecutor(max_workers=CONCURRENT) as pool:
            finished = list(pool.map(lambda c: run_chain(temporal, docker_client, c), todo))
        done = {chain.label: chain for chain in finished}
        ELAPSED.append(time.monotonic() - began)
        yield done
    finally:
        for container in _ours(docker_client, namespaces):
            container.remove(force=True)
        assert _ours(docker_client, namespaces) == []


def expected_bodies(point: str) -> list[str]:
    """The step bodies the second worker runs after a kill at ``point``: the one the first died
    in (but an append that committed is not made again) and all after it."""
    body = point.rsplit(":", 1)[0] if point.startswith("tool:") else point
    after = list(BODIES[BODIES.index(body) :])
    return after[1:] if body.startswith("append:") else after


def activity(body: str) -> str:
    """The Temporal activity (step name) a body runs in: ``pai.model/2``, ``pai.tool/1/0/append``
    (step 1's first tool call), ``pai.append/3``, ``pai.app/instructions``."""
    kind, _, rest = body.partition(":")
    if kind == "tool":
        return f"pai.tool/{LINES.index(rest) + 1}/0/append"
    return f"pai.{kind}/{rest}" if rest else f"pai.app/{kind}"


def check_sandbox(chain: Chain) -> None:
    """One container, each line once, a receipt per command with its real result."""
    assert len(chain.containers) == 1, chain.containers
    assert chain.lines == "a\nb\nc\n", chain.lines
    assert sorted((r["exit_code"], r["stdout"]) for r in chain.receipts) == [
        (0, f"wrote {line}\n") for line in LINES
    ]
    assert len({r["key"] for r in chain.receipts}) == 3
    assert chain.claim_codes == ["0", "0", "0"]


def test_the_uncrashed_run_completes_in_one_container(chains: dict[str, Chain]) -> None:
    chain = chains["uncrashed"]
    assert chain.first == 0, chain.explain()
    assert chain.result["status"] == "completed"
    assert chain.result["text"] == "done"
    assert [r["exit_code"] for r in chain.results("first")] == [0, 0, 0]
    check_sandbox(chain)
    assert [m["role"] for m in chain.result["messages"]] == [
        "user",
        *["assistant", "tool"] * 3,
        "assistant",
    ]
    # Temporal's history: a step (activity) per body, and two more (the thread's history, the
    # run's end), each completed by the first worker on its first attempt, as the run was.
    history = chain.result["history"]
    assert [step["activity"].split("/", 1)[1] for step in history[:-1]] == [
        "pai.app/instructions",
        "pai.app/history",
        *[activity(body) for body in BODIES[1:]],
        "pai.end",
    ]
    assert {(step["identity"], step["attempt"]) for step in history[:-1]} == {
        (IDENTITIES["first"], 1)
    }
    assert history[-1] == {"activity": "workflow", "attempt": 0, "identity": IDENTITIES["first"]}
    assert chain.result["run"] == {
        "status": "succeeded",
        "engine_status": "COMPLETED",
        "executor": None,
    }


def check_chain(chain: Chain, expected: Chain) -> None:
    """What a chain killed at its point shows (``expected``: the uncrashed run)."""
    point = chain.point
    assert point is not None
    # The first worker reached the point and died there, by SIGKILL.
    assert chain.first == -signal.SIGKILL, chain.explain()
    assert point in chain.names("first")
    # The second worker finished the run.
    assert chain.second == 0, chain.explain()
    assert chain.result["status"] == "completed", chain.explain()
    assert chain.result["text"] == "done"
    # It found the dead worker's container (none was made when it died before the first
    # command), and each command ran once with its real result.
    if point in BEFORE_SANDBOX:
        assert chain.crashed_containers == []
    else:
        assert chain.crashed_containers == chain.containers
    check_sandbox(chain)
    # The thread holds what the uncrashed run's holds: a command cut off mid-way was re-attached
    # to, not reported interrupted (exit 255) nor run again.
    assert chain.result["messages"] == expected.result["messages"]
    if point.endswith(":command"):
        line = point.split(":")[1]
        observed = [name for name in chain.names() if name.startswith("observed lines")]
        assert observed == [
            f"observed lines {list(LINES[: LINES.index(line) + 1])}, "
            f"{LINES.index(line)} finished commands"
        ]
    # Only the step it died in, and those after it, ran again: on the second worker.
    assert chain.resumed_bodies() == expected_bodies(point), chain.explain()
    # Every command result the second worker got: the command's own, exit 0. Its first sandbox
    # use of a thread older than its runtime that finds no container counts as a re-creation
    # (environment_reset), though there was none yet: only where the first worker died before
    # creating it.
    resumed = chain.results("second")
    lines = [line for line in LINES if f"tool:{line}" in chain.resumed_bodies()]
    assert [(r["line"], r["exit_code"], r["stdout"], r["stderr"]) for r in resumed] == [
        (line, 0, f"wrote {line}\n", "") for line in lines
    ]
    # Their output reached on_stdout once the command finished, and nothing else did: where the
    # second worker re-attached to a claim (the first died while the command ran, or before the
    # receipt), the wrapper's claim marker is not the command's output.
    for line, texts in chain.callbacks().items():
        assert texts == [f"wrote {line}\n"], (line, texts)
    assert sorted(chain.callbacks()) == lines
    resets = [r["environment_reset"] for r in resumed]
    assert resets == [point in BEFORE_SANDBOX and i == 0 for i in range(len(resumed))]
    # Who finished it: pai runs ls saw the run running with its step on the dead worker, then
    # succeeded; Temporal's history has the steps before the kill completed by the first worker,
    # the killed one (its second attempt) and all later ones, and the run's last workflow task,
    # by the second.
    assert chain.result["before_takeover"] == {
        "status": "running",
        "engine_status": "RUNNING",
        "executor": IDENTITIES["first"],
    }
    assert chain.result["run"] == {
        "status": "succeeded",
        "engine_status": "COMPLETED",
        "executor": None,
    }
    body = point.rsplit(":", 1)[0] if point.startswith("tool:") else point
    history = chain.result["history"]
    activities = [step["activity"] for step in history]
    assert activities == [step["activity"] for step in expected.result["history"]]
    killed = [name.split("/", 1)[-1] for name in activities].index(activity(body))
    assert [(step["identity"], step["attempt"]) for step in history] == [
        *[(IDENTITIES["first"], 1)] * killed,
        (IDENTITIES["second"], 2),
        *[(IDENTITIES["second"], 1)] * (len(history) - killed - 2),
        (IDENTITIES["second"], 0),
    ], chain.explain()
    # The second worker took the step over within the heartbeat timeout of the kill, or at once
    # when its runtime came up later than that (it is built after the kill, and on a busy
    # machine takes seconds); a second of slack, and three more for a busy machine (the figures
    # are printed).
    recovery = chain.recovery()
    assert recovery is not None, chain.explain()
    taken, serving = recovery
    assert taken < max(HEARTBEAT_TIMEOUT, serving) + 4, chain.explain()


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_a_run_killed_there_is_completed_by_another_worker_in_the_same_sandbox(
    chains: dict[str, Chain], point: str
) -> None:
    chain = chains[point]
    check_chain(chain, chains["uncrashed"])
    if point in MID_COMMAND:
        # The command (a second's sleep) had finished before the second worker's tool began:
        # Temporal hands the step over only once the dead worker's heartbeat is 2 s overdue.
        # Its run of the command found the claim taken, re-attached, read the exit code and
        # output the command left in the claim, and wrote the receipt (checked above: exit 0,
        # its output once, the line once).
        assert chain.live_reattach() is False, chain.explain()


@pytest.mark.parametrize("point", MID_COMMAND)
def test_a_command_still_running_at_the_takeover_is_waited_for_by_re_attach(
    chains: dict[str, Chain], point: str
) -> None:
    """The same kill mid-command, with a command that still runs when the second worker gets
    the step: its re-attach polls the claim until the command finishes, and takes its result."""
    chain = chains[f"{point} (sleep {LONG:g})"]
    check_chain(chain, chains["uncrashed"])
    observed = chain.when("first", "observed", prefix=True)
    serving = chain.when("second", "serving")
    assert observed is not None
    assert serving is not None
    # (Unless the second worker's runtime came up only after the command finished: a very busy
    # machine.)
    assert chain.live_reattach() or serving > observed + LONG - 2, chain.explain()


def report(chains: Mapping[str, Chain], seconds: float) -> str:
    crashed = [chain for label, chain in chains.items() if label != "uncrashed"]
    mid = [chain for chain in crashed if chain.point in MID_COMMAND]
    live = sum(bool(chain.live_reattach()) for chain in mid)
    rows = []
    for chain in crashed:
        measured = chain.recovery()
        shown = (
            "none"
            if measured is None
            else f"{measured[0]:5.2f} s (its runtime up after {measured[1]:5.2f} s)"
        )
        rows.append(f"{chain.label:27} {shown}")
    spans = [chain.seconds for chain in chains.values()]
    return (
        f"\nTemporal, Docker sandbox: {len(CRASH_POINTS)} kill points, {len(MID_COMMAND)} with "
        f"a {LONG:g} s command, and the uncrashed run in {seconds:.1f} s ({CONCURRENT} at once; "
        f"a chain {min(spans):.1f}-{max(spans):.1f} s); killed mid-command {len(mid)} times, the "
        f"second worker re-attached while the command still ran {live} times.\nFrom the kill to "
        f"the step's start on the other worker (heartbeat_timeout {HEARTBEAT_TIMEOUT:g} s):\n  "
        + "\n  ".join(rows)
    )


def test_recovery_time_is_reported(
    chains: dict[str, Chain], capsys: pytest.CaptureFixture[str]
) -> None:
    with capsys.disabled():
        print(report(chains, ELAPSED[-1]))
