"""The in-memory sandbox provider: files in the host, commands in worker processes.

This module is the lifecycle: create, find, destroy (and ``forget``), list, probe and close.
One instance's operations (its commands and files) are :mod:`pai.sandbox_inmemory._instance`'s;
the worker processes are :mod:`pai.sandbox_inmemory._pool`'s.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime
from types import TracebackType

from just_bash import ExecutionLimits

from pai.sandbox import InstanceInfo, SandboxInputError, SandboxProviderError
from pai.sandbox.provider import ProviderFeatures
from pai.sandbox_inmemory._instance import (
    EXIT_OUT_OF_MEMORY,
    EXIT_TIMEOUT,
    InMemorySandboxInstance,
    InstanceState,
    ProviderRuntime,
)
from pai.sandbox_inmemory._isolation import Isolation, expected_isolation

__all__ = [
    "DEFAULT_LIMITS",
    "DEFAULT_MAX_WORKERS",
    "DEFAULT_MEMORY_BUDGET",
    "EXIT_OUT_OF_MEMORY",
    "EXIT_TIMEOUT",
    "NAME",
    "InMemorySandboxInstance",
    "InMemorySandboxProvider",
    "create_in_memory_sandbox_provider",
]

NAME = "inmemory"
"""The provider's registered name."""

DEFAULT_MEMORY_BUDGET = 256 * 1024 * 1024
"""Bytes one sandbox's files may hold, and one command's worker may use (256 MiB)."""

DEFAULT_MAX_WORKERS = 2
"""Worker processes that run commands at the same time, per event loop."""

DEFAULT_LIMITS = ExecutionLimits(
    max_call_depth=100,
    max_command_count=10_000_000,
    max_loop_iterations=10_000_000,
    max_awk_iterations=10_000_000,
    max_sed_iterations=10_000_000,
)
"""The interpreter limits when none are given: generous, because the timeout (which kills the
worker) and the memory budget are what bound a command; a limit hit ends it with exit code 126."""

_FEATURES = ProviderFeatures(cross_process=False, durable=False, processes=False)


