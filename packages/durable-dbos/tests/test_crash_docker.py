"""Exactly-once sandbox commands under real crashes, in a Docker sandbox: a DBOS worker whose
three tool calls each append a line in a Docker container (``dbos_docker_worker.py``) is killed
with SIGKILL at each of 21 points (every phase boundary, and inside each tool call: before its
command, while its command runs, when its output reached the host, after it returned), then a new
process finishes the run:

- on SQLite, the same worker restarted (same executor id: DBOS resumes the run at launch);
- on PostgreSQL, another worker (another executor id) that takes the dead worker's run over with
  ``resume_run`` (what ``pai runs resume`` calls).

Every run completes; the new process finds the same container again (the provider names it by
namespace and key; the key by the thread scope), each line is in the sandbox file exactly once,
and the thread equals the uncrashed run's. A command the worker died in while it ran is not run
again: Docker's exec outlives the host process, so the new process re-attaches to it (its claim
says so) and takes its real result (exit 0, its output) once it finishes.

Each kill point runs in a Docker namespace of its own (and on PostgreSQL a schema of its own), so
several run at once, forked from servers that imported DBOS once. Without a Docker engine with
the test image (``PAI_DOCKER_TEST_IMAGE``, default ``pai-test-busybox:latest``) the tests skip
saying why, or fail with ``PAI_REQUIRE_DOCKER=1``; the PostgreSQL one needs
``PAI_TEST_POSTGRES_URL`` as ``test_postgres.py`` does. Containers are removed after each test.
"""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from queue import Queue
from typing import Any

import pytest
from dbos_docker_worker import BODIES, CRASH_POINTS, IMAGE, LINES, workspace_files
from dbos_harness import Chain, ForkServer, run_chain
from test_postgres import postgres_url  # noqa: F401  (a fixture)

WORKER = Path(__file__).with_name("dbos_docker_worker.py")
PARALLEL = 4
"""Kill points run at once (each its own fork server; on 2 cores the workers mostly wait for
Docker and for their commands' sleeps)."""
LABEL = "pai.namespace"

BEFORE_SANDBOX = ("instructions", "model:1", "tool:a:before")
"""The points where the first worker dies before its first command created the container."""


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


@pytest.fixture
def namespaces(docker_client: Any) -> Iterator[set[str]]:
    """The Docker namespaces a test used; their containers are removed after it, and none may
    be left (``docker ps -a``)."""
    used: set[str] = set()
    yield used
    for container in _ours(docker_client, used):
        container.remove(force=True)
    assert _ours(docker_client, used) == []


@dataclass
class DockerChain(Chain):
    """A chain with its sandbox: the containers of its namespace after the first worker died
    and at the end, and what the sandbox holds at the end."""

    namespace: str = ""
    crashed_containers: list[str] = field(default_factory=list[str])
    containers: list[str] = field(default_factory=list[str])
    lines: str = ""
    receipts: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    claim_codes: list[str] = field(default_factory=list[str])
    seconds: float = 0.0

    def names(self) -> list[str]:
        return [name for _, name in self.events]

    def results(self, after_restart: bool) -> list[dict[str, Any]]:
        """The commands' results the tool logged, in the first worker or the restarted one."""
        events = self.events
        if self.second is not None:
            restart = self.restart_index()
            events = events[restart:] if after_restart else events[:restart]
        return [
            json.loads(name[len("result ") :]) for _, name in events if name.startswith("result ")
        ]

    def callbacks(self) -> dict[str, list[str]]:
        """What the restarted worker's ``on_stdout`` got, per line."""
        seen: dict[str, list[str]] = {}
        for _, name in self.events[self.restart_index() :]:
            if name.startswith("stdout "):
                chunk = json.loads(name[len("stdout ") :])
                seen.setdefault(chunk["line"], []).append(chunk["text"])
        return seen

    def live_reattach(self) -> bool:
        """Whether the restarted worker's tool began while the command it died in still slept
        (its line observed at most a second, the command's sleep, before)."""
        line = str(self.point).split(":")[1]
        observed = next(when for when, name in self.events if name.startswith("observed"))
        restarted = self.events[self.restart_index() :]
        began = next(when for when, name in restarted if name == f"tool:{line}:before")
        return began < observed + 1.0

    def resumed_bodies(self) -> list[str]:
        names = [name for _, name in self.events[self.restart_index() :]]
        return [
            name.rsplit(":", 1)[0] if name.endswith(":before") else name
            for name in names
            if name in BODIES or name.endswith(":before")
        ]


