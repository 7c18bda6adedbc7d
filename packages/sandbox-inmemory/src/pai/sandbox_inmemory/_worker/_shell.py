"""The worker's side of the interpreter: just-bash over a filesystem that lives in the host.

Runs inside a worker process only (see the package, ``_worker``). What this module adds to just-bash 0.2.1:

- :class:`RemoteFs`: the interpreter's filesystem, every operation a request to the host over the
  worker's pipes (:class:`Channel`), where the instance's files live. just-bash implements ``>>``
  as read-then-write; :class:`RemoteFs` turns that pair into one ``append`` request, which the
  host applies atomically, so concurrent appends lose nothing.
- Binary-safe text: just-bash passes text around as ``str``; bytes that are not UTF-8 travel as
  lone surrogates (``surrogateescape``) and :class:`BinaryText` encodes back to those bytes.
- :func:`patch_redirections`: a redirection whose file cannot be written discards the
  command's output, as in bash (just-bash kept what it had not written yet).
- :func:`run_script`: one command line in a fresh interpreter (its own variables, cwd and stdin,
  like ``sh -c``); interpreter failures (a limit, a crash, memory) become results.
"""

from __future__ import annotations

import errno
import inspect
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import CodeType
from typing import Any

from just_bash import Bash, ExecutionLimits
from just_bash.fs import InMemoryFs
from just_bash.fs.in_memory_fs import DirentEntry
from just_bash.interpreter import ExecutionLimitError
from just_bash.interpreter.interpreter import Interpreter
from just_bash.types import Command, ExecResult, FsStat

from pai.sandbox_inmemory._protocol import (
    EXIT_INTERPRETER_ERROR,
    EXIT_OUT_OF_MEMORY,
    HEADER,
    decode_body,
    encode_head,
)
from pai.sandbox_inmemory._worker._scripts import SUBSCRIPT_MESSAGE as _SUBSCRIPT_MESSAGE
from pai.sandbox_inmemory._worker._scripts import SUBSCRIPT_SUBSTITUTION as _SUBSCRIPT_SUBSTITUTION
from pai.sandbox_inmemory._worker._scripts import run_command_line

__all__ = [
    "EXIT_INTERPRETER_ERROR",
    "EXIT_OUT_OF_MEMORY",
    "EXIT_UNSUPPORTED",
    "BinaryText",
    "Channel",
    "RedirectionFailed",
    "RemoteFs",
    "ScriptResult",
    "decode",
    "encode",
    "patch_redirections",
    "run_script",
]

EXIT_UNSUPPORTED = 2
"""Exit code for a script the adapter refuses before running it (like a bash syntax error)."""


def encode(text: str, encoding: str = "utf-8") -> bytes:
    """Text from the interpreter as bytes: lone surrogates from ``surrogateescape`` become the
    bytes they stand for; any other lone surrogate becomes U+FFFD."""
    try:
        return text.encode(encoding, "surrogateescape")
    except UnicodeEncodeError:
        return "".join(
            "\ufffd" if 0xD800 <= ord(ch) <= 0xDFFF and not 0xDC80 <= ord(ch) <= 0xDCFF else ch
            for ch in text
        ).encode(encoding, "surrogateescape")


_BYTE_CODECS = frozenset({"utf8", "latin1", "iso88591", "l1"})


def names_the_bytes(encoding: str) -> bool:
    """Whether a command that encodes or decodes with ``encoding`` means the bytes themselves
    (UTF-8, or Latin-1, which commands use for "the bytes"): text that stands for bytes gives
    those bytes back, and bytes become that text, for either."""
    return encoding.replace("-", "").replace("_", "").lower() in _BYTE_CODECS


