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
double forks, ``setsid`` and ``env -i`` orphans) stays its descendant. The init is forked ahead
of time (a *spare*, see :class:`Spare`) and itself accepts the next connection, so a command
goes from the host to its shell and back with no hop through the supervisor. At the deadline,
or when the host hangs up, the init stops and kills its whole subtree (found through ``/proc``,
again until nothing is left): nothing of the command runs afterwards.
"""

from __future__ import annotations

# The C modules, not their Python wrappers (socket, signal, selectors): those import enum,
# which alone would cost every sandbox's start more than all of these.
import _socket
import ctypes
import errno
import marshal
import os
import resource
import select
import stat
import struct
import sys
import time

TYPE_CHECKING = False  # not typing's: importing typing would cost every sandbox's start
if TYPE_CHECKING:
    import signal as _signal
    from typing import TypeVar, cast

    _T = TypeVar("_T")
else:
    import _signal

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


def _as(value: object, kind: type[_T]) -> _T:
    """``value``, a field of a host request, when it has the type the protocol gives it; a
    :class:`ProtocolError` otherwise (not an ``assert``: those vanish under ``python -O``)."""
    if not isinstance(value, kind):
        raise ProtocolError(f"a request field is {type(value).__name__}, not {kind.__name__}")
    return value


def _write(entries: list[list[object]], payload: bytes) -> None:
    offset = 0
    for path, mode, size in entries:
        path = _as(path, str)
        mode = _as(mode, int)
        size = _as(size, int)
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
        path = _as(path, str)
        max_bytes = _as(max_bytes, int)
        return _read(path, max_bytes)
    if kind == "write":
        entries = cast("list[list[object]]", _as(request[1], list))
        _write(entries, payload)
        return ["ok", None], b""
    if kind == "list":
        path = request[1]
        path = _as(path, str)
        return ["ok", _list(path)], b""
    if kind == "remove":
        path, recursive = request[1], request[2]
        path = _as(path, str)
        _remove(path, bool(recursive))
        return ["ok", None], b""
    if kind == "mkdir":
        path, parents = request[1], request[2]
        path = _as(path, str)
        _make_dir(path, bool(parents))
        return ["ok", None], b""
    if kind == "exists":
        path = request[1]
        path = _as(path, str)
        return ["ok", os.path.exists(path)], b""
    raise ProtocolError(f"unknown request {kind!r}")


# -- commands -------------------------------------------------------------------------------------
_LIBC = ctypes.CDLL(None, use_errno=True)  # loaded once: a command's init only calls prctl

_IN, _OUT = select.POLLIN, select.POLLOUT
_GONE = select.POLLHUP | select.POLLERR | select.POLLNVAL

SPARE_AFTER = 0.02
"""Seconds after a spare was taken that the next one is forked, if its command is not done
sooner."""

STALL = 0.1
"""Seconds a spare waits for the rest of a request before it gives up its place (it still
serves the request): hosts send a request at once, and a stalled one must not hold back the
sandbox's other operations."""

_supervisor_pid = 0
"""The supervisor's process id (``ping`` reports it, whichever process answers)."""

_wake_fd = -1
_channel: _socket.socket | None = None
"""A spare's channel to the supervisor."""
"""The reading end of this process's SIGCHLD pipe (see :func:`_wake_on_children`)."""


def _set_subreaper() -> None:
    if _LIBC.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        os._exit(125)


def _descendants(root: int) -> list[int]:
    """Every live process below ``root`` (children, theirs, ...), from ``/proc``. Zombies are
    left out: they cannot be killed, only reaped, and have no children of their own."""
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
        if len(fields) > 1 and fields[0] != b"Z":
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


