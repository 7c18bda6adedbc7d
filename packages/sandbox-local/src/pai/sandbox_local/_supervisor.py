"""The supervisor: the one long-lived process inside a local sandbox's namespaces.

The host starts it once per instance (``bwrap ... python3 -I -S supervisor.py FD``, with the
host's own interpreter mounted read-only at ``/opt/pai/python``) and hands it a listening Unix
socket as file descriptor ``FD``; every operation is one connection to that socket: one request
frame in, result frames out, then the connection closes. Nothing is multiplexed, so a host that
gives up on an operation (a cancelled caller, its own deadline) just closes the connection, and
the supervisor kills what the operation started.

This file runs with the standard library only (``-I -S``: nothing of the host's site-packages),
and the host imports its framing functions too, so both sides read one definition of the wire.
It imports as little as it can: its start is most of a new sandbox's first command.

A frame is an 8-byte header (two big-endian unsigned 32-bit lengths), a document (a list
starting with its kind) and a binary payload. The host's requests are ``marshal`` documents
(built in, nothing to import; the supervisor trusts the host); the supervisor's answers are JSON
(ASCII), which is all the host ever decodes from a sandbox. Requests::

    ["run", {script, cwd, env, stdin, timeout, output_limit}] + stdin bytes
    ["read", path, max_bytes]          -> ["data"] + the file's bytes
    ["write", [[path, mode, size], ...]] + the contents, one after another
    ["list", path]                     -> ["entries", [[name, type, size], ...]]
    ["remove", path, recursive]  ["mkdir", path, parents]  ["exists", path]
    ["ping"]                           -> ["pong", {facts}]

Answers: ``["ok", value]``, ``["err", errno_name, message]``; a command streams
``["out", 1 or 2] + chunk`` frames and ends with ``["exit", {code, timed_out, truncated}]``.

Commands. Each runs as ``SHELL -c SCRIPT`` under a *command init*: a forked copy of this process
that marks itself the child subreaper, so everything the command starts (background jobs,
double forks, ``setsid`` and ``env -i`` orphans) stays its descendant. At the deadline, or when the
host hangs up, the supervisor stops and kills that whole subtree (found through ``/proc``, again
until nothing is left) and then the command init: nothing of the command runs afterwards.
"""

from __future__ import annotations

import ctypes
import errno
import marshal
import os
import resource
import selectors
import signal
import socket
import stat
import struct
import sys
import time

TYPE_CHECKING = False  # not typing's: importing typing would cost every sandbox's start
if TYPE_CHECKING:
    from typing import cast
else:

    def cast(_type: object, value: object) -> object:
        return value


HEADER = struct.Struct("!II")
"""The frame header: the JSON document's length, then the payload's length."""

MAX_JSON = 4 * 1024 * 1024
"""The largest JSON document either side accepts."""

MAX_REQUEST_PAYLOAD = 1024 * 1024 * 1024
"""The largest payload the supervisor accepts in one request (a batch of files, stdin)."""

CHUNK = 64 * 1024
"""How much of a command's output is read (and forwarded) at a time."""

EXIT_TIMEOUT = 124
SHELL = "/bin/bash" if os.access("/bin/bash", os.X_OK) else "/bin/sh"
"""What runs a command's script: bash where the sandbox has it, as the contract asks."""
_PR_SET_CHILD_SUBREAPER = 36


class ProtocolError(Exception):
    """A frame that breaks the format (too long, not JSON, wrong shape)."""


def encode_request(document: list[object], payload: bytes = b"") -> bytes:
    """A request frame (host to supervisor): ``document`` as marshal data, plus ``payload``."""
    body = marshal.dumps(document)
    if len(body) > MAX_JSON:
        raise ProtocolError(f"a request of {len(body)} bytes is over the limit of {MAX_JSON}")
    return HEADER.pack(len(body), len(payload)) + body + payload


