"""The in-memory sandbox provider: an in-memory filesystem and a bash interpreter per instance."""

from __future__ import annotations

import math
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from types import TracebackType
from typing import TypeVar

import anyio

from pai.sandbox import (
    WORKSPACE,
    DirEntry,
    FileWrite,
    InstanceInfo,
    OutputCallback,
    ProviderFeatures,
    RawCommandResult,
    SandboxInputError,
    SandboxVanishedError,
)
from pai.sandbox_inmemory import _files
from pai.sandbox_inmemory._just_bash import (
    Command,
    ExecutionLimits,
    SandboxFs,
    ScriptResult,
    command_registry,
    encode,
    run_script,
)
from pai.sandbox_inmemory._loop import LoopThread

__all__ = [
    "EXIT_TIMEOUT",
    "NAME",
    "InMemorySandboxInstance",
    "InMemorySandboxProvider",
    "create_in_memory_sandbox_provider",
]

T = TypeVar("T")

NAME = "inmemory"
"""The provider's registered name."""

EXIT_TIMEOUT = 124
"""Exit code of a command stopped at its timeout (as GNU ``timeout`` reports it)."""

_FEATURES = ProviderFeatures(cross_process=False, durable=False, processes=False)


class _Runtime:
    """What every instance of one provider shares: the loop, the commands, the limits."""

    __slots__ = ("commands", "limits", "loop")

    loop: LoopThread
    commands: dict[str, Command]
    limits: ExecutionLimits

    def __init__(self, limits: ExecutionLimits) -> None:
        self.loop = LoopThread(NAME)
        self.commands = command_registry()
        self.limits = limits


class _State:
    """One incarnation of an instance. Touched only on the provider's loop thread."""

    __slots__ = ("alive", "created_at", "fs", "instance_id", "key", "running")

    key: str
    instance_id: str
    created_at: datetime
    fs: SandboxFs
    alive: bool
    running: set[anyio.CancelScope]

    def __init__(self, key: str, fs: SandboxFs) -> None:
        self.key = key
        self.instance_id = uuid.uuid4().hex
        self.created_at = datetime.now(UTC)
        self.fs = fs
        self.alive = True
        self.running = set()

    def check(self) -> None:
        if not self.alive:
            raise SandboxVanishedError(
                f"in-memory sandbox {self.key!r} (instance {self.instance_id}) was destroyed; "
                "its files are gone"
            )

    def vanish(self) -> None:
        """Mark the instance gone and stop the commands still running in it."""
        self.alive = False
        for scope in self.running:
            scope.cancel()


class _Timeout:
    """Marker: the command was stopped at its timeout."""


_TIMED_OUT = _Timeout()


def _cap(text: str, limit: int) -> tuple[bytes, bool]:
    """``text`` as at most ``limit`` bytes, and whether that cut anything."""
    if len(text) > limit:  # every character is at least one byte: the cut is certain
        return encode(text[:limit])[:limit], True
    data = encode(text)
    return (data[:limit], True) if len(data) > limit else (data, False)


