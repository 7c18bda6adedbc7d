"""Several processes running one agent on one thread of one SQLite file (``[storage] url``).

Each worker is a real process with its own runtime, as when several ``pai chat --thread`` or app
workers share a database: no run is lost, duplicated or split by another's, and a worker killed
with SIGKILL in the middle of its runs leaves the thread readable and writable. The next run
waits for the dead run's lease to expire (``run_lease_ttl``, one second here), then records that
the run was interrupted and goes on.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    sys.platform == "win32", reason="SIGKILL and a shared start signal are POSIX-only here"
)

WORKER = """
import os
import sys
import time

import anyio

from pai.core import create_agent_runtime, define_agent
from pai.core.testing import FunctionModel, text

name, thread_id, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])


def answer(request):
    last = request.messages[-1].content
    if last.endswith("hang"):
        print("hanging", flush=True)
        time.sleep(120)
    time.sleep(0.005)  # other workers' runs start while this one is open
    return text("re " + last)


async def main():
    runtime = create_agent_runtime(
        agent=define_agent(name="writer", model=FunctionModel(answer)),
        scope_key=lambda identity: "acme",
    )
    admin = runtime.admin(identity=None)
    if name == "create":
        print((await admin.create_thread()).id)
    elif name == "read":
        for message in await admin.thread(thread_id).messages():
            if message.role == "error":
                print(message.role, message.error_type)
            else:
                print(message.role, message.content)
    else:
        while not os.path.exists("go"):
            time.sleep(0.01)
        thread = admin.thread(thread_id)
        for n in range(runs):
            await thread.send(f"{name} {n}")
            print(f"sent {n}", flush=True)
        if runs == 0:
            await thread.send(f"{name} hang")
    await runtime.aclose()


anyio.run(main)
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pai.toml").write_text(
        '[storage]\nurl = "sqlite:///threads.db"\nrun_lease_ttl = 1\n'
    )
    (tmp_path / "worker.py").write_text(WORKER)
    return tmp_path


def start(project: Path, *args: str) -> subprocess.Popen[str]:
    environment = {**os.environ, "PAI_LOAD_PLUGINS": ""}  # [storage] sqlite:// is built in
    return subprocess.Popen(
        [sys.executable, "worker.py", *args],
        cwd=project,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(worker: subprocess.Popen[str]) -> str:
    stdout, stderr = worker.communicate(timeout=120)
    assert worker.returncode == 0, stderr
    return stdout


def runs_of(project: Path, thread_id: str) -> list[tuple[str, str]]:
    """The thread's messages, read by a fresh process, as (question, answer) pairs: each run is
    one user message followed by its own answer. Interrupted-run markers are left out (see
    :func:`interruptions`)."""
    lines = [
        line
        for line in finish(start(project, "read", thread_id, "0")).splitlines()
        if line != "error RunInterrupted"
    ]
    assert len(lines) % 2 == 0, lines
    pairs = [(lines[i], lines[i + 1]) for i in range(0, len(lines), 2)]
    for question, reply in pairs:
        assert question.startswith("user "), pairs
        assert reply == "assistant re " + question.removeprefix("user "), pairs
    return [(q.removeprefix("user "), r.removeprefix("assistant ")) for q, r in pairs]


def interruptions(project: Path, thread_id: str) -> int:
    """How many runs of the thread were recorded as interrupted."""
    lines = finish(start(project, "read", thread_id, "0")).splitlines()
    return lines.count("error RunInterrupted")


def new_thread(project: Path) -> str:
    return finish(start(project, "create", "-", "0")).strip()


def check_database(project: Path) -> None:
    with sqlite3.connect(project / "threads.db") as connection:
        assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]


def test_concurrent_processes_lose_duplicate_and_interleave_no_run(project: Path) -> None:
    thread_id = new_thread(project)
    names, runs = ["a", "b", "c", "d"], 25
    workers = [start(project, name, thread_id, str(runs)) for name in names]
    (project / "go").touch()  # all start together once their imports are done
    for worker in workers:
        finish(worker)

    questions = [question for question, _ in runs_of(project, thread_id)]
    assert sorted(questions) == sorted(f"{name} {n}" for name in names for n in range(runs))
    for name in names:  # each worker's runs in its own order
        own = [q for q in questions if q.split()[0] == name]
        assert own == [f"{name} {n}" for n in range(runs)]
    check_database(project)


def test_a_worker_killed_during_a_run_leaves_the_thread_readable_and_writable(
    project: Path,
) -> None:
    thread_id = new_thread(project)
    (project / "go").touch()
    finish(start(project, "before", thread_id, "2"))
    hanging = start(project, "killed", thread_id, "0")  # its one run waits in the model
    assert hanging.stdout is not None
    assert hanging.stdout.readline() == "hanging\n"
    hanging.send_signal(signal.SIGKILL)
    hanging.communicate(timeout=30)
    assert hanging.returncode == -signal.SIGKILL

    assert runs_of(project, thread_id) == [("before 0", "re before 0"), ("before 1", "re before 1")]
    finish(start(project, "after", thread_id, "1"))
    assert [q for q, _ in runs_of(project, thread_id)] == ["before 0", "before 1", "after 0"]
    assert interruptions(project, thread_id) == 1, "the killed run was not recorded as interrupted"
    check_database(project)


def test_workers_killed_between_and_inside_appends_leave_whole_runs(project: Path) -> None:
    thread_id = new_thread(project)
    (project / "go").touch()
    for round in range(3):
        busy = start(project, f"w{round}", thread_id, "1000")
        assert busy.stdout is not None
        while busy.stdout.readline() != f"sent {5 + round}\n":  # then killed mid-stream
            pass
        time.sleep(0.003 * round)  # later and later into the next run
        busy.send_signal(signal.SIGKILL)
        busy.communicate(timeout=30)
        questions = [q for q, _ in runs_of(project, thread_id)]
        done = [q for q in questions if q.startswith(f"w{round} ")]
        assert done == [f"w{round} {n}" for n in range(len(done))]  # a prefix, each run whole
        assert len(done) >= 6 + round
        check_database(project)
    finish(start(project, "after", thread_id, "1"))
    assert runs_of(project, thread_id)[-1] == ("after 0", "re after 0")
