"""envd's file API as the emulator answers it: uploads, paths and removals as envd handles them.

asyncio only: the e2b SDK is asyncio-only.
"""

from __future__ import annotations

import httpx
import pytest
from e2b import AsyncSandbox, InvalidArgumentException, SandboxException

from pai.sandbox_e2b.testing import E2BEmulator

pytestmark = pytest.mark.anyio


async def listing(sandbox: AsyncSandbox, folder: str) -> list[str]:
    return sorted(entry.name for entry in await sandbox.files.list(folder))


async def test_one_upload_holding_a_path_twice_is_refused_after_the_first(
    raw: AsyncSandbox,
) -> None:
    await raw.files.make_dir("/home/user/up")
    with pytest.raises(
        InvalidArgumentException,
        match=(
            r"^you cannot upload multiple files to the same path '/home/user/up/a' in one "
            r"upload request, only the first specified file was uploaded$"
        ),
    ):
        await raw.files.write_files(
            [
                {"path": "/home/user/up/a", "data": "first"},
                {"path": "/home/user/up/b", "data": "b"},
                {"path": "/home/user/up/a", "data": "second"},
                {"path": "/home/user/up/c", "data": "never"},
            ]
        )
    # As envd: the parts before the repeated one were written, nothing after it.
    assert await listing(raw, "/home/user/up") == ["a", "b"]
    assert await raw.files.read("/home/user/up/a") == "first"


async def test_a_repeated_path_names_the_other_files_only_when_there_are_two_or_more(
    raw: AsyncSandbox,
) -> None:
    with pytest.raises(
        InvalidArgumentException,
        match=r"only the first specified file was uploaded, also the following files were "
        r"uploaded: /home/user/b, /home/user/c$",
    ):
        await raw.files.write_files(
            [
                {"path": "/home/user/a", "data": "1"},
                {"path": "/home/user/b", "data": "2"},
                {"path": "/home/user/c", "data": "3"},
                {"path": "a", "data": "4"},  # relative: the same path, from the home folder
            ]
        )


async def test_names_in_a_multi_file_upload_are_taken_as_envd_reads_them(
    raw: AsyncSandbox,
) -> None:
    # httpx writes '"' as %22 and control characters as %XX in a part's file name; envd (Go's
    # mime parser) does not decode them, so the files get those names.
    written = await raw.files.write_files(
        [{"path": '/home/user/q"uote', "data": "1"}, {"path": "/home/user/new\nline", "data": "2"}]
    )
    assert [w.path for w in written] == ["/home/user/q%22uote", "/home/user/new%0Aline"]
    assert "q%22uote" in await listing(raw, "/home/user")
    # A single file's path travels in the query string, intact.
    await raw.files.write('/home/user/one"quote', "x")
    assert 'one"quote' in await listing(raw, "/home/user")


async def test_removing_a_missing_path_succeeds_as_envds_remove_all_does(
    raw: AsyncSandbox,
) -> None:
    await raw.files.remove("/home/user/never-there")
    await raw.files.remove("/home/user/no/such/folder/file")


async def test_a_folder_under_a_file_is_an_internal_error(raw: AsyncSandbox) -> None:
    await raw.files.write("/home/user/plain", "x")
    with pytest.raises(SandboxException, match=r"INTERNAL.*not a directory"):
        await raw.files.make_dir("/home/user/plain/sub")
    with pytest.raises(SandboxException, match=r"INTERNAL.*not a directory"):
        await raw.files.exists("/home/user/plain/sub")
    with pytest.raises(SandboxException, match="500: error ensuring directories: path is a file"):
        await raw.files.write("/home/user/plain/sub/file", "x")


async def test_a_relative_path_is_taken_from_the_home_of_the_user_named(
    raw: AsyncSandbox,
) -> None:
    as_root = await raw.files.write("relative.txt", "root's", user="root")
    as_user = await raw.files.write("~/relative.txt", "user's")
    assert (as_root.path, as_user.path) == ("/root/relative.txt", "/home/user/relative.txt")
    with pytest.raises(InvalidArgumentException, match="cannot expand user-specific home dir"):
        await raw.files.write("~root/x", "x")


async def test_an_upload_of_an_unknown_content_type_or_without_a_path_is_refused(
    emulator: E2BEmulator, raw: AsyncSandbox
) -> None:
    headers = {
        "E2b-Sandbox-Id": raw.sandbox_id,
        "X-Access-Token": raw._envd_access_token or "",
    }
    async with httpx.AsyncClient(base_url=emulator.url, headers=headers) as client:
        answer = await client.post("/files", content=b"x", headers={"Content-Type": "text/plain"})
        assert answer.status_code == 400
        assert answer.json()["message"].startswith("unsupported content type: text/plain")
        answer = await client.post(
            "/files", content=b"x", headers={"Content-Type": "application/octet-stream"}
        )
        assert answer.status_code == 400
        assert answer.json() == {
            "code": 400,
            "message": "path query parameter is required for raw body upload",
        }
