"""The offline E2B emulator: E2B's control plane and envd on 127.0.0.1, for tests.

A TEST DOUBLE, NOT ISOLATION. Each sandbox is a temporary folder on this machine (its root);
commands run as ordinary processes of the user running the emulator, chrooted into that folder
inside a fresh user, mount, PID and (unless the sandbox allows internet access) network
namespace (Linux ``unshare``), with the host's ``/usr``, ``/bin``, ``/lib*``, ``/etc`` and
``/opt`` bound read-only (where the host lets them be), ``/dev`` bound as it is, and each
process's address space bounded to 512 MiB. That makes ``/workspace``, ``/tmp`` and
``/home/user`` the sandbox's own and lets a timeout kill everything a command started, but it
protects the host from nothing a hostile command could do: never point it at untrusted code.

Served on one port (``url``), used both as ``api_url`` and as ``sandbox_url``:

- control plane (header ``X-API-KEY``): ``POST /v2/sandboxes``, ``GET /v2/sandboxes`` (metadata
  filter, state filter, ``limit``/``nextToken`` pagination with ``x-next-token``), ``GET
  /sandboxes/{id}``, ``POST /v2/sandboxes/{id}/connect`` (resumes a paused sandbox), ``POST
  /sandboxes/{id}/timeout``, ``POST /sandboxes/{id}/pause``, ``DELETE /sandboxes/{id}``;
- envd, multiplexed by the ``E2b-Sandbox-Id`` header (a sandbox that is gone answers 502 "... was
  not found", as E2B's proxy does): ``/process.Process`` (``Start`` with the ``connect-timeout-ms``
  deadline enforced here, ``SendInput``, ``CloseStdin``, ``SendSignal``, ``List``),
  ``/filesystem.Filesystem`` (``Stat``, ``ListDir``, ``MakeDir``, ``Remove``, ``Move``),
  ``GET``/``POST /files`` (multipart and octet-stream uploads) and ``GET /health``.

Limits, stated plainly: no templates (every template id gives the same host userland), no
users (commands run as the namespace's root, which is the emulator's own user), no network
unless ``allow_internet_access`` is true (then the host's), no PTY, no watches, no snapshots.
A command's background processes end with it (each command has its own PID namespace), and a
pause ends running commands (the files stay).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, cast

from pai.sandbox_e2b._errors import E2BEmulatorUnavailableError

#: The envd version the emulator reports (the SDK picks features by it).
ENVD_VERSION = "0.5.7"

_SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "opt")

#: The address space each process of a sandbox may take (KiB): the 512 MB of memory an E2B
#: sandbox reports, so a command that tries to hold more fails instead of the host paying for it.
_MEMORY_LIMIT_KIB = 512 * 1024

# Runs inside the new namespaces: $1 the sandbox root, $2 the working directory inside it, then
# the program and its arguments. Binds the host's userland read-only (best effort), gives the
# sandbox its own /proc (of its PID namespace), bounds each process's memory and chroots.
_SETUP = rf"""
r=$1; w=$2; shift 2
for d in usr bin sbin lib lib32 lib64 libx32 etc opt; do
  if [ -d "/$d" ] && [ ! -L "/$d" ] && [ -d "$r/$d" ] && [ ! -L "$r/$d" ]; then
    mount --rbind "/$d" "$r/$d" && mount -o remount,bind,ro "$r/$d" 2>/dev/null
  fi
done
mount --rbind /dev "$r/dev" || exit 126
mount -t proc proc "$r/proc" || exit 126
ulimit -v {_MEMORY_LIMIT_KIB} || exit 126
exec chroot "$r" /bin/sh -c 'cd -- "$1" || exit 1; shift; exec "$@"' sh "$w" "$@"
"""

_BASE_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/home/user",
    "USER": "user",
    "LANG": "C.UTF-8",
    "E2B_SANDBOX": "true",
}

State = Literal["running", "paused"]


def _now() -> datetime:
    return datetime.now(UTC)


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


# -- namespaces -------------------------------------------------------------------------------


_probe_result: str | None = None
_probe_lock = threading.Lock()


def namespaces_problem() -> str | None:
    """Why commands cannot run here (``None`` when they can): checked once per process."""
    global _probe_result
    with _probe_lock:
        if _probe_result is None:
            _probe_result = _probe() or ""
        return _probe_result or None


def _probe() -> str | None:
    unshare = shutil.which("unshare")
    if unshare is None or shutil.which("chroot") is None:
        return "the emulator needs the `unshare` and `chroot` programs (util-linux, coreutils)"
    root = tempfile.mkdtemp(prefix="pai-e2b-probe-")
    try:
        _prepare_root(Path(root))
        done = subprocess.run(
            _confined(unshare, root, "/", ["/bin/sh", "-c", "echo ok"]),
            capture_output=True,
            timeout=30,
            env=_BASE_ENV,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as error:
        return f"running `unshare` failed: {error}"
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if done.returncode != 0 or done.stdout.strip() != b"ok":
        detail = done.stderr.decode(errors="replace").strip()
        return (
            "this host does not let an unprivileged process create user, mount and PID "
            f"namespaces (`unshare --user --map-root-user --mount --pid --net` failed: {detail})"
        )
    return None


def _confined(
    unshare: str, root: Path | str, workdir: str, argv: Sequence[str], *, network: bool = False
) -> list[str]:
    """The command line running ``argv`` in ``workdir`` of the sandbox folder ``root``: in new
    user, mount and PID namespaces, and a network namespace of its own (nothing but a loopback
    that is down) unless ``network``, chrooted by :data:`_SETUP`."""
    return [
        unshare,
        "--user",
        "--map-root-user",
        "--mount",
        "--pid",
        *(() if network else ("--net",)),
        "--fork",
        "--kill-child",
        "--",
        "/bin/sh",
        "-c",
        _SETUP,
        "pai-e2b-emulator",
        str(root),
        workdir,
        *argv,
    ]


def _prepare_root(root: Path) -> None:
    for name in _SYSTEM_DIRS:
        host = Path("/") / name
        mine = root / name
        if host.is_symlink():
            mine.symlink_to(os.readlink(host))
        elif host.is_dir():
            mine.mkdir()
    for name in ("dev", "proc", "root", "home/user", "var/tmp"):
        (root / name).mkdir(parents=True, exist_ok=True)
    (root / "tmp").mkdir(mode=0o1777, exist_ok=True)
    os.chmod(root / "tmp", 0o1777)


def _remove_tree(path: Path) -> None:
    """Delete a sandbox folder, also where its commands took permissions away."""

    def retry(function: Callable[..., object], failed: str, *_: object) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(failed), 0o700)
            if not os.path.islink(failed):
                os.chmod(failed, 0o700)
            function(failed)

    handler: dict[str, Any] = (
        {"onexc": retry} if sys.version_info >= (3, 12) else {"onerror": retry}
    )
    shutil.rmtree(path, **handler)
    if path.exists():
        shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a running (not a zombie) process."""
    try:
        status = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return status[status.rfind(b")") + 2 : status.rfind(b")") + 3] not in (b"Z", b"X")


