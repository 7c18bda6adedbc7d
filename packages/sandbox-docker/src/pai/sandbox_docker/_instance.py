"""One Docker sandbox: a running container, used through exec and archive calls.

Staying alive: a container found stopped (``docker kill``, an engine restart) is started again
and one found paused is unpaused, with its files, before anything is done in it; only a container
that is gone raises :class:`~pai.sandbox.SandboxVanishedError`, which makes the facade re-create it
and say ``environment_reset=True``. A command cut off by its container stopping is run again
once on the restarted container; one cut off by its container being removed raises
``SandboxVanishedError``, so the facade runs it again once on the fresh one.
"""

from __future__ import annotations

import io
import logging
import posixpath
import re
import tarfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

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
    SandboxFileTooLargeError,
    SandboxInputError,
    SandboxIsADirectoryError,
    SandboxNotADirectoryError,
    SandboxProviderError,
    SandboxVanishedError,
)
from pai.sandbox_docker._engine import (
    MODE_DIR,
    MODE_SYMLINK,
    ContainerPaused,
    ContainerStopped,
    Engine,
    ExecStream,
    LinkLoop,
    PathMissing,
    PathNotADirectory,
    TooLarge,
)
from pai.sandbox_docker._scripts import (
    EXISTS_SCRIPT,
    EXIT_EXISTS,
    EXIT_IS_DIR,
    EXIT_LOOP,
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
    WRITE_CHECK_SCRIPT,
    WRITE_SMALL_SCRIPT,
)

if TYPE_CHECKING:
    from pai.sandbox_docker._provider import DockerSandboxProvider

_log = logging.getLogger("pai.sandbox_docker")

T = TypeVar("T")

#: Exit code of a command killed at its timeout (as coreutils ``timeout``).
EXIT_TIMEOUT = 124

_KILLED = 137  # 128 + SIGKILL: the kernel's out-of-memory killer, or any kill -9
#: Exit codes after which the instance checks whether the container itself went away.
_CUT_OFF = (_KILLED, -1)
# The container's count of processes the out-of-memory killer ended: cgroup v2 keeps it in
# memory.events, cgroup v1 in memory.oom_control (both as a line "oom_kill N").
_OOM_KILLS_SCRIPT = (
    "cat /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control 2>/dev/null"
)
_OOM_KILL_LINE = re.compile(rb"^oom_kill (\d+)$", re.MULTILINE)
# The probe after an odd end: a live container runs it and exits 0, printing its OOM kill count.
_PROBE = ["sh", "-c", f"{_OOM_KILLS_SCRIPT}; exit 0"]


def _oom_kills_in(out: bytes) -> int | None:
    """The out-of-memory kill count in the output of ``_OOM_KILLS_SCRIPT`` (``None``: none
    printed, no memory cgroup in sight)."""
    match = _OOM_KILL_LINE.search(out)
    return int(match.group(1)) if match else None


#: A batch goes through one exec's arguments (checked and written by one script) when each
#: file's escaped content fits in one argument (the kernel's limit is 128 KiB) and all of them
#: well within the limit for one exec; larger batches are checked, then sent as a tar archive.
_SMALL_FILE_CHARS = 96 * 1024
_SMALL_BATCH_CHARS = 512 * 1024

# printf %b escapes: printable ASCII but the backslash as itself, every other byte as \0NNN.
_ESCAPES = [
    chr(byte) if 32 <= byte < 127 and byte != 92 else f"\\0{byte:03o}" for byte in range(256)
]


def _small_batch(files: Sequence[FileWrite]) -> list[str] | None:
    """Each file's content as a printf %b argument, or ``None`` when the batch is too large."""
    total = sum(len(file.path) for file in files)
    if total > _SMALL_BATCH_CHARS:
        return None
    encoded: list[str] = []
    for file in files:
        if len(file.content) > _SMALL_FILE_CHARS:
            return None
        text = "".join([_ESCAPES[byte] for byte in file.content])
        total += len(text)
        if len(text) > _SMALL_FILE_CHARS or total > _SMALL_BATCH_CHARS:
            return None
        encoded.append(text)
    return encoded


