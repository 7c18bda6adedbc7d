"""The app registry: ``create_pai`` owns the construction of every agent's runtime."""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import Required, Self, TypedDict

import anyio

from pai.core._agent import Agent
from pai.core._assembly import create_agent_runtime, default_storage, needs_model_config
from pai.core._binding import CapabilityBinding
from pai.core._config import PaiConfig, load_config
from pai.core._config_binding import config_needed
from pai.core._errors import (
    CapabilityBindingError,
    ConfigError,
    DefinitionError,
    UnknownAgentError,
)
from pai.core._lifecycle import OnRuntimeError
from pai.core._plugins import Plugins, get_plugins
from pai.core._runtime import AgentRuntime, ScopeKeyFn, UserKeyFn
from pai.core._storage import Storage


class AgentEntry(TypedDict, total=False):
    """One agent of an app and its capability bindings."""

    agent: Required[Agent]
    capabilities: Mapping[str, CapabilityBinding[object]]


class Pai:
    """An app: one runtime per registered agent, over one shared storage.

    Make one with :func:`create_pai`; close it with ``async with`` or :meth:`aclose`.
    """

    def __init__(self, runtimes: Mapping[str, AgentRuntime], storage: Storage) -> None:
        self._runtimes = dict(runtimes)
        self.storage = storage
        self._closed = False

    @property
    def agent_ids(self) -> tuple[str, ...]:
        """The registered agent ids, in registration order."""
        return tuple(self._runtimes)

    def runtime(self, agent_id: str) -> AgentRuntime:
        """The runtime of agent ``agent_id``."""
        try:
            return self._runtimes[agent_id]
        except KeyError:
            raise UnknownAgentError(
                f"no agent registered as {agent_id!r}; registered: {list(self._runtimes)}. "
                "Add it to create_pai(agents={...})."
            ) from None

    async def aclose(self) -> None:
        """Close every runtime (awaiting their bindings' ``close``), then the shared storage."""
        if self._closed:
            return
        self._closed = True
        async with anyio.create_task_group() as tg:
            for runtime in self._runtimes.values():
                tg.start_soon(runtime.aclose)
        await self.storage.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def create_pai(
    *,
    agents: Mapping[str, AgentEntry],
    scope_key: ScopeKeyFn,
    storage: Storage | None = None,
    user_key: UserKeyFn | None = None,
    on_runtime_error: OnRuntimeError | None = None,
    settlement_window: float = 5.0,
    config: PaiConfig | None = None,
    plugins: Plugins | None = None,
    run_lease_ttl: float | None = None,
    busy_thread_wait: float | None = None,
) -> Pai:
    """Build an app: every agent's runtime, each with its binding record checked.

    As in :func:`create_agent_runtime`, capabilities an entry does not bind in code are bound
    from configuration (``config``, read once, and only if needed; ``plugins``), and without
    ``storage`` every agent shares the one ``[storage] url`` names (else an in-process SQLite
    database). Problems in several agents' binding records are reported together.
    ``run_lease_ttl`` and ``busy_thread_wait`` say how runs share threads with other processes,
    as in :func:`create_agent_runtime`.

    Example::

        pai = create_pai(
            agents={"coder": {"agent": coder, "capabilities": {"sandbox": sandbox_binding}}},
            scope_key=lambda identity: identity.workspace_id,
        )
        async with pai:
            thread = await pai.runtime("coder").admin(identity=me).create_thread()
    """
    if not agents:
        raise DefinitionError("create_pai(agents=...) needs at least one agent entry")
    if storage is None:
        if config is None:
            config = load_config()  # [storage] may choose the backend
        storage = default_storage(config, plugins)
    if config is None:
        config = _config_if_needed(agents, plugins)
    runtimes: dict[str, AgentRuntime] = {}
    problems: list[CapabilityBindingError] = []
    prefixed: list[str] = []
    for agent_id, entry in agents.items():
        agent = entry.get("agent") if isinstance(entry, Mapping) else None  # pyright: ignore[reportUnnecessaryIsInstance]
        if not isinstance(agent, Agent):
            raise DefinitionError(
                f"create_pai(agents=...): entry {agent_id!r} must be a mapping with an 'agent' "
                f"from define_agent(), e.g. {{'agent': agent, 'capabilities': {{...}}}}; got {entry!r}"
            )
        try:
            runtimes[agent_id] = create_agent_runtime(
                agent=agent,
                storage=storage,
                scope_key=scope_key,
                user_key=user_key,
                capabilities=entry.get("capabilities"),
                on_runtime_error=on_runtime_error,
                settlement_window=settlement_window,
                owns_storage=False,
                config=config,
                plugins=plugins,
                run_lease_ttl=run_lease_ttl,
                busy_thread_wait=busy_thread_wait,
            )
        except CapabilityBindingError as error:
            problems.append(error)
            prefixed.append(f"agent {agent_id!r}: {error}")
    if problems:
        error_type = (
            ConfigError
            if any(isinstance(p, ConfigError) for p in problems)
            else CapabilityBindingError
        )
        raise error_type(
            "\n".join(prefixed), ids=sorted({i for p in problems for i in p.ids})
        ) from next((p.__cause__ for p in problems if p.__cause__ is not None), None)
    return Pai(runtimes, storage)


def _config_if_needed(
    agents: Mapping[str, AgentEntry], plugins: Plugins | None
) -> PaiConfig | None:
    """The configuration, read once for every agent, if some agent needs it; else ``None``."""
    for entry in agents.values():
        agent = entry.get("agent") if isinstance(entry, Mapping) else None  # pyright: ignore[reportUnnecessaryIsInstance]
        if not isinstance(agent, Agent):
            continue  # create_pai reports the malformed entry
        if needs_model_config(agent):
            return load_config()  # [model] may give the agent its model
        given = entry.get("capabilities")
        bound = given.keys() if isinstance(given, Mapping) else ()
        if agent.requirements.keys() - bound:
            plugins = plugins if plugins is not None else get_plugins()
            if config_needed(agent.requirements, bound, plugins):
                return load_config()
    return None
