"""Instances live in the process that made them: a thread used again from a new process (or by
a new provider) gets its sandbox back from the seed files, and its first result says so."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from inmemory_helpers import MakeProvider
from pydantic import BaseModel

from pai.core import Agent, SqliteStorage, ToolContext, define_agent, define_tool
from pai.core.testing import ScriptedModel, create_test_runtime, text, tool_call
from pai.sandbox import CommandResult, SeedFile, sandbox, sandbox_capability
from pai.sandbox_inmemory import InMemorySandboxProvider, create_in_memory_sandbox_provider

SEED = (SeedFile("/workspace/seed.txt", "seeded\n"),)
THREAD = "resumed-thread"
WRITE = "echo made here > made.txt; cat seed.txt"
LOOK = "cat seed.txt; ls"


def run_process(database: Path, backend: str, command: str, *, new: bool) -> object:
    """Run one process of an app (this file run as a script, see the end) to its end: a runtime
    over ``database`` whose agent runs ``command`` in thread THREAD's in-memory sandbox; what
    the command gave."""
    done = subprocess.run(
        [sys.executable, __file__, str(database), backend, "new" if new else "old", command],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_thread_resumed_in_a_new_process_says_its_sandbox_was_reset_and_has_its_seed(
    tmp_path: Path, anyio_backend: str
) -> None:
    database = tmp_path / "threads.db"
    first = run_process(database, anyio_backend, WRITE, new=True)
    assert first == {"stdout": "seeded\n", "reset": False}

    resumed = run_process(database, anyio_backend, LOOK, new=False)

    # The file the first process wrote is gone with it, the seed is back, and the result says so.
    assert resumed == {"stdout": "seeded\nseed.txt\n", "reset": True}


class Command(BaseModel):
    command: str


def command_agent(commands: list[str], results: list[CommandResult]) -> Agent:
    """An agent that runs each of ``commands`` in a turn of its own, keeping each result."""

    async def execute(ctx: ToolContext[Command]) -> CommandResult:
        result = await ctx.capabilities.sandbox.run_command(ctx.input.command)
        results.append(result)
        return result

    run = define_tool(
        id="run",
        description="Run a command.",
        input_schema=Command,
        capabilities={"sandbox": sandbox},
        execute=execute,
    )
    steps = [tool_call("run", {"command": command}) for command in commands]
    model = ScriptedModel([step for call in steps for step in (call, text("ok"))])
    return define_agent(name="coder", model=model, tools={"run": run})


async def send_in_new_runtime(
    database: Path,
    provider: InMemorySandboxProvider,
    commands: list[str],
    *,
    new_thread: bool,
) -> list[CommandResult]:
    """One turn per command in thread THREAD, by a runtime of its own over ``database``."""
    results: list[CommandResult] = []
    agent = command_agent(commands, results)
    binding = sandbox_capability(provider=provider, seed=SEED)
    async with create_test_runtime(
        agent=agent,
        capabilities={"sandbox": binding},
        storage=SqliteStorage(database),
    ) as runtime:
        admin = runtime.admin(identity=None)
        thread = await admin.create_thread(thread_id=THREAD) if new_thread else admin.thread(THREAD)
        for _ in commands:
            await thread.send("go")
    return results


@pytest.mark.anyio
async def test_a_thread_used_by_a_new_provider_is_told_of_the_reset_once(
    tmp_path: Path, make_provider: MakeProvider
) -> None:
    database = tmp_path / "threads.db"
    await send_in_new_runtime(database, make_provider(), [WRITE], new_thread=True)

    # A provider of its own, as a new process has: the instance of the thread is not there.
    first, second = await send_in_new_runtime(
        database, make_provider(), [LOOK, LOOK], new_thread=False
    )

    assert (first.stdout, first.environment_reset) == ("seeded\nseed.txt\n", True)
    assert (second.stdout, second.environment_reset) == ("seeded\nseed.txt\n", False)


@pytest.mark.anyio
async def test_a_thread_whose_instance_the_provider_still_holds_finds_its_files(
    tmp_path: Path, provider: InMemorySandboxProvider
) -> None:
    database = tmp_path / "threads.db"
    await send_in_new_runtime(database, provider, [WRITE], new_thread=True)

    # A new runtime (and session) in this process, over the same provider: nothing was lost.
    (result,) = await send_in_new_runtime(database, provider, [LOOK], new_thread=False)

    assert (result.stdout, result.environment_reset) == ("seeded\nmade.txt\nseed.txt\n", False)


@pytest.mark.anyio
async def test_an_instance_forgotten_between_two_turns_is_re_created_and_the_thread_told(
    tmp_path: Path, provider: InMemorySandboxProvider
) -> None:
    results: list[CommandResult] = []
    agent = command_agent([WRITE, LOOK], results)
    async with create_test_runtime(
        agent=agent,
        capabilities={"sandbox": sandbox_capability(provider=provider, seed=SEED)},
        storage=SqliteStorage(tmp_path / "threads.db"),
    ) as runtime:
        thread = await runtime.admin(identity=None).create_thread(thread_id=THREAD)
        await thread.send("go")
        (info,) = await provider.list_instances()
        await provider.forget(info.key)  # lost behind the runtime's back, in this process
        await thread.send("go")

    assert [(r.stdout, r.environment_reset) for r in results] == [
        ("seeded\n", False),
        ("seeded\nseed.txt\n", True),
    ]


if __name__ == "__main__":  # one process of an app, for run_process

    async def one_process(database: str, new_thread: str, command: str) -> None:
        provider = create_in_memory_sandbox_provider()  # closed with the runtime's binding
        (result,) = await send_in_new_runtime(
            Path(database), provider, [command], new_thread=new_thread == "new"
        )
        print(json.dumps({"stdout": result.stdout, "reset": result.environment_reset}))

    database, backend, new_thread, command = sys.argv[1:]
    anyio.run(one_process, database, new_thread, command, backend=backend)