#: Arguments per write-check exec (well under the kernel's limit for one exec's arguments).
_CHECK_BATCH_BYTES = 96 * 1024

_STAT_LINE = re.compile(r"^([a-z ]+)\|(\d+)\|(.*)$", re.DOTALL)


def _entry_type(kind: str) -> EntryType:
    if kind.startswith("regular"):
        return "file"
    if kind == "directory":
        return "directory"
    if kind == "symbolic link":
        return "symlink"
    return "other"


def archive_entry(
    path: str, mode: int, ids: tuple[int, int], size: int | None = None
) -> tarfile.TarInfo:
    """The tar entry of ``path`` owned by ``ids``: a folder, or a file of ``size`` bytes."""
    info = tarfile.TarInfo(path.lstrip("/"))
    if size is None:
        info.type = tarfile.DIRTYPE
    else:
        info.size = size
    info.mode = mode
    info.uid, info.gid = ids
    info.mtime = int(time.time())
    return info


def query_ids(engine: Engine, container_id: str) -> tuple[int, int]:
    """The uid and gid commands run as in the (running) container."""
    code, out, err = engine.exec_simple(container_id, ["sh", "-c", IDS_SCRIPT])
    parts = out.split()
    if code != 0 or len(parts) != 2:
        raise SandboxProviderError(
            f"could not tell the container user's uid/gid: {err.decode(errors='replace')}"
        )
    return int(parts[0]), int(parts[1])


@dataclass
class _Session:
    """What the host learns of a running command from the wrapper's first line: its session id
    and its start time (clock ticks since boot)."""

    sid: str = ""
    started: str = ""
    head: bytes = b""
    seen: bool = False


