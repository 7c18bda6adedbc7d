"""envd, as one sandbox's E2B agent answers: the process and filesystem services (Connect
RPC), ``/files`` and ``/health``.

Written from envd's handlers (``e2b-dev/infra``, ``packages/envd``): the same status codes,
the same messages, the same entry fields for the envd version the emulator reports.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import errno
import gzip
import os
import shutil
import stat
import zlib
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any, cast

from packaging.version import Version

from pai.sandbox_e2b.testing._asgi import (
    Receive,
    Send,
    read_body,
    send_empty,
    send_error,
    send_json,
)
from pai.sandbox_e2b.testing._machine import (
    DEFAULT_USER,
    PATH,
    USERS,
    MachineError,
    User,
)
from pai.sandbox_e2b.testing._paths import (
    LinkLoopError,
    PathError,
    eval_symlinks,
    expand_and_resolve,
    go_base,
    go_clean,
    go_mode_string,
    opened_inside,
    resolve_in_root,
)
from pai.sandbox_e2b.testing._state import Emulation, Process, Sandbox

#: The newest envd version whose entries carry no ``is_symlink`` (a link's ``type`` is its
#: target's either way).
LAST_ENVD_WITHOUT_IS_SYMLINK = Version("0.6.13")

#: envd's keepalive interval on a stream whose client asks for none (seconds).
_DEFAULT_KEEPALIVE = 90.0

# Go's names of the signals (syscall.Signal.String on Linux), as envd's End event says them.
_GO_SIGNALS = {
    1: "hangup",
    2: "interrupt",
    3: "quit",
    4: "illegal instruction",
    5: "trace/breakpoint trap",
    6: "aborted",
    7: "bus error",
    8: "floating point exception",
    9: "killed",
    10: "user defined signal 1",
    11: "segmentation fault",
    12: "user defined signal 2",
    13: "broken pipe",
    14: "alarm clock",
    15: "terminated",
    16: "stack fault",
    17: "child exited",
    18: "continued",
    19: "stopped (signal)",
    20: "stopped",
    21: "stopped (tty input)",
    22: "stopped (tty output)",
    23: "urgent I/O condition",
    24: "CPU time limit exceeded",
    25: "file size limit exceeded",
    26: "virtual timer expired",
    27: "profiling timer expired",
    28: "window changed",
    29: "I/O possible",
    30: "power failure",
    31: "bad system call",
}


def end_of(returncode: int) -> tuple[int, bool, str, str | None]:
    """envd's End event for a process that ended with ``returncode`` (Python's: minus the
    signal when a signal ended it): ``exit_code``, ``exited``, ``status``, ``error``, as Go's
    ``ProcessState`` gives them (a signal is exit code -1 and ``signal: killed``)."""
    if returncode >= 0:
        status = f"exit status {returncode}"
        return returncode, True, status, (status if returncode else None)
    number = -returncode
    status = f"signal: {_GO_SIGNALS.get(number, f'signal {number}')}"
    return -1, False, status, status


def _strerror(error: OSError) -> str:
    """An OS error as Go spells it (``no such file or directory``)."""
    text = os.strerror(error.errno) if error.errno else str(error)
    return text[:1].lower() + text[1:]


def _go_path_error(operation: str, path: str, error: OSError) -> str:
    return f"{operation} {path}: {_strerror(error)}"


# -- users -------------------------------------------------------------------------------------


class UnknownUserError(Exception):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def user_from_authorization(value: str | None) -> User:
    """The user an RPC runs as: the name in its ``Authorization: Basic`` header (envd's
    ``AuthenticateUsername``), else envd's default user."""
    if not value:
        return DEFAULT_USER
    scheme, _, encoded = value.strip().partition(" ")
    if scheme.lower() != "basic":
        return DEFAULT_USER
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return DEFAULT_USER
    name, colon, _ = decoded.partition(":")
    if not colon:
        return DEFAULT_USER
    user = USERS.get(name)
    if user is None:
        raise UnknownUserError(name)
    return user


# -- entries -----------------------------------------------------------------------------------


def _owner(info: os.stat_result, user: User) -> tuple[str, str]:
    # The sandbox's files belong to the emulator's own user, which each sandbox user sees as
    # itself; anything else the host owns is unmapped there.
    if info.st_uid == os.getuid():
        return user.name, user.name
    return "nobody", "nogroup"


