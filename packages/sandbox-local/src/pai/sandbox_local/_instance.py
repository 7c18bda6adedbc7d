"""One local sandbox's operations: commands and files, each one connection to its supervisor.

Files are handled by the supervisor too, inside the sandbox's mount namespace, so a symbolic
link a command made is followed as a program in the sandbox follows it, and never to the
host's files (the host's own view of ``/workspace`` is never used for an operation).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import cast

import anyio
import anyio.abc

from pai.sandbox import (
    DirEntry,
    EntryType,
    SandboxDirectoryNotEmptyError,
    SandboxError,
    SandboxFileExistsError,
    SandboxFileNotFoundError,
    SandboxFileTooLargeError,
    SandboxIsADirectoryError,
    SandboxNotADirectoryError,
    SandboxPathError,
    SandboxProviderError,
)
from pai.sandbox.provider import FileWrite, OutputCallback, RawCommandResult
from pai.sandbox_local._bwrap import Answer, SupervisorGoneError, parts, send
from pai.sandbox_local._errors import SupervisorUnresponsiveError
from pai.sandbox_local._quota import DiskWatch

Connect = Callable[[], Awaitable[anyio.abc.SocketStream]]
"""Opens a connection to the instance's supervisor, starting it when it is not running."""

Restart = Callable[[], None]
"""Ends the instance's processes (a supervisor that stopped answering); files are kept."""

GRACE = 5.0
"""Seconds past a command's timeout the host waits for the supervisor's own kill to be reported
before it ends the whole sandbox itself (a supervisor a command stopped or killed)."""

_SUPERVISOR_KILLED = (
    b"\npai-sandbox-local: the command ended the sandbox's supervisor (kill -9 -1 does), and "
    b"every process of the sandbox with it; the next command starts them again (files are "
    b"kept)\n"
)

FILE_DEADLINE = 30.0
"""Seconds a file operation may take before the host gives up on the supervisor."""

_FILE_ERRORS: dict[str, type[SandboxError]] = {
    "ENOENT": SandboxFileNotFoundError,
    "EISDIR": SandboxIsADirectoryError,
    "ENOTDIR": SandboxNotADirectoryError,
    "EEXIST": SandboxFileExistsError,
    "ENOTEMPTY": SandboxDirectoryNotEmptyError,
}
_TYPES: dict[object, EntryType] = {
    "file": "file",
    "directory": "directory",
    "symlink": "symlink",
    "other": "other",
}


