"""Shared helpers for the runtime specifications.

- :class:`Box` is the facade type of every test capability; :func:`box_capability` makes tokens.
- :class:`RecordingBinding` wraps :func:`create_capability_binding` and counts, per instance key,
  how often the runtime acquired, how often the lazy facade provisioned an instance, and how
  often the runtime disposed one. Its facade is lazy: acquiring provisions nothing; the first
  ``await facade.use()`` does.
- :func:`use_tool`, :func:`use_command`, :func:`build_agent`, :func:`build_runtime` assemble small
  agents and runtimes around those.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio.lowlevel
from pydantic import BaseModel

from pai.core import (
    AcquireInput,
    Agent,
    AgentRuntime,
    Capability,
    CapabilityBinding,
    CapabilityScope,
    Command,
    CommandContext,
    DisposeInput,
    Message,
    Model,
    RuntimeErrorEvent,
    Tool,
    ToolContext,
    create_agent_runtime,
    create_capability_binding,
    define_agent,
    define_capability,
    define_command,
    define_tool,
)
from pai.core._awaitables import resolve
from pai.core.ext import Storage

SCOPE = "acme"


class Box:
    """The facade of every test capability: ``use()`` returns the id of the instance behind it."""

    async def use(self) -> str:
        raise NotImplementedError


class OtherFacade:
    """A facade type unrelated to :class:`Box`, for wrong-facade bindings."""


def box_capability(id: str = "box") -> Capability[Box]:
    return define_capability(Box, id=id, description=f"test capability {id!r}")


class NoInput(BaseModel):
    pass


@dataclass(frozen=True)
class Who:
    """A test identity: the app scope and (optionally) the user."""

    scope: str = SCOPE
    user: str | None = "ann"


def scope_of(identity: Who) -> str:
    return identity.scope


def user_of(identity: Who) -> str | None:
    return identity.user


class _LazyBox(Box):
    def __init__(self, recorder: RecordingBinding, key: str) -> None:
        self._recorder = recorder
        self._key = key

    async def use(self) -> str:
        await anyio.lowlevel.checkpoint()
        return self._recorder.provision(self._key)


_serials = itertools.count(1)

DisposeHook = Callable[[DisposeInput], "Awaitable[None] | None"]


class RecordingBinding:
    """A binding that records what the runtime does with it, per instance key.

    ``instances`` maps each key to the id of its live instance; disposing a key removes it, so a
    later use provisions a fresh one.
    """

    def __init__(
        self,
        capability: Capability[Box],
        *,
        scope: CapabilityScope = "thread",
        dispose: bool = True,
        on_dispose: DisposeHook | None = None,
        fail_dispose: bool = False,
        fail_close: bool = False,
        log: list[str] | None = None,
    ) -> None:
        self.capability = capability
        self.acquires: Counter[str] = Counter()
        self.provisions: Counter[str] = Counter()
        self.disposes: Counter[str] = Counter()
        self.acquire_inputs: list[AcquireInput] = []
        self.dispose_inputs: list[DisposeInput] = []
        self.instances: dict[str, str] = {}
        self.closes = 0
        self._on_dispose = on_dispose
        self._fail_dispose = fail_dispose
        self._fail_close = fail_close
        self._log = log
        self.binding: CapabilityBinding[Box] = create_capability_binding(
            capability=capability,
            scope=scope,
            acquire=self._acquire,
            dispose=self._dispose if dispose else None,
            close=self._close,
        )

    @property
    def id(self) -> str:
        return self.capability.id

    @property
    def keys(self) -> list[str]:
        """Every key acquired, in first-acquired order."""
        return list(dict.fromkeys(i.key for i in self.acquire_inputs))

    def provision(self, key: str) -> str:
        instance = self.instances.get(key)
        if instance is None:
            instance = f"{self.capability.id}#{next(_serials)}"
            self.instances[key] = instance
            self.provisions[key] += 1
        return instance

    def _acquire(self, input: AcquireInput) -> Box:
        self.acquires[input.key] += 1
        self.acquire_inputs.append(input)
        return _LazyBox(self, input.key)

    async def _dispose(self, input: DisposeInput) -> None:
        self.disposes[input.key] += 1
        self.dispose_inputs.append(input)
        self.instances.pop(input.key, None)
        if self._on_dispose is not None:
            await resolve(self._on_dispose(input))
        if self._fail_dispose:
            raise RuntimeError(f"dispose of {input.key} broke")

    async def _close(self) -> None:
        await anyio.lowlevel.checkpoint()  # a real await, so "awaited" is observable
        self.closes += 1
        if self._log is not None:
            self._log.append(f"close {self.capability.id}")
        if self._fail_close:
            raise RuntimeError(f"close of {self.capability.id} broke")


def local_name(token: Capability[Box]) -> str:
    """The operation-local name a helper operation declares ``token`` under."""
    return token.id.replace(".", "_").replace("-", "_")


def record(*recorders: RecordingBinding) -> dict[str, CapabilityBinding[object]]:
    """The ``capabilities=`` record binding each recorder under its capability id."""
    return {r.id: r.binding for r in recorders}


def use_tool(
    *tokens: Capability[Box], id: str = "useBox", counter: Counter[str] | None = None
) -> Tool[NoInput, list[str]]:
    """A tool that uses each declared capability and returns the instance ids it got."""

    async def execute(ctx: ToolContext[NoInput]) -> list[str]:
        if counter is not None:
            counter[id] += 1
        return [await ctx.capabilities[t].use() for t in tokens]

    return define_tool(
        id=id,
        description="use the boxes",
        input_schema=NoInput,
        capabilities={local_name(t): t for t in tokens},
        execute=execute,
    )


def declare_tool(*tokens: Capability[Box], id: str = "declareBox") -> Tool[NoInput, str]:
    """A tool that declares capabilities but never touches their facades."""

    def execute(ctx: ToolContext[NoInput]) -> str:
        return "untouched"

    return define_tool(
        id=id,
        description="declare the boxes, use none",
        input_schema=NoInput,
        capabilities={local_name(t): t for t in tokens},
        execute=execute,
    )


def use_command(*tokens: Capability[Box]) -> Command[NoInput, list[str]]:
    """A command that uses each declared capability and returns the instance ids it got."""

    async def run(ctx: CommandContext[NoInput]) -> list[str]:
        return [await ctx.capabilities[t].use() for t in tokens]

    return define_command(input=NoInput, capabilities={local_name(t): t for t in tokens}, run=run)


def build_agent(
    *,
    name: str = "main",
    model: Model | None = None,
    tools: Mapping[str, Tool[Any, Any]] | None = None,
    commands: Mapping[str, Command[Any, Any]] | None = None,
    subagents: Mapping[str, Agent] | None = None,
    max_steps: int = 20,
) -> Agent:
    return define_agent(
        name=name,
        model=model,
        instructions=f"you are {name}",
        tools=tools,
        commands=commands,
        subagents=subagents,
        max_steps=max_steps,
    )


@dataclass
class Events:
    """Collects what ``on_runtime_error`` receives."""

    received: list[RuntimeErrorEvent] = field(default_factory=list[RuntimeErrorEvent])

    def __call__(self, event: RuntimeErrorEvent) -> None:
        self.received.append(event)


def build_runtime(
    agent: Agent,
    *recorders: RecordingBinding,
    storage: Storage | None = None,
    model: Model | None = None,
    user_key: Callable[[Who], str | None] | None = user_of,
    on_runtime_error: Callable[[RuntimeErrorEvent], None] | None = None,
    settlement_window: float = 5.0,
    extra: Mapping[str, CapabilityBinding[object]] | None = None,
) -> AgentRuntime:
    """A runtime over ``agent`` binding each recorder; identities are :class:`Who` values."""
    from pai.core import InMemoryStorage

    return create_agent_runtime(
        agent=agent,
        storage=storage if storage is not None else InMemoryStorage(),
        model=model,
        scope_key=scope_of,
        user_key=user_key,
        capabilities={**record(*recorders), **(extra or {})},
        on_runtime_error=on_runtime_error,
        settlement_window=settlement_window,
    )


def of_role(messages: Sequence[Message], role: str) -> list[Any]:
    return [m for m in messages if m.role == role]


SCHEMA_1 = (
    """CREATE TABLE threads (
        id TEXT PRIMARY KEY NOT NULL,
        scope_key TEXT NOT NULL,
        agent_name TEXT NOT NULL,
        parent_thread_id TEXT,
        created_at TEXT NOT NULL,
        seq INTEGER NOT NULL UNIQUE
    )""",
    "CREATE INDEX threads_by_scope ON threads (scope_key, parent_thread_id, seq)",
    "CREATE INDEX threads_by_parent ON threads (parent_thread_id)",
    """CREATE TABLE messages (
        thread_id TEXT NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        json TEXT NOT NULL,
        PRIMARY KEY (thread_id, seq)
    ) WITHOUT ROWID""",
    "PRAGMA user_version = 1",
)
"""What SqliteStorage made at schema version 1 (before lone surrogates and run leases), exactly:
the statements that create an old database file for the migration tests."""