def entry_info(
    filesystem_pb: Any, sandbox: Sandbox, user: User, path: str, *, shown: str | None = None
) -> Any:
    """envd's ``EntryInfo`` for the sandbox ``path`` (not following a last link), as the
    sandbox's envd version sends it; ``shown`` replaces the path it reports. Raises
    :class:`FileNotFoundError` (and other :class:`OSError`) as ``os.Lstat`` would."""
    from protobuf.wkt.google.protobuf.timestamp_pb import Timestamp

    try:
        host, _ = resolve_in_root(sandbox.root, path, follow_last=False)
    except LinkLoopError as error:
        raise OSError(errno.ELOOP, str(error)) from None
    info = host.lstat()
    kind = filesystem_pb.FileType.UNSPECIFIED
    link_target: str | None = None
    mode = info.st_mode & 0o777
    if stat.S_ISLNK(info.st_mode):
        link_target = eval_symlinks(sandbox.root, path) or path
        try:
            target_host, _ = resolve_in_root(sandbox.root, link_target)
            target_info: os.stat_result | None = target_host.stat()
        except (OSError, LinkLoopError):
            target_info = None
        mode = target_info.st_mode & 0o777 if target_info is not None else 0
        if target_info is not None:
            kind = _kind(filesystem_pb, target_info.st_mode)
    else:
        kind = _kind(filesystem_pb, info.st_mode)
    modified = Timestamp()
    modified.seconds = int(info.st_mtime_ns // 1_000_000_000)
    modified.nanos = int(info.st_mtime_ns % 1_000_000_000)
    owner, group = _owner(info, user)
    fields: dict[str, Any] = {
        "name": go_base(path),
        "type": kind,
        "path": shown if shown is not None else path,
        "size": info.st_size,
        "mode": mode,
        "permissions": go_mode_string(info.st_mode),
        "owner": owner,
        "group": group,
        "modified_time": modified,
        "symlink_target": link_target,
    }
    if Version(sandbox.envd_version) > LAST_ENVD_WITHOUT_IS_SYMLINK:
        fields["is_symlink"] = link_target is not None
    return filesystem_pb.EntryInfo(**fields)


def _kind(filesystem_pb: Any, mode: int) -> Any:
    if stat.S_ISREG(mode):
        return filesystem_pb.FileType.FILE
    if stat.S_ISDIR(mode):
        return filesystem_pb.FileType.DIRECTORY
    return filesystem_pb.FileType.UNSPECIFIED


# -- the Connect services ----------------------------------------------------------------------


def services(emulation: Emulation) -> tuple[Any, Any]:
    """The Connect ASGI applications of envd's process and filesystem services."""
    from connectrpc.code import Code
    from connectrpc.errors import ConnectError
    from e2b.envd.filesystem import filesystem_connect, filesystem_pb
    from e2b.envd.process import process_connect, process_pb
    from protobuf import Oneof

    def sandbox_of(ctx: Any) -> tuple[Sandbox, User]:
        headers = ctx.request_headers
        sandbox_id = str(headers.get("e2b-sandbox-id") or "")
        sandbox = emulation.get(sandbox_id, running=True)
        if sandbox is None:
            raise ConnectError(Code.UNAVAILABLE, f"The sandbox {sandbox_id} was not found")
        if headers.get("x-access-token") != sandbox.access_token:
            raise ConnectError(Code.UNAUTHENTICATED, "invalid or missing X-Access-Token")
        try:
            user = user_from_authorization(headers.get("authorization"))
        except UnknownUserError as error:
            raise ConnectError(Code.UNAUTHENTICATED, f"invalid username: '{error.name}'") from None
        return sandbox, user

    def expanded(path: str, user: User) -> str:
        try:
            return expand_and_resolve(path, user)
        except PathError as error:
            raise ConnectError(Code.INVALID_ARGUMENT, str(error)) from None

    def entry(sandbox: Sandbox, user: User, path: str, shown: str | None = None) -> Any:
        try:
            return entry_info(filesystem_pb, sandbox, user, path, shown=shown)
        except FileNotFoundError as error:
            raise ConnectError(
                Code.NOT_FOUND, f"file not found: {_go_path_error('lstat', path, error)}"
            ) from None
        except OSError as error:
            raise ConnectError(
                Code.INTERNAL, f"error getting file info: {_go_path_error('lstat', path, error)}"
            ) from None

    def ensure_dirs(sandbox: Sandbox, path: str) -> None:
        """envd's ``EnsureDirs``: every folder of ``path`` made as needed (one that is a file
        is an error; nothing after it is made)."""
        parts = [p for p in go_clean(path).split("/") if p]
        for count in range(1, len(parts) + 1):
            subpath = "/" + "/".join(parts[:count])
            try:
                host, _ = resolve_in_root(sandbox.root, subpath)
            except LinkLoopError as error:
                raise _Internal(f"failed to stat directory: stat {subpath}: {error}") from None
            if host.is_dir():
                continue
            if os.path.lexists(host) and not host.is_symlink():
                raise _Internal(f"path is a file: {subpath}")
            try:
                host.mkdir(mode=0o755)
            except FileExistsError:
                if not host.is_dir():
                    raise _Internal(f"path is a file: {subpath}") from None
            except OSError as error:
                raise _Internal(
                    f"failed to create directory: {_go_path_error('mkdir', subpath, error)}"
                ) from None

    class FilesystemService(filesystem_connect.Filesystem):
        async def stat(self, request: Any, ctx: Any, /) -> Any:
            sandbox, user = sandbox_of(ctx)
            path = expanded(request.path, user)
            return filesystem_pb.StatResponse(entry=entry(sandbox, user, path))

        async def make_dir(self, request: Any, ctx: Any, /) -> Any:
            sandbox, user = sandbox_of(ctx)
            path = expanded(request.path, user)
            try:
                host, _ = resolve_in_root(sandbox.root, path)
                info = host.stat()
            except FileNotFoundError:
                info = None
            except (OSError, LinkLoopError) as error:
                detail = _strerror(error) if isinstance(error, OSError) else str(error)
                raise ConnectError(
                    Code.INTERNAL, f"error getting file info: stat {path}: {detail}"
                ) from None
            if info is not None:
                if stat.S_ISDIR(info.st_mode):
                    raise ConnectError(Code.ALREADY_EXISTS, f"directory already exists: {path}")
                raise ConnectError(
                    Code.INVALID_ARGUMENT,
                    f"path already exists but it is not a directory: {path}",
                )
            try:
                ensure_dirs(sandbox, path)
            except _Internal as error:
                raise ConnectError(Code.INTERNAL, str(error)) from None
            return filesystem_pb.MakeDirResponse(entry=entry(sandbox, user, path))

        async def move(self, request: Any, ctx: Any, /) -> Any:
            sandbox, user = sandbox_of(ctx)
            source = expanded(request.source, user)
            destination = expanded(request.destination, user)
            try:
                ensure_dirs(sandbox, os.path.dirname(go_clean(destination)))
            except _Internal as error:
                raise ConnectError(Code.INTERNAL, str(error)) from None
            try:
                source_host, _ = resolve_in_root(sandbox.root, source, follow_last=False)
                target_host, _ = resolve_in_root(sandbox.root, destination, follow_last=False)
                os.rename(source_host, target_host)
            except FileNotFoundError as error:
                raise ConnectError(
                    Code.NOT_FOUND,
                    f"source file not found: rename {source} {destination}: {_strerror(error)}",
                ) from None
            except (OSError, LinkLoopError) as error:
                detail = _strerror(error) if isinstance(error, OSError) else str(error)
                raise ConnectError(
                    Code.INTERNAL, f"error renaming: rename {source} {destination}: {detail}"
                ) from None
            return filesystem_pb.MoveResponse(entry=entry(sandbox, user, destination))

        async def list_dir(self, request: Any, ctx: Any, /) -> Any:
            sandbox, user = sandbox_of(ctx)
            depth = int(request.depth or 0) or 1
            requested = expanded(request.path, user)
            try:
                host, resolved = resolve_in_root(sandbox.root, requested)
            except LinkLoopError:
                raise ConnectError(
                    Code.FAILED_PRECONDITION,
                    f'cyclic symlink or chain >255 links at "{requested}"',
                ) from None
            if not (host.is_symlink() or host.exists()):
                raise ConnectError(
                    Code.NOT_FOUND,
                    f"path not found: lstat {resolved}: no such file or directory",
                )
            if not host.is_dir():
                raise ConnectError(Code.INVALID_ARGUMENT, f"path is not a directory: {resolved}")
            found: list[Any] = []

            def walk(folder: Path, inside: str, relative: str, level: int) -> None:
                try:
                    names = sorted(os.listdir(folder))
                except OSError as error:
                    raise ConnectError(
                        Code.INTERNAL,
                        f"error reading directory {resolved}: open {inside}: {_strerror(error)}",
                    ) from None
                for name in names:
                    child_inside = inside.rstrip("/") + "/" + name
                    child_relative = f"{relative}/{name}" if relative else name
                    try:
                        found.append(
                            entry_info(
                                filesystem_pb,
                                sandbox,
                                user,
                                child_inside,
                                shown=go_clean(requested + "/" + child_relative),
                            )
                        )
                    except FileNotFoundError:
                        continue  # gone meanwhile: envd skips it
                    except OSError as error:
                        raise ConnectError(Code.INTERNAL, str(error)) from None
                    child = folder / name
                    if level < depth and child.is_dir() and not child.is_symlink():
                        walk(child, child_inside, child_relative, level + 1)

            walk(host, resolved, "", 1)
            return filesystem_pb.ListDirResponse(entries=found)

        async def remove(self, request: Any, ctx: Any, /) -> Any:
            sandbox, user = sandbox_of(ctx)
            path = expanded(request.path, user)
            try:
                host, shown = resolve_in_root(sandbox.root, path, follow_last=False)
            except LinkLoopError as error:
                raise ConnectError(
                    Code.INTERNAL, f"error removing file or directory: {error}"
                ) from None
            if shown == "/":
                # envd would empty the whole VM; the emulator keeps the sandbox whole.
                raise ConnectError(
                    Code.INTERNAL, "error removing file or directory: refusing to remove /"
                )
            try:
                if host.is_symlink() or not host.is_dir():
                    host.unlink()
                else:
                    shutil.rmtree(host)
            except FileNotFoundError:
                pass  # os.RemoveAll: a missing path is already removed
            except OSError as error:
                raise ConnectError(
                    Code.INTERNAL,
                    f"error removing file or directory: {_go_path_error('unlinkat', path, error)}",
                ) from None
            return filesystem_pb.RemoveResponse()

    def oneof(value: object) -> tuple[str, object] | None:
        if isinstance(value, Oneof):
            chosen = cast("Oneof[str, object]", value)
            return str(chosen.field), chosen.value
        return None

    def event(**kwargs: Any) -> Any:
        return process_pb.StartResponse(event=process_pb.ProcessEvent(**kwargs))

    class ProcessService(process_connect.Process):
        async def list(self, request: Any, ctx: Any, /) -> Any:
            sandbox, _ = sandbox_of(ctx)
            return process_pb.ListResponse(
                processes=[
                    process_pb.ProcessInfo(
                        pid=p.pid,
                        tag=p.tag,
                        config=process_pb.ProcessConfig(
                            cmd=p.cmd, args=p.args, envs=p.envs, cwd=p.cwd
                        ),
                    )
                    for p in sandbox.processes.values()
                ]
            )

        def _process(self, ctx: Any, selector: Any) -> Process:
            sandbox, _ = sandbox_of(ctx)
            chosen = oneof(selector.selector if selector is not None else None)
            if chosen is not None and chosen[0] == "pid":
                found = sandbox.processes.get(cast("int", chosen[1]))
                if found is None:
                    raise ConnectError(Code.NOT_FOUND, f"process with pid {chosen[1]} not found")
                return found
            tag = chosen[1] if chosen is not None else ""
            for process in sandbox.processes.values():
                if process.tag is not None and process.tag == tag:
                    return process
            raise ConnectError(Code.NOT_FOUND, f"process with tag {tag} not found")

        async def send_signal(self, request: Any, ctx: Any, /) -> Any:
            process = self._process(ctx, request.process)
            number = int(request.signal)
            if number not in (signal_kill, signal_term):
                try:
                    name = "SIGNAL_" + process_pb.Signal(number).name
                except ValueError:
                    name = str(number)
                raise ConnectError(Code.UNIMPLEMENTED, f"invalid signal: {name}")
            # envd stops waiting for the output of a process it kills or terminates; a process
            # that ended but is still tracked takes the signal as a zombie would (no error).
            process.output_cancelled.set()
            process.spawned.signal(number)
            return process_pb.SendSignalResponse()

        async def send_input(self, request: Any, ctx: Any, /) -> Any:
            process = self._process(ctx, request.process)
            chosen = oneof(request.input.input if request.input is not None else None)
            if chosen is None or chosen[0] != "stdin":
                raise ConnectError(
                    Code.INTERNAL, "error writing to tty: tty not assigned to process"
                )
            stream = process.spawned.proc.stdin
            async with process.stdin_lock:
                if stream is None or not process.stdin_open:
                    raise ConnectError(
                        Code.INTERNAL, "error writing to stdin: stdin not enabled or closed"
                    )
                try:
                    stream.write(bytes(cast("bytes", chosen[1])))
                    await stream.drain()
                except (BrokenPipeError, ConnectionResetError):
                    raise ConnectError(
                        Code.INTERNAL,
                        "error writing to stdin: error writing to stdin of process "
                        f"'{process.pid}': write |1: broken pipe",
                    ) from None
            return process_pb.SendInputResponse()

        async def close_stdin(self, request: Any, ctx: Any, /) -> Any:
            process = self._process(ctx, request.process)
            stream = process.spawned.proc.stdin
            async with process.stdin_lock:
                if stream is not None and process.stdin_open:
                    process.stdin_open = False
                    stream.close()
                    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                        await stream.wait_closed()
            return process_pb.CloseStdinResponse()

        async def start(self, request: Any, ctx: Any, /) -> AsyncIterator[Any]:
            sandbox, user = sandbox_of(ctx)
            config = request.process or process_pb.ProcessConfig()
            with_stdin = request.stdin if request.has_field("stdin") else True
            command = " ".join([config.cmd, *config.args])
            cwd = expanded(config.cwd if config.has_field("cwd") else "", user)
            try:
                host_cwd, _ = resolve_in_root(sandbox.root, cwd)
                cwd_exists = host_cwd.exists()
            except LinkLoopError:
                host_cwd, cwd_exists = None, False
            if not cwd_exists:
                raise ConnectError(Code.INVALID_ARGUMENT, f"cwd '{cwd}' does not exist")
            if host_cwd is not None and not host_cwd.is_dir():
                raise ConnectError(
                    Code.INVALID_ARGUMENT,
                    f"error starting process '{command}': chdir {cwd}: not a directory",
                )
            envs = dict(config.envs)
            env = {
                "PATH": PATH,
                "HOME": user.home,
                "USER": user.name,
                "LOGNAME": user.name,
                "E2B_SANDBOX": "true",
                "E2B_SANDBOX_ID": sandbox.sandbox_id,
                **sandbox.env_vars,
                **envs,
            }
            timeout_ms = ctx.timeout_ms
            keepalive = _keepalive_interval(ctx.request_headers.get("keepalive-ping-interval"))
            try:
                spawned = await sandbox.machine.spawn(
                    user, [config.cmd, *config.args], env, cwd, stdin=with_stdin
                )
            except MachineError as error:
                if emulation.get(sandbox.sandbox_id, running=True) is None:
                    raise ConnectError(
                        Code.UNAVAILABLE, f"The sandbox {sandbox.sandbox_id} was not found"
                    ) from None
                raise ConnectError(
                    Code.INVALID_ARGUMENT, f"error starting process '{command}': {error}"
                ) from None
            process = Process(
                spawned,
                config.cmd,
                list(config.args),
                envs,
                cwd,
                request.tag if request.has_field("tag") else None,
                stdin_open=with_stdin,
            )
            sandbox.processes[process.pid] = process
            process.reaper = asyncio.create_task(forget_when_done(sandbox, process))
            loop = asyncio.get_running_loop()
            if timeout_ms is not None:

                def at_deadline() -> None:
                    # envd's process context: only the process itself is killed (SIGKILL).
                    process.killed_at_deadline = True
                    process.output_cancelled.set()
                    process.spawned.signal(signal_kill)

                process.deadline = loop.call_later(max(0.0, timeout_ms / 1000), at_deadline)
            async for item in stream(sandbox, process, keepalive):
                yield item

    drains: set[asyncio.Task[None]] = set()
    signal_kill = int(process_pb.Signal.SIGKILL)
    signal_term = int(process_pb.Signal.SIGTERM)

    async def forget_when_done(sandbox: Sandbox, process: Process) -> None:
        # envd tracks a process until it ends and its output closed (or it stopped waiting
        # for the output: a kill, a term, the deadline), whether or not a client streams it.
        await process.spawned.exited
        closed = asyncio.ensure_future(process.spawned.proc.wait())
        stopped = asyncio.ensure_future(process.output_cancelled.wait())
        await asyncio.wait({closed, stopped}, return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        if process.deadline is not None:
            process.deadline.cancel()
        if sandbox.processes.get(process.pid) is process:
            del sandbox.processes[process.pid]
        process.spawned.close()

    async def stream(sandbox: Sandbox, process: Process, keepalive: float) -> AsyncIterator[Any]:
        queue: asyncio.Queue[tuple[str, bytes] | None] = asyncio.Queue(maxsize=64)
        proc = process.spawned.proc

        async def pump(name: str, reader: asyncio.StreamReader | None) -> None:
            while reader is not None:
                chunk = await reader.read(32 * 1024)
                if not chunk:
                    break
                await queue.put((name, chunk))
            await queue.put(None)

        readers = [
            asyncio.create_task(pump("stdout", proc.stdout)),
            asyncio.create_task(pump("stderr", proc.stderr)),
        ]
        cancelled = asyncio.create_task(process.output_cancelled.wait())
        exited = process.spawned.exited
        finished = False
        try:
            yield event(event=Oneof("start", process_pb.ProcessEvent.StartEvent(pid=process.pid)))
            open_streams = 2
            # envd waits for both pipes to close, unless it stopped waiting (a kill, a term,
            # the deadline): then for the process alone.
            while open_streams and not (cancelled.done() and exited.done()):
                getter = asyncio.create_task(queue.get())
                waiting: set[asyncio.Future[Any]] = {getter}
                if cancelled.done():
                    waiting.add(exited)
                else:
                    waiting.add(cancelled)
                done, _ = await asyncio.wait(
                    waiting, timeout=keepalive, return_when=asyncio.FIRST_COMPLETED
                )
                if getter not in done:
                    getter.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await getter
                    if not done:  # nothing for a whole interval
                        yield event(event=Oneof("keepalive", process_pb.ProcessEvent.KeepAlive()))
                    continue
                item = getter.result()
                if item is None:
                    open_streams -= 1
                    continue
                name, chunk = item
                output: Any = Oneof(name, chunk)
                yield event(event=Oneof("data", process_pb.ProcessEvent.DataEvent(output=output)))
            code = await exited
            # What the pipes still held when envd closed them.
            while not queue.empty():
                item = queue.get_nowait()
                if item is not None:
                    output = Oneof(item[0], item[1])
                    yield event(
                        event=Oneof("data", process_pb.ProcessEvent.DataEvent(output=output))
                    )
            finished = True
        finally:
            if not finished:
                # A client that went away leaves the process running, as envd does (its
                # deadline still holds), and its output is read and dropped, so a full pipe
                # never stops it.
                for reader, pipe in zip(readers, (proc.stdout, proc.stderr), strict=True):
                    reader.cancel()
                    if pipe is not None:
                        drain = asyncio.create_task(_discard(pipe))
                        drains.add(drain)
                        drain.add_done_callback(drains.discard)
            else:
                for reader in readers:
                    reader.cancel()
                if cancelled.done():
                    process.spawned.close_output()
            cancelled.cancel()
        if emulation.get(sandbox.sandbox_id, running=True) is None:
            # The sandbox went away under the command (expired, killed, paused): E2B's proxy
            # cuts the stream with its "not found" answer.
            raise ConnectError(Code.UNAVAILABLE, f"The sandbox {sandbox.sandbox_id} was not found")
        if process.killed_at_deadline:
            raise ConnectError(Code.DEADLINE_EXCEEDED, "context deadline exceeded")
        exit_code, exited_normally, status, error = end_of(code)
        yield event(
            event=Oneof(
                "end",
                process_pb.ProcessEvent.EndEvent(
                    exit_code=exit_code, exited=exited_normally, status=status, error=error
                ),
            )
        )

    return (
        process_connect.ProcessASGIApplication(ProcessService()),
        filesystem_connect.FilesystemASGIApplication(FilesystemService()),
    )


async def _discard(pipe: asyncio.StreamReader) -> None:
    while await pipe.read(64 * 1024):
        pass


class _Internal(Exception):
    """An envd error answered with code ``internal`` (500 on ``/files``)."""


def _keepalive_interval(value: str | None) -> float:
    """envd's keepalive interval: the ``Keepalive-Ping-Interval`` header's whole seconds, or
    90 when it is missing or not a number."""
    try:
        seconds = int((value or "").strip())
    except ValueError:
        return _DEFAULT_KEEPALIVE
    # envd's ticker refuses an interval of zero or less (Go panics); the default stands in.
    return float(seconds) if seconds > 0 else _DEFAULT_KEEPALIVE


# -- /files and /health ------------------------------------------------------------------------


class _FilesError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


# Go's mime.ParseMediaType: the characters a backslash escapes in a quoted parameter.
_TSPECIALS = set('()<>@,;:\\"/[]?=')


def _media_parameters(value: str) -> tuple[str, dict[str, str]]:
    """A header value's media type and parameters, as Go's ``mime.ParseMediaType`` reads
    them: no percent-decoding (``%22`` stays ``%22``), a backslash escapes only a special
    character. Raises :class:`ValueError` as Go does for a malformed value."""
    media, _, rest = value.partition(";")
    media = media.strip().lower()
    if not media:
        raise ValueError("mime: no media type")
    parameters: dict[str, str] = {}
    while rest.strip():
        rest = rest.lstrip(" \t")
        if rest.startswith(";"):
            rest = rest[1:]
            continue
        key, equals, rest = rest.partition("=")
        key = key.strip().lower()
        if not equals or not key:
            raise ValueError("mime: invalid media parameter")
        if rest.startswith('"'):
            out: list[str] = []
            index = 1
            while True:
                if index >= len(rest):
                    raise ValueError("mime: invalid media parameter")
                char = rest[index]
                if char == '"':
                    break
                if char == "\\" and index + 1 < len(rest) and rest[index + 1] in _TSPECIALS:
                    out.append(rest[index + 1])
                    index += 2
                    continue
                if char in "\r\n":
                    raise ValueError("mime: invalid media parameter")
                out.append(char)
                index += 1
            parsed = "".join(out)
            rest = rest[index + 1 :]
        else:
            token, _, rest = rest.partition(";")
            parsed = token.strip()
            rest = ";" + rest if rest else ""
        if key in parameters:
            raise ValueError("mime: duplicate parameter name")
        parameters[key] = parsed
    return media, parameters


def _multipart(body: bytes, content_type: str) -> list[tuple[str, str | None, bytes]]:
    """(form name, file name or ``None``, content) of each part of a multipart body; raises
    :class:`ValueError` for a body Go's multipart reader refuses."""
    _, parameters = _media_parameters(content_type)
    boundary = parameters.get("boundary", "")
    if not boundary:
        raise ValueError("no multipart boundary param in Content-Type")
    delimiter = b"--" + boundary.encode()
    parts: list[tuple[str, str | None, bytes]] = []
    position = body.find(delimiter)
    if position < 0:
        raise ValueError("multipart: NextPart: EOF")
    position += len(delimiter)
    while True:
        if body[position : position + 2] == b"--":
            break
        if body[position : position + 2] == b"\r\n":
            position += 2
        header_end = body.find(b"\r\n\r\n", position)
        if header_end < 0:
            raise ValueError("multipart: NextPart: EOF")
        headers = body[position:header_end].decode("utf-8", "surrogateescape")
        next_delimiter = body.find(b"\r\n" + delimiter, header_end + 4)
        if next_delimiter < 0:
            raise ValueError("multipart: NextPart: EOF")
        content = body[header_end + 4 : next_delimiter]
        form_name = ""
        filename: str | None = None
        for line in headers.split("\r\n"):
            name, _, value = line.partition(":")
            if name.strip().lower() != "content-disposition":
                continue
            try:
                _, disposition = _media_parameters(value.strip())
            except ValueError:
                disposition = {}  # Go's FormName is then "": the part is skipped
            form_name = disposition.get("name", "")
            if "filename" in disposition:
                filename = disposition["filename"]
        parts.append((form_name, filename, content))
        position = next_delimiter + 2 + len(delimiter)
    return parts


def _files_user(query: Mapping[str, list[str]]) -> User:
    name = query["username"][0] if query.get("username") else None
    if name is None:
        return DEFAULT_USER
    user = USERS.get(name)
    if user is None:
        raise _FilesError(401, f"error looking up user '{name}': user: unknown user {name}")
    return user


class FilesEndpoint:
    """envd's ``/files`` (upload and download) and ``/health``, for a sandbox that is
    running and a request carrying its access token."""

    def __init__(self, emulation: Emulation) -> None:
        self.emulation = emulation

    async def __call__(
        self,
        sandbox: Sandbox,
        method: str,
        path: str,
        headers: Mapping[str, str],
        query: Mapping[str, list[str]],
        receive: Receive,
        send: Send,
    ) -> None:
        if path == "/health":
            await send_empty(send, 204)
            return
        try:
            if method == "GET":
                await self._download(sandbox, query, send)
            elif method == "POST":
                written = await self._upload(sandbox, headers, query, receive)
                await send_json(send, 200, written)
            else:
                await send_error(send, 405, f"method {method} is not allowed on /files")
        except _FilesError as error:
            await send_error(send, error.status, error.message)

    async def _upload(
        self,
        sandbox: Sandbox,
        headers: Mapping[str, str],
        query: Mapping[str, list[str]],
        receive: Receive,
    ) -> list[dict[str, str]]:
        body = await read_body(receive)
        user = _files_user(query)
        body = _decompressed(body, headers.get("content-encoding", ""))
        content_type = headers.get("content-type", "")
        media = content_type.partition(";")[0].strip().lower()
        query_path = query["path"][0] if query.get("path") else None
        written: list[dict[str, str]] = []
        if media == "application/octet-stream":
            if query_path is None:
                raise _FilesError(400, "path query parameter is required for raw body upload")
            target = self._expanded(query_path, user, "error resolving path")
            await asyncio.to_thread(_write, sandbox.root, target, body)
            return [{"path": target, "name": go_base(target), "type": "file"}]
        if not media.startswith("multipart/"):
            raise _FilesError(
                400,
                f"unsupported content type: {content_type}, expected multipart/form-data or "
                "application/octet-stream",
            )
        try:
            parts = _multipart(body, content_type)
        except ValueError as error:
            raise _FilesError(500, f"error reading form: {error}") from None
        for form_name, filename, content in parts:
            if form_name != "file":
                continue
            if query_path is not None:
                wanted = query_path
            elif filename is None:
                raise _FilesError(
                    400,
                    "error getting multipart custom part file name: filename not found in "
                    "Content-Disposition header",
                )
            else:
                wanted = filename
            target = self._expanded(wanted, user, "error resolving path")
            if any(entry["path"] == target for entry in written):
                raise _FilesError(400, _duplicate_message(target, written))
            await asyncio.to_thread(_write, sandbox.root, target, content)
            written.append({"path": target, "name": go_base(target), "type": "file"})
        return written

    @staticmethod
    def _expanded(path: str, user: User, prefix: str) -> str:
        try:
            return expand_and_resolve(path, user)
        except PathError as error:
            raise _FilesError(400, f"{prefix}: {error}") from None

    async def _download(self, sandbox: Sandbox, query: Mapping[str, list[str]], send: Send) -> None:
        user = _files_user(query)
        requested = query["path"][0] if query.get("path") else ""
        try:
            path = expand_and_resolve(requested, user)
        except PathError as error:
            raise _FilesError(
                400, f"error expanding and resolving path '{requested}': {error}"
            ) from None
        try:
            host, _ = resolve_in_root(sandbox.root, path)
        except LinkLoopError as error:
            raise _FilesError(
                500, f"error checking if path exists '{path}': stat {path}: {error}"
            ) from None
        try:
            handle = await asyncio.to_thread(open, host, "rb")
        except (FileNotFoundError, NotADirectoryError):
            raise _FilesError(404, f"path '{path}' does not exist") from None
        except IsADirectoryError:
            raise _FilesError(400, f"path '{path}' is a directory") from None
        except OSError as error:
            raise _FilesError(
                500, f"error opening file '{path}': {_go_path_error('open', path, error)}"
            ) from None
        try:
            if not opened_inside(sandbox.root, handle.fileno()):  # swapped for a link meanwhile
                raise _FilesError(404, f"path '{path}' does not exist")
            if stat.S_ISDIR(os.fstat(handle.fileno()).st_mode):
                raise _FilesError(400, f"path '{path}' is a directory")
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"application/octet-stream")],
                }
            )
            while True:
                chunk = await asyncio.to_thread(handle.read, 256 * 1024)
                if not chunk:
                    break
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            handle.close()


