"""Processes as envd runs them: one PID namespace per sandbox for its whole life, signals that
reach exactly the process they name, envd's End event, keepalives on long streams.

asyncio only: the e2b SDK is asyncio-only.
"""

from __future__ import annotations

import os
import select
import signal
from typing import Any

import pytest
from e2b import AsyncSandbox, CommandExitException, TimeoutException
from e2b.envd.process import process_pb
from e2b_helpers import host_pids, options, unique_sleep

from pai.sandbox_e2b.testing import E2BEmulator

pytestmark = pytest.mark.anyio


def wait_gone(fragment: str, seconds: float = 10) -> list[int]:
    """Wait (on each process's pidfd, at most ``seconds`` each) for the processes whose
    command line contains ``fragment`` to end; those still alive."""
    for pid in host_pids(fragment):
        try:
            descriptor = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        try:
            select.select([descriptor], [], [], seconds)
        finally:
            os.close(descriptor)
    return host_pids(fragment)


async def wait_for_file(sandbox: AsyncSandbox, path: str) -> str:
    """The content of ``path`` once a command has written it (a line ending in a newline)."""
    for _ in range(500):
        if await sandbox.files.exists(path):
            text = await sandbox.files.read(path)
            if text.endswith("\n"):
                return text.strip()
        await sandbox.commands.run("sleep 0.01")
    raise AssertionError(f"{path} was never written")


async def test_the_pid_envd_reports_is_the_commands_own(raw: AsyncSandbox) -> None:
    handle = await raw.commands.run("echo $$ > /tmp/me; exec sleep 60", background=True)
    try:
        assert await wait_for_file(raw, "/tmp/me") == str(handle.pid)
        listed = {p.pid: p.cmd for p in await raw.commands.list()}
        assert listed[handle.pid] == "/bin/bash"
    finally:
        await handle.kill()


async def test_a_backgrounded_process_outlives_its_command_in_the_sandboxs_namespace(
    raw: AsyncSandbox,
) -> None:
    n = unique_sleep()
    started = await raw.commands.run(f"sleep {n} >/dev/null 2>&1 & echo $!")
    child = started.stdout.strip()
    seen = await raw.commands.run(f"kill -0 {child} && ps -o ppid= -p {child}")
    assert seen.stdout.strip() == "1"  # re-parented to the sandbox's init, as in a VM
    await raw.kill()
    assert wait_gone(f"sleep {n}") == []


async def test_a_signal_reaches_exactly_the_process_it_names(raw: AsyncSandbox) -> None:
    n = unique_sleep()
    handle = await raw.commands.run(
        f"sleep {n} >/dev/null 2>&1 & echo $! > /tmp/child; wait", background=True
    )
    child = await wait_for_file(raw, "/tmp/child")
    assert await handle.kill()
    with pytest.raises(CommandExitException) as ended:
        await handle.wait()
    assert (ended.value.exit_code, ended.value.error) == (-1, "signal: killed")
    # Its child was not signalled (E2B issue 1031): it lives on, re-parented.
    alive = await raw.commands.run(f"kill -0 {child} && ps -o ppid= -p {child}")
    assert alive.stdout.strip() == "1"
    assert host_pids(f"sleep {n}")
    await raw.kill()
    assert wait_gone(f"sleep {n}") == []


async def test_once_killed_a_commands_output_is_closed_under_its_children(
    raw: AsyncSandbox,
) -> None:
    # envd closes its end of the pipes when it has waited for a killed command: a child still
    # writing to them gets a broken pipe.
    handle = await raw.commands.run(
        "(trap '' PIPE; echo $BASHPID > /tmp/child;"
        " while echo x 2>/dev/null; do sleep 0.05; done; echo broken > /tmp/broken) & wait",
        background=True,
    )
    await wait_for_file(raw, "/tmp/child")
    await handle.kill()
    with pytest.raises(CommandExitException):
        await handle.wait()
    assert await wait_for_file(raw, "/tmp/broken") == "broken"


