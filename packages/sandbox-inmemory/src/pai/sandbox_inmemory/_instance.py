"""One in-memory sandbox's operations: its commands (run in the provider's worker processes) and
its files (served in this process).

:class:`InMemorySandboxInstance` runs a command by leasing a worker from the pool
(:mod:`pai.sandbox_inmemory._pool`, the one module that talks to the worker processes), sending it
the command and serving the file requests it sends back against the instance's
:class:`~pai.sandbox_inmemory._hostfs.HostFs`, under the instance's lock; the file API
(``read_file``, ``write_files``, ...) is served directly (:mod:`pai.sandbox_inmemory._files`),
never through a worker. The lifecycle (create, find, destroy, list, close) is
:mod:`pai.sandbox_inmemory._provider`'s.
"""

from __future__ import annotations

import hashlib
import math
import threading
import uuid
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from functools import partial
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from just_bash import ExecutionLimits

from pai.sandbox import (
    WORKSPACE,
    DirEntry,
    SandboxClosedError,
    SandboxError,
    SandboxInputError,
    SandboxVanishedError,
)
from pai.sandbox.provider import FileWrite, OutputCallback, RawCommandResult
from pai.sandbox_inmemory import _files
from pai.sandbox_inmemory._errors import budget_message
from pai.sandbox_inmemory._hostfs import HostFs, drive, serve_frame
from pai.sandbox_inmemory._pool import Worker, WorkerDied, WorkerPool
from pai.sandbox_inmemory._protocol import (
    EXIT_OUT_OF_MEMORY,
    MAX_JSON,
    ProtocolError,
    encode_frame,
    encode_head,
)

__all__ = [
    "EXIT_OUT_OF_MEMORY",
    "EXIT_TIMEOUT",
    "InMemorySandboxInstance",
    "InstanceState",
    "ProviderRuntime",
]

T = TypeVar("T")

EXIT_TIMEOUT = 124
"""Exit code of a command stopped at its timeout (as GNU ``timeout`` reports it)."""

MiB = 1024 * 1024


class InstanceState:
    """One incarnation of an instance: its files and the commands running in it."""

    __slots__ = ("alive", "created_at", "fs", "instance_id", "key", "lock", "running")

    def __init__(self, key: str, budget: int) -> None:
        self.key: str = key
        self.instance_id: str = uuid.uuid4().hex
        self.created_at: datetime = datetime.now(UTC)
        self.fs: HostFs = HostFs(budget)
        drive(self.fs.mkdir(WORKSPACE, recursive=True))
        self.alive: bool = True
        self.lock: threading.Lock = threading.Lock()
        self.running: set[Worker] = set()

    def check(self) -> None:
        if not self.alive:
            raise SandboxVanishedError(
                f"in-memory sandbox {self.key!r} (instance {self.instance_id}) was destroyed; "
                "its files are gone"
            )

    def vanish(self) -> None:
        """Mark the instance gone and kill the workers running its commands."""
        with self.lock:
            self.alive = False
            running = list(self.running)
        for worker in running:
            worker.kill()


class ProviderRuntime:
    """What every instance of one provider shares: the worker pool (which holds the memory
    budget and ``max_workers``) and the limits."""

    __slots__ = ("limits", "limits_document", "pool")

    def __init__(self, limits: ExecutionLimits, memory_budget: int, max_workers: int) -> None:
        self.limits: ExecutionLimits = limits
        self.limits_document: dict[str, Any] = asdict(limits)
        """``limits`` as the worker receives them with each command (converted once)."""
        self.pool: WorkerPool = WorkerPool(max_workers=max_workers, memory_budget=memory_budget)


def _timeout_message(timeout: float) -> bytes:
    return (
        f"pai-sandbox-inmemory: the command timed out after {timeout:g} s and was killed; "
        "its output is lost (files it wrote before are kept)\n"
    ).encode()


def _no_worker_message(waited: float, timeout: float, max_workers: int) -> bytes:
    return (
        f"pai-sandbox-inmemory: the command never ran: it waited {waited:.1f} s for a free "
        f"worker (all {max_workers} were busy with other commands; option max_workers) and its "
        f"timeout of {timeout:g} s passed first; run fewer commands at once, raise max_workers, "
        "or give it a longer timeout\n"
    ).encode()