_HOME_PREFIX = "pai-e2b-"


def _make_home() -> Path:
    """A folder for this emulator's sandboxes, named for this process (see :func:`_sweep`)."""
    return Path(tempfile.mkdtemp(prefix=f"{_HOME_PREFIX}{os.getpid()}-"))


def _sweep() -> None:
    """Delete the sandbox folders of emulators whose process died without stopping them."""
    for entry in Path(tempfile.gettempdir()).glob(f"{_HOME_PREFIX}*-*"):
        pid = entry.name[len(_HOME_PREFIX) :].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid() or not entry.is_dir():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            with contextlib.suppress(OSError):
                _remove_tree(entry)
        except OSError:  # alive, someone else's
            continue


# -- paths inside a sandbox root ----------------------------------------------------------------


class _FsError(Exception):
    def __init__(
        self, code: Literal["not_found", "not_dir", "is_dir", "exists", "invalid"], message: str
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def resolve_in_root(root: Path, path: str, *, follow_last: bool = True) -> tuple[Path, str]:
    """The host path of sandbox ``path`` under ``root``, and its sandbox spelling, following
    symbolic links as the sandbox would see them (an absolute target is inside the sandbox,
    ``..`` stops at its root). Never leaves ``root``; a relative ``path`` is taken from
    ``/home/user``, as envd does."""
    if not path.startswith("/"):
        path = "/home/user/" + path
    pending = [part for part in path.split("/") if part not in ("", ".")]
    done: list[str] = []
    hops = 0
    while pending:
        part = pending.pop(0)
        if part == "..":
            if done:
                done.pop()
            continue
        candidate = root.joinpath(*done, part)
        if (pending or follow_last) and candidate.is_symlink():
            hops += 1
            if hops > 40:
                raise _FsError("invalid", f"too many levels of symbolic links: {path}")
            target = os.readlink(str(candidate))
            if target.startswith("/"):
                done = []
            pending = [p for p in target.split("/") if p not in ("", ".")] + pending
            continue
        done.append(part)
    return root.joinpath(*done), "/" + "/".join(done)


# -- sandboxes ---------------------------------------------------------------------------------


@dataclass
class _Process:
    pid: int
    proc: asyncio.subprocess.Process
    cmd: str
    args: list[str]
    envs: dict[str, str]
    cwd: str
    tag: str | None
    killed_at_deadline: bool = False
    deadline: asyncio.TimerHandle | None = None
    reaper: asyncio.Task[None] | None = None
    stdin_lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def kill(self) -> None:
        for kill in (os.killpg, os.kill):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                kill(self.proc.pid, signal.SIGKILL)


@dataclass
class _Sandbox:
    sandbox_id: str
    template: str
    metadata: dict[str, str]
    env_vars: dict[str, str]
    root: Path
    started_at: datetime
    end_at: datetime
    access_token: str
    allow_internet_access: bool | None
    state: State = "running"
    processes: dict[int, _Process] = field(default_factory=dict[int, _Process])
    next_pid: int = 1000
    created_seq: int = 0

    def listed(self) -> dict[str, object]:
        return {
            "templateID": self.template,
            "sandboxID": self.sandbox_id,
            "clientID": "emulator",
            "startedAt": _iso(self.started_at),
            "endAt": _iso(self.end_at),
            "cpuCount": 2,
            "memoryMB": 512,
            "diskSizeMB": 1024,
            "state": self.state,
            "envdVersion": ENVD_VERSION,
            "metadata": dict(self.metadata),
        }

    def created(self) -> dict[str, object]:
        return {
            "templateID": self.template,
            "sandboxID": self.sandbox_id,
            "clientID": "emulator",
            "envdVersion": ENVD_VERSION,
            "envdAccessToken": self.access_token,
            "trafficAccessToken": None,
            "domain": None,
        }


@dataclass(frozen=True, slots=True)
class EmulatedRequest:
    """One request the emulator received (see :meth:`E2BEmulator.requests`)."""

    method: str
    path: str
    """The URL path: ``/v2/sandboxes``, ``/files``, ``/process.Process/Start``, ..."""
    sandbox_id: str | None
    """The sandbox it was for: the ``E2b-Sandbox-Id`` header (envd) or the id in the path."""
    query: dict[str, list[str]]
    body: dict[str, object] | None
    """The JSON body of a control-plane request (``None`` for envd and bodiless requests)."""


_REQUEST_LOG_SIZE = 10_000


@dataclass(frozen=True, slots=True)
class EmulatedSandbox:
    """What the emulator knows of one sandbox (see :meth:`E2BEmulator.sandboxes`)."""

    sandbox_id: str
    template: str
    metadata: dict[str, str]
    state: State
    end_at: datetime
    root: Path
    """The host folder holding the sandbox's files."""
    allow_internet_access: bool | None


class _Emulation:
    """The state the ASGI handlers share; lives on the server's event loop."""

    def __init__(self, api_key: str, default_timeout: int) -> None:
        self.api_key = api_key
        self.home: Path | None = None  # the folder holding every sandbox's root
        self.default_timeout = default_timeout
        self.sandboxes: dict[str, _Sandbox] = {}
        self.deleters: list[threading.Thread] = []
        self.requests: list[EmulatedRequest] = []
        self.not_found: dict[str, int] = {}
        self.lock = threading.Lock()
        self.seq = 0
        self.unshare = shutil.which("unshare") or "unshare"
        # Where it exists, setpriv makes the kernel kill a sandbox's commands should the process
        # running the emulator die without stopping it (a test run killed with SIGKILL).
        setpriv = shutil.which("setpriv")
        self.launcher = [setpriv, "--pdeathsig", "KILL", "--"] if setpriv else []
        self.shell = "/bin/bash" if Path("/bin/bash").exists() else "/bin/sh"

    # -- requests --

    def record(self, request: EmulatedRequest) -> None:
        with self.lock:
            self.requests.append(request)
            if len(self.requests) > _REQUEST_LOG_SIZE:
                del self.requests[: len(self.requests) - _REQUEST_LOG_SIZE]

    def take_not_found(self, sandbox_id: str) -> bool:
        """Whether this envd request should answer "not found" although the sandbox lives."""
        with self.lock:
            left = self.not_found.get(sandbox_id, 0)
            if left <= 0:
                return False
            if left == 1:
                del self.not_found[sandbox_id]
            else:
                self.not_found[sandbox_id] = left - 1
            return True

    # -- lifecycle --

    def create(
        self,
        template: str,
        timeout: int | None,
        metadata: Mapping[str, str],
        env_vars: Mapping[str, str],
        allow_internet_access: bool | None,
    ) -> _Sandbox:
        root = Path(tempfile.mkdtemp(prefix="sandbox-", dir=self.home))
        _prepare_root(root)
        now = _now()
        with self.lock:
            self.seq += 1
            sandbox = _Sandbox(
                sandbox_id="i" + uuid.uuid4().hex[:19],
                template=template,
                metadata=dict(metadata),
                env_vars=dict(env_vars),
                root=root,
                started_at=now,
                end_at=now + timedelta(seconds=timeout or self.default_timeout),
                access_token=secrets.token_hex(16),
                allow_internet_access=allow_internet_access,
                created_seq=self.seq,
            )
            self.sandboxes[sandbox.sandbox_id] = sandbox
        return sandbox

    def expire_due(self) -> None:
        now = _now()
        with self.lock:
            due = [s for s in self.sandboxes.values() if s.end_at <= now]
        for sandbox in due:
            self.remove(sandbox.sandbox_id)

    def get(self, sandbox_id: str, *, running: bool) -> _Sandbox | None:
        self.expire_due()
        with self.lock:
            sandbox = self.sandboxes.get(sandbox_id)
        if sandbox is None or (running and sandbox.state != "running"):
            return None
        return sandbox

    def remove(self, sandbox_id: str) -> bool:
        with self.lock:
            sandbox = self.sandboxes.pop(sandbox_id, None)
        if sandbox is None:
            return False
        self._stop_processes(sandbox)
        deleter = threading.Thread(target=self._delete_root, args=(sandbox,), daemon=True)
        with self.lock:
            self.deleters = [t for t in self.deleters if t.is_alive()]
            self.deleters.append(deleter)
        deleter.start()
        return True

    def _stop_processes(self, sandbox: _Sandbox) -> None:
        for process in list(sandbox.processes.values()):
            process.kill()

    @staticmethod
    def _delete_root(sandbox: _Sandbox) -> None:
        # Asks the kernel, not the event loop (which may have stopped): a process that is gone
        # or a zombie writes nothing more.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(
            _alive(p.proc.pid) for p in list(sandbox.processes.values())
        ):
            time.sleep(0.02)
        _remove_tree(sandbox.root)

    def pause(self, sandbox_id: str) -> bool | None:
        sandbox = self.get(sandbox_id, running=False)
        if sandbox is None:
            return None
        if sandbox.state == "paused":
            return False
        sandbox.state = "paused"
        self._stop_processes(sandbox)
        return True

    def connect(self, sandbox_id: str, timeout: int | None) -> tuple[_Sandbox, bool] | None:
        sandbox = self.get(sandbox_id, running=False)
        if sandbox is None:
            return None
        resumed = sandbox.state == "paused"
        end = _now() + timedelta(seconds=timeout or self.default_timeout)
        if resumed:
            sandbox.state = "running"
            sandbox.end_at = end
        elif timeout is not None and end > sandbox.end_at:
            sandbox.end_at = end
        return sandbox, resumed

    def kill_everything(self) -> None:
        """Kill every command of every sandbox (their streams then end, so the server can stop
        without waiting for them)."""
        with self.lock:
            held = list(self.sandboxes.values())
        for sandbox in held:
            self._stop_processes(sandbox)

    def shutdown(self) -> None:
        with self.lock:
            held = list(self.sandboxes.values())
            self.sandboxes.clear()
            deleters = list(self.deleters)
        for sandbox in held:
            self._stop_processes(sandbox)
            self._delete_root(sandbox)
        for deleter in deleters:
            deleter.join(15)
        if self.home is not None:
            _remove_tree(self.home)
            self.home = None

    # -- processes --

    async def spawn(
        self,
        sandbox: _Sandbox,
        cmd: str,
        args: list[str],
        envs: Mapping[str, str],
        cwd: str | None,
        with_stdin: bool,
        tag: str | None,
    ) -> _Process:
        problem = namespaces_problem()
        if problem is not None:
            raise E2BEmulatorUnavailableError(problem)
        workdir = cwd or "/home/user"
        host_dir, shown = resolve_in_root(sandbox.root, workdir)
        if not host_dir.is_dir():
            raise _FsError("invalid", f"cwd '{workdir}' does not exist or is not a directory")
        if cmd in ("/bin/bash", "bash") and self.shell != "/bin/bash":
            cmd = self.shell
        env = {**_BASE_ENV, "E2B_SANDBOX_ID": sandbox.sandbox_id, **sandbox.env_vars, **envs}
        proc = await asyncio.create_subprocess_exec(
            *self.launcher,
            *_confined(
                self.unshare,
                sandbox.root,
                shown,
                [cmd, *args],
                network=sandbox.allow_internet_access is True,
            ),
            stdin=asyncio.subprocess.PIPE if with_stdin else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            cwd=str(sandbox.root),
            start_new_session=True,
        )
        sandbox.next_pid += 1
        process = _Process(sandbox.next_pid, proc, cmd, list(args), dict(envs), shown, tag)
        sandbox.processes[process.pid] = process

        async def forget_when_done() -> None:
            await proc.wait()
            sandbox.processes.pop(process.pid, None)

        process.reaper = asyncio.create_task(forget_when_done())
        if sandbox.state != "running" or sandbox.sandbox_id not in self.sandboxes:
            process.kill()  # removed while it started
        return process


