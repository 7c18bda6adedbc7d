"""The ``Sandbox`` facade: what operation bodies use, the same for every provider."""

from __future__ import annotations

import codecs
import math
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar, cast

from pai.core import current_durable_call
from pai.sandbox._errors import SandboxFileTooLargeError, SandboxInputError, SandboxVanishedError
from pai.sandbox._paths import WORKSPACE, resolve_path
from pai.sandbox._provider import OutputCallback, SandboxInstance
from pai.sandbox._receipts import (
    DurableCommand,
    DurableCommands,
    check_durable_commands,
    not_durable,
)
from pai.sandbox._session import SandboxHandle
from pai.sandbox._types import CommandResult, DirEntry, FileWrite, RawCommandResult

T = TypeVar("T")

DEFAULT_OUTPUT_LIMIT = 1024 * 1024
"""Bytes kept per output stream of one command (1 MiB)."""

DEFAULT_READ_LIMIT = 64 * 1024 * 1024
"""The largest file :meth:`Sandbox.read_file` transfers to the host (64 MiB)."""

DEFAULT_TIMEOUT = 120.0
"""Seconds a command may run when no timeout is given."""

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

FileContent = bytes | str


def _no_flush() -> None:
    pass


@dataclass(frozen=True, slots=True)
class _RunCommand:
    """One ``run_command`` call, ready to run on an instance (and again on a new one).

    An object rather than a closure: a command waiting for its sandbox holds this one object
    instead of a function and a cell per argument, which the garbage collector would walk again
    and again while thousands of commands wait."""

    command: str
    cwd: str
    env: Mapping[str, str]
    stdin: bytes | None
    timeout: float | None
    output_limit: int
    on_stdout: OutputCallback | None
    on_stderr: OutputCallback | None

    def __call__(self, instance: SandboxInstance) -> Awaitable[RawCommandResult]:
        return instance.run(
            self.command,
            cwd=self.cwd,
            env=self.env,
            stdin=self.stdin,
            timeout=self.timeout,
            output_limit=self.output_limit,
            on_stdout=self.on_stdout,
            on_stderr=self.on_stderr,
        )


def _decoding(
    callback: Callable[[str], None] | None,
) -> tuple[OutputCallback | None, Callable[[], None]]:
    """Wrap a text callback so byte chunks split mid-character decode correctly.

    Returns the byte callback and a ``flush`` to call when the stream ended, so bytes of an
    unfinished character reach the callback (as U+FFFD) just as they appear in the result.
    """
    if callback is None:
        return None, _no_flush
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def on_chunk(chunk: bytes) -> None:
        text = decoder.decode(chunk)
        if text:
            callback(text)

    def flush() -> None:
        text = decoder.decode(b"", final=True)
        if text:
            callback(text)

    return on_chunk, flush


def _type_name(value: object) -> str:
    return type(value).__name__


def check_limit(name: str, value: object) -> int:
    """``value`` as a byte limit: a positive ``int`` (not a bool), else ``SandboxInputError``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise SandboxInputError(
            f"{name} must be a positive whole number of bytes, got {value!r} "
            f"({_type_name(value)}); e.g. {name}=1048576 for 1 MiB"
        )
    if value < 1:
        raise SandboxInputError(f"{name} must be at least 1 byte, got {value!r}")
    return value


def check_timeout(name: str, value: object) -> float | None:
    """``value`` as a timeout: ``None`` or positive, finite seconds (an ``int`` or ``float``)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SandboxInputError(
            f"{name} must be a number of seconds or None, got {value!r} ({_type_name(value)}); "
            f"e.g. {name}=30"
        )
    if not value > 0 or math.isinf(value):  # "not > 0" also refuses NaN
        raise SandboxInputError(
            f"{name} must be positive, finite seconds (None for no timeout), got {value!r}"
        )
    return float(value) if isinstance(value, float) else value