def _kill_below(root: int) -> None:
    """Stop, then kill, everything below ``root``, until nothing is left (``root`` itself, when
    it is this process, reaps what falls to it meanwhile)."""
    for _ in range(100):
        below = _descendants(root)
        if not below:
            return
        for sig in (_signal.SIGSTOP, _signal.SIGKILL):
            for pid in below:
                try:
                    os.kill(pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
        if root == os.getpid():
            _reap_some()
        time.sleep(0.001)


def kill_tree(init_pid: int) -> None:
    """Kill everything below the command init ``init_pid``, then the init."""
    _kill_below(init_pid)
    try:
        os.kill(init_pid, _signal.SIGKILL)
    except ProcessLookupError:
        pass


def _reap_some() -> list[tuple[int, int]]:
    """Reap every child that has ended; their process ids and wait statuses."""
    done: list[tuple[int, int]] = []
    while True:
        try:
            pid, code = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return done
        if pid == 0:
            return done
        done.append((pid, code))


def _ignore_signal(signum: int, frame: object) -> None:
    """SIGCHLD's handler: the signal only has to wake the loop (``set_wakeup_fd``)."""


def _wake_on_children() -> int:
    """Make SIGCHLD write to a pipe; its reading end, for the loop to wait on."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    _signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    _signal.signal(_signal.SIGCHLD, _ignore_signal)
    return wake_r


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except (BlockingIOError, InterruptedError):
        pass


def _become_init(keep: list[int]) -> None:
    """In a fresh fork: close every descriptor but ``keep``, become the child subreaper (all
    that a command starts stays below this process) and wake on its children."""
    low = 3
    for fd in sorted(keep):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, os.sysconf("SC_OPEN_MAX"))
    _signal.set_wakeup_fd(-1)
    _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
    _signal.signal(_signal.SIGTERM, _signal.SIG_DFL)
    _set_subreaper()
    global _wake_fd
    _wake_fd = _wake_on_children()


def _unix(fd: int) -> _socket.socket:
    return _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM, 0, fd)


def _accept(listener: _socket.socket) -> _socket.socket | None:
    """The next connection on ``listener`` (non-blocking, closed on exec), or ``None``."""
    try:
        fd = cast("tuple[int, object]", listener._accept())[0]  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]
    except (BlockingIOError, InterruptedError):
        return None  # another process took it
    conn = _unix(fd)
    conn.setblocking(False)
    return conn


# -- spares ---------------------------------------------------------------------------------------


class Spare:
    """A command init forked ahead of time (the supervisor's handle on it).

    Forking this process is the slowest step of starting a command, so it happens between
    commands. A spare waits on the listening socket itself (as a pre-forking server's workers
    do): it accepts the next connection and reads its request. A file operation or a ping it
    answers and waits again; a command it runs to the end, itself, with no hop through the
    supervisor (see :func:`_run_command`), after telling the supervisor on its ``channel`` that
    it was taken (``T``), so that the supervisor forks the next spare meanwhile.

    Messages on the channel, one byte each: spare to supervisor ``T`` (taken: it accepts no
    more), ``A`` (it answered an operation: the sandbox is in use), ``S`` (the host asked for a
    shutdown), ``q`` (it quit, as asked); supervisor to spare ``Q`` (quit, unless taken).
    """

    def __init__(self, listener: _socket.socket, rehearse: bool = True) -> None:
        parent, child = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
        self.pid = os.fork()
        if self.pid == 0:
            try:
                parent.close()
                _spare_main(child, listener, rehearse)
            finally:
                os._exit(0)
        child.close()
        parent.setblocking(False)
        self.channel = parent

    def quit(self) -> bytes:
        """Ask a waiting spare to end; what it said until it did (``q`` last), or until it
        was found taken or in use meanwhile."""
        self.channel.setblocking(True)
        self.channel.settimeout(5)
        said = b""
        try:
            self.channel.sendall(b"Q")
            while not said.endswith(b"q"):
                data = self.channel.recv(64)
                if not data:
                    break
                said += data
                if b"T" in said or b"S" in said:
                    break  # taken: it reads nothing more
        except OSError:
            pass
        finally:
            self.channel.setblocking(False)
        return said


def _spare_main(channel: _socket.socket, listener: _socket.socket, rehearse: bool) -> None:
    """A spare's life: serve connections until one is a command (never returns)."""
    global _channel
    _channel = channel
    _become_init([channel.fileno(), listener.fileno()])
    if rehearse:
        _rehearse()
    channel.sendall(b"R")
    waiting = select.poll()
    waiting.register(listener.fileno(), _IN)
    waiting.register(channel.fileno(), _IN)
    while True:
        events = dict(waiting.poll())
        if channel.fileno() in events:
            message = channel.recv(64)
            if not message or b"Q" in message:  # the supervisor ended, or asks us to
                if message:
                    channel.sendall(b"q")
                os._exit(0)
        if listener.fileno() not in events:
            continue
        conn = _accept(listener)
        if conn is not None and _serve(conn, channel, listener):
            os._exit(0)


def _rehearse() -> None:
    """Go through a command's steps once, on nothing, before waiting for a real one.

    This process is a fork: every page it writes to is first copied (and, on a virtual machine,
    the copy's memory first provided by the host), which made each step of the first command
    several times slower. Done now, that work is off the command's path."""
    import gc  # built in: nothing to load

    gc.collect()  # writes to every tracked object's header: their pages are copied here
    host, conn = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        options: dict[str, object] = {
            "script": "true",
            "cwd": "/workspace",
            "env": {"PATH": "/usr/bin"},
            "stdin": False,
            "timeout": 30.0,
            "output_limit": 1 << 20,
        }
        host.sendall(encode_request(["run", options]))
        conn.setblocking(False)
        reader = _Request(conn, time.monotonic() + STALL)
        head = reader.document()
        if head is None or not _runnable(head[0]):
            return
        command = Command(conn, options, reader.payload(head[1]) or b"")
        command._frame(["out", 1], b"rehearsal")  # pyright: ignore[reportPrivateUsage]
        command._frame(["exit", {"code": 0, "timed_out": False, "truncated": False}])  # pyright: ignore[reportPrivateUsage]
        _send_all(conn, bytes(command.outbuf))
        host.recv(CHUNK)
        waiting = select.poll()
        for fd in os.pipe():
            os.set_blocking(fd, False)
            waiting.register(fd, _IN)
            waiting.modify(fd, _IN | _OUT)
            waiting.unregister(fd)
            os.close(fd)
        waiting.poll(0)
        _reap_some()
        _drain(_wake_fd)
    finally:
        host.close()
        conn.close()


def _serve(conn: _socket.socket, channel: _socket.socket, listener: _socket.socket) -> bool:
    """Serve one connection a spare accepted; whether the spare has given up its place."""
    reader = _Request(conn, time.monotonic() + STALL)
    taken = False
    head = reader.document()
    if head is None and reader.stalled:
        channel.sendall(b"T")
        taken = True
        head = reader.document()
    if head is None:
        conn.close()
        return taken
    request, payload_size = head
    if request[0] == "run" and _runnable(request):
        if not taken:
            channel.sendall(b"T")
        listener.close()
        reader.deadline = None
        payload = reader.payload(payload_size)
        if payload is None:
            os._exit(0)
        _run_command(conn, cast("dict[str, object]", request[1]), payload)
    payload = reader.payload(payload_size)
    if payload is None and reader.stalled:
        channel.sendall(b"T")
        taken = True
        reader.deadline = None
        payload = reader.payload(payload_size)
    if payload is None:
        conn.close()
        return taken
    if request[0] == "shutdown":
        channel.sendall(b"S")  # the supervisor ends everything, this process and the host's
        channel.recv(1)  # connection with it
        os._exit(0)
    document, data = answer(request, payload)
    _send_all(conn, encode_answer(document, data))
    conn.close()
    if not taken:
        channel.sendall(b"A")
    return taken


class _Request:
    """Reads one request from a non-blocking connection, waiting at most until ``deadline``."""

    def __init__(self, conn: _socket.socket, deadline: float | None) -> None:
        self.conn = conn
        self.deadline = deadline
        self.stalled = False
        self.buffer = bytearray()
        self.poll = select.poll()
        self.poll.register(conn.fileno(), _IN)

    def _fill(self, size: int) -> bool:
        """Read until ``size`` bytes are buffered; ``False`` at the deadline or the end."""
        self.stalled = False
        while len(self.buffer) < size:
            try:
                chunk = self.conn.recv(max(size - len(self.buffer), CHUNK))
            except (BlockingIOError, InterruptedError):
                if self.deadline is None:
                    self.poll.poll()
                    continue
                left = self.deadline - time.monotonic()
                if left <= 0 or not self.poll.poll(left * 1000 + 1):
                    self.stalled = True
                    return False
                continue
            except OSError:
                return False
            if not chunk:
                return False
            self.buffer += chunk
        return True

    def document(self) -> tuple[list[object], int] | None:
        """The request's document and its payload's size (``None``: a broken request)."""
        if not self._fill(HEADER.size):
            return None
        json_size, payload_size = HEADER.unpack_from(self.buffer)
        if json_size > MAX_JSON or payload_size > MAX_REQUEST_PAYLOAD:
            return None
        if not self._fill(HEADER.size + json_size):
            return None
        body = bytes(self.buffer[HEADER.size : HEADER.size + json_size])
        del self.buffer[: HEADER.size + json_size]
        try:
            return decode_request(body), payload_size
        except ProtocolError:
            return None

    def payload(self, size: int) -> bytes | None:
        if not self._fill(size):
            return None
        data = bytes(self.buffer[:size])
        del self.buffer[:size]
        return data


def _runnable(request: list[object]) -> bool:
    """Whether ``request`` is a well-formed ``run`` request (others get an ``EINVAL`` answer)."""
    if len(request) != 2 or not isinstance(request[1], dict):
        return False
    options = cast("dict[object, object]", request[1])
    env = options.get("env")
    timeout = options.get("timeout")
    limit = options.get("output_limit", 0)
    return (
        isinstance(options.get("script"), str)
        and isinstance(options.get("cwd"), str)
        and isinstance(env, dict)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())  # pyright: ignore[reportUnknownVariableType]
        and (timeout is None or (isinstance(timeout, (int, float)) and timeout >= 0))
        and isinstance(limit, int)
        and limit >= 0
    )


def _send_all(conn: _socket.socket, data: bytes) -> bool:
    """Write all of ``data`` to a non-blocking connection; ``False`` if the host went away."""
    view = memoryview(data)
    waiting: select.poll | None = None
    while view:
        try:
            view = view[conn.send(view) :]
        except (BlockingIOError, InterruptedError):
            if waiting is None:
                waiting = select.poll()
                waiting.register(conn.fileno(), _OUT)
            waiting.poll()
        except OSError:
            return False
    return True


def answer(request: list[object], payload: bytes) -> tuple[object, bytes]:
    """The answer to a request other than ``run`` and ``shutdown``."""
    if request[0] == "ping":
        return ["pong", {"pid": _supervisor_pid or os.getpid(), "uid": os.getuid(), **FACTS}], b""
    try:
        return file_operation(request, payload)
    except OSError as error:
        name = errno.errorcode.get(error.errno or 0, "EIO")
        where = error.filename if isinstance(error.filename, str) else None
        return ["err", name, error.strerror or str(error), where], b""
    except (ProtocolError, AssertionError, TypeError, ValueError) as error:
        return ["err", "EINVAL", f"bad request: {error}"], b""


# -- commands -------------------------------------------------------------------------------------


def _run_command(conn: _socket.socket, options: dict[str, object], stdin: bytes) -> None:
    """In a command init (a spare, or a fork of the supervisor), holding the host's connection:
    run ``SHELL -c script`` with the resource limits, relay its output as ``out`` frames, feed
    its stdin, enforce its deadline, answer ``exit``; then reap every orphan that falls to this
    process until none is left. Never returns.

    At the deadline, or when the host hangs up, everything below this process is stopped and
    killed (found through ``/proc``, again until nothing is left): nothing of the command runs
    afterwards. A background job that outlives a finished command keeps running, and this
    process stays to reap it."""
    try:
        Command(conn, options, stdin).run()
        while True:
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                break
    finally:
        os._exit(0)


class Command:
    """One command, run by the command init that holds its connection."""

    def __init__(self, conn: _socket.socket, options: dict[str, object], stdin: bytes) -> None:
        self.conn = conn
        self.output_limit = int(options.get("output_limit", 1 << 20))  # type: ignore[arg-type]
        timeout = options.get("timeout")
        self.deadline = None if timeout is None else time.monotonic() + float(timeout)  # type: ignore[arg-type]
        self.script = str(options["script"])
        self.cwd = str(options["cwd"])
        self.env = cast("dict[str, str]", options["env"])
        file_size = options.get("file_size")
        self.file_size = file_size if type(file_size) is int and file_size >= 0 else None
        self.wants_stdin = bool(options.get("stdin"))
        self.stdin = stdin
        self.sent = [0, 0]
        self.truncated = False
        self.timed_out = False
        self.outbuf = bytearray()

    def _frame(self, document: object, payload: bytes = b"") -> None:
        self.outbuf += encode_answer(document, payload)

    def _flush(self) -> bool:
        """Send what is buffered, as far as the connection takes it; ``False``: host gone."""
        try:
            while self.outbuf:
                del self.outbuf[: self.conn.send(self.outbuf)]
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            return False
        return True

    def _answer(self, code: int) -> None:
        self._frame(
            ["exit", {"code": code, "timed_out": self.timed_out, "truncated": self.truncated}]
        )
        data, self.outbuf = bytes(self.outbuf), bytearray()
        _send_all(self.conn, data)
        self.conn.close()
        if _channel is not None:
            try:
                _channel.send(b"D")  # done: the supervisor may fork the next spare
            except OSError:
                pass

    def run(self) -> None:
        _apply_limits()  # inherited by the shell and everything it starts
        if self.file_size is not None:
            _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
            lowered = (
                self.file_size if hard == resource.RLIM_INFINITY else min(self.file_size, hard)
            )
            resource.setrlimit(resource.RLIMIT_FSIZE, (lowered, lowered))
        try:
            os.chdir(self.cwd)
        except OSError as error:
            message = f"cannot run the command in {self.cwd}: {error.strerror}\n".encode()
            self._frame(["out", 2], message[: self.output_limit])
            self._answer(1)
            return
        if self.wants_stdin:
            stdin_r, stdin_w = os.pipe()
        else:
            stdin_r, stdin_w = os.open(os.devnull, os.O_RDONLY), -1
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        # posix_spawn (vfork underneath): no second copy of this Python process per command.
        try:
            shell = os.posix_spawn(
                SHELL,
                [os.path.basename(SHELL), "-c", self.script],
                self.env,
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, stdin_r, 0),
                    (os.POSIX_SPAWN_DUP2, out_w, 1),
                    (os.POSIX_SPAWN_DUP2, err_w, 2),
                ],
                setsid=True,
                setsigdef=(_signal.SIGPIPE,),  # which Python ignores; programs expect it
            )
        except OSError as error:
            text = f"{SHELL}: {error.strerror}\n{_why_not_started(error)}"
            self._frame(["out", 2], text.encode()[: self.output_limit])
            self._answer(127)
            return
        finally:
            for fd in (stdin_r, out_w, err_w):
                os.close(fd)
        self._relay(shell, stdin_w, {out_r: 0, err_r: 1})

    def _relay(self, shell: int, stdin_w: int, streams: dict[int, int]) -> None:
        wake = _wake_fd
        conn = self.conn.fileno()
        waiting = select.poll()
        waiting.register(wake, _IN)
        waiting.register(conn, _IN)
        for fd in streams:
            os.set_blocking(fd, False)
            waiting.register(fd, _IN)
        if stdin_w >= 0:
            if self.stdin:
                os.set_blocking(stdin_w, False)
                waiting.register(stdin_w, _OUT)
            else:
                os.close(stdin_w)
                stdin_w = -1
        status: int | None = None
        for pid, code in _reap_some():  # a shell that ended before its SIGCHLD was waited for
            if pid == shell:
                status = code
        while status is None or streams:
            timeout = None
            if self.deadline is not None:
                left = self.deadline - time.monotonic()
                if left <= 0:
                    self.timed_out = True
                    break
                timeout = left * 1000 + 1
            for fd, events in waiting.poll(timeout):
                if fd == wake:
                    _drain(wake)
                    for pid, code in _reap_some():
                        if pid == shell:
                            status = code
                elif fd in streams:
                    if not self._output(fd, streams[fd]):
                        waiting.unregister(fd)
                        os.close(fd)
                        del streams[fd]
                elif fd == stdin_w:
                    if not self._feed(stdin_w):
                        waiting.unregister(stdin_w)
                        os.close(stdin_w)
                        stdin_w = -1
                elif fd == conn:
                    if events & _OUT and not self._flush():
                        self._hangup()
                    if events & (_IN | _GONE):
                        try:
                            gone = not self.conn.recv(4096)  # a host only ever hangs up
                        except (BlockingIOError, InterruptedError):
                            gone = False
                        except OSError:
                            gone = True
                        if gone:
                            self._hangup()
            if self.outbuf and not self._flush():
                self._hangup()
            waiting.modify(conn, _IN | _OUT if self.outbuf else _IN)
        if self.timed_out:
            _kill_below(os.getpid())
        for fd in (*streams, stdin_w):
            if fd >= 0:
                os.close(fd)
        if self.timed_out:
            code = EXIT_TIMEOUT
        elif status is None or status < 0:
            code = 137
        elif os.WIFSIGNALED(status):
            code = 128 + os.WTERMSIG(status)
        else:
            code = os.WEXITSTATUS(status)
        self._answer(code)

    def _hangup(self) -> None:
        """The host went away: stop what it asked for."""
        _kill_below(os.getpid())
        os._exit(0)

    def _feed(self, fd: int) -> bool:
        """Write more of stdin; ``False`` once all is written (or the command closed it)."""
        try:
            written = os.write(fd, self.stdin[:CHUNK])
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:  # the command closed its stdin: the rest is not wanted
            return False
        self.stdin = self.stdin[written:]
        return bool(self.stdin)

    def _output(self, fd: int, stream: int) -> bool:
        """Relay a chunk of output; ``False`` at its end."""
        try:
            chunk = os.read(fd, CHUNK)
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            return False
        if not chunk:
            return False
        room = self.output_limit - self.sent[stream]
        if room <= 0:
            self.truncated = True
            return True  # drained and dropped: the command is never blocked on a full pipe
        if len(chunk) > room:
            chunk = chunk[:room]
            self.truncated = True
        self.sent[stream] += len(chunk)
        self._frame(["out", stream + 1], chunk)
        return True