# -- the envd services ----------------------------------------------------------------------------


def _services(emulation: _Emulation) -> tuple[Any, Any]:
    """The connect-rpc ASGI applications of envd's process and filesystem services."""
    from connectrpc.code import Code
    from connectrpc.errors import ConnectError
    from e2b.envd.filesystem import filesystem_connect, filesystem_pb
    from e2b.envd.process import process_connect, process_pb
    from protobuf import Oneof
    from protobuf.wkt.google.protobuf.timestamp_pb import Timestamp

    codes = {
        "not_found": Code.NOT_FOUND,
        "not_dir": Code.INVALID_ARGUMENT,
        "is_dir": Code.INVALID_ARGUMENT,
        "exists": Code.ALREADY_EXISTS,
        "invalid": Code.INVALID_ARGUMENT,
    }

    def fs_error(error: _FsError) -> Exception:
        return ConnectError(codes[error.code], error.message)

    def sandbox_of(ctx: Any) -> _Sandbox:
        headers = ctx.request_headers
        sandbox_id = str(headers.get("e2b-sandbox-id") or "")
        sandbox = emulation.get(sandbox_id, running=True)
        if sandbox is None:
            raise ConnectError(Code.UNAVAILABLE, f"The sandbox {sandbox_id} was not found")
        token = headers.get("x-access-token")
        if token != sandbox.access_token:
            raise ConnectError(Code.UNAUTHENTICATED, "invalid or missing X-Access-Token")
        return sandbox

    def entry(sandbox: _Sandbox, host: Path, shown: str) -> Any:
        info = host.lstat()
        is_link = stat.S_ISLNK(info.st_mode)
        target_info = info
        link_target: str | None = None
        if is_link:
            link_target = os.readlink(str(host))
            try:
                target_host, _ = resolve_in_root(sandbox.root, shown)
                target_info = target_host.stat()
            except (OSError, _FsError):
                target_info = None
        if target_info is None:  # a dangling link: reported as a link (older envd style)
            kind = filesystem_pb.FileType.SYMLINK
        elif stat.S_ISDIR(target_info.st_mode):
            kind = filesystem_pb.FileType.DIRECTORY
        else:
            kind = filesystem_pb.FileType.FILE
        modified = Timestamp()
        modified.seconds = int(info.st_mtime)
        return filesystem_pb.EntryInfo(
            name=host.name if shown != "/" else "/",
            type=kind,
            path=shown,
            size=(target_info or info).st_size,
            mode=info.st_mode & 0o7777,
            permissions=stat.filemode(info.st_mode),
            owner="user",
            group="user",
            modified_time=modified,
            symlink_target=link_target,
            is_symlink=is_link,
        )

    class FilesystemService(filesystem_connect.Filesystem):
        async def stat(self, request: Any, ctx: Any, /) -> Any:
            sandbox = sandbox_of(ctx)
            try:
                host, shown = resolve_in_root(sandbox.root, request.path, follow_last=False)
                if not host.exists() and not host.is_symlink():
                    raise _FsError("not_found", f"no such file or directory: {request.path}")
                return filesystem_pb.StatResponse(entry=entry(sandbox, host, shown))
            except _FsError as error:
                raise fs_error(error) from None
            except NotADirectoryError:
                raise ConnectError(Code.NOT_FOUND, f"not found: {request.path}") from None

        async def make_dir(self, request: Any, ctx: Any, /) -> Any:
            sandbox = sandbox_of(ctx)
            try:
                host, shown = resolve_in_root(sandbox.root, request.path)
                if host.is_dir():
                    raise _FsError("exists", f"directory already exists: {request.path}")
                host.mkdir(parents=True)
                return filesystem_pb.MakeDirResponse(entry=entry(sandbox, host, shown))
            except _FsError as error:
                raise fs_error(error) from None
            except FileExistsError:
                raise ConnectError(
                    Code.INVALID_ARGUMENT, f"path is not a directory: {request.path}"
                ) from None
            except NotADirectoryError:
                raise ConnectError(
                    Code.INVALID_ARGUMENT, f"a parent is not a directory: {request.path}"
                ) from None

        async def move(self, request: Any, ctx: Any, /) -> Any:
            sandbox = sandbox_of(ctx)
            try:
                source, _ = resolve_in_root(sandbox.root, request.source, follow_last=False)
                target, shown = resolve_in_root(
                    sandbox.root, request.destination, follow_last=False
                )
                if not source.exists() and not source.is_symlink():
                    raise _FsError("not_found", f"no such file or directory: {request.source}")
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(source, target)
                return filesystem_pb.MoveResponse(entry=entry(sandbox, target, shown))
            except _FsError as error:
                raise fs_error(error) from None
            except OSError as error:
                raise ConnectError(Code.INVALID_ARGUMENT, str(error)) from None

        async def list_dir(self, request: Any, ctx: Any, /) -> Any:
            sandbox = sandbox_of(ctx)
            try:
                host, shown = resolve_in_root(sandbox.root, request.path)
                if not host.exists():
                    raise _FsError("not_found", f"no such directory: {request.path}")
                if not host.is_dir():
                    raise _FsError("not_dir", f"path is not a directory: {request.path}")
                depth = max(1, int(request.depth or 1))
                found: list[Any] = []

                def walk(folder: Path, shown_folder: str, level: int) -> None:
                    for child in sorted(folder.iterdir(), key=lambda p: p.name):
                        child_shown = shown_folder.rstrip("/") + "/" + child.name
                        found.append(entry(sandbox, child, child_shown))
                        if level < depth and child.is_dir() and not child.is_symlink():
                            walk(child, child_shown, level + 1)

                walk(host, shown, 1)
                return filesystem_pb.ListDirResponse(entries=found)
            except _FsError as error:
                raise fs_error(error) from None
            except NotADirectoryError:
                raise ConnectError(
                    Code.INVALID_ARGUMENT, f"path is not a directory: {request.path}"
                ) from None

        async def remove(self, request: Any, ctx: Any, /) -> Any:
            sandbox = sandbox_of(ctx)
            try:
                host, shown = resolve_in_root(sandbox.root, request.path, follow_last=False)
                if shown == "/":
                    raise _FsError("invalid", "refusing to remove /")
                if host.is_symlink() or (host.exists() and not host.is_dir()):
                    host.unlink()
                elif host.is_dir():
                    shutil.rmtree(host)
                else:
                    raise _FsError("not_found", f"no such file or directory: {request.path}")
                return filesystem_pb.RemoveResponse()
            except _FsError as error:
                raise fs_error(error) from None
            except NotADirectoryError:
                raise ConnectError(Code.NOT_FOUND, f"not found: {request.path}") from None

    class ProcessService(process_connect.Process):
        async def list(self, request: Any, ctx: Any, /) -> Any:
            sandbox = sandbox_of(ctx)
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
                    if p.proc.returncode is None
                ]
            )

        def _process(self, ctx: Any, selector: Any) -> _Process:
            sandbox = sandbox_of(ctx)
            chosen = _oneof(selector.selector if selector is not None else None)
            for process in sandbox.processes.values():
                if process.proc.returncode is not None or chosen is None:
                    continue
                if chosen == ("pid", process.pid) or chosen == ("tag", process.tag):
                    return process
            raise ConnectError(Code.NOT_FOUND, "process not found")

        async def send_signal(self, request: Any, ctx: Any, /) -> Any:
            self._process(ctx, request.process).kill()
            return process_pb.SendSignalResponse()

        async def send_input(self, request: Any, ctx: Any, /) -> Any:
            process = self._process(ctx, request.process)
            data = request.input.input.value if request.input and request.input.input else b""
            stream = process.proc.stdin
            if stream is None:
                raise ConnectError(Code.FAILED_PRECONDITION, "the process has no stdin")
            async with process.stdin_lock:
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    stream.write(bytes(data))
                    await stream.drain()
            return process_pb.SendInputResponse()

        async def close_stdin(self, request: Any, ctx: Any, /) -> Any:
            process = self._process(ctx, request.process)
            stream = process.proc.stdin
            if stream is not None:
                async with process.stdin_lock:
                    stream.close()
                    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                        await stream.wait_closed()
            return process_pb.CloseStdinResponse()

        async def start(self, request: Any, ctx: Any, /) -> AsyncIterator[Any]:
            sandbox = sandbox_of(ctx)
            config = request.process or process_pb.ProcessConfig()
            with_stdin = request.stdin if request.has_field("stdin") else True
            timeout_ms = ctx.timeout_ms
            try:
                process = await emulation.spawn(
                    sandbox,
                    config.cmd,
                    list(config.args),
                    dict(config.envs),
                    config.cwd if config.has_field("cwd") else None,
                    with_stdin,
                    request.tag if request.has_field("tag") else None,
                )
            except _FsError as error:
                raise fs_error(error) from None
            loop = asyncio.get_running_loop()
            if timeout_ms is not None:

                def at_deadline() -> None:
                    if process.proc.returncode is None:
                        process.killed_at_deadline = True
                        process.kill()

                process.deadline = loop.call_later(max(0.0, timeout_ms / 1000), at_deadline)
            async for item in _stream(sandbox, process):
                yield item

    def _oneof(value: object) -> tuple[str, object] | None:
        if isinstance(value, Oneof):
            chosen = cast("Oneof[str, object]", value)
            return str(chosen.field), chosen.value
        return None

    def event(**kwargs: Any) -> Any:
        return process_pb.StartResponse(event=process_pb.ProcessEvent(**kwargs))

    async def _stream(sandbox: _Sandbox, process: _Process) -> AsyncIterator[Any]:
        queue: asyncio.Queue[tuple[str, bytes] | None] = asyncio.Queue(maxsize=64)

        async def pump(name: str, reader: asyncio.StreamReader | None) -> None:
            while reader is not None:
                chunk = await reader.read(64 * 1024)
                if not chunk:
                    break
                await queue.put((name, chunk))
            await queue.put(None)

        readers = [
            asyncio.create_task(pump("stdout", process.proc.stdout)),
            asyncio.create_task(pump("stderr", process.proc.stderr)),
        ]
        try:
            yield event(event=Oneof("start", process_pb.ProcessEvent.StartEvent(pid=process.pid)))
            open_streams = 2
            while open_streams:
                item = await queue.get()
                if item is None:
                    open_streams -= 1
                    continue
                name, chunk = item
                output: Any = Oneof(name, chunk)
                yield event(event=Oneof("data", process_pb.ProcessEvent.DataEvent(output=output)))
            code = await process.proc.wait()
        finally:
            # A client that went away leaves the process running, as envd does (its deadline
            # still holds); only the readers of this stream stop.
            for reader in readers:
                reader.cancel()
        if process.deadline is not None:
            process.deadline.cancel()
        if emulation.get(sandbox.sandbox_id, running=True) is None:
            # The sandbox went away under the command (expired, killed, paused): E2B's proxy
            # cuts the stream with its "not found" answer.
            raise ConnectError(Code.UNAVAILABLE, f"The sandbox {sandbox.sandbox_id} was not found")
        if process.killed_at_deadline:
            raise ConnectError(
                Code.DEADLINE_EXCEEDED, "the command ran past its timeout and was killed"
            )
        exit_code = code if code >= 0 else 128 - code
        yield event(
            event=Oneof(
                "end",
                process_pb.ProcessEvent.EndEvent(
                    exit_code=exit_code,
                    exited=code >= 0,
                    status=f"exit status {code}" if code >= 0 else f"signal: {-code}",
                ),
            )
        )

    return (
        process_connect.ProcessASGIApplication(ProcessService()),
        filesystem_connect.FilesystemASGIApplication(FilesystemService()),
    )


