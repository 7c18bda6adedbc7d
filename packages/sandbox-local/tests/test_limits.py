"""Limits that hold: processes, memory and file size, and a runaway sandbox leaves the host
healthy."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from pai.sandbox import Sandbox, SandboxError, SandboxSessionManager
from pai.sandbox_local import LocalSandboxProvider
from pai.sandbox_local._cgroups import place

pytestmark = pytest.mark.anyio


@pytest.fixture
async def provider(state_dir: Path) -> AsyncIterator[LocalSandboxProvider]:
    provider = LocalSandboxProvider(state_dir=state_dir, processes=64, file_size="1m")
    try:
        yield provider
    finally:
        await provider.destroy("limits")
        await provider.aclose()


def _sandbox(provider: LocalSandboxProvider) -> Sandbox:
    return Sandbox(SandboxSessionManager(provider).handle("limits"), default_timeout=30)


def _bounded(provider: LocalSandboxProvider) -> None:
    if provider.limits_in_effect["processes"].startswith("none"):
        pytest.skip(
            "a fork bomb is only safe to try where the process count is bounded here: "
            + provider.limits_in_effect["processes"]
        )


def _host_can_spawn() -> bool:
    return subprocess.run(["true"], check=False, timeout=10).returncode == 0


async def test_the_process_count_is_bounded(provider: LocalSandboxProvider) -> None:
    _bounded(provider)
    box = _sandbox(provider)
    # Python's spawn fails at once when the count is reached (bash's fork would retry).
    result = await box.run_command(
        "python3 -c 'import subprocess\nstarted = []\ntry:\n    for _ in range(150):\n"
        '        started.append(subprocess.Popen(["sleep", "3"]))\n'
        'except OSError as error:\n    print("refused", error.errno)\nprint(len(started))\'',
        timeout=20,
    )
    refused, count = result.stdout.split("\n")[:2]
    assert refused == "refused 11", result  # EAGAIN
    assert int(count) < 64, result


async def test_a_command_that_cannot_start_at_the_limit_names_the_option(
    provider: LocalSandboxProvider,
) -> None:
    _bounded(provider)
    box = _sandbox(provider)
    # A background filler takes every process left, and stays to hold the count there.
    filler = await box.run_command(
        "python3 -c 'import subprocess, time\ntry:\n    while True:\n"
        '        subprocess.Popen(["sleep", "60"], start_new_session=True)\n'
        'except OSError:\n    print("full", flush=True)\n    time.sleep(60)\' > /tmp/fill 2>&1 &',
        timeout=20,
    )
    assert filler.exit_code == 0, filler
    failures: list[str] = []
    for _ in range(100):
        try:
            result = await box.run_command("true")
        except SandboxError as error:
            failures.append(str(error))
        else:
            if result.exit_code == 0:
                await anyio.sleep(0.05)  # not full yet
                continue
            failures.append(result.stderr)
        if len(failures) == 3:
            break
    assert failures, "commands still started with the process count at its limit"
    for failure in failures:
        assert "limit of 64 processes (option `processes`" in failure, failures


async def test_a_fork_bomb_fails_its_command_and_the_host_and_sandbox_stay_healthy(
    provider: LocalSandboxProvider,
) -> None:
    _bounded(provider)
    box = _sandbox(provider)
    result = await box.run_command(":(){ :|:& };:", timeout=2)
    assert result.timed_out or result.exit_code != 0, result
    assert _host_can_spawn(), "the host could not start a process after the fork bomb"
    again = await box.run_command("echo alive")
    assert (again.exit_code, again.stdout) == (0, "alive\n"), again


async def test_a_file_over_file_size_fails_naming_the_limit(
    provider: LocalSandboxProvider,
) -> None:
    box = _sandbox(provider)
    result = await box.run_command("head -c 2000000 /dev/zero > big; echo status=$?; wc -c < big")
    assert "status=" in result.stdout, result
    assert "status=0" not in result.stdout, result
    assert int(result.stdout.split()[-1]) <= 1024 * 1024, result


async def test_a_sandbox_gets_a_group_of_its_own_which_destroy_removes(
    provider: LocalSandboxProvider,
) -> None:
    where = place()
    if where is None:
        pytest.skip("this machine lets this process make no control group")

    def ours() -> set[Path]:
        return {
            child
            for parent in where.parents.values()
            for child in parent.iterdir()
            if child.name.startswith("pai-local-")
        }

    # Only the groups this sandbox made: other tests (or runs) may have sandboxes meanwhile.
    before = ours()
    box = _sandbox(provider)
    await box.run_command("true")
    groups = sorted(ours() - before)
    assert groups, "no control group was made for the sandbox"
    pids = (groups[0] / "cgroup.procs").read_text().split()
    assert pids, "the sandbox's processes are not in its group"
    await provider.destroy("limits")
    assert not any(group.exists() for group in groups), "destroy left the group behind"
