"""Real runtime processes sharing one thread on one PostgreSQL database.

Four processes each send 25 messages to the same thread, each run a user message, a tool call
that takes a while, its result and the answer: the thread ends with 100 whole runs, none
interleaved with another, none lost or repeated. A process killed with SIGKILL in the middle of
a run leaves the thread readable; the next run, from another process, takes the thread over once
the dead run's lease expires, marks the dead run as interrupted, and completes. A thread
deleted by one process while another runs it: the run stops at its next lease renewal, stores
nothing more, and its caller gets ``ThreadDeletedError``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from pai.core import AssistantMessage, ErrorMessage, Message, ToolResultMessage, UserMessage
from pai.storage_postgres import PostgresStorage
from pai.storage_postgres.testing import TestSchemas

pytestmark = pytest.mark.skipif(
    sys.platform == "win32", reason="SIGKILL and a shared start file are POSIX-only here"
)

WORKER = """
import os
import sys
import time

import anyio
from pydantic import BaseModel

from pai.core import UserMessage, create_agent_runtime, define_agent, define_tool
from pai.core.testing import FunctionModel, text, tool_call

name, thread_id, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])


class Work(BaseModel):
    label: str


async def work(ctx):
    if ctx.input.label.endswith("hang"):
        print("hanging", flush=True)
        await anyio.sleep(600)
    await anyio.sleep(0.01)  # the other processes ask for the thread meanwhile
    return "worked " + ctx.input.label


def answer(request):
    last = request.messages[-1]
    if isinstance(last, UserMessage):
        return tool_call("work", {"label": last.content})
    return text("done " + last.content)


async def main():
    runtime = create_agent_runtime(
        agent=define_agent(
            name="writer",
            model=FunctionModel(answer),
            tools={"work": define_tool(id="work", description="work", input_schema=Work, execute=work)},
        ),
        scope_key=lambda identity: "acme",
    )
    async with runtime:
        admin = runtime.admin(identity=None)
        if name == "create":
            print((await admin.create_thread()).id)
            return
        thread = admin.thread(thread_id)
        if name == "delete":
            await thread.delete()
            return
        if runs == 0:
            await thread.send(f"{name} hang")
            return
        print("ready", flush=True)
        while not os.path.exists("go"):
            time.sleep(0.001)
        for n in range(runs):
            await thread.send(f"{name} {n}")


anyio.run(main)
"""


@pytest.fixture
def project(tmp_path: Path, postgres_url: str, schemas: TestSchemas) -> Path:
    url = f"{postgres_url}?schema={schemas.fresh()}"
    # A short lease, so the kill test's takeover comes quickly; the busy wait covers 100 runs.
    (tmp_path / "pai.toml").write_text(
        f'[storage]\nurl = "{url}"\nrun_lease_ttl = 3\nbusy_thread_wait = 120\n'
    )
    (tmp_path / "worker.py").write_text(WORKER)
    return tmp_path


def start(project: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "worker.py", *args],
        cwd=project,
        env={**os.environ, "PAI_LOAD_PLUGINS": "pai-storage-postgres"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(worker: subprocess.Popen[str]) -> str:
    stdout, stderr = worker.communicate(timeout=300)
    assert worker.returncode == 0, stderr
    return stdout


def read(project: Path, thread_id: str) -> list[Message]:
    url = (project / "pai.toml").read_text().split('"')[1]

    async def messages() -> list[Message]:
        storage = PostgresStorage(url)
        try:
            return list(await storage.get_messages(thread_id))
        finally:
            await storage.aclose()

    return anyio.run(messages)


def runs_of(messages: list[Message]) -> list[str]:
    """The labels of the whole runs in ``messages``, checking each is whole and its own."""
    labels: list[str] = []
    for index in range(0, len(messages), 4):
        user, call, result, answer = messages[index : index + 4]
        assert isinstance(user, UserMessage), (index, messages[index : index + 4])
        assert isinstance(call, AssistantMessage), (index, messages[index : index + 4])
        assert call.tool_calls[0].arguments == {"label": user.content}
        assert isinstance(result, ToolResultMessage)
        assert (result.tool_call_id, result.content) == (
            call.tool_calls[0].id,
            f"worked {user.content}",
        ), "a tool result is not its own run's"
        assert answer == AssistantMessage(content=f"done worked {user.content}")
        labels.append(user.content)
    return labels


def test_four_processes_sending_to_one_thread_keep_all_100_runs_whole(project: Path) -> None:
    thread_id = finish(start(project, "create", "-", "0")).strip()
    names = ("north", "south", "east", "west")
    workers = [start(project, name, thread_id, "25") for name in names]
    for worker in workers:  # every one is waiting for the start, its imports done
        assert worker.stdout is not None
        assert worker.stdout.readline() == "ready\n"
    (project / "go").touch()
    for worker in workers:
        finish(worker)

    messages = read(project, thread_id)
    assert len(messages) == 4 * 100, f"{len(messages)} messages for 100 runs of 4"
    labels = runs_of(messages)
    for name in names:
        assert [x for x in labels if x.startswith(name)] == [f"{name} {n}" for n in range(25)], (
            f"{name}'s runs were lost, repeated or reordered"
        )


def test_a_process_killed_mid_run_leaves_the_thread_usable_and_marked(project: Path) -> None:
    thread_id = finish(start(project, "create", "-", "0")).strip()
    victim = start(project, "victim", thread_id, "0")
    assert victim.stdout is not None
    assert victim.stdout.readline() == "hanging\n"  # its run holds the thread, mid tool call
    victim.send_signal(signal.SIGKILL)
    victim.communicate(timeout=30)

    partial = read(project, thread_id)
    # What the dead run had stored: nothing, or its steps completed before the kill, whole.
    assert [type(m) for m in partial] in ([], [UserMessage, AssistantMessage]), partial

    (project / "go").touch()
    finish(start(project, "next", thread_id, "1"))
    messages = read(project, thread_id)
    assert messages[: len(partial)] == partial
    marker = messages[len(partial)]
    assert isinstance(marker, ErrorMessage), messages
    assert (marker.source, marker.error_type) == ("runtime", "RunInterrupted")
    assert f":{victim.pid}:" in marker.message, f"the marker does not name the dead run: {marker}"
    assert runs_of(messages[len(partial) + 1 :]) == ["next 0"], (
        "the next send did not complete after the kill"
    )


def test_a_thread_deleted_by_one_process_stops_the_run_of_another(project: Path) -> None:
    thread_id = finish(start(project, "create", "-", "0")).strip()
    runner = start(project, "runner", thread_id, "0")
    assert runner.stdout is not None
    assert runner.stdout.readline() == "hanging\n"  # its run holds the thread, mid tool call
    finish(start(project, "delete", thread_id, "0"))
    # The runner renews its lease every run_lease_ttl / 3 = 1 s: it notices within a few.
    _, stderr = runner.communicate(timeout=30)
    assert runner.returncode != 0
    assert "ThreadDeletedError" in stderr, stderr
    assert read(project, thread_id) == []  # gone, with whatever the run had stored
