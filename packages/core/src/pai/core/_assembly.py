"""Assembling a runtime: the binding record checked; capabilities, models and storage from
configuration.

:func:`create_agent_runtime` is where configuration and plugins meet the runtime; the
:class:`~pai.core.AgentRuntime` itself knows neither.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from pai.core._agent import Agent, define_agent
from pai.core._binding import CapabilityBinding
from pai.core._config import PaiConfig, load_config
from pai.core._config_binding import resolve_from_config
from pai.core._durability import DurabilityEngine, check_engine
from pai.core._errors import CapabilityBindingError, DefinitionError
from pai.core._lifecycle import OnRuntimeError
from pai.core._model import Model
from pai.core._model_config import model_from_config, resolve_model
from pai.core._plugins import Plugins
from pai.core._record import validate_binding_record
from pai.core._runtime import AgentRuntime, ScopeKeyFn, UserKeyFn
from pai.core._storage import Storage
from pai.core._storage_config import (
    BUSY_THREAD_WAIT,
    RUN_LEASE_TTL,
    run_options,
    storage_from_config,
)


def default_storage(config: PaiConfig, plugins: Plugins | None) -> Storage:
    """The storage ``[storage]`` configures, or an in-process SQLite database."""
    configured = storage_from_config(config, plugins=plugins)
    if configured is not None:
        return configured
    from pai.core._storage_sqlite import SqliteStorage

    return SqliteStorage(":memory:")


def run_lease_options(
    run_lease_ttl: float | None, busy_thread_wait: float | None, config: PaiConfig | None
) -> tuple[float, float]:
    """The run lease's time to live and the longest wait for a busy thread: from code when
    given there, else from ``[storage]`` of ``config``, else the defaults (30 s, 60 s)."""
    configured = run_options(config)
    ttl = (
        configured.get("run_lease_ttl", RUN_LEASE_TTL)
        if run_lease_ttl is None
        else _seconds(run_lease_ttl, "run_lease_ttl", positive=True)
    )
    wait = (
        configured.get("busy_thread_wait", BUSY_THREAD_WAIT)
        if busy_thread_wait is None
        else _seconds(busy_thread_wait, "busy_thread_wait", positive=False)
    )
    return ttl, wait


def _seconds(value: object, name: str, *, positive: bool) -> float:
    seconds = -1.0
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    if not math.isfinite(seconds) or seconds < 0 or (positive and seconds == 0):
        bound = "> 0" if positive else ">= 0"
        raise DefinitionError(f"{name} must be a number of seconds {bound}, got {value!r}")
    return seconds


def agent_tree(agent: Agent) -> list[Agent]:
    """``agent`` and its subagents at any depth."""
    found: list[Agent] = []
    stack = [agent]
    while stack:
        current = stack.pop()
        found.append(current)
        stack.extend(current.subagents.values())
    return found


def needs_model_config(agent: Agent) -> bool:
    """Whether some agent of the tree names its model (``"openai:..."``) or has none: then the
    configuration's ``[model]`` tables are read."""
    return any(each.model is None or isinstance(each.model, str) for each in agent_tree(agent))


def resolve_models(
    agent: Agent, *, config: PaiConfig | None, plugins: Plugins | None
) -> tuple[Agent, list[Model]]:
    """``agent`` with every model name resolved through the plugins and every missing model
    taken from ``[model]`` (left missing when there is none), and the models built for it (the
    runtime closes them). The same agent when nothing changes. One name is built once for the
    whole tree, and ``[model]`` once."""
    if not needs_model_config(agent):
        return agent, []
    built: dict[str, Model] = {}
    configured: list[Model | None] = []

    def model_for(model: Model | str | None) -> Model | str | None:
        if isinstance(model, str):
            if model not in built:
                built[model] = resolve_model(model, config=config, plugins=plugins)
            return built[model]
        if model is None and config is not None:
            if not configured:
                configured.append(model_from_config(config, plugins=plugins))
            return configured[0]
        return model

    def rebuild(current: Agent) -> Agent:
        subagents = {key: rebuild(sub) for key, sub in current.subagents.items()}
        model = model_for(current.model)
        if model is current.model and all(
            subagents[key] is sub for key, sub in current.subagents.items()
        ):
            return current
        return define_agent(
            name=current.name,
            model=model,
            instructions=current.instructions,
            tools=current.tool_entries,
            commands=current.commands,
            subagents=subagents,
            max_steps=current.max_steps,
            max_tool_calls_per_step=current.max_tool_calls_per_step,
            max_parallel_tool_calls=current.max_parallel_tool_calls,
            runtime_context=current.runtime_context,
        )

    rebuilt = rebuild(agent)
    owned = [*built.values(), *(model for model in configured if model is not None)]
    return rebuilt, owned


