"""The disk a sandbox may fill: /workspace up to ``disk``, /tmp and /dev/shm up to ``tmp_size``,
nothing else writable; a disk fill fails its command naming the limit, and loses no file."""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from pai.sandbox import Sandbox, SandboxSessionManager
from pai.sandbox_local import DiskLimitError, LocalSandboxProvider
from pai.sandbox_local._provider import key_digest
from pai.sandbox_local._quota import usage

pytestmark = pytest.mark.anyio

MIB = 1 << 20
LIMIT = 32 * MIB


@pytest.fixture
async def provider(state_dir: Path) -> AsyncIterator[LocalSandboxProvider]:
    provider = LocalSandboxProvider(state_dir=state_dir, disk=LIMIT, file_size="8m", tmp_size="4m")
    try:
        yield provider
    finally:
        await provider.destroy("disk")
        await provider.aclose()


def _sandbox(provider: LocalSandboxProvider) -> Sandbox:
    return Sandbox(SandboxSessionManager(provider).handle("disk"), default_timeout=60)


def _workspace(provider: LocalSandboxProvider) -> Path:
    return provider.root / key_digest("disk") / "workspace"


async def test_a_disk_fill_is_stopped_naming_the_limit_and_files_can_be_removed(
    provider: LocalSandboxProvider,
) -> None:
    box = _sandbox(provider)
    await box.write_files({"/workspace/keep.txt": "kept\n"})
    started = time.monotonic()
    # Files under file_size each, as many as it takes: only the disk limit can stop this.
    result = await box.run_command(
        "i=0; while :; do head -c 4194304 /dev/zero > fill$i || exit 3; i=$((i+1)); done",
        timeout=50,
    )
    assert not result.timed_out, result
    assert result.exit_code != 0, result
    assert "over its disk limit of 32.0 MiB (option disk)" in result.stderr, result
    assert time.monotonic() - started < 20, result
    # Stopped within one measuring interval of writing: far from what the loop could write.
    assert usage(_workspace(provider)) < LIMIT + 1024 * MIB
    # Over the limit, a command may still look and remove (but not write).
    listing = await box.run_command("cat keep.txt; ls | grep -c fill")
    assert listing.stdout.startswith("kept\n"), listing
    written = await box.run_command("echo more > more.txt")
    assert written.exit_code != 0, written
    assert "over its disk limit" in written.stderr, written
    removed = await box.run_command("rm -f fill*")
    assert removed.exit_code == 0, removed
    again = await box.run_command("echo more > more.txt && cat more.txt keep.txt")
    assert (again.exit_code, again.stdout) == (0, "more\nkept\n"), again


async def test_write_files_over_the_limit_is_refused_before_anything_is_written(
    provider: LocalSandboxProvider,
) -> None:
    box = _sandbox(provider)
    await box.write_files({"/workspace/small.txt": "small\n"})
    with pytest.raises(DiskLimitError, match=r"over its disk limit of 32\.0 MiB \(option disk\)"):
        await box.write_files(
            {"/workspace/a.bin": b"\0" * (20 * MIB), "/workspace/b.bin": b"\0" * (20 * MIB)}
        )
    assert not (_workspace(provider) / "a.bin").exists()
    assert await box.read_file("/workspace/small.txt") == b"small\n"


async def test_a_workspace_found_over_the_limit_refuses_writes_until_files_are_removed(
    provider: LocalSandboxProvider,
) -> None:
    await _sandbox(provider).run_command("true")
    # 40 MiB written behind the sandbox's back (as by an older process with a higher limit);
    # then a process of its own comes to the sandbox, which measures before its first command.
    await provider.aclose()  # that older process has ended
    await anyio.Path(_workspace(provider) / "big.bin").write_bytes(os.urandom(40 * MIB))
    other = LocalSandboxProvider(state_dir=provider.options.state_dir, disk=LIMIT)
    try:
        box = _sandbox(other)
        refused = await box.run_command("echo x > x.txt")
        assert refused.exit_code != 0, refused
        assert "over its disk limit" in refused.stderr, refused
        assert (await box.run_command("rm big.bin")).exit_code == 0
        accepted = await box.run_command("echo x > x.txt && cat x.txt")
        assert (accepted.exit_code, accepted.stdout) == (0, "x\n"), accepted
    finally:
        await other.aclose()


@pytest.mark.parametrize("folder", ["/tmp", "/dev/shm"])
async def test_memory_backed_folders_are_bounded_by_tmp_size(
    provider: LocalSandboxProvider, folder: str
) -> None:
    box = _sandbox(provider)
    result = await box.run_command(f"head -c 6291456 /dev/zero > {folder}/fill")
    assert result.exit_code != 0, result
    assert "No space left on device" in result.stderr, result
    small = await box.run_command(
        f"rm {folder}/fill; echo ok > {folder}/small && cat {folder}/small"
    )
    assert (small.exit_code, small.stdout) == (0, "ok\n"), small


@pytest.mark.parametrize("path", ["/fill", "/dev/fill", "/etc/fill", "/opt/fill"])
async def test_nothing_but_the_workspace_and_the_bounded_folders_is_writable(
    provider: LocalSandboxProvider, path: str
) -> None:
    # The root and /dev that bwrap builds are file systems in memory with no bound of their own.
    box = _sandbox(provider)
    result = await box.run_command(f"echo x > {path}")
    assert result.exit_code != 0, result
    assert "Read-only file system" in result.stderr, result
