"""Timeouts and cancellation kill in the sandbox: nothing a timed-out or cancelled command started
is left on the emulator's host, and nothing an earlier command left running is taken with it.
The SDK alone (envd's deadline, envd's kill) ends the command's own process only, as on E2B.

asyncio only: the e2b SDK is asyncio-only.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
import uuid
from pathlib import Path

import anyio
import pytest
from e2b import AsyncSandbox, TimeoutException
from e2b_helpers import host_processes, unique_sleep

from pai.sandbox import Sandbox, create_sandbox, create_sandbox_session_manager
from pai.sandbox_e2b import E2BSandboxProvider
from pai.sandbox_e2b.testing import E2BEmulator

pytestmark = pytest.mark.anyio


async def test_a_timed_out_command_leaves_no_process_behind(sandbox: Sandbox) -> None:
    n = unique_sleep()
    await sandbox.run_command("true")
    result = await sandbox.run_command(
        f"setsid sleep {n}1 & env -i sleep {n}2 & (sleep {n}3 &); "
        f"sh -c 'sleep {n}4 &'; nohup sleep {n}5 >/dev/null 2>&1 & sleep {n}6",
        timeout=0.5,
    )
    assert (result.timed_out, result.exit_code) == (True, 124)
    assert result.duration < 1.5
    assert host_processes(f"sleep {n}") == []


def stopped_children() -> list[str]:
    """Command lines of this process's stopped (state T) children: the emulator serves from
    this process, and the commands it runs are its children."""
    found: list[str] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(") ", 1)[1].split()
            line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, IndexError):
            continue
        if fields[0] in ("T", "t") and fields[1] == str(os.getpid()):
            found.append(f"{entry.name}: {line}")
    return found


async def test_a_timeout_leaves_nothing_stopped_behind_the_command(sandbox: Sandbox) -> None:
    # The kill stops what it finds before killing it, but not the command's own process: its
    # parent (envd; here the emulator's nsenter, which suspends itself with a stopped child)
    # would be left waiting for it.
    n = unique_sleep()
    await sandbox.run_command("true")
    result = await sandbox.run_command(f"sleep {n} & sleep {n}", timeout=0.5)
    assert result.timed_out
    assert stopped_children() == []
    assert await settled(f"sleep {n}", 0) == []


async def test_a_cancelled_command_leaves_no_process_behind(sandbox: Sandbox) -> None:
    n = unique_sleep()
    started = anyio.Event()

    async def run() -> None:
        await sandbox.run_command(
            f"(setsid env -i sleep {n}1 &); env -i sleep {n}2 & "
            f"sh -c 'sleep {n}3 &'; echo started; sleep {n}4",
            timeout=None,
            on_stdout=lambda _: started.set(),
        )

    await sandbox.run_command("true")
    async with anyio.create_task_group() as group:
        group.start_soon(run)
        await started.wait()
        group.cancel_scope.cancel()
    assert await settled(f"sleep {n}", 0) == []


async def test_a_timeout_spares_what_an_earlier_command_left_running(
    provider: E2BSandboxProvider,
) -> None:
    # An orphan is taken for the timed-out command's only when it started after the command
    # did: what an earlier command left behind (marked or not) keeps running, as does the
    # sandbox itself.
    key = uuid.uuid4().hex
    sandbox = create_sandbox(create_sandbox_session_manager(provider=provider).handle(key))
    n = unique_sleep()
    try:
        left = await sandbox.run_command(
            f"(setsid env -i sleep {n}1 >/dev/null 2>&1 &); sleep {n}2 >/dev/null 2>&1 &"
        )
        assert left.exit_code == 0, left.stderr
        result = await sandbox.run_command(
            f"(setsid env -i sleep {n}3 &); env -i sleep {n}4 & sleep {n}5", timeout=0.5
        )
        assert result.timed_out
        running = sorted(line.split(": ", 1)[1].strip() for line in await settled(f"sleep {n}", 2))
        assert running == [f"sleep {n}1", f"sleep {n}2"]
        assert (await sandbox.run_command("echo still working")).stdout == "still working\n"
    finally:
        await provider.destroy(key)
    assert await settled(f"sleep {n}", 0) == []


async def settled(fragment: str, at_most: int) -> list[str]:
    """The host processes matching ``fragment``, once no more than ``at_most`` are left (or two
    seconds have passed: a process's exit is seen a moment after its kill)."""
    left = host_processes(fragment)
    for _ in range(40):
        if len(left) <= at_most:
            break
        await anyio.sleep(0.05)
        left = host_processes(fragment)
    return left


async def test_envd_ends_a_command_at_its_deadline_but_not_what_it_backgrounded(
    raw: AsyncSandbox,
) -> None:
    # As envd does (E2B issue 1031): its deadline signals the command's own process (the shell);
    # both sleeps it started are re-parented and live on, until the sandbox ends.
    n = unique_sleep()
    started = time.monotonic()
    with pytest.raises(TimeoutException):
        await raw.commands.run(f"sleep {n} & sleep {n}", timeout=0.5)
    assert time.monotonic() - started < 2
    assert len(host_processes(f"sleep {n}")) == 2
    await raw.kill()
    assert await settled(f"sleep {n}", 0) == []


async def test_the_sdks_kill_ends_the_command_and_the_sandboxs_end_the_rest(
    raw: AsyncSandbox,
) -> None:
    n = unique_sleep()
    handle = await raw.commands.run(f"(sleep {n} &); sleep {n}", background=True)
    assert await handle.kill()
    with pytest.raises(Exception):  # noqa: B017,PT011 - the SDK's error for a killed command
        await handle.wait()
    # The command (the shell runs its last sleep as itself) is gone; the double-forked sleep
    # lives on, as on E2B.
    assert len(await settled(f"sleep {n}", 1)) == 1
    await raw.kill()
    assert await settled(f"sleep {n}", 0) == []


async def test_stdin_is_fed_through_envd(raw: AsyncSandbox) -> None:
    handle = await raw.commands.run("wc -c", background=True, stdin=True)
    await handle.send_stdin(b"12345")
    await handle.close_stdin()
    assert (await handle.wait()).stdout.strip() == "5"


# An emulator in a process that dies without stopping it, a command still running.
DIE_WITH_A_COMMAND_RUNNING = """
import asyncio, os, sys
from e2b import AsyncSandbox
from pai.sandbox_e2b.testing import E2BEmulator

async def main() -> None:
    emulator = E2BEmulator().start()
    sandbox = await AsyncSandbox.create(
        api_key=emulator.api_key, api_url=emulator.url, sandbox_url=emulator.url
    )
    await sandbox.commands.run(sys.argv[1], background=True, timeout=0)
    await sandbox.commands.run("true")
    (held,) = emulator.sandboxes()
    print(held.root.parent, flush=True)
    os.kill(os.getpid(), 9)

asyncio.run(main())
"""


def wait_for_exit(pid: int, seconds: float) -> None:
    """Wait (at most ``seconds``) for a process that is not our child to end."""
    try:
        descriptor = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        select.select([descriptor], [], [], seconds)
    finally:
        os.close(descriptor)


def test_an_emulator_killed_without_stopping_leaves_no_process_and_its_files_are_swept() -> None:
    n = unique_sleep()
    done = subprocess.run(
        [sys.executable, "-c", DIE_WITH_A_COMMAND_RUNNING, f"sleep {n}"],
        capture_output=True,
        timeout=60,
        check=False,
    )
    home = Path(done.stdout.decode().strip())
    assert home.name.startswith("pai-e2b-"), done.stderr.decode()
    assert home.is_dir()
    for line in host_processes(f"sleep {n}"):  # the kernel ends them (parent-death signal)
        wait_for_exit(int(line.split(":")[0]), 5)
    assert host_processes(f"sleep {n}") == []
    with E2BEmulator():
        assert not home.exists()
