"""The authoritative copy of an instance's files: a just-bash ``InMemoryFs`` in the host process.

Workers never hold an instance's files; every file operation of a command is a request that the
host serves here (:func:`serve`), one at a time per instance, so each request is atomic (an
append is never lost between two concurrent commands) and a killed worker loses nothing that
was written before. :class:`HostFs` counts the bytes its entries hold and refuses a change that
would take them over the memory budget.

Every method of ``InMemoryFs`` is a coroutine that never suspends; :func:`drive` runs one to its
end synchronously, so the caller can hold the instance's lock around it on any event loop
(asyncio or trio) or thread.
"""

from __future__ import annotations

import errno
import time
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, TypeVar

from just_bash.fs import InMemoryFs
from just_bash.fs.in_memory_fs import (
    DirectoryEntry,
    DirentEntry,
    FileEntry,
    FsEntry,
    SymlinkEntry,
)

from pai.sandbox_inmemory._errors import SandboxMemoryBudgetError
from pai.sandbox_inmemory._protocol import DEVICES

__all__ = ["ENTRY_OVERHEAD", "PATH_MAX", "HostFs", "drive", "serve_frame"]

T = TypeVar("T")

ENTRY_OVERHEAD = 384
"""Bytes counted per entry (file, folder, link) on top of its path, name and content, so that
many empty files are bounded by the budget too. It covers what an entry costs this process
(measured at about 300 bytes on CPython 3.11: the entry object, its path in the table, its name
in its folder's index)."""

PATH_MAX = 4096
"""The longest path (or link target) a worker request may carry, as on Linux: it bounds the work
one request can make the host do (a ``mkdir -p`` of thousands of levels)."""

MAX_SYMLINKS = 40
"""Symbolic links followed in one path resolution, as Linux counts them (``MAXSYMLINKS``): one
more is ``ELOOP``, "too many levels of symbolic links". With :data:`PATH_MAX`, it bounds the work
of any resolution, with :data:`MAX_WALK`."""

MAX_WALK = 2 * PATH_MAX
"""Path components one resolution may walk, links' targets included (a path of ``PATH_MAX``
characters has at most half as many). Forty links whose targets are each a deep folder would
otherwise make one request walk 80,000 components, about 0.2 s of this process's time; past
this bound the resolution fails with ``ELOOP`` instead (a few milliseconds at most)."""


_ZERO_READ = (
    "/dev/zero has no end and the in-memory shell reads files whole; use head -c N /dev/zero"
)


def _loop_error(path: str, operation: str) -> OSError:
    return OSError(
        errno.ELOOP,
        f"ELOOP: too many levels of symbolic links (more than {MAX_SYMLINKS} followed), "
        f"{operation} '{path[:200]}'",
    )


def _text_cost(text: str) -> int:
    """Bytes a string may take in this process (CPython stores non-ASCII text with up to four
    bytes a character)."""
    return len(text) if text.isascii() else 4 * len(text)


def _cost(path: str, entry: FsEntry) -> int:
    # The path is held in the table and its last component again in the folder's index.
    cost = ENTRY_OVERHEAD + _text_cost(path) + _text_cost(path.rpartition("/")[2])
    if isinstance(entry, FileEntry):
        return cost + len(entry.content)
    if isinstance(entry, SymlinkEntry):
        return cost + _text_cost(entry.target)
    return cost