class BinaryText(str):
    """Interpreter text that encodes back to the bytes it was decoded from.

    just-bash's commands count or hash content with ``text.encode("utf-8")``, which fails on the
    lone surrogates ``surrogateescape`` uses for non-UTF-8 bytes. Text read from files and fed as
    stdin is this subclass, whose ``encode`` applies ``surrogateescape``.
    """

    __slots__ = ()

    def encode(self, encoding: str = "utf-8", errors: str = "surrogateescape") -> bytes:
        if names_the_bytes(encoding):
            return str.encode(self, "utf-8", "surrogateescape")
        return str.encode(self, encoding, "surrogateescape" if errors == "strict" else errors)


def decode(data: bytes, encoding: str = "utf-8") -> str:
    """Bytes as interpreter text, reversibly (``surrogateescape``)."""
    return BinaryText(data.decode(encoding, "surrogateescape"))


# -- the pipe to the host -----------------------------------------------------------------------


_JOIN_LIMIT = 64 * 1024
"""Payloads up to this size are written in one piece with their frame's head."""


class HostGone(BaseException):
    """The host closed the worker's pipe: the worker ends."""


class Channel:
    """Blocking frames over two file descriptors (the worker's end of its pipes)."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self._read_fd = read_fd
        self._write_fd = write_fd

    def send(self, document: object, payload: bytes = b"") -> None:
        # A small frame goes in one write, so the host wakes once to read it whole; a large
        # payload follows the head without being joined to it (no copy of a large write).
        head = encode_head(document, len(payload))
        parts = (head + payload,) if len(payload) <= _JOIN_LIMIT else (head, payload)
        for part in parts:
            view = memoryview(part)
            while view:
                written = os.write(self._write_fd, view)
                view = view[written:]

    def _exactly(self, size: int) -> bytes:
        chunks: list[bytes] = []
        remaining = size
        while remaining:
            chunk = os.read(self._read_fd, min(remaining, 1 << 20))
            if not chunk:
                raise HostGone
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)

    def receive(self) -> tuple[list[object], bytes]:
        body_size, payload_size = HEADER.unpack(self._exactly(HEADER.size))
        body = decode_body(self._exactly(body_size))
        return body, self._exactly(payload_size)


# -- the filesystem -------------------------------------------------------------------------------


def _os_error(number: int, message: str) -> OSError:
    """An ``OSError`` with ``errno`` set whose text is ``message`` alone (no "[Errno N]")."""
    error = OSError(message)
    error.errno = number
    return error


_ERRORS: dict[str, Callable[[str], OSError]] = {
    "ENOENT": FileNotFoundError,
    "EISDIR": IsADirectoryError,
    "ENOTDIR": NotADirectoryError,
    "EEXIST": FileExistsError,
    "EPERM": PermissionError,
    "ENOSPC": lambda message: OSError(errno.ENOSPC, message),
    "ELOOP": lambda message: _os_error(errno.ELOOP, message),
    "ENAMETOOLONG": lambda message: _os_error(errno.ENAMETOOLONG, message),
}

# The interpreter function that implements ">>" (and "&>>", ">&N" to an append fd) as
# ``existing = read_file(path)`` followed by ``write_file(path, existing + output)``.
_REDIRECTIONS: CodeType = Interpreter._process_output_redirections.__code__  # pyright: ignore[reportPrivateUsage, reportUnknownMemberType]


def _caller_code() -> CodeType | None:
    """The code object of the function that called the caller of this function."""
    here = inspect.currentframe()
    caller = here.f_back.f_back if here is not None and here.f_back is not None else None
    return caller.f_code if caller is not None else None


def _redirection_target(default: str) -> str:
    """The redirection's target as the script wrote it (bash names that, not the resolved
    path), read from just-bash's redirection handler two frames up; ``default`` if absent."""
    here = inspect.currentframe()
    frame = here.f_back.f_back if here is not None and here.f_back is not None else None
    written = frame.f_locals.get("original_target") if frame is not None else None
    return written if isinstance(written, str) and written else default