def create_agent_runtime(
    *,
    agent: Agent,
    scope_key: ScopeKeyFn,
    storage: Storage | None = None,
    user_key: UserKeyFn | None = None,
    capabilities: Mapping[str, CapabilityBinding[object]] | None = None,
    on_runtime_error: OnRuntimeError | None = None,
    settlement_window: float = 5.0,
    model: Model | None = None,
    owns_storage: bool = True,
    config: PaiConfig | None = None,
    plugins: Plugins | None = None,
    run_lease_ttl: float | None = None,
    busy_thread_wait: float | None = None,
    durability: DurabilityEngine | None = None,
    durable_identity: object | None = None,
) -> AgentRuntime:
    """Build the runtime for ``agent``; the binding record is checked here, all problems at once.

    Bindings given in ``capabilities`` win; every capability the agent needs that is not bound
    there is bound from configuration (``config``, by default :func:`~pai.core.load_config`, read
    only then) by the capability package a plugin registered for it (``plugins``, by default
    :func:`~pai.core.ext.get_plugins`). Wrong or extra bindings in code and capabilities neither code
    nor configuration binds are reported together, in one :class:`CapabilityBindingError`
    (a :class:`~pai.core.ConfigError` when configuration was involved).

    ``scope_key`` maps an identity to its app scope (tenant, workspace); ``user_key`` to a user,
    for ``"user"``-scoped capabilities. ``storage`` defaults to what ``[storage] url`` in the
    configuration names (``sqlite:///threads.db``, ``memory://``, or a plugin's scheme; see
    :func:`~pai.core.open_storage`), else an in-process SQLite database; the runtime then owns it.
    ``settlement_window`` is how long thread deletion waits for cancelled work before disposing
    that thread's capability instances. ``on_runtime_error`` receives failures the runtime absorbs
    (a ``dispose`` that raised, say); by default they are logged. ``model`` replaces the agent's
    model; otherwise a model name (``define_agent(model="openai:gpt-4.1-mini")``) is resolved
    here through the model provider a plugin registers, and an agent (or subagent) without a
    model gets the ``[model]`` of the configuration (see :func:`~pai.core.model_from_config`).
    ``owns_storage=False`` leaves ``storage`` open on :meth:`AgentRuntime.aclose` (for
    storage shared between runtimes, as :func:`create_pai` does).

    Runs on one thread never overlap, in this process or in any other on the same storage: a run
    holds the thread's *run lease* while it runs. ``busy_thread_wait`` (default 60 s) is how long
    a run waits for a thread another run holds before it raises
    :class:`~pai.core.ThreadBusyError`; ``run_lease_ttl`` (default 30 s) is how long a lease
    lasts unless renewed (the runtime renews it every third of that), so a run whose process dies
    holds its thread for at most that long, and a run that stalls longer loses the thread to
    another (:class:`~pai.core.RunLeaseLostError`). Without them here, ``[storage]
    run_lease_ttl`` and ``busy_thread_wait`` of the configuration apply when the runtime reads
    it (it does when ``storage`` or a binding or a model comes from configuration, or
    ``config`` is given).

    ``durability`` makes every run durable on an engine (``pai.durable_dbos.DbosEngine``, say):
    each run is the engine's workflow and each model answer, tool call and append a recorded
    step, so a run whose process dies is resumed (by this process after a restart, or by
    another) without repeating what it recorded. A durable run records its caller's identity;
    when that is not a JSON value, ``durable_identity`` is its type (a pydantic model, a
    dataclass) to rebuild it from JSON. See the durable runs guide for the rules replayed code
    follows. Without it here, ``[durability]`` of the configuration applies when the runtime
    reads it (``engine = "dbos"`` and that engine's options).

    Example::

        runtime = create_agent_runtime(
            agent=agent,
            scope_key=lambda identity: identity.workspace_id,
            capabilities={"sandbox": sandbox_capability(provider=provider)},
        )
        async with runtime:
            thread = await runtime.admin(identity=me).create_thread()
            print((await thread.send("hello")).text)
    """
    if not callable(scope_key):
        raise CapabilityBindingError(
            f"scope_key must be a function from identity to a string, got {scope_key!r}"
        )
    if user_key is not None and not callable(user_key):
        raise CapabilityBindingError(
            f"user_key must be a function from identity to a string or None, got {user_key!r}"
        )
    if settlement_window < 0:
        raise DefinitionError(f"settlement_window must be >= 0 seconds, got {settlement_window!r}")
    if model is not None:
        agent = agent.with_model(model)
    given = dict(capabilities or {})
    if config is None and (storage is None or needs_model_config(agent)):
        config = load_config()  # [storage] may choose the backend, [model] the model
    agent, owned_models = resolve_models(agent, config=config, plugins=plugins)
    # Reads plugins and configuration only when code leaves a capability unbound.
    resolution = resolve_from_config(
        agent.requirements, config=config, plugins=plugins, bound=given.keys()
    )
    bindings = validate_binding_record(
        agent.requirements,
        {**resolution.bindings, **given},
        unbound=resolution.problems,
        cause=resolution.cause,
    )
    if user_key is None:
        per_user = sorted(cap_id for cap_id, b in bindings.items() if b.scope == "user")
        if per_user:
            raise CapabilityBindingError(
                f"capabilities {per_user} are bound with scope 'user', but the runtime has no "
                "user_key to derive a user from; pass create_agent_runtime(user_key=lambda "
                "identity: ...) returning a non-empty string per user, or bind them with "
                "another scope",
                ids=per_user,
            )
    ttl, wait = run_lease_options(run_lease_ttl, busy_thread_wait, config)
    if durability is None and config is not None and "durability" in config.data:
        from pai.core._durability_config import durability_from_config

        durability = durability_from_config(config, plugins=plugins)
    if storage is None:
        assert config is not None
        storage = default_storage(config, plugins)
    return AgentRuntime(
        agent=agent,
        storage=storage,
        scope_key=scope_key,
        user_key=user_key,
        bindings=bindings,
        on_runtime_error=on_runtime_error,
        settlement_window=settlement_window,
        owns_storage=owns_storage,
        owned_models=owned_models,
        run_lease_ttl=ttl,
        busy_thread_wait=wait,
        durability=None if durability is None else check_engine(durability, "durability"),
        durable_identity=durable_identity,
    )


__all__ = [
    "agent_tree",
    "create_agent_runtime",
    "default_storage",
    "needs_model_config",
    "resolve_models",
    "run_lease_options",
]