class _Entries(dict[str, FsEntry]):
    """The filesystem's path -> entry table, counting what it holds against a budget."""

    def __init__(self, budget: int, entries: Iterable[tuple[str, FsEntry]]) -> None:
        super().__init__()
        self.budget = budget
        self.used = 0
        self.children: dict[str, set[str]] = {}
        """Folder path -> the names in it, so that listing, removing or copying a folder costs
        its own size, not the size of the whole filesystem."""
        self.links = 0
        """How many entries are symbolic links: with none, a path resolves to itself."""
        self.stamping = True
        """Whether adding or removing an entry sets its folder's modification time (a rename
        moves entries without changing the folders inside what it moves)."""
        for path, entry in entries:
            self[path] = entry

    def __setitem__(self, path: str, entry: FsEntry) -> None:
        if isinstance(entry, FileEntry) and isinstance(entry.content, bytearray):
            # A new entry sharing a growable buffer (cp, link, chmod of an appended file): give
            # it its own bytes, so appending to one never changes the other.
            entry.content = bytes(entry.content)
        old = self.get(path)
        delta = _cost(path, entry) - (0 if old is None else _cost(path, old))
        if delta > 0 and self.used + delta > self.budget:
            raise SandboxMemoryBudgetError(path, needed=self.used + delta, budget=self.budget)
        super().__setitem__(path, entry)
        self.used += delta
        self.links += (entry.type == "symlink") - (old is not None and old.type == "symlink")
        if old is None and path != "/":
            parent, _, name = path.rpartition("/")
            self.children.setdefault(parent or "/", set()).add(name)
            if self.stamping:
                self.touch(parent or "/", entry.mtime)

    def __delitem__(self, path: str) -> None:
        entry = self[path]
        super().__delitem__(path)
        self.used -= _cost(path, entry)
        if entry.type == "symlink":
            self.links -= 1
        if path != "/":
            parent, _, name = path.rpartition("/")
            names = self.children.get(parent or "/")
            if names is not None:
                names.discard(name)
                if not names:
                    del self.children[parent or "/"]
            if self.stamping:
                self.touch(parent or "/")

    def touch(self, folder: str, when: float | None = None) -> None:
        # A folder's modification time is when an entry was last added to it (the new entry's
        # own time, as the kernel stamps both at once) or removed.
        entry = self.get(folder)
        if entry is not None and entry.type == "directory":
            entry.mtime = time.time() if when is None else when

    def pop(self, path: str, *default: Any) -> Any:  # dict's own signature
        if path in self:
            entry = self[path]
            del self[path]
            return entry
        return super().pop(path, *default)

    def grow(self, path: str, entry: FileEntry, data: bytes) -> None:
        """Append ``data`` to ``entry`` in place (amortized: no copy of what is there)."""
        if self.used + len(data) > self.budget:
            raise SandboxMemoryBudgetError(path, needed=self.used + len(data), budget=self.budget)
        if not isinstance(entry.content, bytearray):
            entry.content = bytearray(entry.content)  # pyright: ignore[reportAttributeAccessIssue]
        entry.content += data
        entry.mtime = time.time()
        self.used += len(data)