class LocalSandboxInstance:
    """The operations of one local sandbox (see :mod:`pai.sandbox.provider` for the contract)."""

    def __init__(
        self,
        key: str,
        instance_id: str,
        connect: Connect,
        restart: Restart,
        env: Mapping[str, str],
        disk: DiskWatch | None = None,
    ) -> None:
        self._disk = disk
        self._env = dict(env)
        self._key = key
        self._instance_id = instance_id
        self._connect = connect
        self._restart = restart

    @property
    def key(self) -> str:
        return self._key

    @property
    def instance_id(self) -> str:
        return self._instance_id

    def __repr__(self) -> str:
        return f"LocalSandboxInstance(key={self._key!r}, instance_id={self._instance_id!r})"

    # -- commands -------------------------------------------------------------------------------

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
        request: dict[str, object] = {
            "script": command,
            "cwd": cwd,
            "env": {**self._env, **env},
            "stdin": stdin is not None,
            "timeout": timeout,
            "output_limit": output_limit,
        }
        callbacks = (on_stdout, on_stderr)
        disk = self._disk
        if disk is None:
            return await self._command(request, stdin, callbacks)
        if disk.over or disk.stale:
            await disk.refresh()  # files may have been removed (or written) since
        if disk.over:
            # Over the limit: the command may read and remove, and any write fails.
            result = await self._command({**request, "file_size": 0}, stdin, callbacks)
            if result.exit_code == 0:
                return result
            note = (
                f"\npai-sandbox-local: {disk.message(disk.used or 0)}; while it is, commands "
                "may read and remove files but not write them\n"
            )
            return dataclasses.replace(result, stderr=result.stderr + note.encode())
        disk.started()  # measured by the provider's disk thread meanwhile
        try:
            return await self._command(request, stdin, callbacks)
        finally:
            disk.ended()

    async def _command(
        self,
        request: dict[str, object],
        stdin: bytes | None,
        callbacks: tuple[OutputCallback | None, OutputCallback | None],
    ) -> RawCommandResult:
        output_limit = cast(int, request["output_limit"])
        timeout = cast("float | None", request["timeout"])
        streams: tuple[list[bytes], list[bytes]] = ([], [])
        deadline = math.inf if timeout is None else anyio.current_time() + timeout + GRACE
        stream = await self._connect()
        async with stream:
            with anyio.move_on_at(deadline):
                await send(stream, ["run", request], stdin or b"")
                answer = Answer(stream, max_payload=max(output_limit, 1 << 16))
                while True:
                    try:
                        document, payload = await answer.frame()
                    except SupervisorGoneError:
                        # A command killed the supervisor (kill -9 -1 does): every process of
                        # the sandbox is gone with it. Start afresh next time; files are kept.
                        self._restart()
                        return RawCommandResult(
                            stdout=b"".join(streams[0])[:output_limit],
                            stderr=b"".join(streams[1])[:output_limit] + self._gone_note(),
                            exit_code=137,
                        )
                    kind = document[0]
                    if kind == "out" and len(document) == 2 and document[1] in (1, 2):
                        index = 0 if document[1] == 1 else 1
                        streams[index].append(payload)
                        callback = callbacks[index]
                        if callback is not None and payload:
                            callback(payload)
                        continue
                    if kind == "exit" and len(document) == 2 and isinstance(document[1], dict):
                        result: dict[str, object] = document[1]  # pyright: ignore[reportUnknownVariableType]
                        return RawCommandResult(
                            stdout=b"".join(streams[0])[:output_limit],
                            stderr=b"".join(streams[1])[:output_limit],
                            exit_code=_int(result.get("code")),
                            timed_out=bool(result.get("timed_out")),
                            truncated=bool(result.get("truncated")),
                        )
                    if kind == "err":
                        raise SandboxProviderError(
                            f"the local sandbox {self._key!r} could not start the command: "
                            f"{document[2] if len(document) > 2 else document}"
                        )
                    raise SandboxProviderError(
                        f"the local sandbox's supervisor sent an unexpected answer {kind!r}"
                    )
        # The supervisor missed the deadline by GRACE seconds: a command stopped or killed it.
        self._restart()
        assert timeout is not None
        return RawCommandResult(
            stdout=b"".join(streams[0])[:output_limit],
            stderr=b"".join(streams[1])[:output_limit]
            + f"\npai-sandbox-local: the command timed out after {timeout:g} s; the sandbox's "
            "supervisor did not answer either, so every process of the sandbox was ended\n".encode(),
            exit_code=124,
            timed_out=True,
        )

    def _gone_note(self) -> bytes:
        """Why every process of the sandbox ended under a running command."""
        disk = self._disk
        if disk is not None and disk.exceeded is not None:
            return (
                f"\npai-sandbox-local: {disk.message(disk.exceeded)}; every process of the "
                "sandbox was stopped (the files are kept: remove some to write again)\n"
            ).encode()
        return _SUPERVISOR_KILLED

    # -- files ----------------------------------------------------------------------------------

    async def _ask(
        self,
        what: str,
        path: str,
        document: list[object],
        payload: bytes = b"",
        max_payload: int = 0,
    ) -> tuple[list[object], bytes]:
        stream = await self._connect()
        async with stream:
            with anyio.move_on_after(FILE_DEADLINE):
                await send(stream, document, payload)
                answer, data = await Answer(stream, max_payload=max_payload).frame()
                if answer[0] == "err":
                    name = str(answer[1]) if len(answer) > 1 else "EIO"
                    detail = str(answer[2]) if len(answer) > 2 else ""
                    where = answer[3] if len(answer) > 3 and isinstance(answer[3], str) else path
                    raise _file_error(name, where, detail, self._key)
                return answer, data
        self._restart()
        raise SupervisorUnresponsiveError(what, self._key, FILE_DEADLINE)

    async def read_file(self, path: str, *, max_bytes: int) -> bytes:
        answer, data = await self._ask(
            "reading", path, ["read", path, max_bytes], max_payload=max_bytes
        )
        if answer[0] == "too_large":
            raise SandboxFileTooLargeError(path, size=_int(answer[1]), limit=max_bytes)
        if answer[0] != "data":
            raise SandboxProviderError(f"the local sandbox's supervisor answered {answer[0]!r}")
        return data

    async def write_files(self, files: Sequence[FileWrite]) -> None:
        if not files:
            return
        entries, payload = parts([(f.path, f.mode, f.content) for f in files])
        if self._disk is not None:
            await self._disk.ensure_room(len(payload))
        # The supervisor stops at the entry that failed, and names its path.
        await self._ask("writing", files[0].path, ["write", entries], payload)

    async def list_dir(self, path: str) -> Sequence[DirEntry]:
        answer, _ = await self._ask("listing", path, ["list", path])
        raw = _list(answer[1]) if len(answer) > 1 else []
        entries: list[DirEntry] = []
        base = path.rstrip("/")
        for item in raw:
            fields = _list(item)
            if len(fields) != 3:
                raise SandboxProviderError("the local sandbox's supervisor sent a bad listing")
            name, kind, size = fields
            entries.append(
                DirEntry(
                    name=str(name),
                    path=f"{base}/{name}",
                    type=_TYPES.get(kind, "other"),
                    size=_int(size),
                )
            )
        return entries

    async def remove(self, path: str, *, recursive: bool) -> None:
        await self._ask("removing", path, ["remove", path, recursive])

    async def make_dir(self, path: str, *, parents: bool) -> None:
        await self._ask("making the folder", path, ["mkdir", path, parents])

    async def exists(self, path: str) -> bool:
        answer, _ = await self._ask("checking", path, ["exists", path])
        return bool(answer[1]) if len(answer) > 1 else False


def _list(value: object) -> list[object]:
    if isinstance(value, list):
        return cast("list[object]", value)
    raise SandboxProviderError(f"the local sandbox's supervisor sent {value!r} for a list")


def _int(value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise SandboxProviderError(f"the local sandbox's supervisor sent {value!r} for a number")


def _file_error(name: str, path: str, detail: str, key: str) -> SandboxError:
    kind = _FILE_ERRORS.get(name)
    if kind is not None:
        return kind(path)
    if name in ("ELOOP", "ENAMETOOLONG", "EINVAL", "EACCES", "EPERM", "EROFS"):
        return SandboxPathError(f"{path!r} in the local sandbox {key!r}: {detail} ({name})")
    if name in ("ENOSPC", "EFBIG", "EDQUOT"):
        return SandboxProviderError(
            f"writing {path!r} in the local sandbox {key!r} failed: {detail} ({name}): a limit "
            "of the sandbox was reached: raise file_size, disk or tmp_size, or free space on the disk of "
            "its state_dir"
        )
    return SandboxProviderError(f"{path!r} in the local sandbox {key!r}: {detail} ({name})")


__all__ = ["LocalSandboxInstance"]