def decode_request(body: bytes) -> list[object]:
    """A request's document: a non-empty list starting with a string."""
    try:
        document: object = marshal.loads(body)
    except (EOFError, ValueError, TypeError) as error:
        raise ProtocolError(f"a request is not readable: {error}") from None
    if not isinstance(document, list) or not document or not isinstance(document[0], str):
        raise ProtocolError("a request is not a list starting with its kind")
    return document  # pyright: ignore[reportUnknownVariableType]


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _quote(text: str) -> str:
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'
    parts: list[str] = []
    for char in text:
        code = ord(char)
        if char in _ESCAPES:
            parts.append(_ESCAPES[char])
        elif 0x20 <= code < 0x7F:
            parts.append(char)
        elif code <= 0xFFFF:  # lone surrogates (surrogateescape) included, as \udcXX
            parts.append(f"\\u{code:04x}")
        else:
            code -= 0x10000
            parts.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
    return '"' + "".join(parts) + '"'


def _json(value: object) -> str:
    """``value`` as JSON text (ASCII): the answers' few types, without importing ``json``."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, (list, tuple)):
        items = cast("list[object]", value)
        return "[" + ",".join(_json(item) for item in items) + "]"
    if isinstance(value, dict):
        pairs = cast("dict[object, object]", value)
        return "{" + ",".join(f"{_quote(str(k))}:{_json(v)}" for k, v in pairs.items()) + "}"
    raise ProtocolError(f"cannot send a {type(value).__name__}")


def encode_answer(document: object, payload: bytes = b"") -> bytes:
    """An answer frame (supervisor to host): ``document`` as JSON, plus ``payload``."""
    body = _json(document).encode("ascii")
    if len(body) > MAX_JSON:
        raise ProtocolError(f"an answer of {len(body)} bytes is over the limit of {MAX_JSON}")
    return HEADER.pack(len(body), len(payload)) + body + payload


# -- files ----------------------------------------------------------------------------------------


def _entry_type(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISREG(mode):
        return "file"
    return "other"


def _read(path: str, max_bytes: int) -> tuple[object, bytes]:
    # Opened first, then measured: the size checked is the size of the file that is read.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, "Is a directory", path)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        if info.st_size > max_bytes:
            return ["too_large", info.st_size], b""
        chunks: list[bytes] = []
        left = max_bytes + 1  # one byte over tells a file that grew past the limit
        while left > 0:
            chunk = os.read(fd, min(left, 1024 * 1024))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > max_bytes:
            return ["too_large", len(data)], b""
        return ["data"], data
    finally:
        os.close(fd)


def _write(entries: list[list[object]], payload: bytes) -> None:
    offset = 0
    for path, mode, size in entries:
        assert isinstance(path, str)
        assert isinstance(mode, int)
        assert isinstance(size, int)
        content = payload[offset : offset + size]
        offset += size
        try:
            _write_one(path, mode, content)
        except OSError as error:
            # Reported against the path asked for, whichever part of it failed.
            raise OSError(error.errno, error.strerror, path) from None


def _write_one(path: str, mode: int, content: bytes) -> None:
    parent = os.path.dirname(path)
    if parent and not os.path.isdir(parent):
        try:
            os.makedirs(parent, exist_ok=True)
        except FileExistsError:  # a file where a folder of the path should be
            raise NotADirectoryError(errno.ENOTDIR, "Not a directory", path) from None
    # No O_TRUNC before we know it is a file: opening a folder for writing fails (EISDIR), and
    # the folder is left as it was.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        os.ftruncate(fd, 0)
        view = memoryview(content)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fchmod(fd, mode & 0o7777)
    finally:
        os.close(fd)


def _list(path: str) -> list[list[object]]:
    entries: list[list[object]] = []
    with os.scandir(path) as listing:
        for entry in listing:
            try:
                info = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue  # removed while listed
            entries.append([entry.name, _entry_type(info.st_mode), info.st_size])
    entries.sort(key=lambda item: str(item[0]))
    return entries


def _remove(path: str, recursive: bool) -> None:
    info = os.lstat(path)
    if stat.S_ISDIR(info.st_mode):
        if recursive:
            import shutil  # here: its import is a cost every sandbox's start would pay

            shutil.rmtree(path)  # never follows a link out of the folder
        else:
            os.rmdir(path)
    else:
        os.unlink(path)


def _make_dir(path: str, parents: bool) -> None:
    if parents:
        if os.path.isdir(path):
            return
        os.makedirs(path, exist_ok=True)
    else:
        os.mkdir(path)


def file_operation(request: list[object], payload: bytes) -> tuple[object, bytes]:
    """Run one file request; its answer (``["ok", value]`` or a payload-carrying document)."""
    kind = request[0]
    if kind == "read":
        path, max_bytes = request[1], request[2]
        assert isinstance(path, str)
        assert isinstance(max_bytes, int)
        return _read(path, max_bytes)
    if kind == "write":
        entries = request[1]
        assert isinstance(entries, list)
        _write(entries, payload)  # pyright: ignore[reportUnknownArgumentType]
        return ["ok", None], b""
    if kind == "list":
        path = request[1]
        assert isinstance(path, str)
        return ["ok", _list(path)], b""
    if kind == "remove":
        path, recursive = request[1], request[2]
        assert isinstance(path, str)
        _remove(path, bool(recursive))
        return ["ok", None], b""
    if kind == "mkdir":
        path, parents = request[1], request[2]
        assert isinstance(path, str)
        _make_dir(path, bool(parents))
        return ["ok", None], b""
    if kind == "exists":
        path = request[1]
        assert isinstance(path, str)
        return ["ok", os.path.exists(path)], b""
    raise ProtocolError(f"unknown request {kind!r}")


# -- commands -------------------------------------------------------------------------------------


_LIBC = ctypes.CDLL(None, use_errno=True)  # loaded once: a command's init only calls prctl


def _set_subreaper() -> None:
    if _LIBC.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        os._exit(125)


def _descendants(root: int) -> list[int]:
    """Every process below ``root`` (children, theirs, ...), from ``/proc``."""
    parents: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as file:
                data = file.read()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        fields = data[data.rfind(b")") + 2 :].split()
        if len(fields) > 1:
            parents[int(name)] = int(fields[1])
    found: list[int] = []
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, ppid in parents.items():
            if ppid == parent:
                found.append(pid)
                frontier.append(pid)
    return found


def kill_tree(init_pid: int) -> None:
    """Stop, then kill, everything below the command init ``init_pid``, until nothing is left."""
    for _ in range(100):
        below = _descendants(init_pid)
        if not below:
            break
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for pid in below:
                try:
                    os.kill(pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
        time.sleep(0.001)
    try:
        os.kill(init_pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


class Spare:
    """A command init forked ahead of time, waiting for its command on ``channel``.

    Forking this process is the slowest step of starting a command, so it happens between
    commands: the supervisor keeps one spare and forks the next right after handing one out.
    The spare marks itself the child subreaper, receives the command (its JSON and the three
    ends of its standard streams, as ancillary data) and then works as :func:`_run_command`
    says. Its wait status goes back on the same channel; an end-of-file there without one means
    the init died.
    """

    def __init__(self) -> None:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.pid = os.fork()
        if self.pid == 0:
            parent.close()
            _spare_main(child)  # never returns
        child.close()
        self.channel = parent

    def hand(self, job: dict[str, object], fds: list[int]) -> int:
        """Send the command to the spare; the channel's file descriptor, for its status."""
        body = marshal.dumps(job)
        head = HEADER.pack(len(body), 0)
        socket.send_fds(self.channel, [head], fds)
        self.channel.sendall(body)
        return self.channel.detach()

    def discard(self) -> None:
        """Kill a spare that will not be used."""
        self.channel.close()
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _spare_main(channel: socket.socket) -> None:
    """A spare command init's life (never returns)."""
    try:
        fd = channel.fileno()
        os.closerange(3, fd)
        os.closerange(fd + 1, os.sysconf("SC_OPEN_MAX"))
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGPIPE, signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        _set_subreaper()
        head, fds, _, _ = socket.recv_fds(channel, HEADER.size, 3)
        if len(head) < HEADER.size or len(fds) != 3:
            os._exit(0)  # the supervisor ended, or handed out nothing
        for received in fds:  # SCM_RIGHTS gives them without close-on-exec: only 0-2 go on
            os.set_inheritable(received, False)
        size, _ = HEADER.unpack(head)
        body = bytearray()
        while len(body) < size:
            chunk = channel.recv(size - len(body))
            if not chunk:
                os._exit(0)
            body += chunk
        job = marshal.loads(body)
        env = {str(k): str(v) for k, v in job["env"].items()}
        file_size = job.get("file_size")
        _run_command(
            str(job["script"]),
            str(job["cwd"]),
            env,
            (fds[0], fds[1], fds[2]),
            fd,
            file_size if type(file_size) is int else None,
        )
    finally:
        os._exit(0)