class InMemorySandboxProvider:
    """Sandboxes whose files live in this process and whose commands run in worker processes.

    Each instance is an in-memory filesystem (with ``/workspace`` as the working folder) held by
    this process. Each command runs in a fresh just-bash shell in one of a small pool of worker
    processes (at most ``max_workers`` at once per event loop), which reach the instance's files
    only through requests this process serves; see the package README for the isolation they
    get. A timeout kills the worker, whatever the command does, and the host's event loop never
    waits on a command. Works the same under asyncio and trio.

    Instances vanish with the process (``cross_process=False``, ``durable=False``); ``aclose``
    stops the workers but keeps the instances, so a later call starts workers again. A thread
    used again from a new process finds no instance here: the session manager re-creates it
    with the seed files and its first result says ``environment_reset=True``.

    Example::

        provider = create_in_memory_sandbox_provider()
        sessions = create_sandbox_session_manager(provider=provider)
        sandbox = create_sandbox(sessions.handle("t"))
        assert (await sandbox.run_command("echo hi")).stdout == "hi\\n"
        await sessions.aclose()  # also closes the provider
    """

    def __init__(
        self,
        *,
        limits: ExecutionLimits | None = None,
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
        max_workers: int = DEFAULT_MAX_WORKERS,
    ) -> None:
        if isinstance(memory_budget, bool) or not isinstance(memory_budget, int):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise SandboxInputError(
                f"memory_budget must be a number of bytes (int), got {memory_budget!r}"
            )
        if memory_budget < 1024 * 1024:
            raise SandboxInputError(
                f"memory_budget must be at least 1 MiB (1048576 bytes), got {memory_budget}"
            )
        if (
            isinstance(max_workers, bool)
            or not isinstance(max_workers, int)  # pyright: ignore[reportUnnecessaryIsInstance]
            or max_workers < 1
        ):
            raise SandboxInputError(f"max_workers must be an int >= 1, got {max_workers!r}")
        self._runtime = ProviderRuntime(
            limits if limits is not None else DEFAULT_LIMITS, memory_budget, max_workers
        )
        self._lock = threading.Lock()
        self._instances: dict[str, tuple[InMemorySandboxInstance, InstanceState]] = {}

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

    @property
    def memory_budget(self) -> int:
        """Bytes one sandbox's files, and one command's worker, may use."""
        return self._runtime.pool.memory_budget

    @property
    def max_workers(self) -> int:
        """Commands that run at the same time per event loop (one worker process each)."""
        return self._runtime.pool.max_workers

    @property
    def isolation(self) -> Isolation:
        """How the worker processes are confined: ``isolation.kernel == "landlock"`` when the
        kernel refuses them every file access but reads under the Python installation (checked
        by each worker at start-up), ``None`` when only the audit hook and resource limits do;
        ``isolation.reason`` says which, and why. Before any worker started, the kernel is
        probed from this process (``isolation.reported`` is then ``False``)."""
        return self._runtime.pool.isolation or expected_isolation()

    def worker_pids(self) -> list[int]:
        """The process ids of this provider's running, started worker processes (for
        diagnostics)."""
        return self._runtime.pool.pids()

    async def create(self, key: str) -> InMemorySandboxInstance:
        """A new, empty instance for ``key``; an existing one is destroyed first."""
        state = InstanceState(key, self._runtime.pool.memory_budget)
        instance = InMemorySandboxInstance(self._runtime, state)
        with self._lock:
            old = self._instances.get(key)
            self._instances[key] = (instance, state)
        if old is not None:
            old[1].vanish()
        try:
            self._runtime.pool.warm()
        except OSError as error:
            raise SandboxProviderError(
                f"the in-memory sandbox could not start a worker process: {error}"
            ) from error
        return instance

    async def find(self, key: str) -> InMemorySandboxInstance | None:
        """The live instance for ``key``, or ``None``."""
        with self._lock:
            entry = self._instances.get(key)
        return entry[0] if entry is not None else None

    async def destroy(self, key: str) -> None:
        """Remove the instance for ``key`` and its files; a missing key does nothing.

        Anyone still holding the instance gets ``SandboxVanishedError`` from then on, and its
        running commands are killed.
        """
        with self._lock:
            entry = self._instances.pop(key, None)
        if entry is not None:
            entry[1].vanish()

    async def forget(self, key: str) -> None:
        """For tests: remove the instance for ``key`` behind the session manager's back.

        The same as :meth:`destroy`, named for what tests use it for: simulating an instance
        that expired or was removed by someone else, so that the next operation through a
        :class:`~pai.sandbox.Sandbox` finds it gone, re-creates it with the seed files and
        reports ``environment_reset=True``.
        """
        await self.destroy(key)

    async def list_instances(self) -> Sequence[InstanceInfo]:
        """Every live instance of this provider, oldest first."""
        with self._lock:
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

    async def probe(self) -> None:
        """Nothing to check: the sandboxes live in this process (the optional ``probe()`` of
        the provider protocol; workers start, and say what is wrong, at the first command)."""

    async def aclose(self) -> None:
        """Kill the worker processes (commands still running raise ``SandboxClosedError``);
        instances and their files stay, and a later command starts workers again."""
        await self._runtime.pool.close()

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


def _created(state: InstanceState) -> datetime:
    return state.created_at


def create_in_memory_sandbox_provider(
    *,
    limits: ExecutionLimits | None = None,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
    max_workers: int = DEFAULT_MAX_WORKERS,
) -> InMemorySandboxProvider:
    """An in-memory sandbox provider.

    - ``limits``: just-bash's ``ExecutionLimits`` (re-exported here): loop iterations, command
      count, call depth, awk/sed iterations per command; a script over one stops with exit
      code 126 and the reason on stderr. Default: :data:`DEFAULT_LIMITS` (call depth 100,
      10 million for the others), since the timeout and the memory budget bound a command.
    - ``memory_budget`` (bytes, default 256 MiB): what one sandbox's files may hold (a write
      beyond it fails with a "memory budget" error) and what one command's worker process may
      allocate beyond its baseline (beyond it the command ends with exit code 137).
    - ``max_workers`` (default 2): worker processes running commands at the same time, per event
      loop; further commands wait for a free one (their timeout counts while they wait).

    Example::

        sessions = create_sandbox_session_manager(provider=create_in_memory_sandbox_provider())
    """
    return InMemorySandboxProvider(
        limits=limits, memory_budget=memory_budget, max_workers=max_workers
    )
