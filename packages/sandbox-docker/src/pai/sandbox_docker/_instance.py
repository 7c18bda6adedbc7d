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

from pai.sandbox import (
    DirEntry,
    EntryType,
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
from pai.sandbox.provider import FileWrite, OutputCallback, RawCommandResult
from pai.sandbox_docker._engine import (
    MODE_DIR,
    MODE_SYMLINK,
    ContainerPaused,
    ContainerStopped,
    Engine,
    ExecStream,
    HelperFlood,
    HelperTimeout,
    LinkLoop,
    PathMissing,
    PathNotADirectory,
    TooLarge,
)
from pai.sandbox_docker._errors import (
    SandboxDirectoryTooLargeError,
    SandboxHelperOutputError,
    SandboxHelperTimeoutError,
)
from pai.sandbox_docker._scripts import (
    EXIT_EXISTS,
    EXIT_IS_DIR,
    EXIT_LOOP,
    EXIT_NOT_DIR,
    EXIT_NOT_EMPTY,
    EXIT_NOT_FOUND,
    EXIT_TOO_MANY,
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

#: Bounds of the short helpers (the probe, the kill, the uid query, a file script's answer):
#: none prints more than a few lines; anything beyond is a replaced program flooding the host.
_SMALL_ANSWER = 64 * 1024
#: Seconds the probe and the uid query may take.
_PROBE_SECONDS = 2.0
#: The wrapper's first line (pid and start time) is short: a longer one is not the wrapper's.
_SESSION_LINE = 256
#: After a command's timeout, how long the kill inside the container may take (from the
#: deadline) before the provider kills the whole container through the engine instead, and when
#: the call stops waiting for the command's output stream.
_KILL_SECONDS = 0.6
_RETURN_SECONDS = 0.9
_CANCEL_SECONDS = 5.0
#: A longest possible list_dir line beyond the folder's own path: type, size, '/', a name.
_LIST_LINE = 320


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

#: Longest path the kernel resolves (PATH_MAX), bounding a write check's answer.
_PATH_MAX = 4096

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
    try:
        code, out, err = engine.exec_simple(
            container_id,
            ["sh", "-c", IDS_SCRIPT],
            deadline=time.monotonic() + _PROBE_SECONDS,
            max_bytes=_SMALL_ANSWER,
        )
    except (HelperTimeout, HelperFlood):
        raise SandboxProviderError(
            "could not tell the container user's uid/gid: `id` did not answer in time or "
            "answered too much; use a numeric user (user='1000:1000')"
        ) from None
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
        self._limits = provider.limits(container_id)
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

    async def _files(self, fn: Callable[[], T]) -> T:
        """``fn()`` in a thread of this sandbox's file limiter, the container revived if need be.

        Never anyio's shared default limiter: file helpers a tampered sandbox hangs hold tokens
        of this sandbox's limiter only, never another tenant's (see ``_limits``).
        """
        self._provider.touch(self._id)
        return await anyio.to_thread.run_sync(self._call_sync, fn, limiter=self._limits.files.get())

    def _deadline(self) -> float:
        """When a file operation starting now must be done (``time.monotonic()``)."""
        return time.monotonic() + self._provider.helper_timeout

    def _helper_sync(
        self,
        what: str,
        path: str,
        command: Sequence[str],
        *,
        deadline: float,
        max_bytes: int = _SMALL_ANSWER,
    ) -> tuple[int, bytes, bytes]:
        """Run a file helper in the container, bounded in time and output whatever runs in its
        place: a replaced ``/bin/sh`` that hangs or floods raises a clear error instead."""
        try:
            return self._engine.exec_simple(
                self._id, command, deadline=deadline, max_bytes=max_bytes
            )
        except HelperTimeout:
            raise SandboxHelperTimeoutError(
                what, path, self._key, self._provider.helper_timeout
            ) from None
        except HelperFlood as flood:
            raise SandboxHelperOutputError(what, path, self._key, flood.limit) from None

    async def _sh(
        self, what: str, path: str, script: str, *args: str, max_bytes: int = _SMALL_ANSWER
    ) -> tuple[int, bytes, bytes]:
        command = ["sh", "-c", script, "pai", *args]
        return await self._files(
            lambda: self._helper_sync(
                what, path, command, deadline=self._deadline(), max_bytes=max_bytes
            )
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
                if end < 0 and len(head) <= _SESSION_LINE:
                    session.head = head
                    return
                session.seen = True
                session.head = b""
                if 0 <= end <= _SESSION_LINE:
                    sid, _, started = head[:end].decode("ascii", "replace").partition(" ")
                    session.sid = sid if sid.isdigit() else ""
                    session.started = started if started.isdigit() else ""
                    chunk = head[end + 1 :]
                else:
                    chunk = head  # not the wrapper's line (a replaced sh): all of it is output
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
            if not holder.begin():
                return -1  # given up while waiting for a slot: nothing runs
            # Created first: a stopped or paused container fails here, before anything ran.
            stdin_path = f"/tmp/pai-stdin-{marker}" if stdin is not None else ""
            exec_id = self._engine.exec_create(
                self._id,
                ["sh", "-c", RUN_SCRIPT, "pai", command, cwd, stdin_path],
                {**env, RUN_MARKER: marker},
            )
            holder.exec_id = exec_id
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
        # One thread per running command, at most max_concurrent_commands of this sandbox at
        # once; more wait here for a slot, their timeout counting.
        limiter = self._limits.commands.get()
        kills_before = self._limits.container_kills
        notes: list[bytes] = []

        async def worker() -> None:
            try:
                codes.append(await anyio.to_thread.run_sync(work, limiter=limiter))
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
                    if holder.abandon():  # still waiting for a slot: it never runs
                        group.cancel_scope.cancel()
                        notes.append(self._never_started_note())
                    else:
                        with anyio.CancelScope(shield=True):
                            await self._stop(session, marker, holder, done, deadline, notes)
            except BaseException:
                if holder.abandon():
                    group.cancel_scope.cancel()
                else:
                    with anyio.CancelScope(shield=True):
                        await self._stop(session, marker, holder, done, None, notes)
                raise
        if errors:
            error = errors[0]
            if isinstance(error, ContainerStopped | ContainerPaused):
                await self._aux(self._revive_sync)
                return None  # nothing ran: run it on the revived container
            if not isinstance(error, SandboxVanishedError):
                with anyio.CancelScope(shield=True):
                    await self._stop(session, marker, holder, done, None, notes)
                if isinstance(error, SandboxProviderError) and (await self._cut_off())[0]:
                    if self._limits.container_kills == kills_before:
                        return None
                    if not timed_out:
                        # Stopped by this provider's own kill (another command's timeout kill
                        # failed inside the sandbox): not run again.
                        raise SandboxProviderError(
                            f"a command in the Docker sandbox {self._key!r} was ended when the "
                            "provider killed the container after a timeout kill inside it "
                            "failed (its /bin/sh or kill may have been replaced); it was not "
                            "run again"
                        ) from None
                    # This command's own timeout needed the container kill: it timed out.
                else:
                    raise error
            else:
                raise error
        exit_code = codes[0] if codes else -1
        if timed_out:
            exit_code = EXIT_TIMEOUT
        elif exit_code in _CUT_OFF:
            cut_off, oom_kills = await self._cut_off()
            if cut_off:
                if self._limits.container_kills == kills_before:
                    return None
                notes.append(self._container_killed_note())  # ours: not run again
            elif exit_code == _KILLED:
                kept[2].append(self._out_of_memory_note(oom_kills))
        return RawCommandResult(
            stdout=b"".join(kept[1]),
            stderr=b"".join([*kept[2], *notes]),
            exit_code=exit_code,
            timed_out=timed_out,
            truncated=truncated,
        )

    async def _aux(self, fn: Callable[[], T]) -> T:
        """``fn()`` in a thread of this sandbox's limiter for kills, probes and revivals: never
        queued behind the commands they serve, nor behind another sandbox's work."""
        return await anyio.to_thread.run_sync(fn, limiter=self._limits.aux.get())

    def _probe_sync(self) -> tuple[int, bytes]:
        """Run the probe: its exit code and output; ``(-2, b"")`` when it did not answer in time
        or flooded (a replaced ``sh``: the container itself is alive)."""
        try:
            code, out, _ = self._engine.exec_simple(
                self._id,
                _PROBE,
                deadline=time.monotonic() + _PROBE_SECONDS,
                max_bytes=_SMALL_ANSWER,
            )
        except (HelperTimeout, HelperFlood):
            return -2, b""
        return code, out

    def _oom_kills_now_sync(self) -> int | None:
        """The container's out-of-memory kill count now; ``None`` when it cannot be read (no
        memory cgroup in sight, or the container is not running)."""
        try:
            _, out = self._probe_sync()
        except (ContainerStopped, ContainerPaused, SandboxVanishedError, SandboxProviderError):
            return None
        return _oom_kills_in(out)

    def _never_started_note(self) -> bytes:
        return (
            "pai-sandbox-docker: the command never started: all "
            f"{self._provider.max_concurrent_commands} command slots of this sandbox (option "
            "max_concurrent_commands) stayed busy until its timeout\n"
        ).encode()

    @staticmethod
    def _container_killed_note() -> bytes:
        return (
            b"pai-sandbox-docker: the timeout kill inside the sandbox did not work (a command may "
            b"have replaced its /bin/sh or kill), so the provider killed the whole container: "
            b"every process in it ended; its files are kept and it starts again on the next "
            b"operation\n"
        )

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
        state, oom_kills = await self._aux(self._settled_state_sync)
        if state == "running":
            return False, oom_kills
        if state == "gone":
            raise SandboxVanishedError(
                f"the Docker container {self._id[:12]} went away during the command"
            )
        await self._aux(self._revive_sync)
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
            code, out = self._probe_sync()
        except (ContainerStopped, ContainerPaused, SandboxVanishedError, SandboxProviderError):
            code, out = -1, b""
        if code == 0:
            return "running", _oom_kills_in(out)
        if code == -2:
            return "running", None  # the engine ran it, the sandbox's sh did not answer
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
        notes: list[bytes],
    ) -> None:
        """Kill everything the run started, inside the container; then cut the stream loose.

        The kill runs inside the container (its ``sh``), bounded in time and output. When it does
        not work (it hangs, fails or floods: a command may have replaced ``/bin/sh`` or ``kill``)
        while the engine still reports the command's exec running, the whole container is killed
        through the engine, which no program inside can stop; its files stay, and the next
        operation starts it again. Returns by ``deadline + 0.9`` s at the latest (a timed-out
        call returns within its timeout plus one second), cutting the output stream if
        something still holds it.
        """
        now = anyio.current_time()
        # Without a deadline (the call was cancelled, or failed): as long as a healthy kill takes
        # on a busy machine, before the container itself is killed.
        kill_at = now + _CANCEL_SECONDS if deadline is None else deadline + _KILL_SECONDS
        return_at = now + _CANCEL_SECONDS if deadline is None else deadline + _RETURN_SECONDS
        checked = gone = False
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
            kill_by = time.monotonic() + max(0.1, kill_at - anyio.current_time())
            killed = False
            try:
                code, _, _ = await self._aux(
                    lambda: self._call_sync(
                        lambda: self._engine.exec_simple(
                            self._id, script, deadline=kill_by, max_bytes=_SMALL_ANSWER
                        )
                    )
                )
                killed = code == 0
            except (HelperTimeout, HelperFlood):
                _log.warning(
                    "the timeout kill inside Docker sandbox %s did not answer in time",
                    self._id[:12],
                )
            except SandboxVanishedError:
                gone = True
            except SandboxProviderError as error:
                _log.debug("killing a timed-out command failed: %s", error)
            if not killed and not gone and holder.exec_id and not done.is_set():
                checked = True
                await self._kill_container_if_running(holder.exec_id, notes)
        with anyio.move_on_after(max(0.05, return_at - anyio.current_time())):
            await done.wait()
        if not done.is_set():
            holder.abort()  # something escaped with our output pipe; stop reading it
            if not checked and not gone and holder.exec_id:
                # The kill said it worked, yet the command itself still runs: it lied.
                await self._kill_container_if_running(holder.exec_id, notes)

    async def _kill_container_if_running(self, exec_id: str, notes: list[bytes]) -> None:
        """The kill inside the container did not work: if the engine still runs the command's
        exec, kill the container through the engine (everything in it ends)."""

        def kill_sync() -> bool:
            if not self._engine.exec_running(self._id, exec_id):
                return False
            self._limits.container_kills += 1
            self._engine.kill(self._id)
            return True

        try:
            killed = await self._aux(kill_sync)
        except (SandboxVanishedError, SandboxProviderError) as error:
            _log.warning("killing Docker sandbox %s failed: %s", self._id[:12], error)
            return
        if killed:
            _log.warning(
                "the timeout kill inside Docker sandbox %s (key %r) did not work; killed the "
                "container through the engine (its files are kept)",
                self._id[:12],
                self._key,
            )
            notes.append(self._container_killed_note())

    # -- files --------------------------------------------------------------------------------

    async def read_file(self, path: str, *, max_bytes: int) -> bytes:
        self._provider.touch(self._id)
        # The Engine API's archive call: nothing runs in the container, and the host reads at
        # most max_bytes (the size is checked before the content comes).
        return await anyio.to_thread.run_sync(
            self._read_sync, path, max_bytes, limiter=self._limits.files.get()
        )

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
        await self._files(lambda: self._write_sync(list(files)))

    def _check_writes_sync(
        self, files: list[FileWrite], deadline: float
    ) -> list[tuple[int, str, str]]:
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
            # Two resolved paths and a code per path, and room for a shell's error messages.
            bound = len(paths) * (2 * _PATH_MAX + 8) + _SMALL_ANSWER

            code, out, err, fields = 0, b"", b"", list[bytes]()
            for _ in range(2):
                code, out, err = self._helper_sync(
                    "write_files", paths[0], command, deadline=deadline, max_bytes=bound
                )
                fields = out.split(b"\0")
                if code != 0 or len(fields) >= 3 * len(paths):
                    break
                # The engine can lose the output of a very short exec: ask once more.
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
        deadline = self._deadline()
        encoded = _small_batch(files)
        if encoded is not None:
            self._write_small_sync(files, encoded, deadline)
        else:
            self._write_archive_sync(files, deadline)

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

    def _write_small_sync(
        self, files: list[FileWrite], encoded: list[str], deadline: float
    ) -> None:
        """Check and write a small batch in one exec (see ``WRITE_SMALL_SCRIPT``)."""
        arguments: list[str] = []
        for file, content in zip(files, encoded, strict=True):
            arguments += [file.path, f"{file.mode & 0o7777:o}", content]
        code, out, err = self._helper_sync(
            "write_files",
            files[0].path,
            ["sh", "-c", WRITE_SMALL_SCRIPT, "pai", *arguments],
            deadline=deadline,
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

    def _write_archive_sync(self, files: list[FileWrite], deadline: float) -> None:
        ids = self._ids_sync()
        workdir = self._provider.workdir.rstrip("/")
        # Every entry is checked before any is written: a write never replaces a folder (archive
        # extraction would delete it) and follows links inside the container as open() would.
        records = self._check_writes_sync(files, deadline)
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
        limit = self._provider.list_limit
        # One line per entry (type, size, the folder's path, a name of at most 255 bytes): a
        # longer answer is not stat's, and the host stops reading it there.
        bound = limit * (len(path.encode("utf-8", "surrogateescape")) + _LIST_LINE) + _SMALL_ANSWER
        code, out, err = await self._sh(
            "list_dir", path, LIST_SCRIPT, path, str(limit), max_bytes=bound
        )
        if code == EXIT_TOO_MANY:
            raise SandboxDirectoryTooLargeError(path, limit)
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
        code, _, err = await self._sh(
            "remove", path, REMOVE_SCRIPT, path, "1" if recursive else "0"
        )
        if code != 0:
            raise self._failed(path, code, err, "remove")

    async def make_dir(self, path: str, *, parents: bool) -> None:
        code, _, err = await self._sh(
            "make_dir", path, MAKE_DIR_SCRIPT, path, "1" if parents else "0"
        )
        if code != 0:
            raise self._failed(path, code, err, "make_dir")

    async def exists(self, path: str) -> bool:
        self._provider.touch(self._id)
        # The Engine API's archive stat: nothing runs in the container.
        return await anyio.to_thread.run_sync(
            self._exists_sync, path, limiter=self._limits.files.get()
        )

    def _exists_sync(self, path: str) -> bool:
        """Whether ``path`` exists, links followed inside the container (a dangling one, a loop
        or a path through a file: ``False``), from the engine's stat of each link."""
        current = path
        for _ in range(40):
            try:
                stat = self._engine.stat_path(self._id, current)
            except (PathMissing, PathNotADirectory, LinkLoop):
                return False
            if not int(stat.get("mode", 0)) & MODE_SYMLINK:
                return True
            target = str(stat.get("linkTarget") or "")
            if not target:
                return False
            # Resolved against the container's root: '..' never climbs above '/'.
            current = posixpath.normpath(posixpath.join(posixpath.dirname(current), target))
        return False
