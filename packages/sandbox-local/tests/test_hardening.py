"""The walls behind the namespaces: a seccomp filter on every process of a local sandbox."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pai.sandbox import Sandbox, SandboxSessionManager
from pai.sandbox_local import LocalSandboxProvider
from pai.sandbox_local._provider import key_digest
from pai.sandbox_local._seccomp import filter_program, refused_calls

pytestmark = pytest.mark.anyio

# errno of a call through ctypes: each of these succeeds, or fails otherwise than EPERM, for an
# unprivileged process without the filter (ptrace(PTRACE_TRACEME) returns 0, keyctl(0) gives
# EINVAL, userfaultfd and perf_event_open depend on sysctls but never give EPERM for a
# TRACEME-style call with bad arguments).
CALL = (
    "python3 -c 'import ctypes, sys; l = ctypes.CDLL(None, use_errno=True); "
    "r = l.syscall({number}, 0, 0, 0, 0, 0); print(r, ctypes.get_errno())'"
)


@pytest.fixture
async def box(state_dir: Path) -> AsyncIterator[Sandbox]:
    if filter_program() is None:
        pytest.skip("no seccomp filter is known for this machine's architecture")
    provider = LocalSandboxProvider(state_dir=state_dir)
    manager = SandboxSessionManager(provider)
    try:
        yield Sandbox(manager.handle("hardening"), default_timeout=30)
    finally:
        await provider.destroy("hardening")
        await provider.aclose()


async def test_every_process_runs_under_the_filter(box: Sandbox) -> None:
    result = await box.run_command(
        "grep '^Seccomp:' /proc/self/status; sh -c 'grep ^Seccomp: /proc/$$/status'"
    )
    assert result.stdout == "Seccomp:\t2\nSeccomp:\t2\n", result


@pytest.mark.parametrize("command", ["unshare -U true", "unshare -r true"])
async def test_a_command_cannot_make_namespaces(box: Sandbox, command: str) -> None:
    result = await box.run_command(command)
    assert result.exit_code != 0, result
    assert "Operation not permitted" in result.stderr, result


@pytest.mark.parametrize("name", ["ptrace", "keyctl", "add_key", "bpf", "perf_event_open", "setns"])
async def test_a_refused_call_fails_with_eperm(box: Sandbox, name: str) -> None:
    result = await box.run_command(CALL.format(number=refused_calls()[name]))
    assert result.stdout.split() == ["-1", "1"], result


async def test_ordinary_programs_still_fork_spawn_and_pipe(box: Sandbox) -> None:
    result = await box.run_command(
        'python3 -c \'import subprocess; print(subprocess.run(["echo", "spawned"], '
        'capture_output=True, text=True).stdout, end="")\' | tr a-z A-Z; (sleep 0.1 &); wait'
    )
    assert (result.exit_code, result.stdout) == (0, "SPAWNED\n"), result


async def _landlock_fact(provider: LocalSandboxProvider, key: str) -> str:
    from pai.sandbox_local._bwrap import Answer, connect, send

    instance = await provider.find(key)
    assert instance is not None
    stream = await connect(provider.root / key_digest(key) / f"sock-{instance.instance_id[:16]}")
    assert stream is not None
    async with stream:
        await send(stream, ["ping"])
        document, _ = await Answer(stream, max_payload=0).frame()
    facts = document[1]
    assert isinstance(facts, dict)
    return str(facts.get("landlock"))


async def test_landlock_confines_even_the_sandbox_s_root_to_its_own_folders(
    state_dir: Path,
) -> None:
    # As root of its own user namespace a command owns the sandbox's root folder (bwrap's
    # tmpfs). That file system is read-only once built, and Landlock's rules refuse writes
    # outside the sandbox's own folders behind it: either wall stops the write.
    provider = LocalSandboxProvider(state_dir=state_dir, user="root")
    try:
        box = Sandbox(SandboxSessionManager(provider).handle("landlock"), default_timeout=30)
        result = await box.run_command(
            "touch /planted; echo status=$?; echo ok > /tmp/t && cat /tmp/t"
        )
        fact = await _landlock_fact(provider, "landlock")
        if not fact.startswith("abi"):
            pytest.skip(f"Landlock is not applied here: {fact}")
        assert "status=1" in result.stdout, result
        assert "Read-only file system" in result.stderr or "Permission denied" in result.stderr, (
            result
        )
        assert result.stdout.endswith("ok\n"), result
    finally:
        await provider.destroy("landlock")
        await provider.aclose()
