"""File operations where envd's own semantics differ from the facade's (envd's Remove is always
recursive, its MakeDir always makes parents): the provider gives the facade's.

asyncio only: the e2b SDK is asyncio-only.
"""

from __future__ import annotations

import pytest

from pai.sandbox import (
    Sandbox,
    SandboxDirectoryNotEmptyError,
    SandboxFileExistsError,
    SandboxFileNotFoundError,
)

pytestmark = pytest.mark.anyio


async def test_remove_without_recursive_refuses_a_non_empty_folder_and_keeps_it(
    sandbox: Sandbox,
) -> None:
    await sandbox.write_file("folder/inner.txt", "kept")
    with pytest.raises(SandboxDirectoryNotEmptyError):
        await sandbox.remove("folder")
    assert await sandbox.read_text("folder/inner.txt") == "kept"


async def test_remove_without_recursive_removes_a_link_to_a_non_empty_folder_not_the_folder(
    sandbox: Sandbox,
) -> None:
    await sandbox.write_file("folder/inner.txt", "kept")
    assert (await sandbox.run_command("ln -s folder link")).exit_code == 0
    await sandbox.remove("link")
    assert not await sandbox.exists("link")
    assert await sandbox.read_text("folder/inner.txt") == "kept"


async def test_make_dir_without_parents_under_a_missing_folder_makes_nothing(
    sandbox: Sandbox,
) -> None:
    with pytest.raises(SandboxFileNotFoundError):
        await sandbox.make_dir("missing/child")
    assert not await sandbox.exists("missing")


async def test_make_dir_with_parents_over_a_file_says_it_is_not_a_folder(
    sandbox: Sandbox,
) -> None:
    await sandbox.write_file("taken", "a file")
    with pytest.raises(SandboxFileExistsError, match="not a folder"):
        await sandbox.make_dir("taken", parents=True)
    assert await sandbox.read_text("taken") == "a file"