# -- the supervisor -------------------------------------------------------------------------------


class Connection:
    """A connection the supervisor accepted itself (while no spare waited): one request."""

    def __init__(self, sock: _socket.socket) -> None:
        self.sock = sock
        self.inbuf = bytearray()
        self.outbuf = bytearray()
        self.closing = False
        self.request_done = False


class Supervisor:
    def __init__(self, listener: _socket.socket) -> None:
        global _wake_fd
        self.listener = listener
        self.poll = select.poll()
        self.watched: dict[int, object] = {}
        self.connections: dict[int, Connection] = {}
        self.spare: Spare | None = None
        self.fork_again = 0.0
        self.channels: dict[int, Spare] = {}
        self.inits: set[int] = set()
        """Every command init alive: spares (waiting or taken) and inits forked for one
        command."""
        _wake_fd = self.wake = _wake_on_children()
        _signal.signal(_signal.SIGPIPE, _signal.SIG_IGN)
        self._watch(self.wake, _IN, "wake")
        self._watch(listener.fileno(), _IN, "listen")

    def _watch(self, fd: int, events: int, data: object) -> None:
        if fd in self.watched:
            self.poll.modify(fd, events)
        else:
            self.poll.register(fd, events)
        self.watched[fd] = data

    def _unwatch(self, fd: int) -> None:
        if self.watched.pop(fd, None) is not None:
            self.poll.unregister(fd)

    # -- the loop ---------------------------------------------------------------------------------

    def serve(self, keep_alive: float | None) -> None:
        """Serve until idle for ``keep_alive`` seconds (no operation, and no process of the
        sandbox but this one and its spare), then end: the sandbox's namespaces go with it,
        its files stay, and the next operation starts a new supervisor."""
        self._fork_spare(rehearse=False)  # the sandbox's first command is waiting for it
        idle_since = time.monotonic()
        while True:
            # The next spare is forked once nothing else waits (a command just took the last).
            short = self.spare is None
            timeout = None
            if short:
                timeout = max(self.fork_again - time.monotonic(), 0)
            if keep_alive is not None and not self.connections:
                left = idle_since + keep_alive - time.monotonic()
                if left <= 0:
                    if self._alone():
                        self._retire()
                    idle_since = time.monotonic()  # something still runs: look again later
                    continue
                timeout = left if timeout is None else min(timeout, left)
            ready = self.poll.poll(None if timeout is None else timeout * 1000)
            if ready or self.connections:
                idle_since = time.monotonic()
            if not ready and short and time.monotonic() >= self.fork_again:
                self._fork_spare()
                continue
            for fd, events in ready:
                data = self.watched.get(fd)
                if data == "listen":
                    self._accept()
                elif data == "wake":
                    _drain(self.wake)
                elif isinstance(data, Spare):
                    self._message(data)
                elif isinstance(data, Connection):
                    if events & (_IN | _GONE):
                        self._readable(data)
                    if events & _OUT and data.sock.fileno() >= 0:
                        self._flush(data)
            for pid, _ in _reap_some():
                self.inits.discard(pid)

    def _fork_spare(self, rehearse: bool = True) -> None:
        try:
            spare = Spare(self.listener, rehearse)
        except OSError:  # no process to be had now (the sandbox's limit): we accept meanwhile
            self.fork_again = time.monotonic() + 0.05
            return
        self.spare = spare
        self.inits.add(spare.pid)
        self.channels[spare.channel.fileno()] = spare
        self._watch(spare.channel.fileno(), _IN, spare)

    def _message(self, spare: Spare) -> None:
        try:
            data = spare.channel.recv(64)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if b"S" in data:
            self._shutdown()
        if (b"T" in data or not data) and self.spare is spare:
            self.spare = None
            self._watch(self.listener.fileno(), _IN, "listen")
            # The next spare is forked when this command is done (D), which is soon for most:
            # forked now, it would take the processor from the command. A command that comes
            # meanwhile is served all the same (see _start_init).
            self.fork_again = time.monotonic() + SPARE_AFTER
        if b"D" in data:
            self.fork_again = 0.0
        if b"R" in data and self.spare is spare:
            self._unwatch(self.listener.fileno())  # the spare accepts from now on
        if not data:  # it ended
            self._unwatch(spare.channel.fileno())
            self.channels.pop(spare.channel.fileno(), None)
            spare.channel.close()

    def _alone(self) -> bool:
        """Whether nothing runs in the sandbox but this process, its spare, and bwrap's init."""
        ours: set[int] = {1, os.getpid()}
        if self.spare is not None:
            ours.add(self.spare.pid)
        return all(not name.isdigit() or int(name) in ours for name in os.listdir("/proc"))

    def _retire(self) -> None:
        """End, unless an operation came meanwhile (then serve on)."""
        spare = self.spare
        if spare is not None:
            said = spare.quit()
            if b"S" in said:
                self._shutdown()
            self.spare = None
            self._watch(self.listener.fileno(), _IN, "listen")
            if said != b"q":
                return  # used meanwhile: serve on (its channel's end tells when it ended)
        waiting = select.poll()
        waiting.register(self.listener.fileno(), _IN)
        if not waiting.poll(0):
            os._exit(0)

    def _shutdown(self) -> None:
        for pid in self.inits:
            kill_tree(pid)
        os._exit(0)

    def _accept(self) -> None:
        sock = _accept(self.listener)
        if sock is None:
            return
        fd = sock.fileno()
        conn = Connection(sock)
        self.connections[fd] = conn
        self._watch(fd, _IN, conn)

    def _readable(self, conn: Connection) -> None:
        try:
            data = conn.sock.recv(1024 * 1024)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._close(conn)
            return
        if conn.request_done:
            return  # nothing more is expected; a host only hangs up
        conn.inbuf += data
        if len(conn.inbuf) < HEADER.size:
            return
        json_size, payload_size = HEADER.unpack_from(conn.inbuf)
        if json_size > MAX_JSON or payload_size > MAX_REQUEST_PAYLOAD:
            self._close(conn)
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
            self._close(conn)
            return
        self._handle(conn, request, payload)

    def _handle(self, conn: Connection, request: list[object], payload: bytes) -> None:
        kind = request[0]
        if kind == "run" and _runnable(request):
            self._start_init(conn, cast("dict[str, object]", request[1]), payload)
            return
        if kind == "shutdown":  # the instance is being destroyed (by another process)
            self._shutdown()
        document, data = answer(request, payload)
        conn.outbuf += encode_answer(document, data)
        conn.closing = True
        self._flush(conn)

    def _start_init(self, conn: Connection, options: dict[str, object], stdin: bytes) -> None:
        """A command that came while no spare waited: a command init forked for it."""
        try:
            pid = os.fork()
        except OSError as error:
            name = errno.errorcode.get(error.errno or 0, "EIO")
            conn.outbuf += encode_answer(["err", name, f"{error}; {_why_not_started(error)}"])
            conn.closing = True
            self._flush(conn)
            return
        if pid == 0:
            try:
                _become_init([conn.sock.fileno()])
                _run_command(conn.sock, options, stdin)
            finally:
                os._exit(0)
        self.inits.add(pid)
        self._close(conn)

    def _flush(self, conn: Connection) -> None:
        try:
            while conn.outbuf:
                del conn.outbuf[: conn.sock.send(conn.outbuf)]
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            self._close(conn)
            return
        if conn.sock.fileno() < 0:
            return
        if conn.outbuf:
            self._watch(conn.sock.fileno(), _IN | _OUT, conn)
        elif conn.closing:
            self._close(conn)

    def _close(self, conn: Connection) -> None:
        fd = conn.sock.fileno()
        if fd < 0:
            return
        self._unwatch(fd)
        self.connections.pop(fd, None)
        conn.sock.close()


