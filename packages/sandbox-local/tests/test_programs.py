"""Real programs run in a local sandbox as they run anywhere: the host's own bash, python3, git."""

from __future__ import annotations

import shutil
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from pai.sandbox import Sandbox, SandboxSessionManager
from pai.sandbox_local import LocalSandboxProvider

pytestmark = pytest.mark.anyio

SCRIPT = (
    'if [ ! -f p ]; then\n  echo "no pkg"\nfi\nfor i in 1 2; do\n  echo "n=$i"\ndone\necho end\n'
)


@pytest.fixture
async def box(state_dir: Path) -> AsyncIterator[Sandbox]:
    provider = LocalSandboxProvider(state_dir=state_dir)
    manager = SandboxSessionManager(provider)
    try:
        yield Sandbox(manager.handle("programs"), default_timeout=30)
    finally:
        await provider.destroy("programs")
        await provider.aclose()


def needs(program: str) -> None:
    if shutil.which(program) is None:
        pytest.skip(f"{program} is not installed on this machine, so no sandbox here has it")


async def test_real_python3(box: Sandbox) -> None:
    needs("python3")
    result = await box.run_command("python3 -c 'import sys; print(sys.version_info[0] * 7)'")
    assert (result.exit_code, result.stdout) == (0, "21\n"), result


@pytest.mark.parametrize("runner", ["sh s.sh", "bash s.sh", "sh < s.sh", "cat s.sh | sh"])
async def test_multi_line_scripts_run_as_bash_runs_them(box: Sandbox, runner: str) -> None:
    await box.write_files({"/workspace/s.sh": SCRIPT})
    result = await box.run_command(runner)
    assert (result.exit_code, result.stdout) == (0, "no pkg\nn=1\nn=2\nend\n"), result


async def test_stdin_reaches_a_nested_shell(box: Sandbox) -> None:
    result = await box.run_command("sh -c 'cat > g; wc -c < g'", stdin=b"abc\n")
    assert result.stdout.strip() == "4", result
    assert await box.read_file("/workspace/g") == b"abc\n"


async def test_git_init_and_commit(box: Sandbox) -> None:
    needs("git")
    result = await box.run_command(
        "git init -q repo && cd repo && echo hi > a && git add a && "
        "git -c user.name=t -c user.email=t@example.com commit -qm first && git log --format=%s"
    )
    assert (result.exit_code, result.stdout) == (0, "first\n"), result


async def test_file_modes_and_mtimes_are_real(box: Sandbox) -> None:
    result = await box.run_command(
        "touch -d '2020-02-03 04:05:06' f && chmod 640 f && stat -c '%a %y' f"
    )
    assert result.exit_code == 0, result
    assert result.stdout.startswith("640 2020-02-03 04:05:06"), result


async def test_uname_id_whoami_and_hostname(box: Sandbox) -> None:
    result = await box.run_command("uname -s; id -u; id -un; whoami; hostname")
    system, uid, name, whoami, hostname = result.stdout.split("\n")[:5]
    assert (system, uid, name, whoami) == ("Linux", "1000", "user", "user"), result
    assert hostname.startswith("pai-"), result


async def test_home_is_the_workspace(box: Sandbox) -> None:
    result = await box.run_command('echo "$HOME"; cd ~ && pwd')
    assert result.stdout == "/workspace\n/workspace\n", result


async def test_two_first_uses_of_a_key_at_once_get_one_instance(state_dir: Path) -> None:
    # Four provider objects share nothing but the state folder, as four processes would; each
    # does what the session manager does on a first use: find nothing, then create.
    providers = [LocalSandboxProvider(state_dir=state_dir) for _ in range(4)]
    all_found_none = threading.Barrier(len(providers))
    ids: list[str] = []

    async def first_use(provider: LocalSandboxProvider) -> None:
        assert await provider.find("raced") is None
        all_found_none.wait(timeout=30)
        ids.append((await provider.create("raced")).instance_id)

    def blocking(provider: LocalSandboxProvider) -> None:
        anyio.run(first_use, provider)

    async def in_a_thread(provider: LocalSandboxProvider) -> None:
        await anyio.to_thread.run_sync(blocking, provider)

    try:
        async with anyio.create_task_group() as tg:
            for provider in providers:
                tg.start_soon(in_a_thread, provider)
        assert len(set(ids)) == 1, f"four first uses made {len(set(ids))} instances"
    finally:
        await providers[0].destroy("raced")
        for provider in providers:
            await provider.aclose()


async def test_an_idle_sandbox_s_processes_end_and_come_back_with_its_files(
    state_dir: Path,
) -> None:
    provider = LocalSandboxProvider(state_dir=state_dir, keep_alive=0.5)
    box = Sandbox(SandboxSessionManager(provider).handle("idle"), default_timeout=30)
    try:
        await box.run_command("echo kept > f")
        running = await box.run_command("sleep 2 > /dev/null 2>&1 & echo started")
        assert running.stdout == "started\n", running
        await anyio.sleep(1.2)  # idle past keep_alive, while a process of its own still runs
        assert await anyio.to_thread.run_sync(_supervisors_of, state_dir) > 0, (
            "the sandbox's processes ended while one of its own still ran"
        )
        await anyio.sleep(2.5)  # the sleep has ended; then idle past keep_alive
        assert await anyio.to_thread.run_sync(_supervisors_of, state_dir) == 0, (
            "the idle sandbox's supervisor is still running"
        )
        again = await box.run_command("cat f")
        assert (again.exit_code, again.stdout) == (0, "kept\n"), again
    finally:
        await provider.destroy("idle")
        await provider.aclose()


def _supervisors_of(state_dir: Path) -> int:
    """How many bwrap processes of this host run for sandboxes in ``state_dir`` (bwrap and its
    init in the sandbox: two per running sandbox)."""
    count = 0
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if b"bwrap" in cmdline and str(state_dir).encode() in cmdline:
            count += 1
    return count
