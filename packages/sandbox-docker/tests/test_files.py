"""File operations on the real engine: writes never destroy, links are followed inside the
container only, and reads are bounded before anything is transferred."""

from __future__ import annotations

import resource
import time
from collections.abc import AsyncIterator

import pytest

from pai.sandbox import (
    Sandbox,
    SandboxFileTooLargeError,
    SandboxIsADirectoryError,
    SandboxNotADirectoryError,
    create_sandbox,
    create_sandbox_session_manager,
)
from pai.sandbox_docker import DockerSandboxProvider

pytestmark = pytest.mark.anyio

MIB = 1024 * 1024


@pytest.fixture
async def provider(namespace: str, test_image: str) -> AsyncIterator[DockerSandboxProvider]:
    provider = DockerSandboxProvider(test_image, namespace=namespace)
    try:
        yield provider
    finally:
        for info in await provider.list_instances():
            await provider.destroy(info.key)
        await provider.aclose()


@pytest.fixture
async def sandbox(provider: DockerSandboxProvider) -> Sandbox:
    return create_sandbox(create_sandbox_session_manager(provider=provider).handle("files"))


async def test_writing_over_a_folder_keeps_every_file_in_it(sandbox: Sandbox) -> None:
    await sandbox.write_files({"src/a.py": "a", "src/deep/b.py": "b"})
    with pytest.raises(SandboxIsADirectoryError):
        await sandbox.write_file("src", "x")
    listing = await sandbox.run_command("find src | sort")
    assert listing.stdout.split() == ["src", "src/a.py", "src/deep", "src/deep/b.py"]


async def test_a_batch_with_one_bad_entry_writes_none_of_it(sandbox: Sandbox) -> None:
    await sandbox.make_dir("folder")
    with pytest.raises(SandboxIsADirectoryError):
        await sandbox.write_files({"first.txt": "1", "folder": "2", "third.txt": "3"})
    assert not await sandbox.exists("first.txt")
    assert not await sandbox.exists("third.txt")


async def test_a_batch_that_writes_through_its_own_file_raises_not_a_directory(
    sandbox: Sandbox,
) -> None:
    with pytest.raises(SandboxNotADirectoryError):
        await sandbox.write_files({"plain": "a file", "plain/inner.txt": "under it"})
    assert not await sandbox.exists("plain")


async def test_writing_through_a_link_to_the_root_is_refused_and_changes_nothing(
    sandbox: Sandbox,
) -> None:
    await sandbox.run_command("ln -s / root-link && ln -s .. up-link")
    for link in ("root-link", "up-link"):
        with pytest.raises(SandboxIsADirectoryError):
            await sandbox.write_file(link, "x")
        with pytest.raises(SandboxIsADirectoryError):
            await sandbox.read_file(link)
    listing = await sandbox.run_command("ls -la /workspace | wc -l; test -d /bin && echo bin-kept")
    assert listing.stdout.split()[-1] == "bin-kept"
    assert (await sandbox.run_command("readlink root-link; readlink up-link")).stdout == "/\n..\n"


async def test_a_link_out_of_the_workspace_is_followed_inside_the_container(
    sandbox: Sandbox,
) -> None:
    await sandbox.run_command("mkdir -p /tmp/data && ln -s /tmp/data shared")
    await sandbox.write_file("shared/new/file.txt", "through the link")
    result = await sandbox.run_command("cat /tmp/data/new/file.txt; readlink shared")
    assert result.stdout == "through the link/tmp/data\n"
    assert await sandbox.read_text("shared/new/file.txt") == "through the link"


async def test_a_write_through_a_dangling_link_creates_its_target(sandbox: Sandbox) -> None:
    await sandbox.run_command("ln -s target.txt dangling")
    await sandbox.write_file("dangling", "made")
    result = await sandbox.run_command("cat target.txt; readlink dangling")
    assert result.stdout == "madetarget.txt\n"


async def test_a_link_loop_is_a_clear_error_not_a_hang(sandbox: Sandbox) -> None:
    await sandbox.run_command("ln -s loop-b loop-a && ln -s loop-a loop-b")
    with pytest.raises(FileNotFoundError, match="too many levels of symbolic links"):
        await sandbox.write_file("loop-a", "x")
    with pytest.raises(FileNotFoundError):
        await sandbox.read_file("loop-a")


async def test_a_one_gib_sparse_file_is_refused_at_once_without_host_memory(
    sandbox: Sandbox,
) -> None:
    made = await sandbox.run_command("dd if=/dev/zero of=big bs=1 count=0 seek=1073741824")
    assert made.exit_code == 0, made.stderr
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    started = time.perf_counter()
    with pytest.raises(SandboxFileTooLargeError) as caught:
        await sandbox.read_file("big")
    elapsed = time.perf_counter() - started
    peak_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert (caught.value.size, caught.value.limit) == (1024**3, 64 * MIB)
    assert elapsed < 1.0
    assert peak_after - peak_before < 32 * 1024  # KiB: far below the file or the limit


async def test_the_read_limit_is_the_facades_option(provider: DockerSandboxProvider) -> None:
    small = create_sandbox(
        create_sandbox_session_manager(provider=provider).handle("limit"), read_limit=1000
    )
    await small.write_file("exact.bin", b"x" * 1000)
    await small.write_file("over.bin", b"x" * 1001)
    assert len(await small.read_file("exact.bin")) == 1000
    with pytest.raises(SandboxFileTooLargeError, match="read_limit"):
        await small.read_file("over.bin")


async def test_a_read_through_a_link_checks_the_size_of_the_target(sandbox: Sandbox) -> None:
    await sandbox.run_command("dd if=/dev/zero of=big bs=1 count=0 seek=100000000; ln -s big link")
    with pytest.raises(SandboxFileTooLargeError) as caught:
        await sandbox.read_file("link")
    assert caught.value.size == 100_000_000


async def test_a_large_write_takes_the_archive_path_with_the_same_checks(sandbox: Sandbox) -> None:
    large = b"\xff" * (200 * 1024)  # past what one exec argument carries
    await sandbox.write_files({"src/a.py": "a"})
    with pytest.raises(SandboxIsADirectoryError):
        await sandbox.write_file("src", large)
    await sandbox.run_command("ln -s src link")
    await sandbox.write_file("link/big.bin", large)
    assert await sandbox.read_file("src/big.bin") == large
    assert (await sandbox.run_command("ls src; readlink link")).stdout == "a.py\nbig.bin\nsrc\n"