class HostFs(InMemoryFs):
    """just-bash's in-memory filesystem with a memory budget (bytes of paths and contents).

    Appends grow a file in place (just-bash's copy the whole file each time, which a loop of
    ``echo x >> log`` turns into quadratic work in the host).
    """

    def __init__(self, budget: int) -> None:
        super().__init__()
        self._entries = _Entries(budget, self._data.items())
        self._data = self._entries
        self._data["/dev"] = DirectoryEntry()
        for device in DEVICES:
            self._data[device] = FileEntry(mode=0o666)

    async def append_file(self, path: str, content: str | bytes, encoding: str = "utf-8") -> None:
        normalized = self._normalize_path(path)
        if normalized in DEVICES:
            return
        entry = self._data.get(normalized)
        if isinstance(entry, FileEntry):
            data = content.encode(encoding) if isinstance(content, str) else bytes(content)
            self._entries.grow(normalized, entry, data)
            return
        await super().append_file(path, content, encoding)

    def is_plain_folder(self, path: str) -> bool:
        """Whether ``path`` names a folder exactly as stored (absolute, in normal form) while no
        link exists anywhere: then it is a folder by every rule of resolution, and its parents
        are folders too. ``False`` decides nothing (the full check does); it spares that check
        for a command's usual working folder."""
        if self._entries.links:
            return False
        return type(self._data.get(path)) is DirectoryEntry

    # -- path resolution, as the kernel does it ------------------------------------------------
    # just-bash's counts links per component (so a path of many components may follow thousands
    # of links), does not resolve links inside a link's target, and raises ELOOP when a path
    # merely revisits a link. This one splices each target into the walk (absolute targets
    # restart at "/"), resolves ".." after the links before it, and follows at most
    # MAX_SYMLINKS links in all per resolution.

    def _walk(self, path: str, *, follow_last: bool, operation: str) -> str:
        normalized = self._normalize_path(path)
        if normalized == "/" or (not self._entries.links and len(normalized) <= PATH_MAX):
            # No link anywhere: the walk below would end where it starts (a command's working
            # folder is checked this way before every command).
            return normalized
        pending = normalized[1:].split("/")
        pending.reverse()  # a stack: the next component is last
        resolved: list[str] = []  # the resolved folders' paths, from the first one down
        links = steps = 0
        data = self._data
        while pending:
            name = pending.pop()
            if name in ("", "."):
                continue
            steps += 1
            if steps > MAX_WALK:
                raise OSError(
                    errno.ELOOP,
                    f"ELOOP: too many levels of symbolic links (resolving the path walks more "
                    f"than {MAX_WALK} components), {operation} '{path[:200]}'",
                )
            if name == "..":
                if resolved:
                    resolved.pop()
                continue
            current = f"{resolved[-1] if resolved else ''}/{name}"
            if len(current) > PATH_MAX:
                raise OSError(
                    errno.ENAMETOOLONG,
                    f"ENAMETOOLONG: the resolved path is longer than {PATH_MAX} characters, "
                    f"{operation} '{path[:200]}'",
                )
            entry = data.get(current)
            if entry is None or entry.type == "file":
                # Missing, or a file with more to come: what remains is not resolved (the
                # caller finds no entry there).
                return "/".join([current, *reversed(pending)]) if pending else current
            if not pending and not follow_last:
                return current
            if entry.type == "symlink":
                links += 1
                if links > MAX_SYMLINKS:
                    raise _loop_error(path, operation)
                target = entry.target
                if target.startswith("/"):
                    resolved.clear()
                parts = target.split("/")
                parts.reverse()
                pending.extend(parts)
                continue
            resolved.append(current)
        return resolved[-1] if resolved else "/"

    def _resolve_path_with_symlinks(self, path: str, max_loops: int = MAX_SYMLINKS) -> str:
        return self._walk(path, follow_last=True, operation="stat")

    def _resolve_intermediate_symlinks(self, path: str, max_loops: int = MAX_SYMLINKS) -> str:
        return self._walk(path, follow_last=False, operation="lstat")

    # -- POSIX-like checks and linear-time tree operations -------------------------------------
    # just-bash's versions replace a folder by a file, create entries under a file, list a
    # folder by scanning every path (so removing or copying a tree is quadratic), recurse once
    # per level (a deep tree overflows the stack), copy a folder into itself without end and
    # lose a file moved onto itself. These keep the same messages where they exist.

    def _ensure_parent_dirs(self, path: str) -> None:
        # Up from the path by slicing, not by normalizing each level again (which made a
        # "mkdir -p" of 2,000 levels cost 0.2 s of the host's time).
        missing: list[str] = []
        current = self._normalize_path(path).rpartition("/")[0] or "/"
        while current != "/":
            entry = self._data.get(current)
            if entry is not None:
                if entry.type == "symlink":
                    target = self._data.get(self._resolve_path_with_symlinks(current))
                    if target is not None and target.type == "directory":
                        break
                if entry.type != "directory":
                    raise NotADirectoryError(f"ENOTDIR: not a directory, '{current}'")
                break
            missing.append(current)
            current = current.rpartition("/")[0] or "/"
        for folder in reversed(missing):
            self._data[folder] = DirectoryEntry()

    def _write_file_sync(self, path: str, content: str | bytes, encoding: str = "utf-8") -> None:
        normalized = self._normalize_path(path)
        if normalized in DEVICES:
            return
        existing = self._data.get(normalized)
        if existing is not None and existing.type == "directory":
            raise IsADirectoryError(f"EISDIR: illegal operation on a directory, write '{path}'")
        super()._write_file_sync(path, content, encoding)
        if isinstance(existing, FileEntry) and existing.mode != 0o644:
            # Rewriting a file keeps its mode, as writing through open(O_TRUNC) does.
            written = self._data[normalized]
            assert isinstance(written, FileEntry)
            written.mode = existing.mode

    def _mkdir_sync(self, path: str, recursive: bool = False) -> None:
        normalized = self._normalize_path(path)
        entry = self._data.get(normalized)
        if entry is not None:
            if entry.type != "directory":
                raise FileExistsError(f"EEXIST: file already exists, mkdir '{path}'")
            if not recursive:
                raise FileExistsError(f"EEXIST: directory already exists, mkdir '{path}'")
            return
        parent = self._dirname(normalized)
        if not recursive and parent != "/" and parent not in self._data:
            raise FileNotFoundError(f"ENOENT: no such file or directory, mkdir '{path}'")
        self._ensure_parent_dirs(normalized)
        self._data[normalized] = DirectoryEntry()

    def _subtree(self, root: str) -> list[str]:
        """``root`` and every path under it, each folder before its contents."""
        children = self._entries.children
        paths, folders = [root], [root]
        while folders:
            folder = folders.pop()
            prefix = "" if folder == "/" else folder
            for name in children.get(folder, ()):
                child = f"{prefix}/{name}"
                paths.append(child)
                if child in children:
                    folders.append(child)
        return paths

    async def readdir_with_file_types(self, path: str) -> list[DirentEntry]:
        normalized = self._walk(path, follow_last=True, operation="scandir")
        entry = self._data.get(normalized)
        if entry is None:
            raise FileNotFoundError(f"ENOENT: no such file or directory, scandir '{path}'")
        if entry.type != "directory":
            raise NotADirectoryError(f"ENOTDIR: not a directory, scandir '{path}'")
        prefix = "" if normalized == "/" else normalized
        listing: list[DirentEntry] = []
        for name in sorted(self._entries.children.get(normalized, ())):
            child = self._data.get(f"{prefix}/{name}")
            if child is not None:
                listing.append(
                    DirentEntry(
                        name=name,
                        is_file=child.type == "file",
                        is_directory=child.type == "directory",
                        is_symbolic_link=child.type == "symlink",
                    )
                )
        return listing

    async def rm(self, path: str, recursive: bool = False, force: bool = False) -> None:
        normalized = self._normalize_path(path)
        entry = self._data.get(normalized)
        if entry is None:
            if force:
                return
            raise FileNotFoundError(f"ENOENT: no such file or directory, rm '{path}'")
        if normalized == "/":
            raise PermissionError(f"EPERM: operation not permitted, rm '{path}'")
        if normalized == "/dev" or normalized in DEVICES:
            raise PermissionError("Permission denied")
        if entry.type == "directory" and normalized in self._entries.children:
            if not recursive:
                raise OSError(errno.ENOTEMPTY, f"ENOTEMPTY: directory not empty, rm '{path}'")
            for doomed in reversed(self._subtree(normalized)):
                del self._data[doomed]
            return
        del self._data[normalized]

    def _into_itself(self, source: str, destination: str) -> bool:
        return destination == source or destination.startswith(
            "/" if source == "/" else source + "/"
        )

    async def cp(self, src: str, dest: str, recursive: bool = False) -> None:
        source = self._resolve_path_with_symlinks(src)  # a link given is followed
        destination = self._normalize_path(dest)
        entry = self._data.get(source)
        if entry is None:
            raise FileNotFoundError(f"ENOENT: no such file or directory, cp '{src}'")
        if entry.type == "directory":
            if not recursive:
                raise IsADirectoryError(f"EISDIR: is a directory, cp '{src}'")
            if self._into_itself(source, destination):
                raise OSError(
                    errno.EINVAL,
                    f"EINVAL: cannot copy a directory, '{src}', into itself, '{dest}'",
                )
        plan = [(p, self._data[p]) for p in self._subtree(source)]
        # The paths are normalized already, and each folder comes before its contents: only
        # the destination's own parents may be missing (a deep tree is copied in linear time).
        self._ensure_parent_dirs(destination)
        for path, item in plan:
            target = destination + path[len(source) :]
            existing = self._data.get(target)
            if isinstance(item, DirectoryEntry):
                if existing is None:
                    self._data[target] = DirectoryEntry(mode=item.mode)
                elif existing.type != "directory":
                    raise FileExistsError(f"EEXIST: file already exists, mkdir '{target}'")
                continue
            if existing is not None and existing.type == "directory":
                raise IsADirectoryError(f"EISDIR: cannot overwrite a directory, cp '{target}'")
            if isinstance(item, FileEntry):
                self._data[target] = FileEntry(content=item.content, mode=item.mode)
            else:
                self._data[target] = SymlinkEntry(target=item.target, mode=item.mode)

    async def mv(self, src: str, dest: str) -> None:
        """Rename ``src`` (a link itself, not its target) to ``dest``, as ``rename(2)``: a file
        replaces a file, a folder replaces an empty folder, a folder never moves into itself."""
        source = self._normalize_path(src)
        destination = self._normalize_path(dest)
        entry = self._data.get(source)
        if entry is None:
            raise FileNotFoundError(f"ENOENT: no such file or directory, mv '{src}'")
        if destination == source:
            return
        if {source, destination} & {"/dev", *DEVICES}:
            raise PermissionError("Permission denied")
        if entry.type == "directory" and self._into_itself(source, destination):
            raise OSError(
                errno.EINVAL, f"EINVAL: cannot move a directory, '{src}', into itself, '{dest}'"
            )
        if self._into_itself(destination, source):
            raise OSError(errno.ENOTEMPTY, f"ENOTEMPTY: directory not empty, mv '{dest}'")
        existing = self._data.get(destination)
        if existing is not None:
            if existing.type == "directory":
                if entry.type != "directory":
                    raise IsADirectoryError(f"EISDIR: is a directory, mv '{dest}'")
                if destination in self._entries.children:
                    raise OSError(errno.ENOTEMPTY, f"ENOTEMPTY: directory not empty, mv '{dest}'")
            elif entry.type == "directory":
                raise NotADirectoryError(f"ENOTDIR: not a directory, mv '{dest}'")
        self._ensure_parent_dirs(destination)
        moved = [(p, self._data[p]) for p in self._subtree(source)]
        replaced = existing
        self._entries.stamping = False
        try:
            if replaced is not None:
                del self._data[destination]
            for path, _ in reversed(moved):
                del self._data[path]
            done: list[str] = []
            try:
                for path, item in moved:
                    target = destination + path[len(source) :]
                    self._data[target] = item
                    done.append(target)
            except SandboxMemoryBudgetError:  # longer paths over the budget: put all back
                for target in reversed(done):
                    del self._data[target]
                for path, item in moved:
                    self._data[path] = item
                if replaced is not None:
                    self._data[destination] = replaced
                raise
        finally:
            self._entries.stamping = True
        for folder in {self._dirname(source), self._dirname(destination)}:
            self._entries.touch(folder)

    @property
    def entry_count(self) -> int:
        """How many paths (files, folders, links) the filesystem holds."""
        return len(self._data)

    @property
    def budget(self) -> int:
        """Bytes the entries may hold."""
        return self._entries.budget

    @property
    def used(self) -> int:
        """Bytes the entries hold now, as counted against the budget."""
        return self._entries.used

    def content_of(self, path: str) -> bytes:
        """The bytes of the file at ``path`` (symlinks followed), without a copy to keep: a
        file grown in place becomes immutable bytes again (a concurrent append then starts a
        new buffer instead of changing what is being sent)."""
        if self._resolve_path_with_symlinks(path) == "/dev/zero":
            raise OSError(_ZERO_READ)
        content = drive(self.read_file_bytes(path))
        if isinstance(content, bytearray):
            entry = self._data[self._resolve_path_with_symlinks(path)]
            assert isinstance(entry, FileEntry)
            entry.content = content = bytes(content)
        return content

    def size_of(self, path: str) -> int | None:
        """The size of the file at ``path`` (symlinks followed), ``None`` if it is no file."""
        entry = self._data.get(self._resolve_path_with_symlinks(path))
        return len(entry.content) if isinstance(entry, FileEntry) else None