def _run_frame(spec: dict[str, Any], stdin: bytes) -> bytes:
    """The frame asking a worker to run a command; a command line (with its ``env`` and
    ``cwd``) over the frame limit is the caller's input error, raised before any worker is
    taken."""
    try:
        return encode_frame(["run", spec], stdin)
    except ProtocolError:
        size = len(str(spec["script"]).encode("utf-8", "surrogatepass"))
        size += sum(
            len(str(k).encode("utf-8", "surrogatepass"))
            + len(str(v).encode("utf-8", "surrogatepass"))
            for k, v in dict(spec["env"]).items()
        )
        raise SandboxInputError(
            f"the command line and its env are about {size} bytes ({size / MiB:.1f} MiB) as sent "
            f"to the in-memory sandbox's worker, over its limit of {MAX_JSON} bytes "
            f"({MAX_JSON // MiB} MiB); write big inputs as files first (write_files) or pass "
            "them as stdin, and run a short command that reads them"
        ) from None


def _died_message(budget: int) -> bytes:
    return (
        "pai-sandbox-inmemory: the shell process running the command died (most likely it ran "
        f"out of memory: the memory budget is {budget} bytes, option memory_budget); files "
        "written before are kept\n"
    ).encode()


_HEAVY_BYTES = 256 * 1024
_HEAVY_ENTRIES = 2_000
_SCANS = frozenset({"readdir", "dirents", "rm", "cp", "mv", "paths"})


def _heavy(fs: HostFs, method: str, arguments: list[object], payload: bytes) -> bool:
    """Whether serving a request may take long enough to be felt by the host's event loop."""
    if len(payload) > _HEAVY_BYTES:
        return True
    if method in _SCANS and fs.entry_count > _HEAVY_ENTRIES:
        return True
    if method in ("read", "cp", "mv", "link") and arguments and isinstance(arguments[0], str):
        try:
            size = fs.size_of(arguments[0])
        except OSError:
            return False
        return size is not None and size > _HEAVY_BYTES
    return False


def _payload_limit(fs: HostFs, body: list[object], otherwise: int) -> int:
    """The largest payload the host reads for a frame: for a write or an append, what the memory
    budget has room for (a larger one is refused without the host ever holding it)."""
    if len(body) == 3 and body[0] == "fs" and body[1] in ("write", "append"):
        arguments = body[2]
        path = arguments[0] if isinstance(arguments, list) and arguments else None  # pyright: ignore[reportUnknownVariableType]
        room = fs.budget - fs.used
        if isinstance(path, str):
            try:
                existing = fs.size_of(path) if body[1] == "write" else 0
            except OSError:
                existing = 0
            room += existing or 0
        return max(room, 0)
    return otherwise


def _answer(reply: Sequence[object], data: bytes, method: str, budget: int) -> tuple[bytes, bytes]:
    """The frame answering a worker's file request, as its head and its payload (sent one after
    the other, never joined into a copy); an answer larger than the memory budget (a listing of
    a huge folder) is an error the command reports, not a broken pipe."""
    try:
        return encode_head(reply, len(data), max_json=budget), data
    except ProtocolError:
        message = (
            f"{method}: the answer is larger than the sandbox's memory budget of {budget} bytes "
            "(option memory_budget); list fewer entries at once"
        )
        return encode_frame(["err", "ENOMEM", message]), b""


