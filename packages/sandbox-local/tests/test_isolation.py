"""Nothing of the host is reachable from a local sandbox: files, network, processes."""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pai.sandbox import Sandbox, SandboxSessionManager
from pai.sandbox_local import LocalSandboxProvider

pytestmark = pytest.mark.anyio


def _host_process(argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """A process of the host, outside every sandbox (started at once: no wait to block on)."""
    return subprocess.Popen(argv, env=env)


@pytest.fixture
async def box(state_dir: Path) -> AsyncIterator[Sandbox]:
    provider = LocalSandboxProvider(state_dir=state_dir)
    manager = SandboxSessionManager(provider)
    try:
        yield Sandbox(manager.handle("isolation"), default_timeout=30)
    finally:
        await provider.destroy("isolation")
        await provider.aclose()


async def test_the_host_home_and_state_folder_are_invisible(box: Sandbox, state_dir: Path) -> None:
    home = Path.home()
    result = await box.run_command(f"ls {home} 2>&1; echo; ls {state_dir} 2>&1")
    assert result.stdout.count("No such file or directory") == 2, result
    # /proc/1 is bwrap's own init: outside the sandbox's Landlock domain, where the kernel has
    # Landlock, so even its root folder is out of reach; else that root is the sandbox's.
    root = await box.run_command("ls /proc/1/root/")
    if "Permission denied" not in root.stderr:
        listed = set(root.stdout.split())
        expected = {"bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "opt", "proc"}
        assert listed <= expected | {"sbin", "tmp", "usr", "workspace"}, listed


async def test_a_server_on_the_hosts_loopback_is_unreachable(box: Sandbox) -> None:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    try:
        result = await box.run_command(
            f"python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 2)'"
            " 2>&1 | tail -1"
        )
    finally:
        server.close()
    assert "ConnectionRefusedError" in result.stdout, result


async def test_the_hosts_processes_are_invisible(box: Sandbox) -> None:
    marker = f"pai-host-marker-{os.getpid()}"
    host = _host_process(["sleep", "30"], env={"PATH": os.environ["PATH"], "M": marker})
    try:
        result = await box.run_command(
            "for f in /proc/[0-9]*/environ; do cat $f 2>/dev/null; done | tr '\\0' '\\n'; "
            "ls -d /proc/[0-9]* | wc -l"
        )
        assert marker not in result.stdout, result
        assert int(result.stdout.strip().split("\n")[-1]) < 10, result
    finally:
        host.kill()
        host.wait()


async def test_kill_minus_one_harms_nothing_outside_and_the_sandbox_recovers(box: Sandbox) -> None:
    host = _host_process(["sleep", "30"])
    try:
        await box.write_files({"/workspace/kept.txt": "still here"})
        result = await box.run_command("kill -9 -1; sleep 1")
        assert result.exit_code != 0, result
        assert host.poll() is None, "kill -9 -1 in the sandbox killed a process of the host"
        again = await box.run_command("cat kept.txt")
        assert (again.exit_code, again.stdout) == (0, "still here"), again
    finally:
        host.kill()
        host.wait()