class RedirectionFailed(BaseException):  # not Exception: just-bash's handler must not catch it
    """A redirection's file could not be written (a folder, a missing folder, a full budget)."""

    def __init__(self, path: str, error: OSError) -> None:
        super().__init__(path, error)
        self.path = path
        self.reason = str(error)


def patch_redirections() -> None:
    """A redirection that fails discards the command's output, as in bash (where the command
    never runs): just-bash's handler kept the output it had not written yet, so
    ``echo y > missing/f`` printed ``y``. Applied in the worker only."""
    interpreter: Any = Interpreter
    process: Callable[..., Any] = interpreter._process_output_redirections

    async def process_output_redirections(
        self: Interpreter, redirections: list[Any], result: ExecResult
    ) -> ExecResult:
        try:
            return await process(self, redirections, result)
        except RedirectionFailed as failed:
            return ExecResult(
                stdout="", stderr=f"bash: {failed.path}: {failed.reason}\n", exit_code=1
            )

    interpreter._process_output_redirections = process_output_redirections


def _stat(document: object) -> FsStat:
    assert isinstance(document, dict)
    fields: dict[str, Any] = document  # pyright: ignore[reportUnknownVariableType]
    return FsStat(**fields)


class RemoteFs(InMemoryFs):
    """The interpreter's filesystem: every operation is a request to the host.

    Only path arithmetic (``resolve_path``) happens here; no file content is kept between
    requests. Inherits ``InMemoryFs`` for that arithmetic and its type; its own table stays empty.
    """

    def __init__(self, channel: Channel) -> None:
        self._channel = channel
        self._data = {}
        self._append_to: str | None = None

    def _call(self, method: str, *args: object, payload: bytes = b"") -> tuple[object, bytes]:
        self._append_to = None
        self._channel.send(["fs", method, list(args)], payload)
        reply, data = self._channel.receive()
        if reply[0] == "ok":
            return reply[1] if len(reply) > 1 else None, data
        kind = str(reply[1]) if len(reply) > 1 else "EIO"
        message = str(reply[2]) if len(reply) > 2 else kind
        make = _ERRORS.get(kind)
        raise make(message) if make is not None else OSError(message)

    def _value(self, method: str, *args: object) -> Any:  # plain JSON values
        return self._call(method, *args)[0]

    async def read_file(self, path: str, encoding: str = "utf-8") -> str:
        if _caller_code() is _REDIRECTIONS:  # ">>": see _REDIRECTIONS
            self._append_to = path
            return BinaryText("")
        return decode(await self.read_file_bytes(path), encoding)

    async def read_file_bytes(self, path: str) -> bytes:
        return self._call("read", path)[1]

    async def write_file(self, path: str, content: str | bytes, encoding: str = "utf-8") -> None:
        data = encode(content, encoding) if isinstance(content, str) else bytes(content)
        redirecting = _caller_code() is _REDIRECTIONS
        try:
            self._call(
                "append" if redirecting and self._append_to == path else "write", path, payload=data
            )
        except OSError as error:
            if redirecting:  # past just-bash's own handler: see patch_redirections
                raise RedirectionFailed(_redirection_target(path), error) from error
            raise

    async def append_file(self, path: str, content: str | bytes, encoding: str = "utf-8") -> None:
        data = encode(content, encoding) if isinstance(content, str) else bytes(content)
        self._call("append", path, payload=data)

    async def exists(self, path: str) -> bool:
        return bool(self._value("exists", path))

    async def is_file(self, path: str) -> bool:
        return bool(self._value("is_file", path))

    async def is_directory(self, path: str) -> bool:
        return bool(self._value("is_directory", path))

    async def stat(self, path: str) -> FsStat:
        return _stat(self._value("stat", path))

    async def lstat(self, path: str) -> FsStat:
        return _stat(self._value("lstat", path))

    async def mkdir(self, path: str, recursive: bool = False) -> None:
        self._call("mkdir", path, recursive)

    async def readdir(self, path: str) -> list[str]:
        return [str(name) for name in self._value("readdir", path)]

    async def readdir_with_file_types(self, path: str) -> list[DirentEntry]:
        return [
            DirentEntry(
                name=str(n), is_file=bool(f), is_directory=bool(d), is_symbolic_link=bool(s)
            )
            for n, f, d, s in self._value("dirents", path)
        ]

    async def rm(self, path: str, recursive: bool = False, force: bool = False) -> None:
        self._call("rm", path, recursive, force)

    async def cp(self, src: str, dest: str, recursive: bool = False) -> None:
        self._call("cp", src, dest, recursive)

    async def mv(self, src: str, dest: str) -> None:
        self._call("mv", src, dest)

    async def chmod(self, path: str, mode: int) -> None:
        self._call("chmod", path, int(mode))

    async def symlink(self, target: str, link_path: str) -> None:
        self._call("symlink", target, link_path)

    async def link(self, existing_path: str, new_path: str) -> None:
        self._call("link", existing_path, new_path)

    async def readlink(self, path: str) -> str:
        return str(self._value("readlink", path))

    async def utimes(self, path: str, atime: float, mtime: float) -> None:
        self._call("utimes", path, float(atime), float(mtime))

    async def realpath(self, path: str) -> str:
        return str(self._value("realpath", path))

    def get_all_paths(self) -> list[str]:
        return [str(path) for path in self._value("paths")]