class InMemorySandboxInstance:
    """One in-memory sandbox: its files live in the provider's process, its shell is just-bash.

    Every method raises :class:`~pai.sandbox.SandboxVanishedError` once the instance was destroyed
    (or replaced, or forgotten); commands still running then are stopped and raise it too.
    """

    __slots__ = ("_runtime", "_state")

    def __init__(self, runtime: _Runtime, state: _State) -> None:
        self._runtime = runtime
        self._state = state

    @property
    def key(self) -> str:
        """The instance key this instance was created for."""
        return self._state.key

    @property
    def instance_id(self) -> str:
        """A fresh id per incarnation (a uuid)."""
        return self._state.instance_id

    def __repr__(self) -> str:
        status = "" if self._state.alive else ", destroyed"
        return f"InMemorySandboxInstance({self.key!r}, {self.instance_id!r}{status})"

    async def _call(self, operation: Callable[[SandboxFs], Awaitable[T]]) -> T:
        state = self._state

        async def on_loop() -> T:
            state.check()
            return await operation(state.fs)

        return await self._runtime.loop.call(on_loop)

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
        """Run ``command`` in a fresh just-bash shell over this instance's files.

        Like ``sh -c``: ``cwd`` (which must be an existing folder) and ``env`` (added to the
        defaults) apply to this command only. ``stdin`` is what the script's commands read from
        standard input; any bytes are fine. At ``timeout`` seconds the script is cancelled
        between two steps (nothing of it runs after this returns), ``timed_out`` is set, the exit
        code is 124 and the output is lost (the interpreter returns output only at the end).

        ``on_stdout`` / ``on_stderr`` are called once each, after the command finished, with the
        capped output (when it is not empty): the interpreter does not stream. A limit of
        just-bash (``ExecutionLimits``: loop iterations, command count, call depth) or an internal
        interpreter failure is a result with exit code 126 and the reason on stderr.
        """
        if timeout is not None and not timeout > 0:  # also refuses NaN
            raise SandboxInputError(f"timeout must be positive seconds or None, got {timeout!r}")
        state, runtime = self._state, self._runtime
        env_copy = dict(env)

        async def on_loop() -> ScriptResult | _Timeout:
            state.check()
            await _files.check_workdir(state.fs, cwd)
            outcome: ScriptResult | _Timeout = _TIMED_OUT
            # One scope serves both ends: its deadline is the timeout, and destroying the
            # instance cancels it (state.check() below then tells the two apart).
            deadline = math.inf if timeout is None else anyio.current_time() + timeout
            with anyio.CancelScope(deadline=deadline) as scope:
                state.running.add(scope)
                try:
                    outcome = await run_script(
                        state.fs,
                        runtime.commands,
                        runtime.limits,
                        command,
                        cwd=cwd,
                        env=env_copy,
                        stdin=stdin,
                    )
                finally:
                    state.running.discard(scope)
            state.check()  # destroyed while it ran
            return outcome

        outcome = await runtime.loop.call(on_loop)
        if isinstance(outcome, _Timeout):
            message = (
                f"pai-sandbox-inmemory: the command timed out after {timeout:g} s and was "
                "stopped; its output is lost\n"
            )
            stdout, stderr, exit_code, timed_out = "", message, EXIT_TIMEOUT, True
        else:
            stdout, stderr = outcome.stdout, outcome.stderr
            exit_code, timed_out = outcome.exit_code, False
        out, out_cut = _cap(stdout, output_limit)
        err, err_cut = _cap(stderr, output_limit)
        if on_stdout is not None and out:
            on_stdout(out)
        if on_stderr is not None and err:
            on_stderr(err)
        return RawCommandResult(
            stdout=out,
            stderr=err,
            exit_code=exit_code,
            timed_out=timed_out,
            truncated=out_cut or err_cut,
        )

    async def read_file(self, path: str) -> bytes:
        """The file's bytes."""
        return await self._call(lambda fs: _files.read_file(fs, path))

    async def write_files(self, files: Sequence[FileWrite]) -> None:
        """Write every file in order, creating parent folders and setting each file's mode."""
        batch = list(files)
        await self._call(lambda fs: _files.write_files(fs, batch))

    async def list_dir(self, path: str) -> Sequence[DirEntry]:
        """The folder's entries (name, path, type, size), sorted by name."""
        return await self._call(lambda fs: _files.list_dir(fs, path))

    async def remove(self, path: str, *, recursive: bool) -> None:
        """Remove a file or an empty folder; ``recursive`` also removes a non-empty folder."""
        await self._call(lambda fs: _files.remove(fs, path, recursive=recursive))

    async def make_dir(self, path: str, *, parents: bool) -> None:
        """Make a folder. Without ``parents``, an existing path is ``SandboxFileExistsError``
        and a missing parent ``SandboxFileNotFoundError``; with it, missing parents are made
        and an existing folder is fine."""
        await self._call(lambda fs: _files.make_dir(fs, path, parents=parents))

    async def exists(self, path: str) -> bool:
        """Whether anything exists at ``path`` (a dangling symlink counts as nothing)."""
        return await self._call(lambda fs: _files.exists(fs, path))


