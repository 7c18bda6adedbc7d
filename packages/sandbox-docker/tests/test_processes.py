"""Across OS processes: rediscovery by key, a runtime killed with SIGKILL and restarted, and a
container removed behind the provider's back."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from pai.sandbox import SeedFile, create_sandbox, create_sandbox_session_manager
from pai.sandbox_docker import DockerSandboxProvider, container_name

pytestmark = pytest.mark.anyio


def _python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


async def test_a_second_process_finds_the_container_by_key(namespace: str, test_image: str) -> None:
    provider = DockerSandboxProvider(test_image, namespace=namespace)
    key = "thread:ünïcode key/with spaces"
    try:
        instance = await provider.create(key)
        sandbox = create_sandbox(create_sandbox_session_manager(provider=provider).handle(key))
        await sandbox.write_file("note.txt", "from the first process")
        child = await anyio.to_thread.run_sync(
            lambda: _python(
                """
                import sys, anyio
                from pai.sandbox_docker import DockerSandboxProvider

                async def main():
                    provider = DockerSandboxProvider(sys.argv[1], namespace=sys.argv[2])
                    found = await provider.find(sys.argv[3])
                    print(found.instance_id)
                    print((await found.read_file("/workspace/note.txt", max_bytes=1024)).decode())
                    await provider.aclose()

                anyio.run(main)
                """,
                test_image,
                namespace,
                key,
            )
        )
        assert child.returncode == 0, child.stderr
        assert child.stdout.splitlines() == [instance.instance_id, "from the first process"]
    finally:
        await provider.destroy(key)
        await provider.aclose()


_RUNTIME = """
import sys, anyio
from pydantic import BaseModel
from pai.core import SqliteStorage, ToolContext, create_agent_runtime, define_agent, define_tool
from pai.core.testing import ScriptedModel, text, tool_call
from pai.sandbox import sandbox, sandbox_capability
from pai.sandbox_docker import DockerSandboxProvider

image, namespace, db, thread_id, phase = sys.argv[1:6]

class Command(BaseModel):
    command: str

class Nothing(BaseModel):
    pass

async def run_script(ctx: ToolContext[Command]):
    result = await ctx.capabilities.sandbox.run_command(ctx.input.command)
    return result.stdout

async def block(ctx: ToolContext[Nothing]):
    print("BLOCKED", flush=True)
    await anyio.sleep_forever()

tools = {
    "runScript": define_tool(id="runScript", description="run", input_schema=Command,
                             capabilities={"sandbox": sandbox}, execute=run_script),
    "block": define_tool(id="block", description="block", input_schema=Nothing, execute=block),
}
if phase == "first":
    script = [tool_call("runScript", {"command": "echo kept > kept.txt; hostname"}),
              tool_call("block", {})]
else:
    script = [tool_call("runScript", {"command": "cat kept.txt; hostname"}), text("done")]

async def main():
    agent = define_agent(name="coder", model=ScriptedModel(script), tools=tools)
    runtime = create_agent_runtime(
        agent=agent, storage=SqliteStorage(db), scope_key=lambda identity: "scope",
        capabilities={"sandbox": sandbox_capability(
            provider=DockerSandboxProvider(image, namespace=namespace))},
    )
    async with runtime:
        admin = runtime.admin(identity=None)
        if phase == "first":
            thread = await admin.create_thread(thread_id=thread_id)
        else:
            thread = admin.thread(thread_id)
        result = await thread.send("go")
        for message in result.messages:
            if message.role == "tool":
                print("TOOL", message.content.replace("\\n", "|"), flush=True)

anyio.run(main)
"""


async def test_a_runtime_killed_with_sigkill_finds_its_container_after_restart(
    namespace: str, test_image: str, tmp_path: Path
) -> None:
    db = str(tmp_path / "pai.db")
    args = [sys.executable, "-c", _RUNTIME, test_image, namespace, db, "thread-1"]
    provider = DockerSandboxProvider(test_image, namespace=namespace)
    try:
        first = await anyio.to_thread.run_sync(
            lambda: subprocess.Popen([*args, "first"], stdout=subprocess.PIPE, text=True)
        )
        assert first.stdout is not None
        lines: list[str] = []

        def wait_blocked() -> None:
            assert first.stdout is not None
            for line in first.stdout:
                lines.append(line)
                if line.startswith("BLOCKED"):
                    return

        with anyio.fail_after(120):
            await anyio.to_thread.run_sync(wait_blocked)
        os.kill(first.pid, signal.SIGKILL)
        await anyio.to_thread.run_sync(lambda: first.wait(30))
        assert first.returncode == -signal.SIGKILL
        before = await provider.list_instances()
        assert len(before) == 1

        second = await anyio.to_thread.run_sync(
            lambda: subprocess.run([*args, "second"], capture_output=True, text=True, timeout=120)
        )
        assert second.returncode == 0, second.stderr
        tool_lines = [line for line in second.stdout.splitlines() if line.startswith("TOOL")]
        hostname = before[0].instance_id[:12]
        assert tool_lines == [f"TOOL kept|{hostname}|"], second.stdout
        assert [info.instance_id for info in await provider.list_instances()] == [
            before[0].instance_id
        ]
    finally:
        for info in await provider.list_instances():
            await provider.destroy(info.key)
        await provider.aclose()


async def test_a_container_removed_externally_comes_back_with_the_seed(
    namespace: str, test_image: str, docker_client: Any
) -> None:
    provider = DockerSandboxProvider(test_image, namespace=namespace)
    sessions = create_sandbox_session_manager(
        provider=provider, seed=[SeedFile("/workspace/seed.txt", "seeded\n")]
    )
    sandbox = create_sandbox(sessions.handle("k"))
    try:
        await sandbox.write_file("scratch.txt", "gone soon")
        assert (await sandbox.run_command("cat seed.txt")).stdout == "seeded\n"

        def remove() -> None:
            for container in docker_client.containers.list(
                all=True, filters={"label": f"pai.namespace={namespace}"}
            ):
                container.remove(force=True)

        await anyio.to_thread.run_sync(remove)
        result = await sandbox.run_command("cat seed.txt; ls")
        assert result.environment_reset
        assert result.stdout == "seeded\nseed.txt\n"
        assert docker_client.containers.get(container_name(namespace, "k")).status == "running"
    finally:
        await provider.destroy("k")
        await sessions.aclose()
