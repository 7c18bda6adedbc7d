"""The ``Sandbox`` facade: what operation bodies use, the same for every provider."""

from __future__ import annotations

import codecs
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TypeVar, cast

from pai.sandbox._errors import SandboxInputError, SandboxVanishedError
from pai.sandbox._paths import WORKSPACE, resolve_path
from pai.sandbox._provider import OutputCallback, SandboxInstance
from pai.sandbox._session import SandboxHandle
from pai.sandbox._types import CommandResult, DirEntry, FileWrite, RawCommandResult

T = TypeVar("T")

DEFAULT_OUTPUT_LIMIT = 1024 * 1024
"""Bytes kept per output stream of one command (1 MiB)."""

DEFAULT_TIMEOUT = 120.0
"""Seconds a command may run when no timeout is given."""

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

FileContent = bytes | str


def _no_flush() -> None:
    pass


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


def _check_env(env: Mapping[str, str] | None) -> dict[str, str]:
    if env is None:
        return {}
    checked: dict[str, str] = {}
    for name, value in env.items():
        if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise SandboxInputError(
                f"environment variable name {name!r} is not valid; use letters, digits and '_', "
                "not starting with a digit"
            )
        if not isinstance(value, str) or "\x00" in value:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise SandboxInputError(
                f"environment variable {name}={value!r} must be a string without NUL bytes"
            )
        checked[name] = value
    return checked


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
    (``CommandResult.environment_reset``, :attr:`environment_resets`).

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
    ) -> None:
        if output_limit < 1:
            raise SandboxInputError(f"output_limit must be at least 1 byte, got {output_limit!r}")
        if default_timeout is not None and not default_timeout > 0:
            raise SandboxInputError(
                f"default_timeout must be positive seconds or None, got {default_timeout!r}"
            )
        self._handle = handle
        self.default_timeout = default_timeout
        self.output_limit = output_limit
        self.environment_resets: int = 0
        """How many times this facade found its instance gone and re-created it."""

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
        instance = await self._handle.instance()
        try:
            return await operation(instance), False
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
        stdin: FileContent | None = None,
        timeout: float | None = None,
        on_stdout: Callable[[str], None] | None = None,
        on_stderr: Callable[[str], None] | None = None,
    ) -> CommandResult:
        """Run ``command`` in a shell in the sandbox.

        ``cwd`` defaults to ``/workspace``; ``env`` adds variables; ``stdin`` is fed to the command;
        ``timeout`` (seconds, default :attr:`default_timeout`) kills the command inside the sandbox
        and returns ``timed_out=True``. ``on_stdout`` / ``on_stderr`` receive decoded text as it
        arrives.
        """
        if not isinstance(command, str) or not command.strip():  # pyright: ignore[reportUnnecessaryIsInstance]
            raise SandboxInputError(f"command must be a non-empty string, got {command!r}")
        if timeout is None:
            timeout = self.default_timeout
        elif not timeout > 0:  # also refuses NaN
            raise SandboxInputError(f"timeout must be positive seconds, got {timeout!r}")
        workdir = resolve_path(cwd) if cwd is not None else WORKSPACE
        variables = _check_env(env)
        data = None if stdin is None else _as_bytes(stdin, "<stdin>")
        out_callback, out_flush = _decoding(on_stdout)
        err_callback, err_flush = _decoding(on_stderr)
        started = time.perf_counter()

        async def run(instance: SandboxInstance) -> RawCommandResult:
            return await instance.run(
                command,
                cwd=workdir,
                env=variables,
                stdin=data,
                timeout=timeout,
                output_limit=self.output_limit,
                on_stdout=out_callback,
                on_stderr=err_callback,
            )

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
        """The file's bytes. Raises ``SandboxFileNotFoundError`` (a ``FileNotFoundError``)."""
        resolved = resolve_path(path)
        data, _ = await self._with_instance(lambda i: i.read_file(resolved))
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
) -> Sandbox:
    """The :class:`Sandbox` facade over a session manager's handle.

    Example::

        sessions = create_sandbox_session_manager(provider=create_in_memory_sandbox_provider())
        ran = await run_tool(
            run_script,
            input={"command": "echo hi"},
            capabilities={"sandbox": create_sandbox(sessions.handle("t"))},
        )
    """
    return Sandbox(handle, default_timeout=default_timeout, output_limit=output_limit)
