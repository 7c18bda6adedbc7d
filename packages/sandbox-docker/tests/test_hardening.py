"""The hardened defaults, checked from inside a container."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest

from pai.sandbox import Sandbox, create_sandbox, create_sandbox_session_manager
from pai.sandbox_docker import DockerSandboxProvider

pytestmark = pytest.mark.anyio


@contextlib.asynccontextmanager
async def sandbox_of(provider: DockerSandboxProvider, key: str) -> AsyncIterator[Sandbox]:
    """A sandbox for ``key`` on ``provider``; its container is removed after."""
    sessions = create_sandbox_session_manager(provider=provider)
    try:
        yield create_sandbox(sessions.handle(key))
    finally:
        await provider.destroy(key)
        await sessions.aclose()


@pytest.fixture
async def sandbox(namespace: str, test_image: str) -> AsyncIterator[Sandbox]:
    provider = DockerSandboxProvider(test_image, namespace=namespace, user="1000:1000")
    async with sandbox_of(provider, "hardening") as sandbox:
        yield sandbox


async def test_no_network_interface_but_loopback(sandbox: Sandbox) -> None:
    result = await sandbox.run_command("ls /sys/class/net")
    assert result.stdout.split() == ["lo"]


async def test_effective_capabilities_are_zero(sandbox: Sandbox) -> None:
    result = await sandbox.run_command("grep CapEff /proc/self/status")
    assert result.stdout.split() == ["CapEff:", "0000000000000000"]


async def test_no_new_privileges(sandbox: Sandbox) -> None:
    result = await sandbox.run_command("grep NoNewPrivs /proc/self/status")
    assert result.stdout.split() == ["NoNewPrivs:", "1"]


async def test_pids_limit_is_in_force(sandbox: Sandbox) -> None:
    # cgroup v2 puts the file at the root of the container's cgroup, v1 under the controller.
    result = await sandbox.run_command(
        "cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max"
    )
    assert result.stdout.strip() == "256"


async def test_memory_limit_is_in_force(sandbox: Sandbox) -> None:
    result = await sandbox.run_command(
        "cat /sys/fs/cgroup/memory.max 2>/dev/null"
        " || cat /sys/fs/cgroup/memory/memory.limit_in_bytes"
    )
    assert int(result.stdout.strip()) == 512 * 1024 * 1024


async def test_configured_user_owns_the_workspace(sandbox: Sandbox) -> None:
    assert (await sandbox.run_command("id -u; id -g")).stdout.split() == ["1000", "1000"]
    await sandbox.write_file("sub/dir/file.txt", "x")
    result = await sandbox.run_command(
        "stat -c '%u:%g' /workspace /workspace/sub/dir /workspace/sub/dir/file.txt"
        " && echo more >> sub/dir/file.txt && touch new.txt && echo ok"
    )
    assert result.stdout.split() == ["1000:1000"] * 3 + ["ok"]


async def test_init_reaps_zombies_and_is_pid_one(sandbox: Sandbox) -> None:
    result = await sandbox.run_command("cat /proc/1/comm")
    assert result.stdout.strip() in {"docker-init", "tini"}


async def test_timeout_leaves_no_process_behind(sandbox: Sandbox) -> None:
    result = await sandbox.run_command("sleep 300 & (setsid sleep 301 &); sleep 302", timeout=1)
    assert result.timed_out
    survivors = await sandbox.run_command("ps -o args | grep 'sleep 30[0-9]' || true")
    assert survivors.stdout == ""


async def test_output_is_capped_while_streaming_with_callbacks(sandbox: Sandbox) -> None:
    seen: list[str] = []
    result = await sandbox.run_command("seq 1 100000", on_stdout=seen.append)
    assert result.exit_code == 0
    assert not result.truncated
    assert "".join(seen) == result.stdout


async def test_the_output_of_short_commands_is_never_lost(sandbox: Sandbox) -> None:
    # Output that arrives with the exec's response headers must not be dropped.
    results = [await sandbox.run_command(f"echo {i}") for i in range(60)]
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(60)]


@pytest.fixture
async def small_sandbox(namespace: str, test_image: str) -> AsyncIterator[Sandbox]:
    provider = DockerSandboxProvider(test_image, namespace=namespace, memory="64m")
    async with sandbox_of(provider, "small") as sandbox:
        yield sandbox


GROW = 'x=a; i=0; while [ $i -lt 30 ]; do x="$x$x"; i=$((i+1)); done; echo survived'


async def test_a_command_killed_for_memory_says_so_naming_the_limit(small_sandbox: Sandbox) -> None:
    first = await small_sandbox.run_command(GROW, timeout=30)
    second = await small_sandbox.run_command(GROW, timeout=30)

    for result in (first, second):  # each kill is reported, not only the container's first
        assert result.exit_code == 137
        assert "survived" not in result.stdout
        assert "ran out of memory" in result.stderr
        assert "'64m', option memory" in result.stderr
    assert (await small_sandbox.run_command("echo alive")).stdout == "alive\n"


async def test_a_command_killed_by_a_signal_is_not_said_to_be_out_of_memory(
    small_sandbox: Sandbox,
) -> None:
    await small_sandbox.run_command(GROW, timeout=30)  # an earlier kill for memory

    result = await small_sandbox.run_command("echo before >&2; kill -9 $$")

    assert (result.exit_code, result.stderr) == (137, "before\n")