# -- the HTTP side: control plane, /files, /health ---------------------------------------------------

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def _decode_filename(value: str) -> str:
    # httpx writes form parameters the HTML5 way: '"' as %22, '\' doubled, control chars %XX.
    out: list[str] = []
    i = 0
    while i < len(value):
        char = value[i]
        if char == "%" and i + 2 < len(value) + 1 and value[i + 1 : i + 3].isalnum():
            code = value[i + 1 : i + 3]
            try:
                number = int(code, 16)
            except ValueError:
                number = -1
            if number == 0x22 or 0 <= number <= 0x1F:
                out.append(chr(number))
                i += 3
                continue
        if char == "\\" and value[i + 1 : i + 2] == "\\":
            out.append("\\")
            i += 2
            continue
        out.append(char)
        i += 1
    return "".join(out)


def _multipart(body: bytes, content_type: str) -> list[tuple[str, bytes]]:
    """(filename, content) of each part of a multipart/form-data body."""
    boundary = ""
    for piece in content_type.split(";")[1:]:
        key, _, value = piece.strip().partition("=")
        if key.lower() == "boundary":
            boundary = value.strip('"')
    if not boundary:
        raise ValueError("multipart body without a boundary")
    delimiter = b"--" + boundary.encode()
    parts: list[tuple[str, bytes]] = []
    position = body.find(delimiter)
    if position < 0:
        raise ValueError("multipart body without its boundary")
    position += len(delimiter)
    while True:
        if body[position : position + 2] == b"--":
            break
        if body[position : position + 2] == b"\r\n":
            position += 2
        header_end = body.find(b"\r\n\r\n", position)
        if header_end < 0:
            raise ValueError("multipart part without headers")
        headers = body[position:header_end].decode("utf-8", "surrogateescape")
        next_delimiter = body.find(b"\r\n" + delimiter, header_end + 4)
        if next_delimiter < 0:
            raise ValueError("multipart part without its closing boundary")
        content = body[header_end + 4 : next_delimiter]
        filename = ""
        for line in headers.split("\r\n"):
            name, _, value = line.partition(":")
            if name.strip().lower() != "content-disposition":
                continue
            marker = 'filename="'
            start = value.find(marker)
            if start >= 0:
                end = value.find('"', start + len(marker))
                filename = _decode_filename(value[start + len(marker) : end])
        parts.append((filename, content))
        position = next_delimiter + 2 + len(delimiter)
    return parts