def _run_command(
    script: str,
    cwd: str,
    env: dict[str, str],
    fds: tuple[int, int, int],
    status: int,
    file_size: int | None = None,
) -> None:
    """In a command init: start ``SHELL -c script``, reap it and every orphan that falls to
    this process, and write the shell's wait status to ``status``. ``file_size``, when given,
    lowers ``RLIMIT_FSIZE`` for this command (0 while the workspace is over its disk limit)."""
    _apply_limits()  # inherited by the shell and everything it starts
    if file_size is not None:
        _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        lowered = file_size if hard == resource.RLIM_INFINITY else min(file_size, hard)
        resource.setrlimit(resource.RLIMIT_FSIZE, (lowered, lowered))
    stdin, stdout, stderr = fds
    try:
        os.chdir(cwd)
    except OSError as error:
        os.write(stderr, f"cannot run the command in {cwd}: {error.strerror}\n".encode())
        os.write(status, f"{1 << 8}\n".encode())  # a wait status: exit code 1
        return
    # posix_spawn (vfork underneath): no second copy of this Python process per command.
    try:
        pid = os.posix_spawn(
            SHELL,
            [os.path.basename(SHELL), "-c", script],
            env,
            file_actions=[
                (os.POSIX_SPAWN_DUP2, stdin, 0),
                (os.POSIX_SPAWN_DUP2, stdout, 1),
                (os.POSIX_SPAWN_DUP2, stderr, 2),
            ],
            setsid=True,
        )
    except OSError as error:
        os.write(stderr, f"{SHELL}: {error.strerror}\n".encode())
        os.write(status, f"{127 << 8}\n".encode())
        return
    for fd in fds:
        os.close(fd)
    reported = False
    while True:  # reap the shell and every orphan that falls to us
        try:
            done, code = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        if done == pid:
            reported = True
            os.write(status, f"{code}\n".encode())
    if not reported:
        os.write(status, b"-1\n")


