"""Path resolution takes its shortcut (no walk) only while the filesystem holds no link."""

from __future__ import annotations

import pytest

from pai.sandbox_inmemory._errors import SandboxMemoryBudgetError
from pai.sandbox_inmemory._hostfs import PATH_MAX, HostFs, drive


def _fs() -> HostFs:
    fs = HostFs(1 << 30)
    drive(fs.mkdir("/workspace/real", recursive=True))
    drive(fs.write_file("/workspace/real/f.txt", "x"))
    return fs


def _resolve(fs: HostFs, path: str) -> str:
    return fs._resolve_path_with_symlinks(path)


def _links(fs: HostFs) -> int:
    """The counted links, checked against the entries that are links."""
    counted = fs._entries.links
    entries = fs._entries.values()
    assert counted == sum(entry.type == "symlink" for entry in entries)
    return counted


def test_links_are_counted_as_they_come_and_go() -> None:
    fs = _fs()
    assert _links(fs) == 0
    drive(fs.symlink("/workspace/real", "/workspace/link"))
    drive(fs.symlink("real/f.txt", "/workspace/file-link"))
    assert _links(fs) == 2
    drive(fs.rm("/workspace/file-link"))
    assert _links(fs) == 1
    drive(fs.write_file("/workspace/link", "now a file"))  # a link replaced or written through
    _links(fs)
    drive(fs.rm("/workspace/link"))
    assert _links(fs) == 0
    drive(fs.symlink("/workspace/real", "/workspace/link"))
    drive(fs.mv("/workspace/link", "/workspace/moved"))
    assert _links(fs) == 1


def test_a_link_is_followed_and_its_removal_ends_it() -> None:
    fs = _fs()
    drive(fs.symlink("/workspace/real", "/workspace/link"))
    assert _resolve(fs, "/workspace/link/f.txt") == "/workspace/real/f.txt"
    assert drive(fs.read_file("/workspace/link/f.txt")) == "x"
    drive(fs.rm("/workspace/link"))
    assert _resolve(fs, "/workspace/link/f.txt") == "/workspace/link/f.txt"


def test_links_inside_a_copied_or_removed_tree_are_counted() -> None:
    fs = _fs()
    drive(fs.symlink("f.txt", "/workspace/real/alias"))
    drive(fs.cp("/workspace/real", "/workspace/copy", recursive=True))
    assert _links(fs) == 2
    assert drive(fs.read_file("/workspace/copy/alias")) == "x"
    drive(fs.rm("/workspace", recursive=True))
    assert _links(fs) == 0


def test_without_links_a_path_resolves_to_itself() -> None:
    fs = _fs()
    assert _links(fs) == 0
    assert _resolve(fs, "/workspace/./real/../real/f.txt") == "/workspace/real/f.txt"
    assert _resolve(fs, "/missing/deeper") == "/missing/deeper"
    longer = "/workspace/" + "/".join(["d" * 100] * 50)  # past PATH_MAX: walked as before
    assert len(longer) > PATH_MAX
    assert _resolve(fs, longer) == longer


def test_links_are_counted_through_rename_chmod_times_and_hard_links() -> None:
    fs = _fs()
    drive(fs.symlink("/workspace/real", "/workspace/link"))
    drive(fs.symlink("/workspace/real", "/workspace/other"))
    drive(fs.mv("/workspace/real/f.txt", "/workspace/link2"))  # a file renamed to a new name
    drive(fs.mv("/workspace/link2", "/workspace/other"))  # a file renamed over a link
    assert _links(fs) == 1
    drive(fs.mv("/workspace/link", "/workspace/other"))  # a link renamed over a file
    assert _links(fs) == 1
    assert _resolve(fs, "/workspace/other/x") == "/workspace/real/x"
    drive(fs.chmod("/workspace/other", 0o700))  # replaces the entry (through the link)
    drive(fs.utimes("/workspace/other", 1.0, 1.0))
    assert _links(fs) == 1
    drive(fs.write_file("/workspace/real/g.txt", "y"))
    drive(fs.link("/workspace/real/g.txt", "/workspace/hard"))  # a hard link is no symlink
    assert _links(fs) == 1
    with pytest.raises(PermissionError):  # just-bash refuses a hard link to a symbolic link
        drive(fs.link("/workspace/other", "/workspace/hard-to-link"))
    assert _links(fs) == 1


def test_links_inside_a_moved_folder_are_counted_and_followed() -> None:
    fs = _fs()
    drive(fs.mkdir("/workspace/tree/inner", recursive=True))
    drive(fs.symlink("/workspace/real", "/workspace/tree/inner/to-real"))
    drive(fs.mkdir("/workspace/empty"))
    drive(fs.mv("/workspace/tree", "/workspace/empty"))  # a folder over an empty folder
    assert _links(fs) == 1
    assert _resolve(fs, "/workspace/empty/inner/to-real/f.txt") == "/workspace/real/f.txt"
    drive(fs.rm("/workspace/empty", recursive=True))  # a folder holding a link
    assert _links(fs) == 0


def test_a_rename_put_back_over_the_budget_keeps_the_count() -> None:
    fs = _fs()
    drive(fs.mkdir("/workspace/t"))
    drive(fs.symlink("/workspace/real", "/workspace/t/l"))
    fs._entries.budget = fs._entries.used  # no room for one byte more
    with pytest.raises(SandboxMemoryBudgetError):  # the longer paths do not fit
        drive(fs.mv("/workspace/t", "/workspace/" + "t" * 200))
    assert _links(fs) == 1
    assert _resolve(fs, "/workspace/t/l/f.txt") == "/workspace/real/f.txt"
