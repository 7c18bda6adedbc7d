"""A runtime for tests: in-memory storage, a fixed identity scope, the production agent verbatim."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pai.core._agent import Agent
from pai.core._assembly import create_agent_runtime
from pai.core._binding import CapabilityBinding
from pai.core._durability import DurabilityEngine
from pai.core._lifecycle import OnRuntimeError
from pai.core._model import Model
from pai.core._runtime import AgentRuntime
from pai.core._storage import Storage
from pai.core._storage_memory import InMemoryStorage


def _test_scope(identity: Any) -> str:
    return "test-scope"


def _test_user(identity: Any) -> str:
    return "test-user"


def create_test_runtime(
    *,
    agent: Agent,
    model: Model | None = None,
    capabilities: Mapping[str, CapabilityBinding[object]] | None = None,
    storage: Storage | None = None,
    on_runtime_error: OnRuntimeError | None = None,
    settlement_window: float = 1.0,
    run_lease_ttl: float | None = None,
    busy_thread_wait: float | None = None,
    durability: DurabilityEngine | None = None,
) -> AgentRuntime:
    """A runtime around ``agent`` for tests; swap the model and the bindings, keep the agent.

    Every identity maps to scope ``"test-scope"`` and user ``"test-user"``. Storage is an
    :class:`~pai.core.InMemoryStorage` unless you pass one. ``run_lease_ttl`` and
    ``busy_thread_wait`` are those of :func:`~pai.core.create_agent_runtime`; so is
    ``durability`` (a :class:`~pai.core.testing.JournalEngine` makes runs durable in memory).

    Example::

        async with create_test_runtime(
            agent=agent,
            model=ScriptedModel([tool_call("runScript", {"command": "echo hi"}), text("done")]),
            capabilities={"sandbox": sandbox_capability(provider=create_in_memory_sandbox_provider())},
        ) as runtime:
            thread = await runtime.admin(identity=None).create_thread()
            await thread.send("go")
    """
    return create_agent_runtime(
        agent=agent,
        model=model,
        storage=storage if storage is not None else InMemoryStorage(),
        scope_key=_test_scope,
        user_key=_test_user,
        capabilities=capabilities,
        on_runtime_error=on_runtime_error,
        settlement_window=settlement_window,
        run_lease_ttl=run_lease_ttl,
        busy_thread_wait=busy_thread_wait,
        durability=durability,
    )