class _Http:
    """A small ASGI app for the JSON control plane and envd's HTTP endpoints."""

    def __init__(self, emulation: _Emulation) -> None:
        self.emulation = emulation

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        query = urllib.parse.parse_qs(scope.get("query_string", b"").decode("latin-1"))
        method: str = scope["method"]
        path: str = scope["path"]
        if path == "/health" or path == "/files":
            await self._envd(method, path, headers, query, receive, send)
            return
        if headers.get("x-api-key") != self.emulation.api_key:
            await _error(send, 401, "Invalid API key")
            return
        body = await _read_body(receive)
        try:
            payload: Any = json.loads(body) if body else {}
        except ValueError:
            await _error(send, 400, "invalid JSON body")
            return
        parts = [p for p in path.split("/") if p]
        mentioned = next((p for p in parts[1:] if p not in ("sandboxes", "v2")), None)
        self.emulation.record(EmulatedRequest(method, path, mentioned, query, _json_object(body)))
        e = self.emulation
        if parts == ["v2", "sandboxes"] and method == "POST":
            metadata = cast("dict[str, str]", payload.get("metadata") or {})
            sandbox = e.create(
                str(payload.get("templateID") or "base"),
                payload.get("timeout"),
                metadata,
                cast("dict[str, str]", payload.get("envVars") or {}),
                payload.get("allow_internet_access"),
            )
            await _json(send, 201, sandbox.created())
        elif parts == ["v2", "sandboxes"] and method == "GET":
            await self._list(query, send)
        elif len(parts) == 4 and parts[:2] == ["v2", "sandboxes"] and parts[3] == "connect":
            connected = e.connect(parts[2], payload.get("timeout"))
            if connected is None:
                await _error(send, 404, f"sandbox {parts[2]} not found")
            else:
                sandbox, resumed = connected
                await _json(send, 201 if resumed else 200, sandbox.created())
        elif len(parts) == 2 and parts[0] == "sandboxes" and method == "GET":
            sandbox = e.get(parts[1], running=False)
            if sandbox is None:
                await _error(send, 404, f"sandbox {parts[1]} not found")
            else:
                await _json(send, 200, {**sandbox.listed(), **sandbox.created()})
        elif len(parts) == 2 and parts[0] == "sandboxes" and method == "DELETE":
            if e.remove(parts[1]):
                await _empty(send, 204)
            else:
                await _error(send, 404, f"sandbox {parts[1]} not found")
        elif len(parts) == 3 and parts[0] == "sandboxes" and parts[2] == "timeout":
            sandbox = e.get(parts[1], running=False)
            if sandbox is None:
                await _error(send, 404, f"sandbox {parts[1]} not found")
            else:
                sandbox.end_at = _now() + timedelta(seconds=int(payload.get("timeout") or 0))
                await _empty(send, 204)
        elif len(parts) == 3 and parts[0] == "sandboxes" and parts[2] == "pause":
            paused = e.pause(parts[1])
            if paused is None:
                await _error(send, 404, f"sandbox {parts[1]} not found")
            elif not paused:
                await _error(send, 409, "sandbox is already paused")
            else:
                await _empty(send, 204)
        else:
            await _error(send, 404, f"{method} {path} is not emulated")

    async def _list(self, query: dict[str, list[str]], send: Send) -> None:
        wanted: dict[str, str] = {}
        if query.get("metadata"):
            # The SDK quotes each key and value, then url-encodes the pairs into one parameter.
            wanted = {
                urllib.parse.unquote(k): urllib.parse.unquote(v)
                for k, v in urllib.parse.parse_qsl(query["metadata"][0], keep_blank_values=True)
            }
        states = set(",".join(query.get("state", [])).split(",")) - {""}
        limit = int((query.get("limit") or ["100"])[0])
        start = int((query.get("nextToken") or ["0"])[0] or 0)
        self.emulation.expire_due()
        with self.emulation.lock:
            everything = sorted(self.emulation.sandboxes.values(), key=lambda s: s.created_seq)
        matching = [
            s
            for s in everything
            if all(s.metadata.get(k) == v for k, v in wanted.items())
            and (not states or s.state in states)
        ]
        page = matching[start : start + limit]
        extra: list[tuple[bytes, bytes]] = []
        if start + limit < len(matching):
            extra.append((b"x-next-token", str(start + limit).encode()))
        await _json(send, 200, [s.listed() for s in page], extra)

    async def _envd(
        self,
        method: str,
        path: str,
        headers: dict[str, str],
        query: dict[str, list[str]],
        receive: Receive,
        send: Send,
    ) -> None:
        sandbox_id = headers.get("e2b-sandbox-id", "")
        sandbox = self.emulation.get(sandbox_id, running=True)
        if sandbox is None:
            await _error(send, 502, f"The sandbox {sandbox_id} was not found")
            return
        if headers.get("x-access-token") != sandbox.access_token:
            await _error(send, 401, "invalid or missing X-Access-Token")
            return
        if path == "/health":
            await _empty(send, 204)
            return
        if method == "GET":
            await self._download(sandbox, (query.get("path") or [""])[0], send)
            return
        if method != "POST":
            await _error(send, 405, f"{method} /files is not allowed")
            return
        body = await _read_body(receive)
        content_type = headers.get("content-type", "")
        try:
            if content_type.startswith("multipart/form-data"):
                files = _multipart(body, content_type)
                if len(files) == 1 and query.get("path"):
                    files = [(query["path"][0], files[0][1])]
            else:
                files = [((query.get("path") or [""])[0], body)]
        except ValueError as error:
            await _error(send, 400, str(error))
            return
        written: list[dict[str, str]] = []
        for file_path, content in files:
            try:
                shown = await asyncio.to_thread(_write, sandbox.root, file_path, content)
            except _FsError as error:
                status = 404 if error.code == "not_found" else 400
                await _error(send, status, error.message)
                return
            written.append({"name": shown.rsplit("/", 1)[-1], "type": "file", "path": shown})
        await _json(send, 200, written)

    async def _download(self, sandbox: _Sandbox, path: str, send: Send) -> None:
        try:
            host, _ = resolve_in_root(sandbox.root, path)
        except _FsError as error:
            await _error(send, 400, error.message)
            return
        try:
            handle = await asyncio.to_thread(open, host, "rb")
        except (FileNotFoundError, NotADirectoryError):
            await _error(send, 404, f"path '{path}' does not exist")
            return
        except IsADirectoryError:
            await _error(send, 400, f"path '{path}' is a directory")
            return
        try:
            if not opened_inside(sandbox.root, handle.fileno()):  # swapped for a link meanwhile
                await _error(send, 404, f"path '{path}' does not exist")
                return
            if stat.S_ISDIR(os.fstat(handle.fileno()).st_mode):
                await _error(send, 400, f"path '{path}' is a directory")
                return
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