def _check_env(env: object) -> dict[str, str]:
    if env is None:
        return {}
    if not isinstance(env, Mapping):
        raise SandboxInputError(
            f"env must be a mapping of variable name to value (both str) or None, got {env!r} "
            f"({_type_name(env)}); e.g. env={{'DEBUG': '1'}}"
        )
    checked: dict[str, str] = {}
    for name, value in cast("Mapping[object, object]", env).items():
        if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
            raise SandboxInputError(
                f"env: variable name {name!r} is not valid; use a str of letters, digits and "
                "'_', not starting with a digit"
            )
        if not isinstance(value, str):
            raise SandboxInputError(
                f"env: the value of {name} must be a str, got {value!r} ({_type_name(value)}); "
                f"e.g. env={{{name!r}: {str(value)!r}}}"
            )
        if "\x00" in value:
            raise SandboxInputError(
                f"env: the value of {name} contains a NUL byte, which no environment can hold; "
                "remove it"
            )
        checked[name] = value
    return checked


def _check_stdin(stdin: object) -> bytes | None:
    if stdin is None:
        return None
    if isinstance(stdin, bytes | bytearray):
        return bytes(stdin)
    if isinstance(stdin, str):
        raise SandboxInputError(
            "stdin must be bytes or None, got a str; encode text first, e.g. stdin=text.encode()"
        )
    raise SandboxInputError(f"stdin must be bytes or None, got {stdin!r} ({_type_name(stdin)})")


def _check_callback(name: str, callback: object) -> None:
    if callback is not None and not callable(callback):
        raise SandboxInputError(
            f"{name} must be a function taking a str, or None, got {callback!r}"
        )


