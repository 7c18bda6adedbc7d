"""The agent runtime: a thin public facade over the runtime's parts.

:class:`~pai.core._threads.Threads` finds, creates and deletes threads and owns their lifecycle;
:class:`~pai.core._loop.AgentLoop` runs the agent loop, tool calls and commands;
:class:`~pai.core._acquisition.Acquisition` turns declared capabilities into facades. The admin
client reaches the first two through the small interfaces :mod:`pai.core._admin` declares.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Self

from pai.core._acquisition import Acquisition
from pai.core._admin import AdminClient, Caller
from pai.core._agent import Agent
from pai.core._binding import CapabilityBinding
from pai.core._durability import DurabilityEngine
from pai.core._errors import CapabilityBindingError
from pai.core._lifecycle import OnRuntimeError
from pai.core._loop import AgentLoop
from pai.core._model import Model, aclose_if_closable
from pai.core._storage import Storage
from pai.core._threads import Threads

ScopeKeyFn = Callable[[Any], str]
UserKeyFn = Callable[[Any], "str | None"]


def _check_key(value: object, option: str) -> str:
    if not isinstance(value, str) or not value:
        raise CapabilityBindingError(
            f"{option} returned {value!r}; it must return a non-empty string key"
        )
    return value


class AgentRuntime:
    """Runs one agent: its threads, operations, capability lifecycle and shutdown.

    Make one with :func:`create_agent_runtime`; use it as ``async with`` or call :meth:`aclose`.
    """

    def __init__(
        self,
        *,
        agent: Agent,
        storage: Storage,
        scope_key: ScopeKeyFn,
        user_key: UserKeyFn | None,
        bindings: Mapping[str, CapabilityBinding[object]],
        on_runtime_error: OnRuntimeError | None,
        settlement_window: float,
        owns_storage: bool,
        owned_models: Sequence[Model] = (),
        run_lease_ttl: float = 30.0,
        busy_thread_wait: float = 60.0,
        durability: DurabilityEngine | None = None,
        durable_identity: object | None = None,
    ) -> None:
        self.agent = agent
        self.storage = storage
        self.bindings: Mapping[str, CapabilityBinding[object]] = bindings
        self.settlement_window = settlement_window
        self.run_lease_ttl = run_lease_ttl
        """Seconds a run's lease on its thread lasts unless renewed (every third of it)."""
        self.busy_thread_wait = busy_thread_wait
        """Seconds a run waits for a thread another run holds before ThreadBusyError."""
        self._scope_key = scope_key
        self._user_key = user_key
        self._owns_storage = owns_storage
        self._owned_models = tuple(owned_models)
        agents = _index_agents(agent)
        self._threads = Threads(
            agent=agent,
            agents=agents,
            storage=storage,
            bindings=bindings,
            on_runtime_error=on_runtime_error,
            settlement_window=settlement_window,
            run_lease_ttl=run_lease_ttl,
            busy_thread_wait=busy_thread_wait,
        )
        self._loop = AgentLoop(
            agent=agent,
            agents=agents,
            threads=self._threads,
            acquisition=Acquisition(bindings, self._threads.roots, storage),
        )
        self.durability = durability
        """The engine that makes this runtime's runs durable, if any."""
        if durability is not None:
            from pai.core._durable import DurableRuns

            self._loop.durable = DurableRuns(
                engine=durability,
                loop=self._loop,
                threads=self._threads,
                agents=agents,
                identity_type=durable_identity,
            )

    def admin(self, *, identity: object) -> AdminClient:
        """Server-side access for ``identity``: create threads, run the agent, call commands.

        Example::

            thread = await runtime.admin(identity=user).create_thread()
            result = await thread.send("list the files")
            await runtime.admin(identity=user).thread(thread.id).commands.reset_workspace({})
        """
        scope_key = _check_key(self._scope_key(identity), "scope_key")
        user_key: str | None = None
        user_key_error: BaseException | None = None
        if self._user_key is not None:
            # A user key only matters to user-scoped capabilities: a user_key function that
            # fails fails their acquisition (naming user_key), and nothing else.
            try:
                raw = self._user_key(identity)
            except Exception as error:
                user_key_error = error
            else:
                if isinstance(raw, str) and raw:
                    user_key = raw
                else:
                    user_key_error = ValueError(
                        f"user_key returned {raw!r}; it must return a non-empty string"
                    )
        caller = Caller(identity, scope_key, user_key, user_key_error)
        return AdminClient(self._threads, self._loop, caller)

    async def aclose(self) -> None:
        """Await every binding's ``close()``, then close storage (if this runtime owns it).

        Models the runtime built from names or configuration are closed too (their
        ``aclose()``, when they have one). Close releases local resources only; durable state
        (containers, files) stays.
        """
        durable = self._loop.durable
        if durable is not None:
            await durable.aclose()
        await self._threads.close(owns_storage=self._owns_storage)
        owned, self._owned_models = self._owned_models, ()
        for model in owned:
            await aclose_if_closable(model)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def start(self) -> None:
        """Start what runs in the background: with a durability engine, the engine, which
        resumes the runs this process (by its engine identity) left unfinished when it died.
        ``async with runtime`` calls it; the first durable run does too. Idempotent."""
        durable = self._loop.durable
        if durable is not None:
            await durable.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def active_operations(self, thread_id: str) -> int:
        """How many operations are running in ``thread_id`` in this process."""
        return self._threads.work.count(thread_id)


def _index_agents(agent: Agent) -> dict[str, Agent]:
    """The agent and its subagents, at any depth, by name (the first of a name wins)."""
    index: dict[str, Agent] = {}
    stack = [agent]
    while stack:
        current = stack.pop()
        index.setdefault(current.name, current)
        stack.extend(current.subagents.values())
    return index


__all__ = ["AgentRuntime", "ScopeKeyFn", "UserKeyFn"]
