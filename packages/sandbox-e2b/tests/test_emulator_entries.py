"""The envd version a sandbox reports, and the entry fields its envd sends for it.

Up to envd 0.6.13 an entry carries no ``is_symlink``: a link's ``type`` is its target's (none
for a dangling link), ``symlink_target`` the fully resolved path (the link's own when
dangling). A newer envd marks the link itself, which the SDK reads as ``FileType.SYMLINK``.

asyncio only: the e2b SDK is asyncio-only.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from e2b import AsyncSandbox, FileType

from pai.sandbox_e2b.testing import E2BEmulator

pytestmark = pytest.mark.anyio

LINKS = (
    "mkdir -p /home/user/real/inner && echo hi > /home/user/real/file.txt && "
    "ln -s real /home/user/l1 && ln -s /home/user/l1 /home/user/l2 && "
    "ln -s real/file.txt /home/user/to-file && ln -s nowhere /home/user/dangling"
)


@pytest.fixture(scope="module")
def newer_emulator() -> Iterator[E2BEmulator]:
    with E2BEmulator(envd_version="0.7.0") as emulator:
        yield emulator


@pytest.fixture(scope="module")
def older_emulator() -> Iterator[E2BEmulator]:
    with E2BEmulator(envd_version="0.5.7") as emulator:
        yield emulator


async def linked(emulator: E2BEmulator) -> AsyncSandbox:
    sandbox = await AsyncSandbox.create(
        timeout=120, api_key=emulator.api_key, api_url=emulator.url, sandbox_url=emulator.url
    )
    await sandbox.commands.run(LINKS)
    return sandbox


@pytest.fixture
async def default_sandbox(emulator: E2BEmulator) -> AsyncIterator[AsyncSandbox]:
    sandbox = await linked(emulator)
    try:
        yield sandbox
    finally:
        await sandbox.kill()


@pytest.fixture(params=["default", "older"])
async def sandbox_up_to_0_6_13(
    request: pytest.FixtureRequest, emulator: E2BEmulator, older_emulator: E2BEmulator
) -> AsyncIterator[AsyncSandbox]:
    sandbox = await linked(emulator if request.param == "default" else older_emulator)
    try:
        yield sandbox
    finally:
        await sandbox.kill()


async def test_the_default_envd_version_is_the_newest_release(
    emulator: E2BEmulator, default_sandbox: AsyncSandbox
) -> None:
    assert emulator.envd_version == "0.6.13"
    info = await default_sandbox.get_info()
    assert info.envd_version == "0.6.13"


async def test_the_envd_version_asked_for_is_reported(older_emulator: E2BEmulator) -> None:
    sandbox = await linked(older_emulator)
    try:
        assert (await sandbox.get_info()).envd_version == "0.5.7"
    finally:
        await sandbox.kill()


async def test_up_to_0_6_13_a_link_has_its_targets_type_and_its_fully_resolved_target(
    sandbox_up_to_0_6_13: AsyncSandbox,
) -> None:
    files = sandbox_up_to_0_6_13.files
    to_folder = await files.get_info("/home/user/l2")
    assert (to_folder.type, to_folder.symlink_target) == (FileType.DIR, "/home/user/real")
    assert to_folder.permissions == "Lrwxrwxrwx"
    assert to_folder.mode == 0o755  # the target's permission bits
    to_file = await files.get_info("/home/user/to-file")
    assert (to_file.type, to_file.symlink_target) == (FileType.FILE, "/home/user/real/file.txt")


async def test_up_to_0_6_13_a_dangling_link_has_no_type_and_points_at_itself(
    sandbox_up_to_0_6_13: AsyncSandbox,
) -> None:
    dangling = await sandbox_up_to_0_6_13.files.get_info("/home/user/dangling")
    assert (dangling.type, dangling.symlink_target, dangling.mode) == (
        None,
        "/home/user/dangling",
        0,
    )


async def test_up_to_0_6_13_a_listing_shows_links_as_their_targets(
    sandbox_up_to_0_6_13: AsyncSandbox,
) -> None:
    # The dangling link has no type, and the SDK leaves entries of no type out of a listing.
    entries = {e.name: e.type for e in await sandbox_up_to_0_6_13.files.list("/home/user")}
    assert entries == {
        "l1": FileType.DIR,
        "l2": FileType.DIR,
        "real": FileType.DIR,
        "to-file": FileType.FILE,
    }


async def test_a_newer_envd_marks_the_link_itself(newer_emulator: E2BEmulator) -> None:
    sandbox = await linked(newer_emulator)
    try:
        entries = {e.name: e for e in await sandbox.files.list("/home/user")}
        # A dangling link's type is still none, and the SDK leaves it out of a listing.
        assert {name: e.type for name, e in entries.items()} == {
            "l1": FileType.SYMLINK,
            "l2": FileType.SYMLINK,
            "real": FileType.DIR,
            "to-file": FileType.SYMLINK,
        }
        assert entries["l2"].symlink_target == "/home/user/real"
        dangling = await sandbox.files.get_info("/home/user/dangling")
        assert (dangling.type, dangling.symlink_target) == (FileType.SYMLINK, "/home/user/dangling")
    finally:
        await sandbox.kill()


async def test_a_plain_entry_carries_gos_permission_string_and_bits(
    default_sandbox: AsyncSandbox,
) -> None:
    tmp = await default_sandbox.files.get_info("/tmp")
    assert (tmp.permissions, tmp.mode) == ("dtrwxrwxrwx", 0o777)
    listed = await default_sandbox.files.list("/home/user/real", depth=2)
    assert [(e.path, e.type) for e in listed] == [
        ("/home/user/real/file.txt", FileType.FILE),
        ("/home/user/real/inner", FileType.DIR),
    ]
    through_link = await default_sandbox.files.list("/home/user/l2")
    assert [e.path for e in through_link] == ["/home/user/l2/file.txt", "/home/user/l2/inner"]


@pytest.mark.parametrize("version", ["", "latest", "v-1"])
def test_an_envd_version_that_is_no_version_is_refused(version: str) -> None:
    with pytest.raises(ValueError, match="envd_version must be a version string"):
        E2BEmulator(envd_version=version)
