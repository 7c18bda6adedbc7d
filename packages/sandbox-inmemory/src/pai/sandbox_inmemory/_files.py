"""File operations on a :class:`HostFs`, with POSIX-like checks and ``pai.sandbox`` errors.

just-bash's ``InMemoryFs`` is lenient where a real filesystem is not (it writes "under" a file,
makes folders whose parent is a file, removes ``/``), so every operation checks its path first and
raises the matching ``Sandbox*Error`` naming the path the caller gave. Paths arrive absolute and
normalized (the facade resolves them). The coroutines here never suspend: the provider runs each
to its end with ``drive`` while it holds the instance's lock.
"""

from __future__ import annotations

import posixpath
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from pai.sandbox import (
    DirEntry,
    EntryType,
    SandboxDirectoryNotEmptyError,
    SandboxError,
    SandboxFileExistsError,
    SandboxFileNotFoundError,
    SandboxFileTooLargeError,
    SandboxInputError,
    SandboxIsADirectoryError,
    SandboxNotADirectoryError,
    SandboxProviderError,
)
from pai.sandbox.provider import FileWrite
from pai.sandbox_inmemory._errors import SandboxMemoryBudgetError
from pai.sandbox_inmemory._hostfs import HostFs

T = TypeVar("T")

_ERRORS_BY_CODE: dict[str, Callable[[str], SandboxError]] = {
    "ENOENT": SandboxFileNotFoundError,
    "EEXIST": SandboxFileExistsError,
    "EISDIR": SandboxIsADirectoryError,
    "ENOTDIR": SandboxNotADirectoryError,
    "ENOTEMPTY": SandboxDirectoryNotEmptyError,
}


def _translate(error: OSError, path: str) -> SandboxError:
    """A ``Sandbox*Error`` for an error of the in-memory filesystem (which sets no errno)."""
    if isinstance(error, FileNotFoundError):
        return SandboxFileNotFoundError(path)
    if isinstance(error, IsADirectoryError):
        return SandboxIsADirectoryError(path)
    if isinstance(error, NotADirectoryError):
        return SandboxNotADirectoryError(path)
    if isinstance(error, FileExistsError):
        return SandboxFileExistsError(path)
    code = str(error).split(":", 1)[0]
    make = _ERRORS_BY_CODE.get(code)
    if make is not None:
        return make(path)
    return SandboxProviderError(f"the in-memory filesystem failed on {path!r}: {error}")


async def _guard(path: str, operation: Callable[[], Awaitable[T]]) -> T:
    try:
        return await operation()
    except (SandboxError, SandboxMemoryBudgetError):
        raise
    except OSError as error:
        raise _translate(error, path) from error


async def _is_dir(fs: HostFs, path: str) -> bool | None:
    """``True`` for a folder, ``False`` for anything else, ``None`` when nothing is there."""
    try:
        return (await fs.stat(path)).is_directory
    except FileNotFoundError:
        return None


async def _check_parents(fs: HostFs, path: str) -> None:
    """Every ancestor of ``path`` exists and is a folder (symlinks followed)."""
    current = ""
    for part in path.strip("/").split("/")[:-1]:
        current += "/" + part
        kind = await _is_dir(fs, current)
        if kind is None:
            raise SandboxFileNotFoundError(path, f"{current} does not exist")
        if not kind:
            raise SandboxNotADirectoryError(path, f"{current} is not a directory")


async def _without_final_link(fs: HostFs, path: str) -> str:
    """``path`` with symlinks resolved in its folders but not in its last component."""
    if path == "/":
        return path
    return posixpath.join(await fs.realpath(posixpath.dirname(path)), posixpath.basename(path))


async def _lexists(fs: HostFs, path: str) -> bool:
    try:
        await fs.lstat(path)
    except FileNotFoundError:
        return False
    return True


async def check_workdir(fs: HostFs, path: str) -> None:
    """``path`` is an existing folder, fit to be a command's working directory."""

    async def check() -> None:
        await _check_parents(fs, path)
        kind = await _is_dir(fs, path)
        if kind is None:
            raise SandboxFileNotFoundError(path, "the command's working directory does not exist")
        if not kind:
            raise SandboxNotADirectoryError(path, "the command's working directory is a file")

    await _guard(path, check)