def drive(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends (``InMemoryFs``'s methods) to its end, now."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise RuntimeError("an in-memory filesystem operation tried to suspend")


# -- serving a worker's requests ----------------------------------------------------------------


class RequestError(Exception):
    """A request that is not one the worker protocol defines."""


def _str(args: list[object], index: int) -> str:
    value = args[index] if index < len(args) else None
    if not isinstance(value, str):
        raise RequestError(f"argument {index} must be a string")
    return value


def _bool(args: list[object], index: int) -> bool:
    value = args[index] if index < len(args) else None
    if not isinstance(value, bool):
        raise RequestError(f"argument {index} must be a boolean")
    return value


def _number(args: list[object], index: int) -> float:
    value = args[index] if index < len(args) else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RequestError(f"argument {index} must be a number")
    return float(value)


def _int(args: list[object], index: int) -> int:
    value = args[index] if index < len(args) else None
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(f"argument {index} must be an integer")
    return value


def _folders_resolved(fs: HostFs, args: list[object], index: int) -> str:
    """Argument ``index`` with symlinks resolved in its folders, not in its last component (the
    path a ``mkdir``, ``rm``, ``ln`` or ``mv`` acts on, as the kernel resolves it)."""
    return fs._resolve_intermediate_symlinks(_str(args, index))  # pyright: ignore[reportPrivateUsage]


def _stat_doc(stat: Any) -> dict[str, object]:  # just-bash's FsStat
    return {
        "is_file": bool(stat.is_file),
        "is_directory": bool(stat.is_directory),
        "is_symbolic_link": bool(stat.is_symbolic_link),
        "mode": int(stat.mode),
        "size": int(stat.size),
        "mtime": float(stat.mtime),
        "nlink": int(getattr(stat, "nlink", 1)),
    }


_Handler = Callable[[HostFs, list[object], bytes], tuple[object, bytes]]


def _read(fs: HostFs, args: list[object], payload: bytes) -> tuple[object, bytes]:
    return None, fs.content_of(_str(args, 0))


def _in_a_folder(fs: HostFs, path: str) -> str:
    """``path``, once its folder is known to exist: a command's write never creates folders
    (just-bash's write_file does, so ``echo x > missing/f`` made ``missing``); the file API's
    writes, which do, are not served here."""
    folder = fs._data.get(fs._resolve_path_with_symlinks(fs._dirname(path)))  # pyright: ignore[reportPrivateUsage]
    if folder is None:
        raise FileNotFoundError("No such file or directory")
    if folder.type != "directory":
        raise NotADirectoryError("Not a directory")
    return path


def _write(fs: HostFs, args: list[object], payload: bytes) -> tuple[object, bytes]:
    # Writing through a symlink writes its target (just-bash's write_file replaces the link).
    path = fs._resolve_path_with_symlinks(_str(args, 0))  # pyright: ignore[reportPrivateUsage]
    drive(fs.write_file(_in_a_folder(fs, path), payload))
    return None, b""


def _append(fs: HostFs, args: list[object], payload: bytes) -> tuple[object, bytes]:
    # just-bash's append_file does not follow a symlink at the last component; a shell does.
    path = drive(fs.realpath(_str(args, 0)))
    drive(fs.append_file(_in_a_folder(fs, path), payload))
    return None, b""


def _dirents(fs: HostFs, args: list[object], payload: bytes) -> tuple[object, bytes]:
    entries = drive(fs.readdir_with_file_types(_str(args, 0)))
    return [[e.name, e.is_file, e.is_directory, e.is_symbolic_link] for e in entries], b""


def _value(result: object) -> tuple[object, bytes]:
    return result, b""


_HANDLERS: dict[str, _Handler] = {
    "read": _read,
    "write": _write,
    "append": _append,
    "exists": lambda fs, a, p: _value(drive(fs.exists(_str(a, 0)))),
    "is_file": lambda fs, a, p: _value(drive(fs.is_file(_str(a, 0)))),
    "is_directory": lambda fs, a, p: _value(drive(fs.is_directory(_str(a, 0)))),
    "stat": lambda fs, a, p: _value(_stat_doc(drive(fs.stat(_str(a, 0))))),
    "lstat": lambda fs, a, p: _value(_stat_doc(drive(fs.lstat(_str(a, 0))))),
    "mkdir": lambda fs, a, p: _value(
        drive(fs.mkdir(_folders_resolved(fs, a, 0), recursive=_bool(a, 1)))
    ),
    "readdir": lambda fs, a, p: _value(drive(fs.readdir(_str(a, 0)))),
    "dirents": _dirents,
    "rm": lambda fs, a, p: _value(
        drive(fs.rm(_folders_resolved(fs, a, 0), recursive=_bool(a, 1), force=_bool(a, 2)))
    ),
    "cp": lambda fs, a, p: _value(
        drive(fs.cp(_str(a, 0), _folders_resolved(fs, a, 1), recursive=_bool(a, 2)))
    ),
    "mv": lambda fs, a, p: _value(
        drive(fs.mv(_folders_resolved(fs, a, 0), _folders_resolved(fs, a, 1)))
    ),
    "chmod": lambda fs, a, p: _value(drive(fs.chmod(_str(a, 0), _int(a, 1) & 0o7777))),
    "symlink": lambda fs, a, p: _value(drive(fs.symlink(_str(a, 0), _folders_resolved(fs, a, 1)))),
    "link": lambda fs, a, p: _value(
        drive(fs.link(_folders_resolved(fs, a, 0), _folders_resolved(fs, a, 1)))
    ),
    "readlink": lambda fs, a, p: _value(drive(fs.readlink(_str(a, 0)))),
    "utimes": lambda fs, a, p: _value(drive(fs.utimes(_str(a, 0), _number(a, 1), _number(a, 2)))),
    "realpath": lambda fs, a, p: _value(drive(fs.realpath(_str(a, 0)))),
    "paths": lambda fs, a, p: _value(fs.get_all_paths()),
}

# The error kinds a worker turns back into exceptions; anything else is reported as EIO.
_ERROR_KINDS: tuple[tuple[type[OSError], str], ...] = (
    (SandboxMemoryBudgetError, "ENOSPC"),
    (FileNotFoundError, "ENOENT"),
    (IsADirectoryError, "EISDIR"),
    (NotADirectoryError, "ENOTDIR"),
    (FileExistsError, "EEXIST"),
    (PermissionError, "EPERM"),
)


def serve_frame(
    fs: HostFs, method: str, args: list[object], payload: bytes
) -> tuple[list[object], bytes]:
    """Serve one worker request: the reply document and its payload."""
    handler = _HANDLERS.get(method)
    if handler is None:
        return ["err", "EINVAL", f"unknown filesystem request {method!r}"], b""
    for argument in args:
        if isinstance(argument, str) and len(argument) > PATH_MAX:
            return [
                "err",
                "ENAMETOOLONG",
                f"ENAMETOOLONG: a path of {len(argument)} characters is longer than {PATH_MAX}",
            ], b""
    try:
        value, data = handler(fs, args, payload)
    except RequestError as error:
        return ["err", "EINVAL", f"bad filesystem request {method!r}: {error}"], b""
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENAMETOOLONG) and error.strerror:
            return ["err", errno.errorcode[error.errno], error.strerror], b""
        for cls, kind in _ERROR_KINDS:
            if isinstance(error, cls):
                return ["err", kind, str(error)], b""
        return ["err", "EIO", str(error)], b""
    except (RecursionError, ValueError, TypeError, RuntimeError) as error:
        # Never an exception in the host for what a command asked: the command gets an error.
        return ["err", "EIO", f"{method}: {type(error).__name__}: {error}"], b""
    return ["ok", value], data
