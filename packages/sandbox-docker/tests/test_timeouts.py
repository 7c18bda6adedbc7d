"""Timeouts kill everything a command started, inside the container, and return in time."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from pai.sandbox import CommandResult, Sandbox, create_sandbox, create_sandbox_session_manager
from pai.sandbox_docker import DockerSandboxProvider

pytestmark = pytest.mark.anyio

# What a container runs when no command is: Docker's init and the keep-alive sleep.
IDLE = {"/sbin/docker-init -- sleep 2147483647", "sleep 2147483647"}


@pytest.fixture
async def sandbox(namespace: str, test_image: str) -> AsyncIterator[Sandbox]:
    provider = DockerSandboxProvider(test_image, namespace=namespace)
    sessions = create_sandbox_session_manager(provider=provider)
    box = create_sandbox(sessions.handle("timeouts"))
    await box.run_command("true")  # provisioned: durations below measure the command alone
    try:
        yield box
    finally:
        await provider.destroy("timeouts")
        await sessions.aclose()


async def _others(sandbox: Sandbox) -> set[str]:
    """Every process in the container but the idle ones and the `ps` asking."""
    listing = await sandbox.run_command("ps -o args")
    lines = {line.strip() for line in listing.stdout.splitlines()[1:]}
    return {line for line in lines if line not in IDLE and not line.startswith("ps ")} - {
        "sh -c ps -o args",
        "{ps} sh -c ps -o args",
    }


async def test_an_env_clearing_background_loop_is_killed_within_a_second(
    sandbox: Sandbox,
) -> None:
    result = await sandbox.run_command("env -i sh -c 'while :; do :; done' & sleep 1000", timeout=1)
    assert (result.timed_out, result.exit_code) == (True, 124)
    assert result.duration < 2.0
    assert await _others(sandbox) == set()


async def test_a_process_that_left_the_session_and_cleared_its_environment_is_killed(
    sandbox: Sandbox,
) -> None:
    # setsid: a new session; env -i: no marker; its parent stays, so the parent chain finds it.
    result = await sandbox.run_command("env -i setsid sh -c 'sleep 1001' & sleep 1002", timeout=1)
    assert result.timed_out
    assert await _others(sandbox) == set()


async def test_an_orphan_that_left_the_session_and_cleared_its_environment_is_killed(
    sandbox: Sandbox,
) -> None:
    # The subshell exits at once: the loop loses its parent (pid 1 adopts it), its session and
    # its environment, so neither the session, the marker nor the parent chain finds it.
    result = await sandbox.run_command(
        "(setsid env -i sh -c 'while :; do :; done' &); sleep 1003", timeout=1
    )
    assert (result.timed_out, result.exit_code) == (True, 124)
    assert result.duration < 2.0
    assert await _others(sandbox) == set()


async def test_an_orphan_with_a_forged_marker_is_killed(sandbox: Sandbox) -> None:
    result = await sandbox.run_command(
        "(setsid env -i PAI_RUN=0123456789abcdef sh -c 'while :; do :; done' &); sleep 1004",
        timeout=1,
    )
    assert result.timed_out
    assert await _others(sandbox) == set()


async def test_the_kill_spares_an_earlier_orphan_and_one_of_a_command_still_running(
    sandbox: Sandbox,
) -> None:
    # Before the timed-out command: an orphan without any marker (not started by it).
    await sandbox.run_command("(setsid env -i sleep 1005 >/dev/null 2>&1 &)", timeout=5)
    results: list[CommandResult] = []
    async with anyio.create_task_group() as group:

        async def timed_out() -> None:
            results.append(await sandbox.run_command("sleep 1006", timeout=1.5))

        group.start_soon(timed_out)
        await anyio.sleep(0.5)
        # During it: an orphan of another command, which is still running when the first one
        # times out (the orphan keeps that command's marker).
        group.start_soon(
            sandbox.run_command, "(setsid sleep 1007 >/dev/null 2>&1 &); sleep 2; echo done"
        )
    [result] = results
    assert result.timed_out
    assert await _others(sandbox) == {"sleep 1005", "sleep 1007"}


async def test_a_command_that_exits_but_leaves_a_loop_holding_its_output_is_cut_off(
    sandbox: Sandbox,
) -> None:
    result = await sandbox.run_command("env -i sh -c 'while :; do :; done' &", timeout=1)
    assert result.timed_out
    assert result.duration < 2.0
    assert await _others(sandbox) == set()


async def test_output_before_the_timeout_is_returned(sandbox: Sandbox) -> None:
    result = await sandbox.run_command("echo before; sleep 30", timeout=1)
    assert result.timed_out
    assert result.stdout == "before\n"


async def test_the_kill_spares_other_commands_running_at_the_same_time(
    sandbox: Sandbox,
) -> None:
    await sandbox.run_command("sleep 30 >/dev/null 2>&1 &", timeout=5)  # unrelated, detached
    result = await sandbox.run_command("sleep 31", timeout=1)
    assert result.timed_out
    assert await _others(sandbox) == {"sleep 30"}