def _write(root: Path, path: str, content: bytes) -> str:
    host, shown = resolve_in_root(root, path)
    if host.is_dir():
        raise _FsError("is_dir", f"path '{shown}' is a directory")
    # Parents: made as needed; one that is a file is an error, and nothing is written.
    parent = host.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise _FsError("not_dir", f"a parent of '{shown}' is not a directory") from None
    if not parent.is_dir():
        raise _FsError("not_dir", f"a parent of '{shown}' is not a directory")
    # Truncated only once the opened file is known to be inside the root: a command may swap a
    # folder for a link to the host between the resolution above and this open.
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
    try:
        descriptor = os.open(host, flags, 0o644)
    except IsADirectoryError:
        raise _FsError("is_dir", f"path '{shown}' is a directory") from None
    except OSError as error:  # a link appeared at the last step (ELOOP), ...
        raise _FsError("invalid", f"cannot write '{shown}': {error.strerror}") from None
    with os.fdopen(descriptor, "wb") as handle:
        if not opened_inside(root, descriptor):
            raise _FsError("invalid", f"'{shown}' changed while it was written; nothing written")
        handle.truncate(0)
        handle.write(content)
    return shown


def opened_inside(root: Path, descriptor: int) -> bool:
    """Whether the open file ``descriptor`` lies under ``root`` (as the kernel sees it now)."""
    try:
        opened = os.readlink(f"/proc/self/fd/{descriptor}")
    except OSError:
        return False
    top = os.path.realpath(root)
    return opened == top or opened.startswith(top.rstrip("/") + "/")


