"""Path resolution takes its shortcut (no walk) only while the filesystem holds no link."""

from __future__ import annotations

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