class DockerSandboxInstance:
    """One sandbox: a running container (keyed by labels), used through exec and archive calls."""

    def __init__(
        self,
        provider: DockerSandboxProvider,
        key: str,
        container_id: str,
        ids: tuple[int, int] | None,
        *,
        oom_kills: int | None = None,
    ) -> None:
        self._provider = provider
        self._engine = provider.engine
        self._key = key
        self._id = container_id
        self._ids = ids
        self._oom_kills: int | None = oom_kills
        """The container's out-of-memory kill count as last read (0 for a container this
        handle created; unknown for one found, until a command is killed)."""

    @property
    def key(self) -> str:
        return self._key

    @property
    def instance_id(self) -> str:
        return self._id

    def __repr__(self) -> str:
        return f"DockerSandboxInstance(key={self._key!r}, container={self._id[:12]!r})"

    # -- keeping the container alive ----------------------------------------------------------

    def _state_sync(self) -> str:
        """``running``, ``stopped``, ``paused`` or ``gone``."""
        attrs = self._engine.inspect(self._id)
        if attrs is None:
            return "gone"
        state: dict[str, Any] = attrs.get("State") or {}
        if state.get("Dead") or state.get("Status") in ("removing", "dead"):
            return "gone"
        if state.get("Paused"):
            return "paused"
        if state.get("Running"):
            return "running"
        return "stopped"

    def _revive_sync(self) -> None:
        """Start a stopped container or unpause a paused one, files kept; gone raises."""
        state = self._state_sync()
        if state == "gone":
            raise SandboxVanishedError(f"the Docker container {self._id[:12]} is gone")
        if state == "paused":
            _log.warning("Docker sandbox %s was paused; unpausing it", self._id[:12])
            self._engine.unpause(self._id)
        elif state == "stopped":
            _log.warning("Docker sandbox %s was stopped; starting it again", self._id[:12])
            self._engine.start(self._id)
            self._oom_kills = self._oom_kills_now_sync()  # a new start may begin a new count

    def _call_sync(self, fn: Callable[[], T]) -> T:
        """``fn()``, after bringing the container back once if it was stopped or paused."""
        try:
            return fn()
        except (ContainerStopped, ContainerPaused):
            self._revive_sync()
        try:
            return fn()
        except (ContainerStopped, ContainerPaused):
            raise SandboxProviderError(
                f"the Docker container {self._id[:12]} of sandbox {self._key!r} keeps stopping "
                "or being paused by something outside this provider; check `docker ps -a`"
            ) from None

    # -- helpers ------------------------------------------------------------------------------

    async def _sh(self, script: str, *args: str) -> tuple[int, bytes, bytes]:
        self._provider.touch(self._id)
        return await anyio.to_thread.run_sync(
            self._call_sync,
            lambda: self._engine.exec_simple(self._id, ["sh", "-c", script, "pai", *args]),
        )

    def _ids_sync(self) -> tuple[int, int]:
        if self._ids is None:
            self._ids = self._call_sync(lambda: query_ids(self._engine, self._id))
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
        if code == EXIT_LOOP:
            return SandboxFileNotFoundError(path, "too many levels of symbolic links")
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
        deadline = None if timeout is None else anyio.current_time() + timeout
        for _ in range(2):
            result = await self._run_once(
                command,
                cwd=cwd,
                env=env,
                stdin=stdin,
                deadline=deadline,
                output_limit=output_limit,
                on_stdout=on_stdout,
                on_stderr=on_stderr,
            )
            if result is not None:
                return result
        raise SandboxProviderError(
            f"the Docker container {self._id[:12]} of sandbox {self._key!r} stopped twice while "
            "running a command; something outside this provider keeps stopping it"
        )

    async def _run_once(
        self,
        command: str,
        *,
        cwd: str,
        env: Mapping[str, str],
        stdin: bytes | None,
        deadline: float | None,
        output_limit: int,
        on_stdout: OutputCallback | None,
        on_stderr: OutputCallback | None,
    ) -> RawCommandResult | None:
        """One attempt; ``None`` when the container stopped under it (it was started again)."""
        marker = uuid.uuid4().hex
        holder = ExecStream()
        kept: dict[int, list[bytes]] = {1: [], 2: []}
        sizes = {1: 0, 2: 0}
        truncated = False
        callbacks = {1: on_stdout, 2: on_stderr}
        session = _Session()

        def on_frame(stream: int, chunk: bytes) -> None:
            nonlocal truncated
            if stream not in kept:
                return
            if stream == 1 and not session.seen:
                # The wrapper's first line is its pid (the command's session id) and start
                # time, not output.
                head = session.head + chunk
                end = head.find(b"\n")
                if end < 0:
                    session.head = head
                    return
                sid, _, started = head[:end].decode("ascii", "replace").partition(" ")
                session.sid = sid if sid.isdigit() else ""
                session.started = started if started.isdigit() else ""
                session.seen = True
                chunk = head[end + 1 :]
                if not chunk:
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
            # Created first: a stopped or paused container fails here, before anything ran.
            stdin_path = f"/tmp/pai-stdin-{marker}" if stdin is not None else ""
            exec_id = self._engine.exec_create(
                self._id,
                ["sh", "-c", RUN_SCRIPT, "pai", command, cwd, stdin_path],
                {**env, RUN_MARKER: marker},
            )
            if stdin is not None:
                entry = archive_entry(stdin_path, 0o600, self._ids_sync(), len(stdin))
                buffer = io.BytesIO()
                with tarfile.open(fileobj=buffer, mode="w") as archive:
                    archive.addfile(entry, io.BytesIO(stdin))
                self._engine.put_archive(self._id, "/", buffer.getvalue())
            self._engine.exec_stream(self._id, exec_id, holder, on_frame)
            return self._engine.exec_exit_code(self._id, exec_id)

        codes: list[int] = []
        done = anyio.Event()
        errors: list[Exception] = []

        async def worker() -> None:
            try:
                codes.append(await anyio.to_thread.run_sync(work, limiter=anyio.CapacityLimiter(1)))
            except Exception as error:  # handled below, outside the task group
                errors.append(error)
            finally:
                done.set()

        timed_out = False
        async with anyio.create_task_group() as group:
            group.start_soon(worker)
            try:
                with anyio.move_on_after(
                    None if deadline is None else deadline - anyio.current_time()
                ):
                    await done.wait()
                if not done.is_set():
                    timed_out = True
                    with anyio.CancelScope(shield=True):
                        await self._stop(session, marker, holder, done, deadline)
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await self._stop(session, marker, holder, done, None)
                raise
        if errors:
            error = errors[0]
            if isinstance(error, ContainerStopped | ContainerPaused):
                await anyio.to_thread.run_sync(self._revive_sync)
                return None  # nothing ran: run it on the revived container
            if not isinstance(error, SandboxVanishedError):
                with anyio.CancelScope(shield=True):
                    await self._stop(session, marker, holder, done, None)
                if isinstance(error, SandboxProviderError) and (await self._cut_off())[0]:
                    return None
            raise error
        exit_code = codes[0] if codes else -1
        if timed_out:
            exit_code = EXIT_TIMEOUT
        elif exit_code in _CUT_OFF:
            cut_off, oom_kills = await self._cut_off()
            if cut_off:
                return None
            if exit_code == _KILLED:
                kept[2].append(self._out_of_memory_note(oom_kills))
        return RawCommandResult(
            stdout=b"".join(kept[1]),
            stderr=b"".join(kept[2]),
            exit_code=exit_code,
            timed_out=timed_out,
            truncated=truncated,
        )

    def _oom_kills_now_sync(self) -> int | None:
        """The container's out-of-memory kill count now; ``None`` when it cannot be read (no
        memory cgroup in sight, or the container is not running)."""
        try:
            _, out, _ = self._engine.exec_simple(self._id, _PROBE)
        except (ContainerStopped, ContainerPaused, SandboxVanishedError, SandboxProviderError):
            return None
        return _oom_kills_in(out)

    def _out_of_memory_note(self, count: int | None) -> bytes:
        """After a command was killed (exit 137) in a live container whose out-of-memory kill
        count now reads ``count``: a line for its stderr when the count rose, naming the limit;
        else nothing (a ``kill -9`` also exits 137)."""
        before, self._oom_kills = self._oom_kills, count
        if count is None or before is None or count <= before:
            return b""
        limit = self._provider.memory
        return (
            "pai-sandbox-docker: the command was killed because the sandbox ran out of memory "
            f"(its Docker memory limit is {limit!r}, option memory); use less memory or raise "
            "the limit\n"
        ).encode()

    async def _cut_off(self) -> tuple[bool, int | None]:
        """After a command ended oddly: was it cut off by its container going away? With the
        container's out-of-memory kill count, when the probe that found it alive read one.

        Gone raises :class:`SandboxVanishedError` (the facade re-creates the container and runs
        the command again, saying ``environment_reset=True``); stopped or paused: it is brought
        back with its files and ``True`` says to run the command again; running: ``False``, the
        command's own result stands (a process killed by a signal also exits 137).
        """
        state, oom_kills = await anyio.to_thread.run_sync(self._settled_state_sync)
        if state == "running":
            return False, oom_kills
        if state == "gone":
            raise SandboxVanishedError(
                f"the Docker container {self._id[:12]} went away during the command"
            )
        await anyio.to_thread.run_sync(self._revive_sync)
        return True, None

    def _settled_state_sync(self) -> tuple[str, int | None]:
        """The container's state once a kill or removal in progress has finished, and its
        out-of-memory kill count when it is running (``None`` when none could be read).

        A killed or removed container's processes die before the engine records the change, so
        "running" right after a 137 proves nothing: a probe exec tells a live container (it runs
        and exits 0, printing the count) from a dying one, whose state is then awaited for a few
        seconds.
        """
        state = self._state_sync()
        if state != "running":
            return state, None
        try:
            code, out, _ = self._engine.exec_simple(self._id, _PROBE)
        except (ContainerStopped, ContainerPaused, SandboxVanishedError, SandboxProviderError):
            code, out = -1, b""
        if code == 0:
            return "running", _oom_kills_in(out)
        deadline = time.monotonic() + 5
        while state == "running" and time.monotonic() < deadline:
            time.sleep(0.05)
            state = self._state_sync()
        return state, None

    async def _stop(
        self,
        session: _Session,
        marker: str,
        holder: ExecStream,
        done: anyio.Event,
        deadline: float | None,
    ) -> None:
        """Kill everything the run started, inside the container; then cut the stream loose.

        Returns by ``deadline + 0.9`` s at the latest (a timed-out call returns within its
        timeout plus one second), cutting the output stream if something still holds it.
        """
        if not done.is_set():
            script = [
                "sh",
                "-c",
                KILL_SCRIPT,
                "pai-kill",
                session.sid,
                f"{RUN_MARKER}={marker}",
                session.started,
            ]
            try:
                await anyio.to_thread.run_sync(
                    self._call_sync, lambda: self._engine.exec_simple(self._id, script)
                )
            except (SandboxVanishedError, SandboxProviderError) as error:
                _log.debug("killing a timed-out command failed: %s", error)
        limit = 5.0 if deadline is None else max(0.05, deadline + 0.9 - anyio.current_time())
        with anyio.move_on_after(limit):
            await done.wait()
        if not done.is_set():
            holder.abort()  # something escaped with our output pipe; stop reading it

    # -- files --------------------------------------------------------------------------------

    async def read_file(self, path: str, *, max_bytes: int) -> bytes:
        self._provider.touch(self._id)
        return await anyio.to_thread.run_sync(self._read_sync, path, max_bytes)

    def _read_sync(self, path: str, max_bytes: int) -> bytes:
        current = path
        for _ in range(40):  # follow symbolic links inside the container, as the kernel would
            try:
                stat, data = self._engine.read_archive(self._id, current, max_bytes)
            except PathMissing:
                raise SandboxFileNotFoundError(path) from None
            except PathNotADirectory:
                raise SandboxNotADirectoryError(path) from None
            except LinkLoop:
                raise SandboxFileNotFoundError(path, "too many levels of symbolic links") from None
            except TooLarge as error:
                raise SandboxFileTooLargeError(path, size=error.size, limit=max_bytes) from None
            mode = int(stat.get("mode", 0))
            if mode & MODE_DIR:
                raise SandboxIsADirectoryError(path)
            if mode & MODE_SYMLINK:
                target = str(stat.get("linkTarget") or "")
                if not target:
                    raise SandboxFileNotFoundError(path, "a dangling symbolic link")
                # Resolved against the container's root: '..' never climbs above '/'.
                current = posixpath.normpath(posixpath.join(posixpath.dirname(current), target))
                continue
            with tarfile.open(fileobj=io.BytesIO(data), mode="r") as archive:
                for member in archive:
                    if member.isfile():
                        extracted = archive.extractfile(member)
                        if extracted is not None:
                            return extracted.read()
            raise SandboxProviderError(
                f"{path!r} is not a regular file in the sandbox (a device, pipe or socket); "
                "read it with a command instead"
            )
        raise SandboxFileNotFoundError(path, "too many levels of symbolic links")

    async def write_files(self, files: Sequence[FileWrite]) -> None:
        if not files:
            return
        self._provider.touch(self._id)
        await anyio.to_thread.run_sync(self._call_sync, lambda: self._write_sync(list(files)))

    def _check_writes_sync(self, files: list[FileWrite]) -> list[tuple[int, str, str]]:
        """Where each write lands (see ``WRITE_CHECK_SCRIPT``): code, resolved path, deepest
        existing folder. One exec for the whole batch (a few for a huge one)."""
        records: list[tuple[int, str, str]] = []
        start = 0
        while start < len(files):
            end, size = start, 0
            while end < len(files) and (end == start or size < _CHECK_BATCH_BYTES):
                size += len(files[end].path.encode("utf-8", "surrogateescape")) + 1
                end += 1
            paths = [file.path for file in files[start:end]]
            command = ["sh", "-c", WRITE_CHECK_SCRIPT, "pai", *paths]
            code, out, err = self._engine.exec_simple(self._id, command)
            fields = out.split(b"\0")
            if code == 0 and len(fields) < 3 * len(paths):
                # The engine can lose the output of a very short exec: ask once more.
                code, out, err = self._engine.exec_simple(self._id, command)
                fields = out.split(b"\0")
            if code != 0 or len(fields) < 3 * len(paths):
                detail = err.decode(errors="replace").strip()
                raise SandboxProviderError(
                    f"checking where {len(paths)} file(s) go failed (exit {code}): {detail}"
                )
            for index in range(len(paths)):
                status, resolved, existing = fields[3 * index : 3 * index + 3]
                records.append(
                    (
                        int(status),
                        resolved.decode("utf-8", "surrogateescape"),
                        existing.decode("utf-8", "surrogateescape"),
                    )
                )
            start = end
        return records

    def _write_sync(self, files: list[FileWrite]) -> None:
        self._check_batch(files)
        encoded = _small_batch(files)
        if encoded is not None:
            self._write_small_sync(files, encoded)
        else:
            self._write_archive_sync(files)

    @staticmethod
    def _check_batch(files: list[FileWrite]) -> None:
        """A batch that writes through, or over the folder of, one of its own files fails
        before anything is written (the container cannot know what the batch will make)."""
        seen: set[str] = set()
        folders: set[str] = set()
        for file in files:
            if file.path in folders:
                raise SandboxIsADirectoryError(file.path)
            parent = posixpath.dirname(file.path)
            while parent not in ("/", ""):
                if parent in seen:
                    raise SandboxNotADirectoryError(file.path)
                folders.add(parent)
                parent = posixpath.dirname(parent)
            seen.add(file.path)

    def _write_small_sync(self, files: list[FileWrite], encoded: list[str]) -> None:
        """Check and write a small batch in one exec (see ``WRITE_SMALL_SCRIPT``)."""
        arguments: list[str] = []
        for file, content in zip(files, encoded, strict=True):
            arguments += [file.path, f"{file.mode & 0o7777:o}", content]
        code, out, err = self._engine.exec_simple(
            self._id, ["sh", "-c", WRITE_SMALL_SCRIPT, "pai", *arguments]
        )
        if code == 3:
            index, _, status = out.decode(errors="replace").strip().partition(" ")
            if index.isdigit() and status.isdigit() and int(index) < len(files):
                path = files[int(index)].path
                raise self._failed(path, int(status), b"", "write_file")
        if code != 0:
            detail = err.decode(errors="replace").strip()
            raise SandboxProviderError(
                f"writing {len(files)} file(s) failed (exit {code}): {detail}"
            )

    def _write_archive_sync(self, files: list[FileWrite]) -> None:
        ids = self._ids_sync()
        workdir = self._provider.workdir.rstrip("/")
        # Every entry is checked before any is written: a write never replaces a folder (archive
        # extraction would delete it) and follows links inside the container as open() would.
        records = self._check_writes_sync(files)
        written: set[str] = set()
        made: set[str] = set()
        plan: list[tuple[FileWrite, str, list[str]]] = []
        for file, (status, resolved, existing) in zip(files, records, strict=True):
            if status != 0:
                raise self._failed(file.path, status, b"", "write_file")
            if resolved in made:
                raise SandboxIsADirectoryError(file.path)
            parent = posixpath.dirname(resolved)
            folders: list[str] = []
            while parent not in ("/", "") and parent != existing:
                if parent in written:
                    raise SandboxNotADirectoryError(file.path)
                folders.append(parent)
                parent = posixpath.dirname(parent)
            folders.reverse()
            made.update(folders)
            written.add(resolved)
            plan.append((file, resolved, folders))
        buffer = io.BytesIO()
        added: set[str] = set()
        with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
            for file, resolved, folders in plan:
                # Missing folders inside the workspace become folder entries owned by the sandbox
                # user (the engine would make them root-owned); missing ones outside it are left
                # to the engine. Existing folders get no entry: their owner and mode stay.
                for folder in folders:
                    if folder in added or not folder.startswith(workdir + "/"):
                        continue
                    added.add(folder)
                    archive.addfile(archive_entry(folder, 0o755, ids))
                info = archive_entry(resolved, file.mode & 0o7777, ids, len(file.content))
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