def _duplicate_message(path: str, written: list[dict[str, str]]) -> str:
    """envd's answer to a second file for the same path in one upload (its wording, and its
    way of naming the other files only when more than one was written)."""
    message = (
        f"you cannot upload multiple files to the same path '{path}' in one upload request, "
        "only the first specified file was uploaded"
    )
    others = [entry["path"] for entry in written if entry["path"] != path]
    if len(others) > 1:
        message += f", also the following files were uploaded: {', '.join(others)}"
    return message


def _decompressed(body: bytes, encoding: str) -> bytes:
    name = encoding.partition(";")[0].strip().lower()
    if name in ("", "identity"):
        return body
    if name != "gzip":
        raise _FilesError(
            400,
            f"error decompressing request body: unsupported Content-Encoding: {encoding}, "
            "supported: [gzip]",
        )
    try:
        return gzip.decompress(body)
    except (OSError, EOFError, zlib.error) as error:
        raise _FilesError(
            400, f"error decompressing request body: failed to create gzip reader: {error}"
        ) from None


def _write(root: Path, path: str, content: bytes) -> None:
    """envd's ``processFile``: the folders made as needed, then the file written (truncated)."""
    parts = [p for p in go_clean(os.path.dirname(go_clean(path)) or "/").split("/") if p]
    for count in range(1, len(parts) + 1):
        subpath = "/" + "/".join(parts[:count])
        try:
            host, _ = resolve_in_root(root, subpath)
        except LinkLoopError as error:
            raise _FilesError(500, f"error ensuring directories: {error}") from None
        if host.is_dir():
            continue
        if os.path.lexists(host) and not host.is_symlink():
            raise _FilesError(500, f"error ensuring directories: path is a file: {subpath}")
        try:
            host.mkdir(mode=0o755)
        except FileExistsError:
            continue
        except OSError as error:
            raise _FilesError(
                500,
                "error ensuring directories: failed to create directory: "
                + _go_path_error("mkdir", subpath, error),
            ) from None
    try:
        host, _ = resolve_in_root(root, path)
    except LinkLoopError as error:
        raise _FilesError(500, f"error getting file info: stat {path}: {error}") from None
    if host.is_dir():
        raise _FilesError(400, f"path is a directory: {path}")
    # Truncated only once the opened file is known to be inside the root: a command may swap a
    # folder for a link to the host between the resolution above and this open.
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
    try:
        descriptor = os.open(host, flags, 0o644)
    except IsADirectoryError:
        raise _FilesError(400, f"path is a directory: {path}") from None
    except OSError as error:  # a link appeared at the last step (ELOOP), ...
        raise _FilesError(
            500, f"error opening file: {_go_path_error('open', path, error)}"
        ) from None
    with os.fdopen(descriptor, "wb") as handle:
        if not opened_inside(root, descriptor):
            raise _FilesError(500, f"error opening file: open {path}: changed while written")
        handle.truncate(0)
        handle.write(content)