@pytest.mark.parametrize(
    ("command", "exit_code", "error"),
    [
        ("kill -KILL $$", -1, "signal: killed"),
        ("kill -TERM $$", -1, "signal: terminated"),
        ("kill -SEGV $$", -1, "signal: segmentation fault"),
        ("exit 3", 3, "exit status 3"),
    ],
)
async def test_how_a_command_ended_is_told_as_envd_tells_it(
    raw: AsyncSandbox, command: str, exit_code: int, error: str
) -> None:
    with pytest.raises(CommandExitException) as ended:
        await raw.commands.run(command)
    assert (ended.value.exit_code, ended.value.error) == (exit_code, error)


async def test_a_command_starts_with_no_signal_ignored_whatever_the_emulator_ignores(
    raw: AsyncSandbox,
) -> None:
    # envd is a service: its commands start with every signal at its default action. The
    # emulator's process may ignore some (run under nohup, SIGHUP is ignored), and a command it
    # started would inherit that: `kill -HUP $$` would do nothing and exit 0.
    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with pytest.raises(CommandExitException) as ended:
            await raw.commands.run("kill -HUP $$")
    finally:
        signal.signal(signal.SIGHUP, before)
    assert (ended.value.exit_code, ended.value.error) == (-1, "signal: hangup")


async def test_at_its_deadline_envd_kills_the_command_alone(raw: AsyncSandbox) -> None:
    n = unique_sleep()
    with pytest.raises(TimeoutException):
        await raw.commands.run(
            f"sleep {n} >/dev/null 2>&1 & echo $! > /tmp/child; sleep 30", timeout=1
        )
    child = await wait_for_file(raw, "/tmp/child")
    assert (await raw.commands.run(f"kill -0 {child} && echo alive")).stdout == "alive\n"
    await raw.kill()
    assert wait_gone(f"sleep {n}") == []


async def backgrounded(sandbox: AsyncSandbox) -> str:
    """Leave processes running in ``sandbox`` (backgrounded, in a new session, with no
    environment); the fragment their command lines share."""
    n = unique_sleep()
    await sandbox.commands.run(
        f"sleep {n}1 >/dev/null 2>&1 & setsid env -i sleep {n}2 >/dev/null 2>&1 &"
        f" nohup sleep {n}3 >/dev/null 2>&1 &"
    )
    assert len(host_pids(f"sleep {n}")) == 3
    return f"sleep {n}"


@pytest.mark.parametrize("how", ["kill", "pause", "expire", "remove"])
async def test_every_process_of_a_sandbox_ends_with_it(
    emulator: E2BEmulator, raw: AsyncSandbox, how: str
) -> None:
    fragment = await backgrounded(raw)
    if how == "kill":
        await raw.kill()
    elif how == "pause":
        await raw.pause()
    elif how == "expire":
        emulator.expire(raw.sandbox_id)
    else:
        emulator.remove(raw.sandbox_id)
    assert wait_gone(fragment) == []


async def test_every_process_ends_when_the_emulator_stops() -> None:
    async with E2BEmulator() as emulator:
        sandbox = await AsyncSandbox.create(timeout=60, **options(emulator))
        fragment = await backgrounded(sandbox)
    assert wait_gone(fragment) == []


async def keepalives(sandbox: AsyncSandbox, command: str, interval: str | None) -> list[str]:
    """The kinds of the events envd streams for ``command`` (started through the SDK's RPC
    client, with the keepalive header set to ``interval``)."""
    rpc: Any = sandbox.commands._rpc
    headers = {} if interval is None else {"Keepalive-Ping-Interval": interval}
    kinds: list[str] = []
    async for response in rpc.start(
        process_pb.StartRequest(
            process=process_pb.ProcessConfig(cmd="/bin/bash", args=["-c", command]),
            stdin=False,
        ),
        headers=headers,
        timeout_ms=30_000,
    ):
        kinds.append(str(response.event.event.field))
    return kinds


async def test_a_long_command_gets_keepalive_events_at_the_interval_asked_for(
    raw: AsyncSandbox,
) -> None:
    kinds = await keepalives(raw, "sleep 2.5", "1")
    assert kinds[0] == "start"
    assert kinds[-1] == "end"
    assert kinds.count("keepalive") >= 1
    assert set(kinds[1:-1]) == {"keepalive"}
    # Without the header envd's interval is 90 seconds: none in a short command.
    assert await keepalives(raw, "sleep 1.5; echo done", None) == ["start", "data", "end"]
