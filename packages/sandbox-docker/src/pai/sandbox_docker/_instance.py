"""One Docker sandbox: a running container, used through exec and archive calls."""

from __future__ import annotations

import io
import logging
import posixpath
import re
import tarfile
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from anyio import from_thread

from pai.sandbox.provider import (
    DirEntry,
    EntryType,
    FileWrite,
    OutputCallback,
    RawCommandResult,
    SandboxDirectoryNotEmptyError,
    SandboxFileExistsError,
    SandboxFileNotFoundError,
    SandboxInputError,
    SandboxIsADirectoryError,
    SandboxNotADirectoryError,
    SandboxProviderError,
    SandboxVanishedError,
)
from pai.sandbox_docker._engine import MODE_DIR, MODE_SYMLINK, ExecStream, PathMissing
from pai.sandbox_docker._scripts import (
    EXISTS_SCRIPT,
    EXIT_EXISTS,
    EXIT_IS_DIR,
    EXIT_NOT_DIR,
    EXIT_NOT_EMPTY,
    EXIT_NOT_FOUND,
    IDS_SCRIPT,
    KILL_SCRIPT,
    LIST_SCRIPT,
    MAKE_DIR_SCRIPT,
    REMOVE_SCRIPT,
    RUN_MARKER,
    RUN_SCRIPT,
)

if TYPE_CHECKING:
    from pai.sandbox_docker._provider import DockerSandboxProvider

_log = logging.getLogger("pai.sandbox_docker")

_STAT_LINE = re.compile(r"^([a-z ]+)\|(\d+)\|(.*)$", re.DOTALL)


def _entry_type(kind: str) -> EntryType:
    if kind.startswith("regular"):
        return "file"
    if kind == "directory":
        return "directory"
    if kind == "symbolic link":
        return "symlink"
    return "other"