class InMemorySandboxInstance:
    """One in-memory sandbox: its files live in the provider's process, its commands run in
    worker processes that reach those files only through requests the provider serves.

    Every method raises :class:`~pai.sandbox.SandboxVanishedError` once the instance was destroyed
    (or replaced, or forgotten); commands still running then are killed and raise it too.
    """

    __slots__ = ("_runtime", "_state")

    def __init__(self, runtime: ProviderRuntime, state: InstanceState) -> None:
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

    @property
    def memory_used(self) -> int:
        """Bytes the instance's files hold, as counted against the memory budget."""
        return self._state.fs.used

    def __repr__(self) -> str:
        status = "" if self._state.alive else ", destroyed"
        return f"InMemorySandboxInstance({self.key!r}, {self.instance_id!r}{status})"

    async def _locked(
        self, work: Callable[[HostFs], T], *, heavy: bool = False, abandon_on_cancel: bool = False
    ) -> T:
        """``work(files)`` under the instance's lock, once the instance is known to be alive.

        It runs on the event loop when the lock is free and the work is not ``heavy``; else in a
        thread, so the event loop never waits for the lock (a command's large request may hold it
        in a thread for a while) nor for work proportional to the files' size.
        """
        state = self._state
        if not heavy and state.lock.acquire(blocking=False):
            try:
                state.check()
                return work(state.fs)
            finally:
                state.lock.release()

        def in_thread() -> T:
            with state.lock:
                state.check()
                return work(state.fs)

        return await anyio.to_thread.run_sync(in_thread, abandon_on_cancel=abandon_on_cancel)

    def _plain_workdir(self, cwd: str) -> bool:
        """Whether ``cwd`` is certainly a fit working folder, known without the full check
        (``HostFs.is_plain_folder``), the instance being alive; ``False`` decides nothing."""
        state = self._state
        if not state.lock.acquire(blocking=False):
            return False
        try:
            state.check()
            return state.fs.is_plain_folder(cwd)
        finally:
            state.lock.release()

    async def _files(self, operation: Callable[[HostFs], Coroutine[Any, Any, T]]) -> T:
        """A file-API operation of ``_files`` (a coroutine that never suspends), under the lock."""
        return await self._locked(lambda fs: drive(operation(fs)))

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
        """Run ``command`` in a fresh just-bash shell, in a worker process, over this instance's
        files.

        Like ``sh -c``: ``cwd`` and ``env`` (added to the defaults) apply to this command only;
        a missing or non-folder ``cwd`` is a result with exit code 1 and the reason on stderr.
        ``stdin`` bytes reach the command unchanged; ``None`` reads as empty. At ``timeout``
        seconds the worker is killed (whatever the command does), ``timed_out`` is set, the exit
        code is 124, and the output is lost (files written before stay). A command that runs out
        of memory ends with exit code 137 and a message naming ``memory_budget``; a limit of
        :class:`ExecutionLimits` with exit code 126.

        Output is capped at ``output_limit`` bytes per stream inside the worker (the host never
        receives more); ``on_stdout`` / ``on_stderr`` are called once each, after the command
        finished, with the capped output (when not empty).
        """
        if timeout is not None and not timeout > 0:  # also refuses NaN
            raise SandboxInputError(f"timeout must be positive seconds or None, got {timeout!r}")
        state, runtime = self._state, self._runtime
        if not self._plain_workdir(cwd):
            try:
                # Not a lambda: that would make cwd a cell this coroutine holds while it waits.
                await self._files(partial(_files.check_workdir, path=cwd))
            except SandboxVanishedError:
                raise
            except SandboxError as error:
                message = f"pai-sandbox-inmemory: cannot run the command in {cwd}: {error}\n"
                return RawCommandResult(stdout=b"", stderr=message.encode(), exit_code=1)

        queued = anyio.current_time()
        deadline = math.inf if timeout is None else queued + timeout
        request = _run_frame(
            {
                "script": command,
                "cwd": cwd,
                "env": dict(env),
                "stdin": stdin is not None,
                "limits": runtime.limits_document,
                "output_limit": output_limit,
                "hostname": _hostname(state.key),
            },
            stdin or b"",
        )
        generation = runtime.pool.generation
        result: RawCommandResult | None = None
        lease = await runtime.pool.lease(deadline)
        if lease is not None:
            worker = lease.worker
            with state.lock:
                if state.alive:
                    state.running.add(worker)
            try:
                state.check()
                with anyio.CancelScope(deadline=deadline + lease.startup):
                    result = await self._converse(worker, request, output_limit)
            except (WorkerDied, ProtocolError):
                worker.kill()
                state.check()  # destroyed while it ran
                if runtime.pool.generation != generation:
                    raise SandboxClosedError(
                        "the in-memory sandbox provider was closed (aclose()) while the command "
                        "ran; it was stopped"
                    ) from None
                result = RawCommandResult(
                    stdout=b"",
                    stderr=_died_message(runtime.pool.memory_budget),
                    exit_code=EXIT_OUT_OF_MEMORY,
                )
            finally:
                if result is None:
                    worker.kill()  # a timeout, a cancelled caller: never reuse it mid-command
                with state.lock:
                    state.running.discard(worker)
                await lease.release(reusable=result is not None)
        if result is None:
            assert timeout is not None
            state.check()
            message = (
                _timeout_message(timeout)
                if lease is not None
                else _no_worker_message(
                    anyio.current_time() - queued, timeout, runtime.pool.max_workers
                )
            )
            result = RawCommandResult(
                stdout=b"", stderr=message, exit_code=EXIT_TIMEOUT, timed_out=True
            )
        if on_stdout is not None and result.stdout:
            on_stdout(result.stdout)
        if on_stderr is not None and result.stderr:
            on_stderr(result.stderr)
        return result

    async def _converse(
        self, worker: Worker, request: bytes, output_limit: int
    ) -> RawCommandResult:
        """Send the command, serve the worker's file requests, return its result."""
        state, budget = self._state, self._runtime.pool.memory_budget
        await worker.send(request)
        while True:
            message, payload = await worker.receive(
                lambda body: _payload_limit(state.fs, body, budget + 2 * output_limit)
            )
            kind = message[0]
            if kind == "fs" and len(message) == 3 and isinstance(message[1], str):
                arguments = message[2]
                if not isinstance(arguments, list):
                    raise ProtocolError("a file request without an argument list")
                method: str = message[1]
                request_args: list[object] = arguments  # pyright: ignore[reportUnknownVariableType]
                if payload is None:  # a write larger than the whole budget
                    path = str(request_args[0]) if request_args else "?"
                    reply, data = ["err", "ENOSPC", budget_message(path, None, budget)], b""
                else:
                    # At the timeout the command ends without waiting for a request served in a
                    # thread (the request is still applied whole, under the lock).
                    reply, data = await self._locked(
                        partial(serve_frame, method=method, args=request_args, payload=payload),
                        heavy=_heavy(state.fs, method, request_args, payload),
                        abandon_on_cancel=True,
                    )
                await worker.send(*_answer(reply, data, method, budget))
            elif kind == "done" and len(message) == 2 and isinstance(message[1], dict):
                if payload is None:
                    raise ProtocolError("a result larger than the output limit")
                done: dict[str, Any] = message[1]  # pyright: ignore[reportUnknownVariableType]
                split = int(done["stdout"])
                if not 0 <= split <= len(payload) or len(payload) - split > output_limit:
                    raise ProtocolError("a result whose lengths do not add up")
                if done.get("retire"):
                    worker.kill()
                return RawCommandResult(
                    stdout=payload[:split],
                    stderr=payload[split:],
                    exit_code=int(done["exit_code"]),
                    truncated=bool(done["truncated"]),
                )
            else:
                raise ProtocolError(f"unexpected worker message {kind!r}")

    async def read_file(self, path: str, *, max_bytes: int) -> bytes:
        """The file's bytes; a file over ``max_bytes`` raises
        :class:`~pai.sandbox.SandboxFileTooLargeError` (checked before reading)."""
        return await self._files(lambda fs: _files.read_file(fs, path, max_bytes))

    async def write_files(self, files: Sequence[FileWrite]) -> None:
        """Write every file in order, creating parent folders and setting each file's mode.

        A write that would take the files over the memory budget raises
        :class:`~pai.sandbox_inmemory.SandboxMemoryBudgetError` (that file is not written).
        """
        batch = list(files)
        await self._files(lambda fs: _files.write_files(fs, batch))

    async def list_dir(self, path: str) -> Sequence[DirEntry]:
        """The folder's entries (name, path, type, size), sorted by name."""
        return await self._files(lambda fs: _files.list_dir(fs, path))

    async def remove(self, path: str, *, recursive: bool) -> None:
        """Remove a file or an empty folder; ``recursive`` also removes a non-empty folder."""
        await self._files(lambda fs: _files.remove(fs, path, recursive=recursive))

    async def make_dir(self, path: str, *, parents: bool) -> None:
        """Make a folder. Without ``parents``, an existing path is ``SandboxFileExistsError``
        and a missing parent ``SandboxFileNotFoundError``; with it, missing parents are made
        and an existing folder is fine."""
        await self._files(lambda fs: _files.make_dir(fs, path, parents=parents))

    async def exists(self, path: str) -> bool:
        """Whether anything exists at ``path`` (a dangling symlink counts as nothing)."""
        return await self._files(lambda fs: _files.exists(fs, path))


def _hostname(key: str) -> str:
    """The host name of the instance for ``key`` (``hostname``, ``uname -n``, ``$HOSTNAME``):
    12 hex digits of a hash of the key, the shape of a Docker container's, the same for every
    incarnation of the key. Here, not in the worker's ``_worker._coreutils``, so that the host
    never imports the command code."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:12]
