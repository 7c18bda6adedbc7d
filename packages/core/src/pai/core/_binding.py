"""Capability bindings: the concrete implementation a runtime binds to a capability token."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, Literal, TypeAlias, TypeVar, final

from pai.core._awaitables import maybe_await
from pai.core._capability import Capability
from pai.core._errors import DefinitionError
from pai.core._scope import SCOPE_KINDS, CapabilityScope, ScopeKind, is_scope

F_co = TypeVar("F_co", covariant=True)
F = TypeVar("F")

ScopeLabel: TypeAlias = ScopeKind | Literal["custom"]
"""The kind of scope a key was derived for; ``"custom"`` for a scope function."""


@dataclass(frozen=True, slots=True)
class AcquireInput:
    """What a binding's ``acquire`` receives, once per operation.

    ``key`` is the instance key derived from the binding's scope: map it to a resource, compare or
    persist it, never parse it. The value is immutable, and consecutive operations of one caller
    in one thread may be handed the same object (built-in scopes; a custom scope is asked each
    time). ``root_thread_id`` is resolved only for ``"rootThread"`` and custom
    scopes (the walk up ``parent_thread_id`` runs only for those); it is ``None`` otherwise.
    ``thread_created_at`` is when the operation's thread was stored (``None`` when no stored
    thread is behind the call): a binding whose instances can be lost while no process holds
    them (an instance kept in memory, one removed when idle) compares it with when it started,
    to tell a thread it has not seen yet from one whose instance it had before.
    """

    key: str
    capability_id: str
    scope: ScopeLabel
    thread_id: str
    root_thread_id: str | None
    scope_key: str
    user_key: str | None
    identity: object
    thread_created_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class DisposeInput:
    """What a binding's ``dispose`` receives when the runtime retires an instance key."""

    reason: Literal["thread-deleted"]
    key: str
    thread_id: str
    capability_id: str


AcquireFn: TypeAlias = Callable[[AcquireInput], "F_co | Awaitable[F_co]"]
DisposeFn: TypeAlias = Callable[[DisposeInput], object]
"""A ``dispose`` hook: a plain function or an ``async def``. What it returns is awaited when it
is awaitable and ignored otherwise (``lambda input: pages.pop(input.key, None)`` is fine)."""
CloseFn: TypeAlias = Callable[[], object]
"""A ``close`` hook, called like :data:`DisposeFn`: its result awaited only when awaitable."""


@final
class CapabilityBinding(Generic[F_co]):
    """A capability token bound to an implementation, with its scope and lifecycle hooks.

    Make one with :func:`create_capability_binding`. The runtime calls :meth:`acquire` once per
    operation per declared capability, ``dispose`` when a thread that owns an instance is deleted,
    and ``close`` when the runtime shuts down.
    """

    __slots__ = ("_acquire", "_capability", "_close", "_dispose", "_scope")

    def __init__(
        self,
        *,
        capability: Capability[F_co],
        scope: CapabilityScope,
        acquire: Callable[[AcquireInput], F_co | Awaitable[F_co]],
        dispose: DisposeFn | None,
        close: CloseFn | None,
    ) -> None:
        self._capability = capability
        self._scope: CapabilityScope = scope
        self._acquire = acquire
        self._dispose = dispose
        self._close = close

    @property
    def capability(self) -> Capability[F_co]:
        """The token this binding implements."""
        return self._capability

    @property
    def scope(self) -> CapabilityScope:
        """Which operations share one instance (see :data:`CapabilityScope`)."""
        return self._scope

    @property
    def has_dispose(self) -> bool:
        """Whether the binding reacts to thread deletion."""
        return self._dispose is not None

    def acquire(self, input: AcquireInput) -> F_co | Awaitable[F_co]:
        """Return the facade for ``input.key`` (or an awaitable of it). Must be cheap."""
        return self._acquire(input)

    async def dispose(self, input: DisposeInput) -> None:
        """Destroy the instance behind ``input.key``; a no-op for bindings without a dispose hook."""
        if self._dispose is not None:
            pending = maybe_await(self._dispose(input))
            if pending is not None:
                await pending

    async def close(self) -> None:
        """Release local resources (clients, pools). Never destroys durable state."""
        if self._close is not None:
            pending = maybe_await(self._close())
            if pending is not None:
                await pending

    def __repr__(self) -> str:
        scope = self._scope if isinstance(self._scope, str) else "custom"
        return f"CapabilityBinding(capability={self._capability.id!r}, scope={scope!r})"


def create_capability_binding(
    *,
    capability: Capability[F],
    acquire: Callable[[AcquireInput], F | Awaitable[F]],
    scope: CapabilityScope = "thread",
    dispose: DisposeFn | None = None,
    close: CloseFn | None = None,
) -> CapabilityBinding[F]:
    """Bind ``capability`` to an implementation.

    ``acquire`` maps an instance key to a facade; it runs once per operation, so return a lazy
    facade and provision the resource on first use. ``dispose`` destroys one key's instance when the
    thread owning it is deleted; ``close`` releases local resources at runtime shutdown. Each may be
    a plain function or an ``async def``; what a hook returns is awaited only when it is
    awaitable, so a plain function may return anything (``dispose=lambda input:
    pages.pop(input.key, None)``).

    Example::

        pools: dict[str, Pool] = {}

        def acquire(input: AcquireInput) -> SqlWorkbench:
            pool = pools.get(input.key) or pools.setdefault(input.key, connect(input.key))
            return PoolWorkbench(pool)

        binding = create_capability_binding(capability=db, scope="scope", acquire=acquire)
    """
    if not isinstance(capability, Capability):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise DefinitionError(
            f"create_capability_binding(capability=...) needs a token from define_capability(), "
            f"got {capability!r}"
        )
    if not callable(acquire):
        raise DefinitionError(
            f"create_capability_binding() for {capability.id!r} needs an acquire callable, "
            f"got {acquire!r}"
        )
    if not is_scope(scope):
        raise DefinitionError(
            f"scope {scope!r} for capability {capability.id!r} is not valid; use one of "
            f"{', '.join(repr(k) for k in SCOPE_KINDS)} or a function taking CapabilityScopeInput"
        )
    for name, hook in (("dispose", dispose), ("close", close)):
        if hook is not None and not callable(hook):
            raise DefinitionError(
                f"{name}= for capability {capability.id!r} must be callable, got {hook!r}"
            )
    return CapabilityBinding(
        capability=capability, scope=scope, acquire=acquire, dispose=dispose, close=close
    )