def dir_entry(name: str, mode: int, uid: int, gid: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    info.mode = mode
    info.uid, info.gid = uid, gid
    info.mtime = int(time.time())
    return info


class DockerSandboxInstance:
    """One sandbox: a running container (keyed by labels), used through exec and archive calls."""

    def __init__(
        self,
        provider: DockerSandboxProvider,
        key: str,
        container_id: str,
        ids: tuple[int, int] | None,
    ) -> None:
        self._provider = provider
        self._engine = provider.engine
        self._key = key
        self._id = container_id
        self._ids = ids

    @property
    def key(self) -> str:
        return self._key

    @property
    def instance_id(self) -> str:
        return self._id

    def __repr__(self) -> str:
        return f"DockerSandboxInstance(key={self._key!r}, container={self._id[:12]!r})"

    # -- helpers ------------------------------------------------------------------------------

    async def _sh(self, script: str, *args: str) -> tuple[int, bytes, bytes]:
        self._provider.touch(self._id)
        return await anyio.to_thread.run_sync(
            self._engine.exec_simple, self._id, ["sh", "-c", script, "pai", *args]
        )

    def _ids_sync(self) -> tuple[int, int]:
        if self._ids is None:
            code, out, err = self._engine.exec_simple(self._id, ["sh", "-c", IDS_SCRIPT])
            parts = out.split()
            if code != 0 or len(parts) != 2:
                raise SandboxProviderError(
                    f"could not tell the container user's uid/gid: {err.decode(errors='replace')}"
                )
            self._ids = (int(parts[0]), int(parts[1]))
        return self._ids

    @staticmethod
    def _failed(path: str, code: int, err: bytes, what: str) -> Exception:
        if code == EXIT_NOT_FOUND:
            return SandboxFileNotFoundError(path)
        if code == EXIT_NOT_DIR:
            return SandboxNotADirectoryError(path)
        if code == EXIT_IS_DIR:
            return SandboxIsADirectoryError(path)
        if code == EXIT_EXISTS:
            return SandboxFileExistsError(path)
        if code == EXIT_NOT_EMPTY:
            return SandboxDirectoryNotEmptyError(path)
        detail = err.decode(errors="replace").strip()
        return SandboxProviderError(f"{what} of {path!r} failed (exit {code}): {detail}")

    # -- commands -----------------------------------------------------------------------------

    async def run(
        self,
        command: str,
        *,
        cwd: str,
        env: Mapping[str, str],
        stdin: bytes | None,
        timeout: float | None,
        output_limit: int,
        on_stdout: OutputCallback | None = None,
        on_stderr: OutputCallback | None = None,
    ) -> RawCommandResult:
        if timeout is not None and timeout <= 0:
            raise SandboxInputError(f"timeout must be positive seconds or None, got {timeout!r}")
        self._provider.touch(self._id)
        marker = uuid.uuid4().hex
        holder = ExecStream()
        kept: dict[int, list[bytes]] = {1: [], 2: []}
        sizes = {1: 0, 2: 0}
        truncated = False
        callbacks = {1: on_stdout, 2: on_stderr}

        def on_frame(stream: int, chunk: bytes) -> None:
            nonlocal truncated
            if stream not in kept:
                return
            room = output_limit - sizes[stream]
            if room <= 0:
                truncated = True  # keep draining, keep nothing
                return
            if len(chunk) > room:
                chunk = chunk[:room]
                truncated = True
            kept[stream].append(chunk)
            sizes[stream] += len(chunk)
            callback = callbacks[stream]
            if callback is not None:
                from_thread.run_sync(callback, chunk)

        def work() -> int:
            stdin_path = ""
            if stdin is not None:
                stdin_path = f"/tmp/pai-stdin-{marker}"
                uid, gid = self._ids_sync()
                buffer = io.BytesIO()
                with tarfile.open(fileobj=buffer, mode="w") as archive:
                    info = tarfile.TarInfo(stdin_path.lstrip("/"))
                    info.size, info.mode, info.uid, info.gid = len(stdin), 0o600, uid, gid
                    info.mtime = int(time.time())
                    archive.addfile(info, io.BytesIO(stdin))
                self._engine.put_archive(self._id, "/", buffer.getvalue())
            exec_id = self._engine.exec_create(
                self._id,
                ["sh", "-c", RUN_SCRIPT, "pai", command, cwd, stdin_path],
                {**env, RUN_MARKER: marker},
            )
            self._engine.exec_stream(self._id, exec_id, holder, on_frame)
            return self._engine.exec_exit_code(self._id, exec_id)

        codes: list[int] = []
        done = anyio.Event()

        errors: list[Exception] = []

        async def worker() -> None:
            try:
                codes.append(await anyio.to_thread.run_sync(work, limiter=anyio.CapacityLimiter(1)))
            except Exception as error:  # re-raised below, outside the task group
                errors.append(error)
            finally:
                done.set()

        timed_out = False
        async with anyio.create_task_group() as group:
            group.start_soon(worker)
            try:
                with anyio.move_on_after(timeout):
                    await done.wait()
                if not done.is_set():
                    timed_out = True
                    with anyio.CancelScope(shield=True):
                        await self._stop(marker, holder, done)
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await self._stop(marker, holder, done)
                raise
        if errors:
            if not isinstance(errors[0], SandboxVanishedError):
                with anyio.CancelScope(shield=True):
                    await self._stop(marker, holder, done)  # e.g. a callback raised mid-stream
            raise errors[0]
        exit_code = codes[0] if codes else -1
        if timed_out and exit_code in (0, -1):
            exit_code = 137
        return RawCommandResult(
            stdout=b"".join(kept[1]),
            stderr=b"".join(kept[2]),
            exit_code=exit_code,
            timed_out=timed_out,
            truncated=truncated,
        )

    async def _stop(self, marker: str, holder: ExecStream, done: anyio.Event) -> None:
        """Kill everything the run started, inside the container; then cut the stream loose."""
        if not done.is_set():
            try:
                await anyio.to_thread.run_sync(
                    self._engine.exec_simple,
                    self._id,
                    ["sh", "-c", KILL_SCRIPT, "pai-kill", f"{RUN_MARKER}={marker}"],
                )
            except (SandboxVanishedError, SandboxProviderError) as error:
                _log.debug("killing a timed-out command failed: %s", error)
        with anyio.move_on_after(5):
            await done.wait()
        if not done.is_set():
            holder.abort()  # something escaped with our output pipe; stop reading it

    # -- files --------------------------------------------------------------------------------

    async def read_file(self, path: str) -> bytes:
        self._provider.touch(self._id)
        return await anyio.to_thread.run_sync(self._read_sync, path)

    def _read_sync(self, path: str) -> bytes:
        current = path
        for _ in range(16):  # follow symlinks a bounded number of times
            try:
                stat, data = self._engine.get_archive(self._id, current)
            except PathMissing:
                raise SandboxFileNotFoundError(path) from None
            except SandboxProviderError as error:
                if "not a directory" in str(error).lower():
                    raise SandboxNotADirectoryError(path) from None
                raise
            mode = int(stat.get("mode", 0))
            if mode & MODE_DIR:
                raise SandboxIsADirectoryError(path)
            if mode & MODE_SYMLINK:
                target = str(stat.get("linkTarget") or "")
                if not target:
                    raise SandboxFileNotFoundError(path, "a dangling symbolic link")
                current = posixpath.normpath(posixpath.join(posixpath.dirname(current), target))
                continue
            with tarfile.open(fileobj=io.BytesIO(data), mode="r") as archive:
                for member in archive:
                    if member.isfile():
                        extracted = archive.extractfile(member)
                        if extracted is not None:
                            return extracted.read()
            raise SandboxProviderError(f"{path!r} is not a regular file in the sandbox")
        raise SandboxFileNotFoundError(path, "too many levels of symbolic links")

    async def write_files(self, files: Sequence[FileWrite]) -> None:
        if not files:
            return
        self._provider.touch(self._id)
        await anyio.to_thread.run_sync(self._write_sync, list(files))

    def _write_sync(self, files: list[FileWrite]) -> None:
        uid, gid = self._ids_sync()
        workdir = self._provider.workdir.rstrip("/")
        now = int(time.time())
        buffer = io.BytesIO()
        added: set[str] = set()
        with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
            for file in files:
                # Parents inside the workspace become folder entries owned by the sandbox user
                # (the engine would make missing ones root-owned); folders outside it are left
                # to the engine, so /tmp and the like keep their owner and mode.
                parent = posixpath.dirname(file.path)
                chain: list[str] = []
                while parent.startswith(workdir + "/") and parent not in added:
                    chain.append(parent)
                    parent = posixpath.dirname(parent)
                for folder in reversed(chain):
                    added.add(folder)
                    archive.addfile(dir_entry(folder.lstrip("/"), 0o755, uid, gid))
                info = tarfile.TarInfo(file.path.lstrip("/"))
                info.size = len(file.content)
                info.mode = file.mode & 0o7777
                info.uid, info.gid = uid, gid
                info.mtime = now
                archive.addfile(info, io.BytesIO(file.content))
        self._engine.put_archive(self._id, "/", buffer.getvalue())

    async def list_dir(self, path: str) -> Sequence[DirEntry]:
        code, out, err = await self._sh(LIST_SCRIPT, path)
        if code != 0:
            raise self._failed(path, code, err, "list_dir")
        base = path.rstrip("/")
        prefix = base + "/"
        text = out.decode("utf-8", "surrogateescape")
        if text.endswith("\n"):
            text = text[:-1]
        parsed: list[list[Any]] = []
        for line in text.split("\n") if text else []:
            match = _STAT_LINE.match(line)
            if match and match.group(3).startswith(prefix):
                parsed.append([match.group(1), int(match.group(2)), match.group(3)])
            elif parsed:  # a name with a newline in it
                parsed[-1][2] += "\n" + line
        entries: list[DirEntry] = []
        for kind, size, full in parsed:
            name = str(full)[len(prefix) :]
            entry_type = _entry_type(str(kind))
            entries.append(
                DirEntry(
                    name,
                    posixpath.join(path, name),
                    entry_type,
                    0 if entry_type == "directory" else int(size),
                )
            )
        return sorted(entries, key=lambda entry: entry.name)

    async def remove(self, path: str, *, recursive: bool) -> None:
        if path == "/":
            raise SandboxInputError("refusing to remove '/', the sandbox's root folder")
        code, _, err = await self._sh(REMOVE_SCRIPT, path, "1" if recursive else "0")
        if code != 0:
            raise self._failed(path, code, err, "remove")

    async def make_dir(self, path: str, *, parents: bool) -> None:
        code, _, err = await self._sh(MAKE_DIR_SCRIPT, path, "1" if parents else "0")
        if code != 0:
            raise self._failed(path, code, err, "make_dir")

    async def exists(self, path: str) -> bool:
        code, _, err = await self._sh(EXISTS_SCRIPT, path)
        if code not in (0, 1):
            raise self._failed(path, code, err, "exists")
        return code == 0