def _container_ids(client: Any, namespace: str) -> list[str]:
    return [
        c.id for c in client.containers.list(all=True, filters={"label": f"{LABEL}={namespace}"})
    ]


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


def run_chains(
    folder: Path,
    env: Mapping[str, str],
    restart: str,
    namespaces: set[str],
    configure: Callable[[], dict[str, str]] = dict,
) -> dict[str | None, DockerChain]:
    """The uncrashed run and a chain per kill point, ``PARALLEL`` at a time, each in a fresh
    namespace (and whatever ``configure`` adds to its config.json)."""
    import docker

    servers: Queue[ForkServer] = Queue()
    with ThreadPoolExecutor(PARALLEL) as pool:
        for server in pool.map(lambda _: ForkServer(env, worker=WORKER), range(PARALLEL)):
            servers.put(server)

    def one(point: str | None) -> DockerChain:
        namespace = f"pai-test-{uuid.uuid4().hex[:12]}"
        namespaces.add(namespace)
        chain = DockerChain(point, folder / (point or "uncrashed").replace(":", "-"))
        chain.namespace = namespace
        chain.folder.mkdir(parents=True)
        (chain.folder / "config.json").write_text(
            json.dumps({"namespace": namespace, **configure()})
        )
        client = docker.from_env()
        server = servers.get()
        began = time.monotonic()
        try:

            def run(where: Path, mode: str, crash_at: str | None) -> int:
                code = server.run(where, mode, crash_at)
                if mode == "run" and code == -signal.SIGKILL:
                    chain.crashed_containers = _container_ids(client, namespace)
                return code

            run_chain(chain, run, restart)
        finally:
            servers.put(server)
        chain.seconds = time.monotonic() - began
        chain.containers, chain.lines, chain.receipts, chain.claim_codes = _sandbox_state(
            client, namespace
        )
        client.close()
        return chain

    try:
        with ThreadPoolExecutor(PARALLEL) as pool:
            chains = list(pool.map(one, [None, *CRASH_POINTS]))
    finally:
        while not servers.empty():
            servers.get().close()
    return {chain.point: chain for chain in chains}


def expected_bodies(point: str) -> list[str]:
    """The step bodies a restart after a kill at ``point`` runs: the one it died in (but an
    append that committed is not made again) and all after it."""
    body = point.rsplit(":", 1)[0] if point.startswith("tool:") else point
    after = list(BODIES[BODIES.index(body) :])
    return after[1:] if body.startswith("append:") else after


def check_sandbox(chain: DockerChain) -> None:
    """One container, each line once, a receipt per command with its real result."""
    assert len(chain.containers) == 1, chain.containers
    assert chain.lines == "a\nb\nc\n", chain.lines
    assert sorted((r["exit_code"], r["stdout"]) for r in chain.receipts) == [
        (0, f"wrote {line}\n") for line in LINES
    ]
    assert len({r["key"] for r in chain.receipts}) == 3
    assert chain.claim_codes == ["0", "0", "0"]


