"""Copying a sandbox skill into a sandbox, and updating an older copy in place.

The folder ``<sandbox_dir>/<name>/`` holds the skill's files and a marker, ``.pai-skill``:

    pai-skill csv-report 3f2a…(the version: a SHA-256 of the skill's files)
    "data/sample.csv"
    "scripts/count.sh"

The first line names the skill and its version; each further line is one file the copy wrote,
as a JSON string. A load that finds the marker of the skill's current version writes nothing.
Otherwise it updates the copy so that the marker never claims a version whose files are not
all in place:

1. the marker is replaced by a *pending* one (version ``copying``, which no version equals),
   listing every file an earlier copy wrote and every file this one writes, so a copy
   interrupted at any point leaves a marker that is stale and knows what to clean up;
2. the files the earlier copy wrote and this version no longer has are removed, then the folders
   they leave empty;
3. the files are written, then the marker of the new version.

Without anything to remove, 1 and 3 are one ``write_files`` batch. Only what the marker lists is
removed, and only inside the skill's folder: a listed path that is absolute, holds ``..`` or is
not normalized is ignored (the marker lives in the sandbox, where commands can rewrite it); a
path is removed only when every folder on its way is a real folder, not a symlink, and it is
itself a regular file; and a folder only when it is empty. A user's file is never removed, in
the skill's folder or elsewhere.

Writing through a symlink writes its target, so before anything is written the copy checks that
the skill's folder, the folders its files go in, its files and its marker are not symlinks
(commands in the sandbox can make them); one that is fails the load with
:class:`~pai.skills.SkillCopyError` naming it, and nothing is written.
"""

from __future__ import annotations

import contextlib
import json
import posixpath
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from typing_extensions import TypeIs

from pai.sandbox import (
    Sandbox,
    SandboxDirectoryNotEmptyError,
    SandboxFileNotFoundError,
    SandboxFileTooLargeError,
    SandboxNotADirectoryError,
)
from pai.sandbox.provider import FileWrite
from pai.skills._entry import MARKER, SKILL_FILE
from pai.skills._errors import SkillCopyError

MARKER_PREFIX = "pai-skill"
PENDING = "copying"
"""The version a marker records while a copy is under way (no content hash equals it)."""

MAX_LISTED = 100_000
"""The most files a marker may list (as many as a skill may hold); a longer list is not one a
copy wrote, and nothing in it is removed."""


def is_relative_path(path: object) -> TypeIs[str]:
    """Whether ``path`` is a normalized path inside a skill folder: relative, no ``..``, no NUL."""
    return (
        isinstance(path, str)
        and bool(path)
        and "\x00" not in path
        and not path.startswith(("/", "../"))
        and path != ".."
        and posixpath.normpath(path) == path
    )


def marker_bytes(name: str, version: str, paths: Iterable[str]) -> bytes:
    """The marker of a copy of skill ``name`` at ``version`` holding ``paths``."""
    lines = [f"{MARKER_PREFIX} {name} {version}"]
    lines.extend(json.dumps(path, ensure_ascii=False) for path in paths)
    return ("\n".join(lines) + "\n").encode()


def listed_files(marker: bytes, name: str) -> list[str]:
    """The files a marker of skill ``name`` says its copy wrote; ``[]`` for a marker that is
    not one (another skill's, garbled, edited beyond reading). Paths that could leave the skill
    folder, and the marker and ``SKILL.md`` themselves, are dropped."""
    try:
        text = marker.decode("utf-8")
    except UnicodeDecodeError:
        return []
    lines = text.split("\n")
    header = lines[0].split(" ")
    if len(header) != 3 or header[0] != MARKER_PREFIX or header[1] != name:
        return []
    if len(lines) > MAX_LISTED + 2:
        return []
    paths: list[str] = []
    for line in lines[1:]:
        if not line:
            continue
        try:
            path: object = json.loads(line)
        except ValueError:
            continue
        if is_relative_path(path) and path not in (MARKER, SKILL_FILE):
            paths.append(str(path))
    return paths


@dataclass(frozen=True, slots=True)
class CopyPlan:
    """What loading one sandbox skill writes: its files, then its marker."""

    name: str
    sandbox_dir: str
    folder: str
    marker_path: str
    marker: bytes
    paths: tuple[str, ...]
    """The skill's files, relative to its folder."""
    writes: tuple[FileWrite, ...]
    """The files, then the marker (the seed writes exactly these)."""


