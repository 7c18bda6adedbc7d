"""Two real processes, each with a runtime on one SQLite file, sending to the same thread at once.

Each run is a user message, a tool call that takes a while, its result and the answer: the
thread ends with every run whole, none interleaved with another, none lost or repeated.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from pai.core import AssistantMessage, SqliteStorage, ToolResultMessage, UserMessage

WORKER = """
import os
import sys
import time

import anyio
from pydantic import BaseModel

from pai.core import ToolResultMessage, UserMessage, create_agent_runtime, define_agent, define_tool
from pai.core.testing import FunctionModel, text, tool_call

name, thread_id, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])


class Work(BaseModel):
    label: str


async def work(ctx):
    await anyio.sleep(0.02)  # the other process asks for the thread meanwhile
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
        print("ready", flush=True)
        while not os.path.exists("go"):
            time.sleep(0.001)
        thread = admin.thread(thread_id)
        for n in range(runs):
            await thread.send(f"{name} {n}")


anyio.run(main)
"""


def run_worker(project: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "worker.py", *args],
        cwd=project,
        env={**os.environ, "PAI_LOAD_PLUGINS": ""},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(worker: subprocess.Popen[str]) -> str:
    stdout, stderr = worker.communicate(timeout=180)
    assert worker.returncode == 0, stderr
    return stdout


@pytest.mark.skipif(sys.platform == "win32", reason="the workers share a start file, POSIX-only")
def test_two_processes_sending_to_one_thread_keep_every_run_whole(tmp_path: Path) -> None:
    (tmp_path / "pai.toml").write_text('[storage]\nurl = "sqlite:///threads.db"\n')
    (tmp_path / "worker.py").write_text(WORKER)
    thread_id = finish(run_worker(tmp_path, "create", "-", "0")).strip()
    workers = [run_worker(tmp_path, name, thread_id, "10") for name in ("left", "right")]
    for worker in workers:  # both are waiting for the start, their imports done
        assert worker.stdout is not None
        assert worker.stdout.readline() == "ready\n"
    (tmp_path / "go").touch()
    for worker in workers:
        finish(worker)

    async def read() -> list[object]:
        store = SqliteStorage(tmp_path / "threads.db")
        try:
            return list(await store.get_messages(thread_id))
        finally:
            await store.aclose()

    messages = anyio.run(read)
    assert len(messages) == 4 * 20, f"{len(messages)} messages for 20 runs of 4"
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
    for name in ("left", "right"):
        assert [x for x in labels if x.startswith(name)] == [f"{name} {n}" for n in range(10)]