def _json_object(body: bytes) -> dict[str, object] | None:
    """The body as a JSON object (a copy for the request log), or ``None``."""
    if not body:
        return None
    loaded: object = json.loads(body)
    return cast("dict[str, object]", loaded) if isinstance(loaded, dict) else None


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    return b"".join(chunks)


async def _json(
    send: Send, status: int, payload: object, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = json.dumps(payload).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *(extra or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _error(send: Send, status: int, message: str) -> None:
    """An error answer in the shape E2B's API and proxy use."""
    await _json(send, status, {"code": status, "message": message})


async def _empty(send: Send, status: int) -> None:
    await send({"type": "http.response.start", "status": status, "headers": []})
    await send({"type": "http.response.body", "body": b""})


def _app(emulation: _Emulation) -> Callable[[dict[str, Any], Receive, Send], Awaitable[None]]:
    process_app, filesystem_app = _services(emulation)
    http = _Http(emulation)

    async def app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # uvicorn runs it with lifespan="off"
            return
        path: str = scope["path"]
        headers = {k.decode("latin-1").lower(): v for k, v in scope["headers"]}
        envd = path.startswith(("/process.Process/", "/filesystem.Filesystem/"))
        if envd or path in ("/files", "/health"):
            sandbox_id = headers.get("e2b-sandbox-id", b"").decode("latin-1")
            query = urllib.parse.parse_qs(scope.get("query_string", b"").decode("latin-1"))
            emulation.record(EmulatedRequest(scope["method"], path, sandbox_id, query, None))
            if emulation.get(sandbox_id, running=True) is None or emulation.take_not_found(
                sandbox_id
            ):
                # What E2B's proxy answers for a sandbox that is gone (not a Connect error).
                await _error(send, 502, f"The sandbox {sandbox_id} was not found")
                return
        if envd:
            target = process_app if path.startswith("/process.") else filesystem_app
            await target(scope, receive, send)
            return
        await http(scope, receive, send)

    return app


# -- the server ------------------------------------------------------------------------------------


class E2BEmulator:
    """An E2B control plane and envd on 127.0.0.1, on a free port, for tests. A TEST DOUBLE, NOT
    ISOLATION: see the module documentation and the package README.

    Use it as a context manager (``with`` or ``async with``); it serves from a background thread
    with its own event loop, so the code under test can use it from any event loop or none.
    :attr:`env` holds the ``E2B_*`` variables that point the ``e2b`` SDK (and the ``e2b``
    provider) at it.

    Example::

        with E2BEmulator() as emulator:
            provider = E2BSandboxProvider(
                api_key=emulator.api_key, api_url=emulator.url, sandbox_url=emulator.url
            )

    The recovery paths of a provider are exercised with :meth:`expire`, :meth:`pause` and
    :meth:`remove`; :meth:`sandboxes` shows what exists.
    """

    def __init__(self, *, api_key: str | None = None, default_timeout: int = 300) -> None:
        self.api_key: str = api_key or "e2b_emulator_" + secrets.token_hex(12)
        """The only API key the emulator accepts."""
        self._emulation = _Emulation(self.api_key, default_timeout)
        self._thread: threading.Thread | None = None
        self._server: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._port = 0

    # -- lifecycle --

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``: both the API URL and the sandbox (envd) URL."""
        if not self._port:
            raise RuntimeError("the E2B emulator is not running; use it in a `with` block")
        return f"http://127.0.0.1:{self._port}"

    @property
    def env(self) -> dict[str, str]:
        """``E2B_API_KEY``, ``E2B_API_URL`` and ``E2B_SANDBOX_URL`` for this emulator."""
        return {"E2B_API_KEY": self.api_key, "E2B_API_URL": self.url, "E2B_SANDBOX_URL": self.url}

    def start(self) -> E2BEmulator:
        """Serve (idempotent); returns ``self``. Raises
        :class:`~pai.sandbox_e2b.E2BEmulatorUnavailableError` where commands cannot run."""
        if self._thread is not None:
            return self
        problem = namespaces_problem()
        if problem is not None:
            raise E2BEmulatorUnavailableError(
                f"the E2B emulator cannot run commands here: {problem}. It runs on Linux hosts "
                "that allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1"
                "; on Ubuntu 24.04 also kernel.apparmor_restrict_unprivileged_userns=0)"
            )
        try:
            import uvicorn
        except ImportError:
            raise E2BEmulatorUnavailableError(
                "the E2B emulator needs uvicorn: pip install 'pai-sandbox-e2b[testing]'"
            ) from None

        _sweep()
        self._emulation.home = _make_home()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self._port = sock.getsockname()[1]
        config = uvicorn.Config(
            _app(self._emulation),
            log_level="warning",
            http="h11",
            lifespan="off",
            access_log=False,
            timeout_keep_alive=30,
            # A client that stopped reading a stream must not keep the emulator from stopping.
            timeout_graceful_shutdown=3,
        )
        server = uvicorn.Server(config)
        self._server = server
        started = threading.Event()

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)

            async def main() -> None:
                expiry = asyncio.create_task(self._expire_loop())
                started.set()
                try:
                    await server.serve(sockets=[sock])
                finally:
                    expiry.cancel()

            try:
                loop.run_until_complete(main())
            finally:
                loop.close()

        self._thread = threading.Thread(target=serve, name="pai-e2b-emulator", daemon=True)
        self._thread.start()
        started.wait(10)
        deadline = time.monotonic() + 10
        while not server.started and time.monotonic() < deadline and self._thread.is_alive():
            time.sleep(0.005)
        if not server.started:
            self.stop()
            raise E2BEmulatorUnavailableError("the E2B emulator's server did not start")
        return self

    async def _expire_loop(self) -> None:
        while True:
            await asyncio.sleep(0.1)
            await asyncio.to_thread(self._emulation.expire_due)

    def stop(self) -> None:
        """Kill every sandbox's processes, stop serving and delete the sandboxes' files."""
        self._emulation.kill_everything()  # their streams end, so serving stops promptly
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(15)
        self._emulation.shutdown()
        self._thread = None
        self._server = None
        self._port = 0

    def __enter__(self) -> E2BEmulator:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    async def __aenter__(self) -> E2BEmulator:
        import anyio.to_thread

        return await anyio.to_thread.run_sync(self.start)

    async def __aexit__(self, *exc_info: object) -> None:
        import anyio.to_thread

        await anyio.to_thread.run_sync(self.stop)

    # -- controls --

    def sandboxes(self) -> list[EmulatedSandbox]:
        """Every sandbox the emulator holds (running and paused), oldest first."""
        self._emulation.expire_due()
        with self._emulation.lock:
            held = sorted(self._emulation.sandboxes.values(), key=lambda s: s.created_seq)
        return [
            EmulatedSandbox(
                s.sandbox_id,
                s.template,
                dict(s.metadata),
                s.state,
                s.end_at,
                s.root,
                s.allow_internet_access,
            )
            for s in held
        ]

    def find(self, **metadata: str) -> list[EmulatedSandbox]:
        """The sandboxes whose metadata has every given key and value."""
        return [
            s for s in self.sandboxes() if all(s.metadata.get(k) == v for k, v in metadata.items())
        ]

    def expire(self, sandbox_id: str) -> None:
        """End the sandbox's lifetime now, as its timeout would: its processes are killed and
        its files deleted; E2B then answers "not found" for it."""
        with self._emulation.lock:
            sandbox = self._emulation.sandboxes.get(sandbox_id)
        if sandbox is None:
            raise KeyError(f"no sandbox {sandbox_id!r} in the emulator")
        sandbox.end_at = _now() - timedelta(seconds=1)
        self._emulation.expire_due()

    def pause(self, sandbox_id: str) -> None:
        """Pause the sandbox (its running commands end, its files stay); envd then answers
        "not found" until a connect resumes it."""
        if self._emulation.pause(sandbox_id) is None:
            raise KeyError(f"no sandbox {sandbox_id!r} in the emulator")

    def remove(self, sandbox_id: str) -> None:
        """Kill the sandbox as ``DELETE /sandboxes/{id}`` would."""
        if not self._emulation.remove(sandbox_id):
            raise KeyError(f"no sandbox {sandbox_id!r} in the emulator")

    def answer_not_found(self, sandbox_id: str, times: int = 1) -> None:
        """Make envd's next ``times`` requests for this (live) sandbox answer 502 "... was not
        found", as E2B's proxy intermittently does; the sandbox itself stays as it is."""
        if times < 1:
            raise ValueError(f"times must be at least 1, got {times!r}")
        with self._emulation.lock:
            if sandbox_id not in self._emulation.sandboxes:
                raise KeyError(f"no sandbox {sandbox_id!r} in the emulator")
            self._emulation.not_found[sandbox_id] = times

    def requests(self, sandbox_id: str | None = None) -> list[EmulatedRequest]:
        """The requests received so far (the last 10,000), oldest first; only those for
        ``sandbox_id`` when it is given."""
        with self._emulation.lock:
            held = list(self._emulation.requests)
        return [r for r in held if sandbox_id is None or r.sandbox_id == sandbox_id]

    def set_timeout(self, sandbox_id: str, seconds: float) -> None:
        """Set the sandbox's remaining lifetime."""
        with self._emulation.lock:
            sandbox = self._emulation.sandboxes.get(sandbox_id)
        if sandbox is None:
            raise KeyError(f"no sandbox {sandbox_id!r} in the emulator")
        sandbox.end_at = _now() + timedelta(seconds=seconds)

    def __repr__(self) -> str:
        where = self.url if self._port else "stopped"
        return f"E2BEmulator({where})"