class Command:
    """One running command and the connection that asked for it."""

    def __init__(
        self, conn: Connection, options: dict[str, object], stdin: bytes, spare: Spare
    ) -> None:
        self.conn = conn
        self.output_limit = int(options.get("output_limit", 1 << 20))  # type: ignore[arg-type]
        timeout = options.get("timeout")
        self.deadline = None if timeout is None else time.monotonic() + float(timeout)  # type: ignore[arg-type]
        self.sent = [0, 0]
        self.truncated = False
        self.status: int | None = None
        self.timed_out = False
        self.open_streams = 2
        self.stdin = stdin
        self.stdin_fd: int | None = None
        env = {str(k): str(v) for k, v in dict(options.get("env") or {}).items()}  # type: ignore[arg-type]
        stdin_r, stdin_w = (
            os.pipe() if options.get("stdin") else (os.open(os.devnull, os.O_RDONLY), -1)
        )
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        self.pid = spare.pid
        file_size = options.get("file_size")
        job = {
            "script": options["script"],
            "cwd": options["cwd"],
            "env": env,
            "file_size": file_size if type(file_size) is int and file_size >= 0 else None,
        }
        try:
            status_r = spare.hand(job, [stdin_r, out_w, err_w])
        finally:
            for fd in (stdin_r, out_w, err_w):
                os.close(fd)
        self.out_fds = {out_r: 0, err_r: 1}
        self.status_fd = status_r
        self.status_buf = b""
        if stdin_w >= 0:
            os.set_blocking(stdin_w, False)
            self.stdin_fd = stdin_w
            if not self.stdin:
                os.close(stdin_w)
                self.stdin_fd = None
        for fd in self.out_fds:
            os.set_blocking(fd, False)

    @property
    def finished(self) -> bool:
        return self.status is not None and self.open_streams == 0

    def result(self) -> dict[str, object]:
        if self.timed_out:
            code = EXIT_TIMEOUT
        elif self.status is None or self.status < 0:
            code = 137
        elif os.WIFSIGNALED(self.status):
            code = 128 + os.WTERMSIG(self.status)
        else:
            code = os.WEXITSTATUS(self.status)
        return {"code": code, "timed_out": self.timed_out, "truncated": self.truncated}