def _as_bytes(content: FileContent, path: str) -> bytes:
    if isinstance(content, bytes):
        return content
    if isinstance(content, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        return content.encode()
    raise SandboxInputError(
        f"content for {path!r} must be bytes or str, got {type(content).__name__}"
    )


class Sandbox:
    """A command and filesystem environment, lazily provisioned, that repairs itself.

    Every provider gets the same behaviour from this one class: relative paths resolve against
    ``/workspace``; output is decoded as UTF-8 (with replacement) and capped; a non-zero exit is a
    result; and when the instance behind it has vanished (expired, removed, crashed), the next
    operation re-creates it, re-applies the seed files, retries once, and says so
    (``CommandResult.environment_reset``, :attr:`environment_resets`). So does the first
    operation of a thread older than this process's session whose instance the provider cannot
    find (gone with the process that held it, or removed meanwhile).

    Make one with :func:`create_sandbox`, or receive one at ``ctx.capabilities.sandbox``.

    Example::

        result = await sandbox.run_command("python3 -c 'print(1+1)'", timeout=10)
        if result.exit_code != 0:
            ...
        await sandbox.write_file("notes.md", "# Notes\\n")
        print(await sandbox.read_text("notes.md"))
    """

    def __init__(
        self,
        handle: SandboxHandle,
        *,
        default_timeout: float | None = DEFAULT_TIMEOUT,
        output_limit: int = DEFAULT_OUTPUT_LIMIT,
        read_limit: int = DEFAULT_READ_LIMIT,
        durable_commands: DurableCommands = "exactly-once",
    ) -> None:
        self._handle = handle
        self.default_timeout: float | None = check_timeout("default_timeout", default_timeout)
        """Seconds a command may run when ``run_command`` gets no ``timeout``."""
        self.output_limit: int = check_limit("output_limit", output_limit)
        """Bytes kept per output stream of one command."""
        self.read_limit: int = check_limit("read_limit", read_limit)
        """The largest file :meth:`read_file` transfers; a larger one raises
        :class:`~pai.sandbox.SandboxFileTooLargeError`."""
        self.environment_resets: int = 0
        """How many times this facade found its instance gone and re-created it."""
        self.durable_commands: DurableCommands = check_durable_commands(durable_commands)
        """In a durable run on a provider that keeps no receipts: refuse commands
        (``"exactly-once"``) or run them, perhaps again on replay (``"at-least-once"``)."""

    @property
    def key(self) -> str:
        """The instance key this sandbox is bound to."""
        return self._handle.key

    @property
    def workdir(self) -> str:
        """The working directory of commands, and the base of relative paths."""
        return WORKSPACE

    async def _with_instance(
        self, operation: Callable[[SandboxInstance], Awaitable[T]]
    ) -> tuple[T, bool]:
        instance, recreated = await self._handle.resume()
        if recreated:
            self.environment_resets += 1
        try:
            return await operation(instance), recreated
        except SandboxVanishedError:
            instance = await self._handle.replace(instance)
            self.environment_resets += 1
            return await operation(instance), True

    # -- commands -----------------------------------------------------------------------------

    async def run_command(
        self,
        command: str,
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
        timeout: float | None = None,
        on_stdout: Callable[[str], None] | None = None,
        on_stderr: Callable[[str], None] | None = None,
    ) -> CommandResult:
        """Run ``command`` in a shell in the sandbox.

        ``cwd`` (default ``/workspace``) is the working directory; a missing one gives a non-zero
        exit code, not an exception. ``env`` adds variables (str to str). ``stdin`` (bytes) is fed
        to the command; ``None`` gives it an immediate end-of-file. ``timeout`` (seconds, default
        :attr:`default_timeout`) kills the command and everything it started inside the sandbox
        and returns ``timed_out=True`` with exit code 124. ``on_stdout`` / ``on_stderr`` receive
        decoded text as it arrives. Arguments of the wrong type raise ``SandboxInputError``
        naming the argument, before anything runs.

        Inside a tool call of a durable run (:func:`pai.core.current_durable_call`), a command
        runs at most once per replay key: a replay returns the receipt the sandbox keeps under
        ``/workspace/.pai/receipts``, waits for the command an earlier attempt left running, or
        returns exit code 255 for one that was interrupted. Output then reaches ``on_stdout`` /
        ``on_stderr`` when the command has finished. A provider that keeps no receipts raises
        :class:`~pai.sandbox.SandboxNotDurableError` unless ``durable_commands="at-least-once"``.
        """
        if not isinstance(command, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise SandboxInputError(
                f"command must be a str (a shell command line), got {command!r} "
                f"({_type_name(command)}); join arguments with shlex.join()"
            )
        if not command.strip():
            raise SandboxInputError(f"command must be a non-empty shell command, got {command!r}")
        if cwd is not None and not isinstance(cwd, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise SandboxInputError(
                f"cwd must be a str path or None, got {cwd!r} ({_type_name(cwd)})"
            )
        checked_timeout = check_timeout("timeout", timeout)
        if checked_timeout is None:
            checked_timeout = self.default_timeout
        variables = _check_env(env)
        data = _check_stdin(stdin)
        _check_callback("on_stdout", on_stdout)
        _check_callback("on_stderr", on_stderr)
        workdir = resolve_path(cwd) if cwd is not None else WORKSPACE
        out_callback, out_flush = _decoding(on_stdout)
        err_callback, err_flush = _decoding(on_stderr)
        started = time.perf_counter()

        run: Callable[[SandboxInstance], Awaitable[RawCommandResult]] = _RunCommand(
            command,
            workdir,
            variables,
            data,
            checked_timeout,
            self.output_limit,
            out_callback,
            err_callback,
        )
        call = current_durable_call()
        if call is not None:
            provider = self._handle.manager.provider
            if provider.features.durable:
                run = DurableCommand(
                    key=call.next_key("sandbox.command"),
                    command=command,
                    cwd=workdir,
                    env=variables,
                    stdin=data,
                    timeout=checked_timeout,
                    output_limit=self.output_limit,
                    on_stdout=out_callback,
                    on_stderr=err_callback,
                )
            elif self.durable_commands != "at-least-once":
                raise not_durable(provider.name)
        raw, reset = await self._with_instance(run)
        out_flush()
        err_flush()
        limit = self.output_limit
        # Providers cap while streaming; cap again so a lax provider cannot break the contract.
        truncated = raw.truncated or len(raw.stdout) > limit or len(raw.stderr) > limit
        return CommandResult(
            stdout=raw.stdout[:limit].decode("utf-8", "replace"),
            stderr=raw.stderr[:limit].decode("utf-8", "replace"),
            exit_code=raw.exit_code,
            timed_out=raw.timed_out,
            truncated=truncated,
            environment_reset=reset,
            duration=time.perf_counter() - started,
        )

    # -- files ----------------------------------------------------------------------------------

    async def read_file(self, path: str) -> bytes:
        """The file's bytes.

        Raises ``SandboxFileNotFoundError`` (a ``FileNotFoundError``) and the other file errors;
        a file larger than :attr:`read_limit` raises
        :class:`~pai.sandbox.SandboxFileTooLargeError` before any of it is transferred.
        """
        resolved = resolve_path(path)
        limit = self.read_limit
        data, _ = await self._with_instance(lambda i: i.read_file(resolved, max_bytes=limit))
        if len(data) > limit:
            # Providers check before the transfer; check again so a lax one cannot break the limit.
            raise SandboxFileTooLargeError(resolved, size=len(data), limit=limit)
        return data

    async def read_text(self, path: str, *, errors: str = "replace") -> str:
        """The file decoded as UTF-8 (undecodable bytes replaced unless ``errors="strict"``)."""
        return (await self.read_file(path)).decode("utf-8", errors)

    async def write_file(
        self, path: str, content: FileContent, *, executable: bool = False
    ) -> None:
        """Write one file (text as UTF-8), creating parent folders."""
        await self.write_files(
            [
                FileWrite(
                    resolve_path(path), _as_bytes(content, path), 0o755 if executable else 0o644
                )
            ]
        )

    async def write_files(self, files: Mapping[str, FileContent] | Iterable[FileWrite]) -> None:
        """Write several files in order, in one round trip where the backend allows.

        Pass a mapping of path to content, or :class:`FileWrite` values (to set modes). Every path
        is checked before anything is written.
        """
        writes: list[FileWrite] = []
        if isinstance(files, Mapping):
            contents = cast("Mapping[str, FileContent]", files)
            for path, content in contents.items():
                writes.append(FileWrite(resolve_path(path), _as_bytes(content, path)))
        else:
            for item in files:
                if not isinstance(item, FileWrite):  # pyright: ignore[reportUnnecessaryIsInstance]
                    raise SandboxInputError(
                        f"write_files() takes a mapping of path to content or FileWrite values, "
                        f"got {item!r}"
                    )
                writes.append(
                    FileWrite(
                        resolve_path(item.path), _as_bytes(item.content, item.path), item.mode
                    )
                )
        if writes:
            await self._with_instance(lambda i: i.write_files(writes))

    async def list_dir(self, path: str = ".") -> list[DirEntry]:
        """The folder's entries (name, path, type, size), sorted by name."""
        resolved = resolve_path(path)
        entries, _ = await self._with_instance(lambda i: i.list_dir(resolved))
        return sorted(entries, key=lambda e: e.name)

    async def remove(self, path: str, *, recursive: bool = False) -> None:
        """Remove a file or an empty folder; ``recursive=True`` removes a folder and its contents."""
        resolved = resolve_path(path)
        await self._with_instance(lambda i: i.remove(resolved, recursive=recursive))

    async def make_dir(self, path: str, *, parents: bool = False) -> None:
        """Make a folder; ``parents=True`` makes missing parents and accepts an existing folder."""
        resolved = resolve_path(path)
        await self._with_instance(lambda i: i.make_dir(resolved, parents=parents))

    async def exists(self, path: str) -> bool:
        """Whether a file or folder exists at ``path``."""
        resolved = resolve_path(path)
        found, _ = await self._with_instance(lambda i: i.exists(resolved))
        return found

    # -- lifecycle --------------------------------------------------------------------------------

    async def reset(self) -> None:
        """Replace the environment with a fresh one; the seed files are written again."""
        await self._handle.replace()

    def __repr__(self) -> str:
        return f"Sandbox(key={self.key!r}, provider={self._handle.manager.provider.name!r})"


def create_sandbox(
    handle: SandboxHandle,
    *,
    default_timeout: float | None = DEFAULT_TIMEOUT,
    output_limit: int = DEFAULT_OUTPUT_LIMIT,
    read_limit: int = DEFAULT_READ_LIMIT,
    durable_commands: DurableCommands = "exactly-once",
) -> Sandbox:
    """The :class:`Sandbox` facade over a session manager's handle.

    ``default_timeout`` (seconds, ``None`` for none) applies to commands given no timeout;
    ``output_limit`` caps each output stream of a command; ``read_limit`` is the largest file
    :meth:`Sandbox.read_file` transfers (64 MiB by default); ``durable_commands`` is what a
    durable run's commands do on a provider that keeps no receipts (see
    :attr:`Sandbox.durable_commands`). Bad values raise ``SandboxInputError`` naming the option.

    Example::

        sessions = create_sandbox_session_manager(provider=create_in_memory_sandbox_provider())
        ran = await run_tool(
            run_script,
            input={"command": "echo hi"},
            capabilities={"sandbox": create_sandbox(sessions.handle("t"))},
        )
    """
    return Sandbox(
        handle,
        default_timeout=default_timeout,
        output_limit=output_limit,
        read_limit=read_limit,
        durable_commands=durable_commands,
    )