LIMITS: dict[str, int] = {}
"""The resource limits every command starts with (from the host: ``memory``, ``processes``,
``file_size`` in bytes or counts), applied in the command's own process before ``exec``."""


def _why_not_started(error: OSError) -> str:
    """What a user may do about a command that could not start (a line, or nothing)."""
    limit = LIMITS.get("processes")
    if error.errno != errno.EAGAIN or not limit:
        return ""
    return (
        f"pai-sandbox-local: the command could not start: the sandbox is at its limit of {limit} "
        "processes (option `processes`; without a control group it counts every process and "
        "thread of the host user)\n"
    )


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
    global _supervisor_pid
    _supervisor_pid = os.getpid()
    fd = int(sys.argv[1])
    for item in sys.argv[2].split(",") if len(sys.argv) > 2 and sys.argv[2] else ():
        name, _, value = item.partition("=")
        LIMITS[name] = int(value)
    keep_alive = float(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[3] != "none" else None
    # Not dumpable: a command (same user) can neither trace this process nor open its file
    # descriptors through /proc, so the socket it listens on stays the host's way in alone.
    _LIBC.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    FACTS["landlock"] = _landlock()
    listener = _unix(fd)
    listener.setblocking(False)
    os.set_inheritable(fd, False)
    Supervisor(listener).serve(keep_alive)


if __name__ == "__main__":
    main()
