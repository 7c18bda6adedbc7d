"""One E2B sandbox's operations: commands and files, through envd (the sandbox's own agent).

Commands go to envd's process service directly (the SDK's connect-rpc client, transport and
codec), so output arrives as the bytes the command wrote; files go through the SDK's filesystem
calls. Both are made through :class:`pai.sandbox_e2b._sdk.Envd`: this module decides what to run
and what an answer means, never calls the SDK itself. :mod:`pai.sandbox_e2b._provider` makes,
finds and kills the sandboxes these run in.
"""

from __future__ import annotations

import contextlib
import logging
import posixpath
import re
import shlex
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

import anyio

from pai.sandbox import (
    DirEntry,
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
from pai.sandbox_e2b._errors import E2BError, E2BSandboxBusyError, E2BUnreachableError
from pai.sandbox_e2b._failures import ATTEMPTS, backoff
from pai.sandbox_e2b._sdk import (
    AsyncSandbox,
    CommandExitException,
    ConnectError,
    EntryInfo,
    Envd,
    FileType,
    HTTPError,
    InvalidArgumentException,
    NotFoundException,
    SandboxException,
    SandboxNotFoundException,
    SandboxNotRunningException,
    SandboxUnreachableException,
    TimeoutException,
    event_payload,
    oneof,
    start_pid,
)

if TYPE_CHECKING:
    from pai.sandbox_e2b._provider import E2BSandboxProvider

_log = logging.getLogger("pai.sandbox_e2b")

T = TypeVar("T")

#: The environment variable marking every process a command starts (for the timeout kill).
RUN_MARKER = "PAI_RUN"

_TIMEOUT_EXIT = 124
_SERVER_GRACE = 5.0  # envd's own deadline: the timeout plus this
_STDIN_CHUNK = 1024 * 1024
# How long a timeout waits for the kill script, then for envd's SIGKILL of the command: together
# with the stream's end, the call returns within about a second of the timeout.
_KILL_WAIT = 0.7
_SIGNAL_WAIT = 0.2
_KILL_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


# -- shell snippets (run in the sandbox) -----------------------------------------------------

# The command, its folder and the marker arrive in the environment, so nothing is quoted into the
# command line; a missing folder is a result (exit 1 and the shell's message), not an error. The
# command runs in envd's own bash (no second shell to start): eval sees the text as `bash -c`
# would.
_RUN = (
    'cd -- "$PAI_CWD" || exit 1; __pai_c=$PAI_CMD; unset PAI_CWD PAI_CMD; '
    'eval "unset __pai_c; $__pai_c"'
)

# Kills the command's whole tree ($1 the run's marker, $2 the command's pid), found first, while
# nothing has died: every process descending from the command (by parent pid), every one
# carrying the marker in its environment, and every orphan (adopted by pid 1) that started after
# the command, in its cgroup, unless it carries the marker of another command still running (a
# child of the command's parent, as the command is). That last rule is the only trace of a child
# that cleared its environment, left the session and lost its parent (`(setsid env -i x &)`).
# It spares what other live commands run, what was running before the command started, and
# system services (another cgroup); a forged or stale marker saves nothing. It would take an
# environment-clearing orphan that a concurrent command made meanwhile for this one's. Each pass
# stops (SIGSTOP) what it found, so none of it can fork again, and passes repeat until one finds
# nothing new; only then is anything killed. The command's own process is not stopped (its
# parent, envd or nsenter, may stop with it and never resume): a child it makes after the last
# pass is found by a second sweep once it is dead. Killing the command first (envd's SendSignal
# alone) re-parents its children to init before they are found, and they survive (E2B issue
# 1031).
_KILL = r"""
m="PAI_RUN=$1"; top=$2; tree=" $2 "; me=$$; t=; cg=; live=" "
marker() { tr '\0' '\n' < "$1/environ" 2>/dev/null | grep -m1 '^PAI_RUN='; }
pids() { for f in "$@"; do f=${f#/proc/}; printf ' %s' "${f%/environ}"; done; echo ' '; }
if read -r s < "/proc/$top/stat"; then
  s=${s##*) }; set -- $s; t=${20}; parent=$2; cg=$(cat "/proc/$top/cgroup")
  for d in /proc/[0-9]*; do
    read -r s < "$d/stat" || continue
    s=${s##*) }; set -- $s
    [ "$2" = "$parent" ] && live="$live$(marker "$d") "
  done
fi 2>/dev/null
scan() {
  grown=0
  marked=$(pids $(grep -lzxF "$m" /proc/[0-9]*/environ 2>/dev/null))
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    case "$tree $me " in *" $p "*) continue;; esac
    read -r s < "$d/stat" 2>/dev/null || continue
    s=${s##*) }; set -- $s
    case "$tree" in *" $2 "*) tree="$tree$p "; grown=1; continue;; esac
    case "$marked" in *" $p "*) tree="$tree$p "; grown=1; continue;; esac
    [ -n "$t" ] && [ "$2" = 1 ] || continue
    # Started since the command: a later clock tick, or the same tick and a later pid.
    [ "${20}" -gt "$t" ] || { [ "${20}" = "$t" ] && [ "$p" -gt "$top" ]; } || continue
    [ "$(cat "$d/cgroup" 2>/dev/null)" = "$cg" ] || continue
    o=$(marker "$d")
    if [ -n "$o" ]; then case "$live" in *" $o "*) continue;; esac; fi
    tree="$tree$p "; grown=1
  done
}
sweep() {
  i=0
  while [ $i -lt 50 ]; do
    scan
    for p in $tree; do [ "$p" = "$top" ] || kill -STOP "$p" 2>/dev/null; done
    [ $grown = 0 ] && return
    i=$((i+1))
  done
}
sweep
for p in $tree; do kill -KILL "$p" 2>/dev/null; done
sweep
for p in $tree; do kill -KILL "$p" 2>/dev/null; done
exit 0
"""

# Go's names of the Linux signals (syscall.Signal.String), as envd's End event spells them.
_GO_SIGNALS = {
    name: number
    for number, name in enumerate(
        (
            "hangup",
            "interrupt",
            "quit",
            "illegal instruction",
            "trace/breakpoint trap",
            "aborted",
            "bus error",
            "floating point exception",
            "killed",
            "user defined signal 1",
            "segmentation fault",
            "user defined signal 2",
            "broken pipe",
            "alarm clock",
            "terminated",
            "stack fault",
            "child exited",
            "continued",
            "stopped (signal)",
            "stopped",
            "stopped (tty input)",
            "stopped (tty output)",
            "urgent I/O condition",
            "CPU time limit exceeded",
            "file size limit exceeded",
            "virtual timer expired",
            "profiling timer expired",
            "window changed",
            "I/O possible",
            "power failure",
            "bad system call",
        ),
        start=1,
    )
}
_SIGNALLED = re.compile(r"signal: (.+?)(?: \(core dumped\))?")


def _exit_code(end: Any) -> int:
    """The exit code a shell reports for a command envd says ended (its End event): a command
    killed by signal N is 128 + N. envd says so as Go does: exit code -1 and the status
    ``signal: killed`` (a process it re-adopted after a restart: 128 + N already)."""
    code = int(end.exit_code)
    if code >= 0 or end.exited:
        return code
    status = str(end.status)
    matched = _SIGNALLED.fullmatch(status)
    name = matched.group(1) if matched else ""
    number = _GO_SIGNALS.get(name)
    if number is None and name.startswith("signal ") and name[7:].isdigit():
        number = int(name[7:])  # Go's name for a signal it has no word for
    if number is None:
        raise SandboxProviderError(
            f"envd reported a command ending with exit code {code} and status {status!r}, "
            "which names no signal: this provider does not know that answer; report it with "
            "your envd version"
        )
    return 128 + number


def _is_link(entry: EntryInfo) -> bool:
    """Whether ``entry`` is a symbolic link. envd up to 0.6.13 sends no ``is_symlink``: a link's
    ``type`` is its target's (none when dangling) and only ``symlink_target`` tells it apart;
    newer envd marks it, and the SDK then reports ``FileType.SYMLINK``."""
    return entry.type == FileType.SYMLINK or entry.symlink_target is not None


# What the SDK's HTTP library (httpx) writes differently in a multipart part's file name: `"` as
# %22 and the control characters but ESC as %XX, which envd's Go parser keeps as they are; its
# `\\` for a backslash Go reads back as one.
_ALTERED_IN_HEADERS = re.compile('["\\x00-\\x1a\\x1c-\\x1f]')


def _envd_path(path: str) -> str:
    """``path`` as envd compares upload paths (Go's ``filepath.Clean`` of an absolute path)."""
    return "/" + posixpath.normpath(path).lstrip("/")


def _uploads(files: Sequence[FileWrite]) -> list[list[FileWrite]]:
    """The requests a batch is written in, in order, as few as envd allows. envd refuses a
    request naming one path twice (400 "you cannot upload multiple files to the same path"),
    so a repeated path starts a new request and the last write wins, as on every provider. In
    a request of several files envd reads each one's path from its part's header, where the
    SDK's HTTP library alters `"`, CR, LF and other control characters (`a"b` would be written
    as `a%22b`): a file whose path holds one goes alone, in a request whose path travels in
    the URL instead."""
    uploads: list[list[FileWrite]] = []
    current: list[FileWrite] = []
    seen: set[str] = set()
    for file in files:
        path = _envd_path(file.path)
        if _ALTERED_IN_HEADERS.search(file.path) or path in seen:
            if current:
                uploads.append(current)
            current, seen = [], set()
        if _ALTERED_IN_HEADERS.search(file.path):
            uploads.append([file])
            continue
        current.append(file)
        seen.add(path)
    if current:
        uploads.append(current)
    return uploads


def _not_utf8(text: str) -> str | None:
    """The part of ``text`` that is not valid UTF-8 (a byte decoded with ``surrogateescape``),
    or ``None``: envd takes UTF-8 only (protobuf strings and URLs)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        return text[error.start : error.end]
    return None


def _utf8(path: str) -> str:
    """``path``, refused unless it is valid UTF-8 text, so it can be written, read or named on
    envd."""
    bad = _not_utf8(path)
    if bad is not None:
        raise SandboxInputError(
            f"E2B cannot use the path {path!r}: envd takes paths as UTF-8 text, and this one "
            f"holds {bad!r}, which is not (a byte decoded with surrogateescape); use a name "
            "that is valid UTF-8"
        )
    return path


def _sendable(command: str, cwd: str, env: Mapping[str, str]) -> None:
    """Refuse what envd cannot be sent: a command, folder or variable that is not valid UTF-8."""
    _utf8(cwd)
    texts = [("the command", command)]
    texts += [(f"the variable {name!r}", f"{name}={value}") for name, value in env.items()]
    for what, text in texts:
        bad = _not_utf8(text)
        if bad is not None:
            raise SandboxInputError(
                f"E2B cannot run this: {what} holds {bad!r}, which is not valid UTF-8 text (a "
                "byte decoded with surrogateescape); envd takes UTF-8 only"
            )


class _Output:
    """One output stream, capped at ``limit`` bytes while it streams."""

    def __init__(self, limit: int, callback: OutputCallback | None) -> None:
        self.limit = limit
        self.callback = callback
        self.kept: list[bytes] = []
        self.size = 0
        self.truncated = False

    def receive(self, data: bytes) -> None:
        room = self.limit - self.size
        if len(data) > room:
            self.truncated = True
            data = data[: max(room, 0)]
        if not data:
            return
        self.kept.append(data)
        self.size += len(data)
        if self.callback is not None:
            self.callback(data)

    def value(self) -> bytes:
        return b"".join(self.kept)


class E2BSandboxInstance:
    """One sandbox: an ``AsyncSandbox`` connection, used through envd (commands and files)."""

    def __init__(self, provider: E2BSandboxProvider, key: str, sandbox: AsyncSandbox) -> None:
        self._provider = provider
        self._key = key
        self._sandbox = sandbox
        # Commands, listings and files, as the provider's user (see _sdk.Envd).
        self._envd = Envd(sandbox, provider.user)
        self._lifetime = provider.lifetime(sandbox.sandbox_id)  # held: extended while in use

    @property
    def key(self) -> str:
        """The instance key."""
        return self._key

    @property
    def instance_id(self) -> str:
        """The E2B sandbox id."""
        return self._sandbox.sandbox_id

    @property
    def sandbox(self) -> AsyncSandbox:
        """The SDK's sandbox object (for what this provider does not cover)."""
        return self._sandbox

    def __repr__(self) -> str:
        return f"E2BSandboxInstance(key={self._key!r}, sandbox={self.instance_id!r})"

    # -- errors -----------------------------------------------------------------------------

    async def _vanished(
        self, error: BaseException, *, confirmed: bool = False
    ) -> SandboxVanishedError | E2BError:
        """The error for a sandbox reported gone: :class:`SandboxVanishedError` (the facade
        re-creates it) once E2B's API confirms it no longer exists (asked here unless
        ``confirmed``); else :class:`E2BUnreachableError`, the sandbox left as it is."""
        if not confirmed:
            state = await self._provider.state(self.instance_id)
            if state is not None:
                return E2BUnreachableError(
                    f"lost E2B sandbox {self.instance_id} mid-operation ({error}), but E2B's API "
                    f"says it is {state}: it was kept, and what the operation did is unknown; "
                    "try again"
                )
        return SandboxVanishedError(
            f"E2B sandbox {self.instance_id} (key {self._key!r}) is gone: {error}"
        )

    async def _resume(self, error: BaseException) -> None:
        """Connect again (which resumes a paused sandbox); raises :class:`SandboxVanishedError`
        when E2B's API says the sandbox no longer exists, and the API's own error (e.g.
        :class:`E2BUnreachableError`) when it does not say."""
        try:
            await self._provider.connect(self.instance_id)
        except SandboxNotFoundException as gone:
            raise await self._vanished(error, confirmed=True) from gone
        except E2BSandboxBusyError as busy:  # 409: being killed, or still changing state
            if await self._provider.state(self.instance_id) is None:
                raise await self._vanished(error, confirmed=True) from busy
            raise

    async def _guard(self, operation: Callable[[], Awaitable[T]]) -> T:
        """``operation``, with the sandbox kept alive (an extension starts beside it when one
        is due, and is not waited for; no request otherwise) and E2B's "not found" for it
        handled: the sandbox is connected to again (a paused one resumes) and the operation
        retried; reported gone again, E2B's API is asked: gone, :class:`SandboxVanishedError`;
        paused, resumed; running, retried after a backoff, a few times, then
        :class:`E2BUnreachableError`. A sandbox that still runs is never given up for a
        transient "not found"."""
        self._provider.keep_alive(self.instance_id)
        for attempt in range(ATTEMPTS):
            try:
                return await self._reach(operation)
            except (SandboxNotRunningException, SandboxNotFoundException) as error:
                if attempt == 0:
                    await self._resume(error)
                    continue
                state = await self._provider.state(self.instance_id)
                if state is None:
                    raise await self._vanished(error, confirmed=True) from error
                if attempt == ATTEMPTS - 1:
                    raise E2BUnreachableError(
                        f"E2B sandbox {self.instance_id} answered 'not found' {ATTEMPTS} times "
                        f"in a row, but E2B's API says it is {state} ({error}); it was kept: "
                        "try again in a moment"
                    ) from error
                if state == "paused":
                    await self._resume(error)
                else:
                    await anyio.sleep(backoff(attempt))
        raise AssertionError("unreachable")  # pragma: no cover - the last attempt raises

    async def _reach(self, operation: Callable[[], Awaitable[T]]) -> T:
        """``operation`` on envd, retried where E2B's answer shows it was not carried out; a
        sandbox that does not answer, or E2B's refusals once retries are spent, made clear
        errors naming the sandbox (see :meth:`E2BSandboxProvider.envd`)."""
        return await self._provider.envd(self._sandbox, operation)

    def _failed(self, what: str, path: str, error: BaseException) -> SandboxProviderError:
        return SandboxProviderError(
            f"E2B {what} of {path!r} failed in sandbox {self.instance_id}: {error}"
        )

    # -- commands ---------------------------------------------------------------------------

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
        """Run ``command`` in envd's ``bash -l``; see :mod:`pai.sandbox.provider` for the
        contract (a timeout kills inside the sandbox, exit code 124)."""
        marker = uuid.uuid4().hex
        streams = {
            "stdout": _Output(output_limit, on_stdout),
            "stderr": _Output(output_limit, on_stderr),
        }
        _sendable(command, cwd, env)
        envs = {**env, RUN_MARKER: marker, "PAI_CWD": cwd, "PAI_CMD": command}
        server_timeout = timeout + _SERVER_GRACE if timeout is not None else None
        events = await self._guard(lambda: self._start(envs, stdin is not None, server_timeout))
        first, stream = events
        pid = start_pid(first)
        exit_codes: list[int] = []
        failures: list[BaseException] = []
        done = anyio.Event()

        async def consume() -> None:
            try:
                async for response in stream:
                    payload = event_payload(response)
                    if payload is None:
                        continue
                    kind, value = payload
                    if kind == "data":
                        output = oneof(getattr(value, "output", None))
                        if output is not None and output[0] in streams:
                            streams[output[0]].receive(bytes(cast("bytes", output[1])))
                    elif kind == "end":
                        exit_codes.append(_exit_code(value))
            except Exception as error:  # an ended stream, a callback that raised, ...
                failures.append(error)
            finally:
                done.set()
                with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                    await stream.aclose()

        async def feed(data: bytes) -> None:
            try:
                for offset in range(0, len(data), _STDIN_CHUNK):
                    await self._send_stdin(pid, data[offset : offset + _STDIN_CHUNK])
                await self._close_stdin(pid)
            except Exception as error:  # the command ended (or stopped reading) before the end
                _log.debug("stdin of an E2B command was not fully delivered: %s", error)

        timed_out = False
        async with anyio.create_task_group() as group:
            group.start_soon(consume)
            if stdin is not None:
                group.start_soon(feed, stdin)
            try:
                with anyio.move_on_after(timeout):
                    await done.wait()
                if not done.is_set():
                    timed_out = True
                    with anyio.CancelScope(shield=True):
                        await self._kill(pid, marker, done)
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await self._kill(pid, marker, done)
                raise
            finally:
                group.cancel_scope.cancel()
        if not exit_codes and not timed_out:
            # The stream stopped without an end: make sure nothing keeps running, then say why.
            with anyio.CancelScope(shield=True):
                await self._kill(pid, marker, done)
            failure = failures[0] if failures else None
            if failure is not None and not isinstance(failure, (SandboxException, ConnectError)):
                raise failure  # e.g. an output callback raised
            error = await self._envd.rpc_error(failure) if failure is not None else None
            if isinstance(error, (SandboxNotRunningException, SandboxNotFoundException)):
                raise await self._vanished(error) from error
            if isinstance(error, TimeoutException) and not isinstance(
                error, SandboxUnreachableException
            ):
                timed_out = True  # envd's own deadline ended it (the client's did not)
            else:
                raise SandboxProviderError(
                    f"E2B command in sandbox {self.instance_id} ended without an exit code: "
                    f"{error or 'the stream closed early'}"
                ) from error
        out, err = streams["stdout"], streams["stderr"]
        return RawCommandResult(
            stdout=out.value(),
            stderr=err.value(),
            exit_code=_TIMEOUT_EXIT if timed_out else (exit_codes[0] if exit_codes else -1),
            timed_out=timed_out,
            truncated=out.truncated or err.truncated,
        )

    async def _start(
        self, envs: Mapping[str, str], with_stdin: bool, timeout: float | None
    ) -> tuple[Any, AsyncGenerator[Any, Any]]:
        return await self._envd.start(
            "/bin/bash",
            ["-l", "-c", _RUN],
            envs,
            stdin=with_stdin,
            timeout=timeout,
            request_timeout=self._provider.request_timeout,
        )

    async def _send_stdin(self, pid: int, data: bytes) -> None:
        await self._envd.send_stdin(pid, data, timeout=self._provider.request_timeout)

    async def _close_stdin(self, pid: int) -> None:
        await self._envd.close_stdin(pid, timeout=self._provider.request_timeout)

    async def _kill(self, pid: int, marker: str, done: anyio.Event) -> None:
        """Kill the command and everything it started, inside the sandbox; then wait (briefly)
        for its stream to end. Returns within about a second whatever the sandbox does: the
        kill script goes on in the sandbox after that (envd does not end a process when its
        caller stops listening)."""
        with anyio.move_on_after(_KILL_WAIT):
            try:
                await self._kill_tree(pid, marker)
            except Exception as error:
                _log.debug("killing what an E2B command started failed: %s", error)
        # The backstop, should the script not have run: envd's SIGKILL of the command's own
        # process (its children, if any survive, are re-parented and keep running).
        with anyio.move_on_after(_SIGNAL_WAIT):
            try:
                await self._envd.kill(pid, timeout=self._provider.request_timeout)
            except Exception as error:  # the process has ended already
                _log.debug("killing an E2B command through envd failed: %s", error)
        with anyio.move_on_after(0.15):
            await done.wait()

    async def _kill_tree(self, pid: int, marker: str) -> None:
        """Run :data:`_KILL` as root, straight through envd (no login shell to start), until it
        ends."""
        stream = self._envd.start_as_root(
            "/bin/sh", ["-c", _KILL, "pai-kill", marker, str(pid)], {"PATH": _KILL_PATH}, timeout=10
        )
        try:
            async for _ in stream:
                pass
        finally:
            with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                await stream.aclose()

    # -- files ------------------------------------------------------------------------------

    async def _info(self, path: str) -> EntryInfo | None:
        """The entry at ``path`` itself (a link is not followed), or ``None``."""
        try:
            return await self._guard(lambda: self._envd.get_info(path))
        except NotFoundException:
            return None

    async def _follow(self, path: str) -> tuple[str, EntryInfo] | None:
        """The path and entry ``path`` leads to after following symbolic links (inside the
        sandbox), or ``None`` when nothing is there (a dangling link included)."""
        current = path
        for _ in range(40):
            info = await self._info(current)
            if info is None:
                return None
            if not _is_link(info):
                return current, info
            target = info.symlink_target or ""
            # envd resolves the whole chain, and names the link itself when the chain dangles.
            following = posixpath.normpath(posixpath.join(posixpath.dirname(current), target))
            if not target or following == posixpath.normpath(current):
                return None
            current = following
        raise SandboxFileNotFoundError(path, "too many levels of symbolic links")

    async def _diagnose(self, path: str, error: BaseException, what: str) -> Exception:
        """The specific error for a failed file operation on ``path``: a parent that is not a
        folder, a folder where a file was expected, or nothing there."""
        parts = path.strip("/").split("/")
        for depth in range(1, len(parts)):
            parent = "/" + "/".join(parts[:depth])
            found = await self._follow(parent)
            if found is None:
                return SandboxFileNotFoundError(path)
            if found[1].type != FileType.DIR:
                return SandboxNotADirectoryError(path)
        found = await self._follow(path)
        if found is not None and found[1].type == FileType.DIR and what in ("write", "read"):
            return SandboxIsADirectoryError(path)
        if found is not None and found[1].type != FileType.DIR and what == "list_dir":
            return SandboxNotADirectoryError(path)
        if found is None and what in ("read", "list_dir", "remove"):
            return SandboxFileNotFoundError(path)
        if found is None and what == "write":
            info = await self._info(path)
            if info is not None and _is_link(info):  # a link whose target's folder is missing
                return SandboxFileNotFoundError(path, "it is a link to a missing folder")
        return self._failed(what, path, error)

    async def read_file(self, path: str, *, max_bytes: int) -> bytes:
        """The file's bytes, its size checked (``Stat``) before the transfer."""
        _utf8(path)
        found = await self._follow(path)
        if found is None:
            raise await self._diagnose(path, FileNotFoundError(path), "read")
        target, info = found
        if info.type == FileType.DIR:
            raise SandboxIsADirectoryError(path)
        if info.size > max_bytes:
            raise SandboxFileTooLargeError(path, size=info.size, limit=max_bytes)
        try:
            reader = await self._guard(lambda: self._envd.read(target))
        except NotFoundException:
            raise SandboxFileNotFoundError(path) from None
        except InvalidArgumentException as error:
            raise await self._diagnose(path, error, "read") from error
        chunks: list[bytes] = []
        size = 0
        async with reader:
            async for chunk in reader:
                size += len(chunk)
                if size > max_bytes:  # it grew after the size check: stop at the limit
                    raise SandboxFileTooLargeError(path, size=size, limit=max_bytes)
                chunks.append(bytes(chunk))
        return b"".join(chunks)

    async def write_files(self, files: Sequence[FileWrite]) -> None:
        """The files, in order, in as few ``files.write_files`` calls as envd allows (one,
        unless a path repeats or a name needs a request of its own: see :func:`_uploads`);
        then the modes other than 0644, in one command. A path given twice ends with its last
        content and mode."""
        if not files:
            return
        for file in files:
            _utf8(file.path)
        for upload in _uploads(files):
            entries: list[Any] = [{"path": f.path, "data": f.content} for f in upload]
            try:
                await self._guard(lambda entries=entries: self._envd.write_files(entries))
            except (SandboxException, HTTPError) as error:
                for file in upload:
                    specific = await self._diagnose(file.path, error, "write")
                    if not isinstance(specific, SandboxProviderError):
                        raise specific from error
                raise self._failed("write", upload[0].path, error) from error
        last = {_envd_path(f.path): f for f in files}  # the mode a repeated path ends with
        modes: dict[int, list[str]] = {}
        for file in last.values():
            if file.mode & 0o7777 != 0o644:
                modes.setdefault(file.mode & 0o7777, []).append(file.path)
        if modes:
            script = "; ".join(
                f"chmod {mode:o} -- {shlex.join(paths)}" for mode, paths in modes.items()
            )
            try:
                await self._guard(lambda: self._envd.run(script, timeout=60))
            except CommandExitException as error:
                raise self._failed("chmod", files[0].path, error) from error

    async def _list(self, path: str) -> list[DirEntry]:
        """Every entry of the folder, as envd sends it (an entry of no known type included)."""
        return await self._envd.list_dir(path, timeout=self._provider.request_timeout)

    async def list_dir(self, path: str) -> Sequence[DirEntry]:
        """The folder's entries, a link reported as itself."""
        _utf8(path)
        try:
            entries = await self._guard(lambda: self._list(path))
        except (NotFoundException, InvalidArgumentException) as error:
            raise await self._diagnose(path, error, "list_dir") from error
        return sorted(entries, key=lambda e: e.name)

    async def remove(self, path: str, *, recursive: bool) -> None:
        """Remove a file, link or folder; a non-empty folder only with ``recursive`` (envd's own
        remove is always recursive, so emptiness is checked here first)."""
        _utf8(path)
        if path == "/":
            raise SandboxInputError("refusing to remove '/', the sandbox's root folder")
        info = await self._info(path)
        if info is None:
            raise await self._diagnose(path, FileNotFoundError(path), "remove")
        if (
            info.type == FileType.DIR
            and not _is_link(info)  # envd removes a link, never what it points to
            and not recursive
            and await self.list_dir(path)
        ):
            raise SandboxDirectoryNotEmptyError(path)
        try:
            await self._guard(lambda: self._envd.remove(path))
        except NotFoundException:
            raise SandboxFileNotFoundError(path) from None

    async def make_dir(self, path: str, *, parents: bool) -> None:
        """Make a folder; its parent must exist unless ``parents`` (envd always makes them)."""
        _utf8(path)
        info = await self._info(path)
        if info is not None:
            found = await self._follow(path)
            if parents and found is not None and found[1].type == FileType.DIR:
                return
            if parents:
                raise SandboxFileExistsError(path, "it is not a folder")
            raise SandboxFileExistsError(path)
        if not parents:
            parent = posixpath.dirname(path)
            found = await self._follow(parent)
            if found is None:
                raise SandboxFileNotFoundError(path)
            if found[1].type != FileType.DIR:
                raise SandboxNotADirectoryError(path)
        try:
            await self._guard(lambda: self._envd.make_dir(path))
        except SandboxException as error:
            raise await self._diagnose(path, error, "make_dir") from error

    async def exists(self, path: str) -> bool:
        """Whether anything is there, following links (a dangling link is ``False``)."""
        info = await self._info(_utf8(path))
        if info is None:
            return False
        if not _is_link(info) or info.type in (FileType.FILE, FileType.DIR):
            return True  # up to 0.6.13 envd gives a link its target's type: the target exists
        return await self._follow(path) is not None
