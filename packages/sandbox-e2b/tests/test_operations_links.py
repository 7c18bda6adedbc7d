"""Symbolic links as envd reports them, on each kind of envd: up to 0.6.13 an entry carries no
``is_symlink`` (a link's ``type`` is its target's, none when dangling; ``symlink_target`` the
fully resolved path, the link's own when dangling); newer envd marks the link itself. The
provider gives the facade's semantics on both.

asyncio only: the e2b SDK is asyncio-only.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from pai.sandbox import (
    Sandbox,
    SandboxFileExistsError,
    SandboxFileNotFoundError,
    SandboxFileTooLargeError,
    SandboxIsADirectoryError,
    create_sandbox,
    create_sandbox_session_manager,
)
from pai.sandbox_e2b import E2BSandboxProvider
from pai.sandbox_e2b.testing import E2BEmulator

pytestmark = pytest.mark.anyio

LINKS = (
    "mkdir -p real/inner && printf 0123456789 > real/ten.txt && echo in > real/inner/f && "
    "ln -s real folder-link && ln -s folder-link chain && ln -s real/ten.txt file-link && "
    "ln -s nowhere dangling && ln -s self-loop self-loop && ln -s /workspace/real absolute && "
    "mkfifo pipe"
)


@pytest.fixture(scope="module", params=["0.5.7", "0.6.13", "0.7.0"])
def versioned(request: pytest.FixtureRequest) -> Iterator[E2BEmulator]:
    """An emulator whose sandboxes report this envd version: 0.5.7 and 0.6.13 send no
    ``is_symlink``, 0.7.0 does."""
    with E2BEmulator(envd_version=request.param) as emulator:
        yield emulator


@pytest.fixture
async def sandbox(versioned: E2BEmulator) -> AsyncIterator[Sandbox]:
    provider = E2BSandboxProvider(
        api_key=versioned.api_key,
        api_url=versioned.url,
        sandbox_url=versioned.url,
        namespace=f"pai-test-{uuid.uuid4().hex[:12]}",
    )
    key = uuid.uuid4().hex
    # A read limit of 5 bytes: a link's own size is that of the path it holds, under 5.
    sandbox = create_sandbox(
        create_sandbox_session_manager(provider=provider).handle(key), read_limit=5
    )
    made = await sandbox.run_command(LINKS)
    assert made.exit_code == 0, made.stderr
    try:
        yield sandbox
    finally:
        await provider.destroy(key)
        await provider.aclose()


async def test_every_link_is_listed_as_a_link_and_a_fifo_as_other(sandbox: Sandbox) -> None:
    assert [(e.name, e.type) for e in await sandbox.list_dir(".")] == [
        ("absolute", "symlink"),
        ("chain", "symlink"),
        ("dangling", "symlink"),
        ("file-link", "symlink"),
        ("folder-link", "symlink"),
        ("pipe", "other"),
        ("real", "directory"),
        ("self-loop", "symlink"),
    ]


async def test_exists_follows_links_to_the_end(sandbox: Sandbox) -> None:
    found = {
        name: await sandbox.exists(name)
        for name in ("folder-link", "chain", "file-link", "absolute", "dangling", "self-loop")
    }
    assert found == {
        "folder-link": True,
        "chain": True,
        "file-link": True,
        "absolute": True,
        "dangling": False,
        "self-loop": False,
    }


async def test_reading_through_links_reads_the_target_and_checks_the_targets_size(
    sandbox: Sandbox,
) -> None:
    assert await sandbox.read_text("chain/inner/f") == "in\n"
    with pytest.raises(SandboxFileTooLargeError) as large:
        await sandbox.read_file("file-link")
    assert (large.value.size, large.value.limit) == (10, 5)  # the target's size, not the link's
    with pytest.raises(SandboxIsADirectoryError):
        await sandbox.read_file("chain")
    for name in ("dangling", "self-loop"):
        with pytest.raises(SandboxFileNotFoundError):
            await sandbox.read_file(name)


async def test_removing_a_link_to_a_non_empty_folder_removes_the_link_only(
    sandbox: Sandbox,
) -> None:
    await sandbox.remove("folder-link")
    await sandbox.remove("absolute", recursive=True)
    await sandbox.remove("dangling")
    await sandbox.remove("self-loop")
    assert [e.name for e in await sandbox.list_dir(".")] == ["chain", "file-link", "pipe", "real"]
    assert await sandbox.read_text("real/inner/f") == "in\n"
    assert (await sandbox.run_command("cat real/ten.txt")).stdout == "0123456789"


async def test_make_dir_over_a_link_is_refused_unless_it_leads_to_a_folder_and_parents(
    sandbox: Sandbox,
) -> None:
    for name in ("dangling", "self-loop", "file-link"):
        for parents in (False, True):
            with pytest.raises(SandboxFileExistsError):
                await sandbox.make_dir(name, parents=parents)
    with pytest.raises(SandboxFileExistsError):
        await sandbox.make_dir("chain")
    await sandbox.make_dir("chain", parents=True)  # an existing folder, through two links
    await sandbox.make_dir("chain/new")
    assert [e.name for e in await sandbox.list_dir("real")] == ["inner", "new", "ten.txt"]
    assert not await sandbox.exists("nowhere")