async def ensure_copy(sandbox: Sandbox, plan: CopyPlan) -> None:
    """Make ``plan.folder`` hold the skill's current version (see the module docstring)."""
    try:
        found: bytes | None = await sandbox.read_file(plan.marker_path)
    except (SandboxFileNotFoundError, SandboxFileTooLargeError):
        found = None  # missing, or something else sits there: copy the skill again
    if found == plan.marker:
        return
    earlier = listed_files(found, plan.name) if found is not None else []
    new = set(plan.paths)
    stale = sorted({path for path in earlier if path not in new})
    listed = sorted(new.union(earlier))
    pending = FileWrite(plan.marker_path, marker_bytes(plan.name, PENDING, listed))
    folders = _Folders(sandbox, plan)
    await _check_no_links(folders, plan)
    if not stale:
        await sandbox.write_files([pending, *plan.writes])
        return
    await sandbox.write_files([pending])
    await _remove_stale(folders, plan, stale)
    await sandbox.write_files(plan.writes)


class _Folders:
    """What sits at each path of the skill folder, from listings each read once. Symlinks are
    never followed: below a symlink (or a file, or nothing) there is nothing."""

    def __init__(self, sandbox: Sandbox, plan: CopyPlan) -> None:
        self.sandbox = sandbox
        self._plan = plan
        self._top: dict[str, str] | Literal[False] | None = False  # the sandbox_dir listing
        self._listings: dict[str, dict[str, str] | None] = {}

    async def _list(self, path: str) -> dict[str, str] | None:
        try:
            entries = await self.sandbox.list_dir(path)
        except (SandboxFileNotFoundError, SandboxNotADirectoryError):
            return None
        return {entry.name: entry.type for entry in entries}

    async def kind(self, relative: str) -> str | None:
        """The type of the entry at ``relative`` in the skill folder (``""`` for the folder
        itself): ``"file"``, ``"directory"``, ``"symlink"``, ``"other"``, or ``None`` when
        nothing is there or it is reached only through a symlink or a file."""
        if relative == "":
            if self._top is False:
                self._top = await self._list(self._plan.sandbox_dir)
            return None if self._top is None else self._top.get(self._plan.name)
        head, tail = posixpath.split(relative)
        listing = await self._entries(head)
        return None if listing is None else listing.get(tail)

    async def _entries(self, relative: str) -> dict[str, str] | None:
        if relative not in self._listings:
            self._listings[relative] = (
                await self._list(posixpath.join(self._plan.folder, relative).rstrip("/"))
                if await self.kind(relative) == "directory"
                else None
            )
        return self._listings[relative]


def _ancestors(path: str) -> list[str]:
    """The folders ``path`` lies in, inside the skill folder: ``a/b/c`` gives ``a/b``, ``a``."""
    folders: list[str] = []
    head = posixpath.dirname(path)
    while head:
        folders.append(head)
        head = posixpath.dirname(head)
    return folders


async def _check_no_links(folders: _Folders, plan: CopyPlan) -> None:
    """Refuse to copy through a symlink: writing through one writes its target, which may be
    any file of the sandbox. Raises :class:`SkillCopyError` naming each link in the way."""
    needed = ["", *sorted({folder for path in plan.paths for folder in _ancestors(path)})]
    links = [
        posixpath.join(plan.folder, path).rstrip("/")
        for path in [*needed, *plan.paths, MARKER]
        if await folders.kind(path) == "symlink"
    ]
    if links:
        shown = ", ".join(links)
        raise SkillCopyError(
            f"cannot copy the skill {plan.name!r} into the sandbox: {shown} "
            f"{'is a symlink' if len(links) == 1 else 'are symlinks'} where the skill's own "
            "files go, and writing through a symlink would write wherever it points; remove "
            f"{'it' if len(links) == 1 else 'them'} (rm {' '.join(links)}) and load the skill "
            "again"
        )


async def _remove_stale(folders: _Folders, plan: CopyPlan, stale: Sequence[str]) -> None:
    sandbox = folders.sandbox
    for path in stale:
        if await folders.kind(path) != "file":
            continue  # gone, replaced by a folder or a link, or reached through a link: kept
        with contextlib.suppress(SandboxFileNotFoundError):
            await sandbox.remove(f"{plan.folder}/{path}")
    needed = {folder for path in plan.paths for folder in _ancestors(path)}
    emptied = {folder for path in stale for folder in _ancestors(path)} - needed
    # Deepest first, so a folder's emptied subfolders are gone before it is tried.
    for folder in sorted(emptied, key=lambda f: (-f.count("/"), f)):
        if await folders.kind(folder) != "directory":
            continue
        # A folder still holding something the skill did not put there is kept.
        with contextlib.suppress(SandboxDirectoryNotEmptyError, SandboxFileNotFoundError):
            await sandbox.remove(f"{plan.folder}/{folder}")