async def read_file(fs: HostFs, path: str, max_bytes: int) -> bytes:
    async def read() -> bytes:
        await _check_parents(fs, path)
        kind = await _is_dir(fs, path)
        if kind is None:
            raise SandboxFileNotFoundError(path)
        if kind:
            raise SandboxIsADirectoryError(path)
        size = fs.size_of(path)
        if size is not None and size > max_bytes:
            raise SandboxFileTooLargeError(path, size=size, limit=max_bytes)
        return bytes(await fs.read_file_bytes(path))

    return await _guard(path, read)


async def write_files(fs: HostFs, files: Sequence[FileWrite]) -> None:
    for file in files:

        async def write(file: FileWrite = file) -> None:
            target = await fs.realpath(file.path)  # writing through a symlink writes its target
            current = ""
            for part in target.strip("/").split("/")[:-1]:
                current += "/" + part
                kind = await _is_dir(fs, current)
                if kind is None:
                    await fs.mkdir(current)
                elif not kind:
                    raise SandboxNotADirectoryError(file.path, f"{current} is not a directory")
            if await _is_dir(fs, target):
                raise SandboxIsADirectoryError(file.path)
            await fs.write_file(target, file.content)
            await fs.chmod(target, file.mode & 0o7777)

        await _guard(file.path, write)


async def list_dir(fs: HostFs, path: str) -> list[DirEntry]:
    async def listing() -> list[DirEntry]:
        await _check_parents(fs, path)
        kind = await _is_dir(fs, path)
        if kind is None:
            raise SandboxFileNotFoundError(path)
        if not kind:
            raise SandboxNotADirectoryError(path)
        real = await fs.realpath(path)
        entries: list[DirEntry] = []
        for child in await fs.readdir_with_file_types(real):
            info = await fs.lstat(posixpath.join(real, child.name))
            entry_type: EntryType
            if info.is_symbolic_link:
                entry_type = "symlink"
            elif info.is_directory:
                entry_type = "directory"
            elif info.is_file:
                entry_type = "file"
            else:
                entry_type = "other"
            size = 0 if entry_type == "directory" else info.size
            entries.append(DirEntry(child.name, posixpath.join(path, child.name), entry_type, size))
        return sorted(entries, key=lambda entry: entry.name)

    return await _guard(path, listing)


async def remove(fs: HostFs, path: str, *, recursive: bool) -> None:
    if path == "/":
        raise SandboxInputError("refusing to remove '/', the sandbox's root folder")

    async def delete() -> None:
        await _check_parents(fs, path)
        target = await _without_final_link(fs, path)  # remove a symlink, not what it points to
        try:
            info = await fs.lstat(target)
        except FileNotFoundError:
            raise SandboxFileNotFoundError(path) from None
        if info.is_directory and not recursive and await fs.readdir(target):
            raise SandboxDirectoryNotEmptyError(path)
        await fs.rm(target, recursive=recursive)

    await _guard(path, delete)


async def make_dir(fs: HostFs, path: str, *, parents: bool) -> None:
    async def make() -> None:
        if not parents:
            await _check_parents(fs, path)
            target = await _without_final_link(fs, path)
            if await _lexists(fs, target):
                raise SandboxFileExistsError(path)
            await fs.mkdir(target)
            return
        parts = [part for part in path.split("/") if part]
        current = "/"
        for index, part in enumerate(parts):
            current = await fs.realpath(posixpath.join(current, part))
            kind = await _is_dir(fs, current)
            if kind is None:
                await fs.mkdir(current)
            elif not kind:
                if index == len(parts) - 1:
                    raise SandboxFileExistsError(path, "it is a file, not a directory")
                raise SandboxNotADirectoryError(path, f"{current} is not a directory")

    await _guard(path, make)


async def exists(fs: HostFs, path: str) -> bool:
    return await _guard(path, lambda: fs.exists(path))
