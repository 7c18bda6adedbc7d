"""Attachments: checked, kept in a folder apart per scope, and staged into the thread's sandbox."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pai.http._errors import HttpError
from pai.http._files import Attachments, FolderFilesStore, safe_filename, sandbox_stager
from pai.http._wire import Attachment
from pai.sandbox import create_sandbox_service
from pai.sandbox_inmemory import create_in_memory_sandbox_provider

pytestmark = pytest.mark.anyio


def csv(name: str = "data.csv", data: bytes = b"a,b\n1,2\n") -> Attachment:
    return Attachment(filename=name, media_type="text/csv", data=data)


@given(st.text(max_size=300))
def test_a_safe_filename_is_one_harmless_path_segment(name: str) -> None:
    safe = safe_filename(name)
    assert safe
    assert len(safe) <= 100
    assert "/" not in safe
    assert "\\" not in safe
    assert "\x00" not in safe
    assert not safe.startswith(".")
    assert all(ord(c) >= 0x20 and ord(c) != 0x7F for c in safe)


def test_a_path_in_a_name_is_reduced_to_its_last_part() -> None:
    assert safe_filename("../../etc/passwd") == "passwd"
    assert safe_filename("..\\..\\boot.ini") == "boot.ini"
    assert safe_filename("...") == "file"
    assert safe_filename("a\nb\x00c.txt") == "a_b_c.txt"
    long = "x" * 300 + ".csv"
    assert safe_filename(long).endswith(".csv")
    assert len(safe_filename(long)) == 100


def test_limits_are_checked_before_anything_is_kept(tmp_path: Path) -> None:
    attachments = Attachments(store=FolderFilesStore(tmp_path), max_bytes=4, max_files=1)
    with pytest.raises(HttpError) as big:
        attachments.check([csv(data=b"12345")])
    assert (big.value.status, big.value.code) == (413, "file_too_large")
    assert "5 bytes; at most 4" in big.value.message
    with pytest.raises(HttpError) as many:
        attachments.check([csv(data=b"1"), csv(data=b"2")])
    assert (many.value.status, many.value.code) == (413, "too_many_files")
    with pytest.raises(HttpError) as kind:
        attachments.check([Attachment("x.exe", "application/x-msdownload", b"MZ")])
    assert (kind.value.status, kind.value.code) == (415, "unsupported_media_type")
    with pytest.raises(HttpError) as malformed:
        attachments.check([Attachment("x", "text/csv\r\nX-Evil: 1", b"1")])
    assert malformed.value.status == 415
    attachments.check([Attachment("x.csv", "text/csv; charset=utf-8", b"1")])
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("field", "value"),
    [("max_bytes", 0), ("max_files", -1), ("max_bytes", True), ("media_types", "text/*")],
)
def test_bad_options_are_refused_by_name(tmp_path: Path, field: str, value: object) -> None:
    with pytest.raises(ValueError, match=field):
        Attachments(store=FolderFilesStore(tmp_path), **{field: value})  # type: ignore[arg-type]


async def test_the_folder_keeps_scopes_apart_and_names_no_key(tmp_path: Path) -> None:
    store = FolderFilesStore(tmp_path)
    mine = await store.put(scope_key="../acme", thread_id="t/1", attachment=csv())
    theirs = await store.put(scope_key="globex", thread_id="t/1", attachment=csv(data=b"x"))
    assert await store.get(scope_key="../acme", thread_id="t/1", file_id=mine.id) == b"a,b\n1,2\n"
    with pytest.raises(FileNotFoundError):
        await store.get(scope_key="globex", thread_id="t/1", file_id=mine.id)
    with pytest.raises(FileNotFoundError):
        await store.get(scope_key="../acme", thread_id="t/1", file_id="../" + theirs.id)
    written = [p for p in tmp_path.rglob("*") if p.is_file()]  # noqa: ASYNC240 (a test's tmp folder)
    assert len(written) == 2
    for path in written:
        assert path.is_relative_to(tmp_path)
        assert "acme" not in str(path)
        assert "globex" not in str(path)
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert mine.size == 8
    assert len(mine.sha256) == 64


async def test_staged_files_reach_the_threads_sandbox_without_overwriting(tmp_path: Path) -> None:
    service = create_sandbox_service(provider=create_in_memory_sandbox_provider())
    attachments = Attachments(store=FolderFilesStore(tmp_path), stage=sandbox_stager(service))
    note = await attachments.receive(
        scope_key="acme", thread_id="t1", files=[csv(), csv(data=b"second\n")]
    )
    sandbox = service.acquire(scope_key="acme", thread_id="t1")
    listed = {entry.name for entry in await sandbox.list_dir("/workspace/uploads")}
    (renamed,) = listed - {"data.csv"}
    assert len(listed) == 2
    assert renamed.startswith("data-")
    assert renamed.endswith(".csv")
    assert await sandbox.read_file("/workspace/uploads/data.csv") == b"a,b\n1,2\n"
    assert await sandbox.read_file(f"/workspace/uploads/{renamed}") == b"second\n"
    assert "/workspace/uploads/data.csv (data.csv, text/csv, 8 bytes)" in note
    other = service.acquire(scope_key="globex", thread_id="t1")
    assert not await other.exists("/workspace/uploads")


def test_a_stager_folder_outside_the_workspace_is_refused() -> None:
    service = create_sandbox_service(provider=create_in_memory_sandbox_provider())
    for folder in ("/etc", "/workspace/.pai/x", "/workspace/up/", "uploads"):
        with pytest.raises(ValueError, match="under /workspace"):
            sandbox_stager(service, folder=folder)


async def test_no_files_no_note(tmp_path: Path) -> None:
    attachments = Attachments(store=FolderFilesStore(tmp_path))
    assert await attachments.receive(scope_key="a", thread_id="t", files=[]) == ""
    note = await attachments.receive(scope_key="a", thread_id="t", files=[csv()])
    assert note.strip() == "[Attached files:\n- (data.csv, text/csv, 8 bytes)]"