# -- running a script -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ScriptResult:
    """What one command line printed and how it exited (text as the interpreter produced it)."""

    stdout: str
    stderr: str
    exit_code: int
    out_of_memory: bool = False


def _break_cycles(bash: Bash) -> None:
    """Drop the interpreter's context, which holds the interpreter's own bound methods."""
    interpreter = getattr(bash, "_interpreter", None)
    if interpreter is not None and hasattr(interpreter, "_ctx"):
        interpreter._ctx = None


async def run_script(
    fs: RemoteFs,
    commands: Mapping[str, Command],
    limits: ExecutionLimits,
    script: str,
    *,
    cwd: str,
    env: Mapping[str, str],
    stdin: bytes | None,
    memory_message: str,
) -> ScriptResult:
    """Run ``script`` in a fresh interpreter over ``fs``; never raises for what the script does."""
    if _SUBSCRIPT_SUBSTITUTION.search(script):
        return ScriptResult("", _SUBSCRIPT_MESSAGE, EXIT_UNSUPPORTED)
    bash = Bash(
        fs=fs,
        cwd=cwd,
        env=dict(env),
        limits=limits,
        commands=dict(commands),
        unescape_html=False,  # plain bash semantics: "&lt;" is text, not "<"
    )
    if stdin is not None:
        # just-bash has no stdin parameter; a pipeline's first command reads the interpreter
        # state's ``group_stdin`` (what `{ ...; } < file` sets), so every top-level pipeline sees
        # the data, and ``read`` consumes it line by line.
        bash._interpreter.state.group_stdin = decode(stdin)  # pyright: ignore[reportPrivateUsage]
    try:
        result = await run_command_line(bash._interpreter, script)  # pyright: ignore[reportPrivateUsage]
    except MemoryError:
        return ScriptResult("", memory_message, EXIT_OUT_OF_MEMORY, out_of_memory=True)
    except ExecutionLimitError as error:
        return ScriptResult(
            error.stdout,
            f"{error.stderr}bash: execution limit exceeded: {error}\n",
            EXIT_INTERPRETER_ERROR,
        )
    except Exception as error:  # the interpreter crashed: report it as the command's failure
        return ScriptResult(
            "",
            f"pai-sandbox-inmemory: the shell interpreter failed: {type(error).__name__}: "
            f"{error}\n",
            EXIT_INTERPRETER_ERROR,
        )
    finally:
        _break_cycles(bash)
    return ScriptResult(result.stdout, result.stderr, result.exit_code)