class Connection:
    """One accepted connection: reads one request, then answers it."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.inbuf = bytearray()
        self.outbuf = bytearray()
        self.command: Command | None = None
        self.closing = False
        self.request_done = False


class Watch:
    """What a command's file descriptor in the selector is for."""

    __slots__ = ("command", "kind")

    def __init__(self, kind: str, command: Command) -> None:
        self.kind = kind
        self.command = command


def _ignore_signal(signum: int, frame: object) -> None:
    """SIGCHLD's handler: the signal only has to wake the selector (``set_wakeup_fd``)."""


class Supervisor:
    def __init__(self, listener: socket.socket) -> None:
        self.listener = listener
        self.selector = selectors.DefaultSelector()
        self.connections: dict[int, Connection] = {}
        self.commands: dict[int, Command] = {}  # by command init pid
        self.fd_owner: dict[int, Command] = {}
        wake_r, wake_w = socket.socketpair()
        wake_r.setblocking(False)
        wake_w.setblocking(False)
        self.wake_r = wake_r
        self.wake_w = wake_w
        signal.set_wakeup_fd(wake_w.fileno())
        signal.signal(signal.SIGCHLD, _ignore_signal)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        self.spare: Spare | None = None
        self.selector.register(listener, selectors.EVENT_READ, "listen")
        self.selector.register(wake_r, selectors.EVENT_READ, "wake")

    # -- the loop ---------------------------------------------------------------------------------

    def serve(self, keep_alive: float | None) -> None:
        """Serve until idle for ``keep_alive`` seconds (no connection, and no process of the
        sandbox but this one and its spare), then end: the sandbox's namespaces go with it,
        its files stay, and the next operation starts a new supervisor."""
        self.spare = Spare()
        idle_since = time.monotonic()
        while True:
            # The next spare is forked once nothing else waits (a command just took the last).
            short = self._spare_taken()
            timeout = 0 if short else self._next_deadline()
            if keep_alive is not None and not self.connections:
                left = idle_since + keep_alive - time.monotonic()
                if left <= 0:
                    if self._alone():
                        self._retire()
                    idle_since = time.monotonic()  # something still runs: look again later
                    continue
                timeout = left if timeout is None else min(timeout, left)
            ready = self.selector.select(timeout)
            if ready or self.connections:
                idle_since = time.monotonic()
            if not ready and short:
                self.spare = Spare()
                continue
            for key, events in ready:
                data = key.data
                if data == "listen":
                    self._accept()
                elif data == "wake":
                    try:
                        self.wake_r.recv(4096)
                    except BlockingIOError:
                        pass
                elif isinstance(data, Connection):
                    if events & selectors.EVENT_READ:
                        self._readable(data)
                    if events & selectors.EVENT_WRITE and data.sock.fileno() >= 0:
                        self._flush(data)
                elif isinstance(data, Watch):
                    if data.kind == "out":
                        self._output(data.command, key.fd)
                    elif data.kind == "status":
                        self._status(data.command)
                    else:
                        self._feed(data.command)
            self._reap()
            self._expire()

    def _alone(self) -> bool:
        """Whether nothing runs in the sandbox but this process, its spare, and bwrap's init."""
        ours: set[int] = {1, os.getpid()}
        if self.spare is not None:
            ours.add(self.spare.pid)
        return all(not name.isdigit() or int(name) in ours for name in os.listdir("/proc"))

    def _retire(self) -> None:
        if self.spare is not None:
            self.spare.discard()
        os._exit(0)

    def _spare_taken(self) -> bool:
        return self.spare is None

    def _next_deadline(self) -> float | None:
        deadlines = [c.deadline for c in self.commands.values() if c.deadline is not None]
        if not deadlines:
            return None
        return max(min(deadlines) - time.monotonic(), 0)

    def _accept(self) -> None:
        try:
            sock, _ = self.listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        sock.setblocking(False)
        conn = Connection(sock)
        self.connections[sock.fileno()] = conn
        self.selector.register(sock, selectors.EVENT_READ, conn)

    def _readable(self, conn: Connection) -> None:
        try:
            data = conn.sock.recv(1024 * 1024)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._hangup(conn)
            return
        if conn.request_done:
            return  # nothing more is expected; a host only hangs up
        conn.inbuf += data
        if len(conn.inbuf) < HEADER.size:
            return
        json_size, payload_size = HEADER.unpack_from(conn.inbuf)
        if json_size > MAX_JSON or payload_size > MAX_REQUEST_PAYLOAD:
            self._hangup(conn)
            return
        if len(conn.inbuf) < HEADER.size + json_size + payload_size:
            return
        body = bytes(conn.inbuf[HEADER.size : HEADER.size + json_size])
        payload = bytes(conn.inbuf[HEADER.size + json_size :])
        conn.inbuf = bytearray()
        conn.request_done = True
        try:
            request = decode_request(body)
        except ProtocolError:
            self._hangup(conn)
            return
        self._handle(conn, request, payload)

    def _handle(self, conn: Connection, request: list[object], payload: bytes) -> None:
        kind = request[0]
        if kind == "run":
            options = request[1]
            if not isinstance(options, dict):
                self._hangup(conn)
                return
            spare, self.spare = self.spare or Spare(), None
            try:
                command = Command(conn, options, payload, spare)  # pyright: ignore[reportUnknownArgumentType]
            except OSError as error:
                spare.discard()
                self._answer(
                    conn, ["err", errno.errorcode.get(error.errno or 0, "EIO"), str(error)]
                )
                return
            conn.command = command
            self.commands[command.pid] = command
            for fd in command.out_fds:
                self.selector.register(fd, selectors.EVENT_READ, Watch("out", command))
            self.selector.register(
                command.status_fd, selectors.EVENT_READ, Watch("status", command)
            )
            if command.stdin_fd is not None:
                self.selector.register(
                    command.stdin_fd, selectors.EVENT_WRITE, Watch("stdin", command)
                )
            return
        if kind == "shutdown":  # the instance is being destroyed (by another process)
            for command in list(self.commands.values()):
                kill_tree(command.pid)
            if self.spare is not None:
                self.spare.discard()
            os._exit(0)
        if kind == "ping":
            self._answer(conn, ["pong", {"pid": os.getpid(), "uid": os.getuid(), **FACTS}])
            return
        try:
            document, data = file_operation(request, payload)
        except OSError as error:
            name = errno.errorcode.get(error.errno or 0, "EIO")
            where = error.filename if isinstance(error.filename, str) else None
            self._answer(conn, ["err", name, error.strerror or str(error), where])
            return
        except (ProtocolError, AssertionError, TypeError, ValueError) as error:
            self._answer(conn, ["err", "EINVAL", f"bad request: {error}"])
            return
        self._answer(conn, document, data)

    # -- answers ----------------------------------------------------------------------------------

    def _send(self, conn: Connection, document: object, payload: bytes = b"") -> None:
        if conn.closing:
            return
        conn.outbuf += encode_answer(document, payload)
        self._flush(conn)

    def _answer(self, conn: Connection, document: object, payload: bytes = b"") -> None:
        self._send(conn, document, payload)
        conn.closing = True
        self._flush(conn, closing=True)

    def _flush(self, conn: Connection, closing: bool = False) -> None:
        try:
            while conn.outbuf:
                sent = conn.sock.send(conn.outbuf)
                del conn.outbuf[:sent]
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            self._hangup(conn)
            return
        fd = conn.sock.fileno()
        if fd < 0:
            return
        if conn.outbuf:
            self.selector.modify(conn.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, conn)
        else:
            self.selector.modify(conn.sock, selectors.EVENT_READ, conn)
            if conn.closing or closing:
                self._close(conn)

    def _close(self, conn: Connection) -> None:
        fd = conn.sock.fileno()
        if fd < 0:
            return
        self.selector.unregister(conn.sock)
        self.connections.pop(fd, None)
        conn.sock.close()

    def _hangup(self, conn: Connection) -> None:
        """The host went away (or broke the protocol): stop what it asked for."""
        conn.closing = True
        command = conn.command
        if command is not None and not command.finished:
            self._end(command, kill=True)
        self._close(conn)

    # -- commands ---------------------------------------------------------------------------------

    def _feed(self, command: Command) -> None:
        fd = command.stdin_fd
        if fd is None:
            return
        try:
            written = os.write(fd, command.stdin[:CHUNK])
        except (BlockingIOError, InterruptedError):
            return
        except OSError:  # the command closed its stdin: the rest is not wanted
            written = len(command.stdin)
        command.stdin = command.stdin[written:]
        if not command.stdin:
            self._close_stdin(command)

    def _close_stdin(self, command: Command) -> None:
        fd = command.stdin_fd
        if fd is not None:
            self.selector.unregister(fd)
            os.close(fd)
            command.stdin_fd = None

    def _output(self, command: Command, fd: int) -> None:
        try:
            chunk = os.read(fd, CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            self.selector.unregister(fd)
            os.close(fd)
            del command.out_fds[fd]
            command.open_streams -= 1
            self._maybe_done(command)
            return
        stream = command.out_fds[fd]
        room = command.output_limit - command.sent[stream]
        if room <= 0:
            command.truncated = True
            return  # drained and dropped: the command is never blocked on a full pipe
        if len(chunk) > room:
            chunk = chunk[:room]
            command.truncated = True
        command.sent[stream] += len(chunk)
        self._send(command.conn, ["out", stream + 1], chunk)

    def _status(self, command: Command) -> None:
        try:
            data = os.read(command.status_fd, 64)
        except (BlockingIOError, InterruptedError):
            return
        if data:
            command.status_buf += data
            if not command.status_buf.endswith(b"\n"):
                return
        try:
            command.status = int(command.status_buf.strip() or b"-1")
        except ValueError:
            pass
        if command.status is None:
            command.status = -1
        self.selector.unregister(command.status_fd)
        os.close(command.status_fd)
        command.status_fd = -1
        self._maybe_done(command)

    def _maybe_done(self, command: Command) -> None:
        if command.finished:
            self._end(command, kill=False)

    def _end(self, command: Command, *, kill: bool) -> None:
        if kill:
            kill_tree(command.pid)
        self._close_stdin(command)
        for fd in list(command.out_fds):
            self.selector.unregister(fd)
            os.close(fd)
        command.out_fds.clear()
        command.open_streams = 0
        if command.status_fd >= 0:
            self.selector.unregister(command.status_fd)
            os.close(command.status_fd)
            command.status_fd = -1
        if command.status is None:
            command.status = -1
        command.deadline = None
        self._answer(command.conn, ["exit", command.result()])
        command.conn.command = None

    def _expire(self) -> None:
        now = time.monotonic()
        for command in list(self.commands.values()):
            if command.deadline is not None and now >= command.deadline and not command.finished:
                command.timed_out = True
                self._end(command, kill=True)

    def _reap(self) -> None:
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.commands.pop(pid, None)


LIMITS: dict[str, int] = {}
"""The resource limits every command starts with (from the host: ``memory``, ``processes``,
``file_size`` in bytes or counts), applied in the command's own process before ``exec``."""


def _apply_limits() -> None:
    for name, which in (
        ("memory", resource.RLIMIT_DATA),
        ("processes", resource.RLIMIT_NPROC),
        ("file_size", resource.RLIMIT_FSIZE),
        ("open_files", resource.RLIMIT_NOFILE),
    ):
        value = LIMITS.get(name)
        if value:
            try:
                resource.setrlimit(which, (value, value))
            except (ValueError, OSError):
                pass


_PR_SET_DUMPABLE = 4

# Landlock: its system calls (one number on x86-64 and the generic table) and access rights.
_LANDLOCK_CREATE_RULESET, _LANDLOCK_ADD_RULE, _LANDLOCK_RESTRICT_SELF = 444, 445, 446
_LANDLOCK_RULE_PATH_BENEATH = 1
_FS_EXECUTE, _FS_READ_FILE, _FS_READ_DIR = 1 << 0, 1 << 2, 1 << 3
_FS_FILE_RIGHTS = 1 << 0 | 1 << 1 | 1 << 2 | 1 << 14 | 1 << 15  # what a rule on a file may hold
_READ_ONLY = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt/pai")
_READ_WRITE = ("/workspace", "/tmp", "/dev", "/proc")

FACTS: dict[str, object] = {"landlock": "not applied"}
"""What this supervisor reports to ``ping``: ``landlock`` is ``"abi N"`` once applied, else why
not."""


def _landlock() -> str:
    """Confine this process, and all it will start, to the sandbox's own folders with Landlock:
    read and execute under the program folders, everything under ``/workspace``, ``/tmp``,
    ``/dev`` and ``/proc``, listing anywhere; nothing else. A second wall behind the mount
    namespace: the rules hold on the very files, wherever a path to another one might come
    from. ``bwrap`` has set ``no_new_privs``, which Landlock needs."""
    syscall = _LIBC.syscall
    syscall.restype = ctypes.c_long
    abi = syscall(_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    if abi < 0:
        return f"none: this kernel has no Landlock ({os.strerror(ctypes.get_errno())})"
    handled = (1 << 13) - 1
    handled |= (1 << 13) if abi >= 2 else 0  # REFER
    handled |= (1 << 14) if abi >= 3 else 0  # TRUNCATE
    handled |= (1 << 15) if abi >= 5 else 0  # IOCTL_DEV
    attr = ctypes.create_string_buffer(struct.pack("<Q", handled))
    ruleset = syscall(_LANDLOCK_CREATE_RULESET, attr, ctypes.c_size_t(8), ctypes.c_uint32(0))
    if ruleset < 0:
        return f"none: landlock_create_ruleset failed ({os.strerror(ctypes.get_errno())})"
    try:
        rules = [("/", _FS_READ_DIR)]
        rules += [(path, _FS_EXECUTE | _FS_READ_FILE | _FS_READ_DIR) for path in _READ_ONLY]
        rules += [(path, handled) for path in _READ_WRITE]
        for path, allowed in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # not in this sandbox (no /lib32 here, say)
            try:
                if not stat.S_ISDIR(os.fstat(fd).st_mode):
                    allowed &= _FS_FILE_RIGHTS
                rule = ctypes.create_string_buffer(struct.pack("<Qi", allowed & handled, fd))
                if syscall(
                    _LANDLOCK_ADD_RULE,
                    ctypes.c_int(ruleset),
                    ctypes.c_int(_LANDLOCK_RULE_PATH_BENEATH),
                    rule,
                    ctypes.c_uint32(0),
                ):
                    return f"none: landlock_add_rule({path}) failed ({os.strerror(ctypes.get_errno())})"
            finally:
                os.close(fd)
        if syscall(_LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)):
            return f"none: landlock_restrict_self failed ({os.strerror(ctypes.get_errno())})"
    finally:
        os.close(ruleset)
    return f"abi {abi}"


def main() -> None:
    fd = int(sys.argv[1])
    for item in sys.argv[2].split(",") if len(sys.argv) > 2 and sys.argv[2] else ():
        name, _, value = item.partition("=")
        LIMITS[name] = int(value)
    keep_alive = float(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[3] != "none" else None
    # Not dumpable: a command (same user) can neither trace this process nor open its file
    # descriptors through /proc, so the socket it listens on stays the host's way in alone.
    _LIBC.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    FACTS["landlock"] = _landlock()
    listener = socket.socket(fileno=fd)
    listener.setblocking(False)
    os.set_inheritable(fd, False)
    Supervisor(listener).serve(keep_alive)


if __name__ == "__main__":
    main()