def check_chain(chain: DockerChain, expected: DockerChain, restart: str) -> None:
    assert chain.point is not None
    # The worker reached the point and died there, by SIGKILL.
    assert chain.first == -signal.SIGKILL, chain.explain()
    assert chain.point in chain.names()
    # The new process finished the run.
    assert chain.second == 0, chain.explain()
    assert chain.result["status"] == "completed", chain.explain()
    assert chain.result["text"] == "done"
    # It found the dead worker's container (none was made when it died before the first
    # command), and each command ran once with its real result.
    if chain.point in BEFORE_SANDBOX:
        assert chain.crashed_containers == []
    else:
        assert chain.crashed_containers == chain.containers
    check_sandbox(chain)
    # The thread holds what the uncrashed run's holds: a command cut off mid-way was re-attached
    # to, not reported interrupted (exit 255) nor run again.
    assert chain.result["messages"] == expected.result["messages"]
    if chain.point.endswith(":command"):
        line = chain.point.split(":")[1]
        observed = [name for name in chain.names() if name.startswith("observed lines")]
        assert observed == [
            f"observed lines {list(LINES[: LINES.index(line) + 1])}, "
            f"{LINES.index(line)} finished commands"
        ]
    # Only the step it died in, and those after it, ran again.
    assert chain.resumed_bodies() == expected_bodies(chain.point), chain.explain()
    # Every command result the restarted worker got: the command's own, exit 0. The first
    # sandbox use of a thread older than the process whose container it cannot find counts as
    # a re-creation (environment_reset), though there was none yet: only where the first worker
    # died before creating it.
    resumed = chain.results(after_restart=True)
    lines = [line for line in LINES if f"tool:{line}" in chain.resumed_bodies()]
    assert [(r["line"], r["exit_code"], r["stdout"], r["stderr"]) for r in resumed] == [
        (line, 0, f"wrote {line}\n", "") for line in lines
    ]
    # Their output reached on_stdout once the command finished, and nothing else did: where the
    # new process re-attached to a claim (it died while the command ran, or before the
    # receipt), the wrapper's claim marker is not the command's output.
    for line, texts in chain.callbacks().items():
        assert texts == [f"wrote {line}\n"], (line, texts)
    assert sorted(chain.callbacks()) == lines
    resets = [r["environment_reset"] for r in resumed]
    assert resets == [chain.point in BEFORE_SANDBOX and i == 0 for i in range(len(resumed))]
    # Who finished it.
    if restart == "recover":
        assert chain.result["run"] == {
            "status": "succeeded",
            "engine_status": "SUCCESS",
            "executor": "pai:docker-w1",
        }
    else:
        assert chain.result["before_takeover"] == {
            "status": "running",
            "engine_status": "PENDING",
            "executor": "pai:docker-w1",
        }
        assert chain.result["run"] == {
            "status": "succeeded",
            "engine_status": "SUCCESS",
            "executor": "pai:docker-w2",
        }


def check_all(chains: Mapping[str | None, DockerChain], restart: str) -> None:
    expected = chains[None]
    assert expected.first == 0, expected.explain()
    assert [r["exit_code"] for r in expected.results(after_restart=False)] == [0, 0, 0]
    check_sandbox(expected)
    assert [m["role"] for m in expected.result["messages"]] == [
        "user",
        *["assistant", "tool"] * 3,
        "assistant",
    ]
    failures: list[str] = []
    for point in CRASH_POINTS:
        try:
            check_chain(chains[point], expected, restart)
        except AssertionError as error:
            failures.append(f"{point}: {error}")
    assert not failures, "\n\n".join(failures)


def report(label: str, chains: Mapping[str | None, DockerChain], began: float) -> str:
    seconds = [chain.seconds for chain in chains.values()]
    mid = [chain for point, chain in chains.items() if point and point.endswith(":command")]
    live = sum(chain.live_reattach() for chain in mid)
    return (
        f"\n{label}: {len(CRASH_POINTS)} kill points and the uncrashed run in "
        f"{time.monotonic() - began:.1f} s ({PARALLEL} at once; a chain "
        f"{min(seconds):.1f}-{max(seconds):.1f} s); killed mid-command {len(mid)} times, the new "
        f"process re-attached while the command still ran {live} times"
    )


def test_killed_workers_resume_on_sqlite_in_the_same_docker_sandbox(
    tmp_path: Path, namespaces: set[str], capsys: pytest.CaptureFixture[str]
) -> None:
    began = time.monotonic()
    chains = run_chains(tmp_path, {}, "recover", namespaces)
    check_all(chains, "recover")
    with capsys.disabled():
        print(report("SQLite, restarted with the same executor id", chains, began))


@pytest.fixture
def schemas(postgres_url: str) -> Iterator[list[str]]:  # noqa: F811
    """Fresh PostgreSQL schemas for DBOS's tables, dropped after the test."""
    import psycopg

    made: list[str] = []
    yield made
    with psycopg.connect(postgres_url, autocommit=True, connect_timeout=10) as conn:
        for name in made:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE'.encode())


def test_killed_workers_runs_are_taken_over_on_postgres_in_the_same_docker_sandbox(
    tmp_path: Path,
    postgres_url: str,  # noqa: F811
    schemas: list[str],
    namespaces: set[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    def schema() -> dict[str, str]:
        name = f"pai_dbos_{uuid.uuid4().hex[:12]}"
        schemas.append(name)
        return {"schema": name}

    began = time.monotonic()
    chains = run_chains(tmp_path, {"PAI_DBOS_URL": postgres_url}, "takeover", namespaces, schema)
    check_all(chains, "takeover")
    with capsys.disabled():
        print(report("PostgreSQL, taken over by another executor id", chains, began))