class InMemorySandboxProvider:
    """Sandboxes that live in this process: an in-memory filesystem plus an in-process bash.

    Each instance is a just-bash ``InMemoryFs`` (with ``/workspace`` as the working folder) and a
    fresh just-bash interpreter per command. The interpreter sees only that filesystem and has no
    network. All of it runs on one private asyncio event loop in a background thread, started on
    first use and stopped by :meth:`aclose`, so the provider works the same under asyncio and
    trio, and concurrent commands really run concurrently there.

    Instances vanish with the process (``cross_process=False``, ``durable=False``); ``aclose``
    stops the thread but keeps the instances, so a later call starts it again.

    Example::

        provider = create_in_memory_sandbox_provider()
        sessions = create_sandbox_session_manager(provider=provider)
        sandbox = create_sandbox(sessions.handle("t"))
        assert (await sandbox.run_command("echo hi")).stdout == "hi\\n"
        await sessions.aclose()  # also closes the provider
    """

    def __init__(self, *, limits: ExecutionLimits | None = None) -> None:
        self._runtime = _Runtime(limits if limits is not None else ExecutionLimits())
        # key -> (instance, its state); touched only on the loop thread.
        self._instances: dict[str, tuple[InMemorySandboxInstance, _State]] = {}

    @property
    def name(self) -> str:
        """``"inmemory"``."""
        return NAME

    @property
    def features(self) -> ProviderFeatures:
        """No processes, nothing outside this process, nothing durable."""
        return _FEATURES

    @property
    def limits(self) -> ExecutionLimits:
        """The interpreter limits every command runs under."""
        return self._runtime.limits

    async def create(self, key: str) -> InMemorySandboxInstance:
        """A new, empty instance for ``key``; an existing one is destroyed first."""

        async def on_loop() -> InMemorySandboxInstance:
            self._drop(key)
            fs = SandboxFs()
            await fs.mkdir(WORKSPACE, recursive=True)
            state = _State(key, fs)
            instance = InMemorySandboxInstance(self._runtime, state)
            self._instances[key] = (instance, state)
            return instance

        return await self._runtime.loop.call(on_loop)

    async def find(self, key: str) -> InMemorySandboxInstance | None:
        """The live instance for ``key``, or ``None``."""

        async def on_loop() -> InMemorySandboxInstance | None:
            entry = self._instances.get(key)
            return entry[0] if entry is not None else None

        if not self._instances:  # nothing was ever created: no need to start the loop
            return None
        return await self._runtime.loop.call(on_loop)

    async def destroy(self, key: str) -> None:
        """Remove the instance for ``key`` and its files; a missing key does nothing.

        Anyone still holding the instance gets ``SandboxVanishedError`` from then on, and its
        running commands are stopped.
        """

        async def on_loop() -> None:
            self._drop(key)

        if self._instances:
            await self._runtime.loop.call(on_loop)

    async def forget(self, key: str) -> None:
        """For tests: remove the instance for ``key`` behind the session manager's back.

        The same as :meth:`destroy`, named for what tests use it for: simulating an instance
        that expired or was removed by someone else, so that the next operation through a
        :class:`~pai.sandbox.Sandbox` finds it gone, re-creates it with the seed files and
        reports ``environment_reset=True``.
        """
        await self.destroy(key)

    def _drop(self, key: str) -> None:
        entry = self._instances.pop(key, None)
        if entry is not None:
            entry[1].vanish()

    async def list_instances(self) -> Sequence[InstanceInfo]:
        """Every live instance of this provider, oldest first."""

        async def on_loop() -> list[InstanceInfo]:
            states = sorted((state for _, state in self._instances.values()), key=_created)
            return [
                InstanceInfo(
                    key=state.key,
                    instance_id=state.instance_id,
                    created_at=state.created_at,
                    provider=NAME,
                )
                for state in states
            ]

        if not self._instances:
            return []
        return await self._runtime.loop.call(on_loop)

    async def aclose(self) -> None:
        """Stop the background loop (cancelling commands still running); instances stay."""
        await self._runtime.loop.aclose()

    async def __aenter__(self) -> InMemorySandboxProvider:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"InMemorySandboxProvider(instances={len(self._instances)})"


def _created(state: _State) -> datetime:
    return state.created_at


def create_in_memory_sandbox_provider(
    *, limits: ExecutionLimits | None = None
) -> InMemorySandboxProvider:
    """An in-memory sandbox provider; ``limits`` bounds what one command may do.

    ``limits`` is just-bash's ``ExecutionLimits`` (re-exported here): loop iterations, command
    count, call depth, awk/sed iterations per command. A script that exceeds one stops with exit
    code 126 and the reason on stderr.

    Example::

        sessions = create_sandbox_session_manager(provider=create_in_memory_sandbox_provider())
    """
    return InMemorySandboxProvider(limits=limits)
