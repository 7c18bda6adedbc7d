"""Acquisition: an operation's declared capabilities turned into facades, once per operation.

Keys are derived with :func:`~pai.core.ext.derive_instance_key` (walking to the root thread only for
the scopes that need it); every key is derived before any binding is asked, and all of an
operation's capabilities are acquired in parallel.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field

import anyio

from pai.core._admin import Caller
from pai.core._awaitables import maybe_await
from pai.core._binding import AcquireInput, CapabilityBinding, ScopeLabel
from pai.core._capability import Capability
from pai.core._errors import CapabilityAcquireError, CapabilityBindingError
from pai.core._lifecycle import RootCache
from pai.core._operations import EMPTY_CAPABILITIES, Capabilities
from pai.core._scope import derive_instance_key
from pai.core._storage import Storage, ThreadRecord

_log = logging.getLogger("pai.core")


class Acquisition:
    """Acquires the facades of one operation's declared capabilities from a binding record."""

    def __init__(
        self, bindings: Mapping[str, CapabilityBinding[object]], roots: RootCache, storage: Storage
    ) -> None:
        self._bindings = bindings
        self._roots = roots
        self._storage = storage
        self._plans: dict[int, _Plan] = {}

    def plan(self, declared: Mapping[str, Capability[object]]) -> _Plan:
        # An operation's declarations never change, so what acquiring them needs is worked out
        # once per operation (dispatch is a hot path) and kept with the mapping it came from.
        cached = self._plans.get(id(declared))
        if cached is not None and cached.declared is declared:
            return cached
        steps = tuple((token.id, self._bindings[token.id]) for token in declared.values())
        plan = _Plan(
            declared=declared,
            steps=steps,
            names=tuple((name, token.id) for name, token in declared.items()),
        )
        self._plans[id(declared)] = plan
        return plan

    async def acquire(
        self, declared: Mapping[str, Capability[object]], thread: ThreadRecord, caller: Caller
    ) -> Capabilities:
        if not declared:
            return EMPTY_CAPABILITIES
        plan = self.plan(declared)
        # Only rootThread and custom scopes need the root: the walk runs only when one of this
        # operation's bindings has such a scope.
        root_id = await self._roots.root_of(self._storage, thread) if plan.walks else None
        # Derive every key before acquiring any, so a key that cannot be derived fails the
        # operation before any binding has been asked for a facade.
        inputs = self._inputs(plan, thread, root_id, caller)
        pending: list[tuple[str, Awaitable[object]]] = []
        by_id: dict[str, object] = {}
        failures: list[tuple[str, BaseException]] = []
        for (cap_id, binding), acquire_input in zip(plan.steps, inputs, strict=True):
            try:
                facade = binding.acquire(acquire_input)
            except Exception as error:
                failures.append((cap_id, error))
                continue
            awaitable = maybe_await(facade)
            if awaitable is None:
                by_id[cap_id] = facade
            else:
                pending.append((cap_id, awaitable))
        if len(pending) == 1:
            cap_id, awaitable = pending[0]
            try:
                by_id[cap_id] = await awaitable
            except Exception as error:
                failures.append((cap_id, error))
        elif pending:
            # All of an operation's capabilities are acquired in parallel.
            async def one(cap_id: str, awaitable: Awaitable[object]) -> None:
                try:
                    by_id[cap_id] = await awaitable
                except Exception as error:
                    failures.append((cap_id, error))

            async with anyio.create_task_group() as tg:
                for cap_id, awaitable in pending:
                    tg.start_soon(one, cap_id, awaitable)
        if failures:
            failures.sort(key=lambda f: f[0])
            detail = "; ".join(f"{cap_id!r}: {error!r}" for cap_id, error in failures)
            raise CapabilityAcquireError(
                f"could not acquire capabilities for thread {thread.id!r}: {detail}",
                ids=[cap_id for cap_id, _ in failures],
            ) from failures[0][1]
        if plan.named_by_id:
            return Capabilities(by_id, by_id)
        return Capabilities({name: by_id[cap_id] for name, cap_id in plan.names}, by_id)

    def _inputs(
        self, plan: _Plan, thread: ThreadRecord, root_id: str | None, caller: Caller
    ) -> tuple[AcquireInput, ...]:
        # Built-in scopes derive keys from the caller, the thread and its root alone, and an
        # AcquireInput is immutable: the inputs of the plan's last operation serve the next one
        # when those are the same (the next tool call of a run, the next command of a handle).
        # Custom scopes are functions the runtime does not assume pure: asked every time.
        last = plan.last
        if (
            last is not None
            and last[0] is caller
            and last[1] == thread.id
            and last[2] == root_id
            # A thread deleted and stored again under its id is another thread.
            and last[3][0].thread_created_at == thread.created_at
        ):
            return last[3]
        inputs = tuple(
            self._input(binding, cap_id, thread, root_id, caller) for cap_id, binding in plan.steps
        )
        if plan.pure:
            plan.last = (caller, thread.id, root_id, inputs)
        return inputs

    def _input(
        self,
        binding: CapabilityBinding[object],
        cap_id: str,
        thread: ThreadRecord,
        root_id: str | None,
        caller: Caller,
    ) -> AcquireInput:
        scope = binding.scope
        if scope == "user" and caller.user_key is None and caller.user_key_error is not None:
            error = CapabilityBindingError(
                f"capability {cap_id!r} is bound with scope 'user', but the user_key function "
                f"failed for this identity: {caller.user_key_error}; make "
                "create_agent_runtime(user_key=...) return a non-empty string for every "
                "identity that uses it",
                ids=[cap_id],
            )
            _log.warning("%s", error)
            raise error from caller.user_key_error
        key = derive_instance_key(
            cap_id,
            scope,
            scope_key=caller.scope_key,
            thread_id=thread.id,
            root_thread_id=root_id,
            user_key=caller.user_key,
            identity=caller.identity,
        )
        label: ScopeLabel = "custom" if callable(scope) else scope
        return AcquireInput(
            key=key,
            capability_id=cap_id,
            scope=label,
            thread_id=thread.id,
            root_thread_id=root_id,
            scope_key=caller.scope_key,
            user_key=caller.user_key,
            identity=caller.identity,
            thread_created_at=thread.created_at,
        )


@dataclass(slots=True, kw_only=True)
class _Plan:
    """What acquiring one operation's capabilities needs, worked out once per operation, and the
    inputs of its last acquisition (see ``Acquisition._inputs``)."""

    declared: Mapping[str, Capability[object]]
    steps: tuple[tuple[str, CapabilityBinding[object]], ...]
    names: tuple[tuple[str, str], ...]
    walks: bool = field(init=False)
    """Some binding's scope needs the thread's root (rootThread, custom)."""
    pure: bool = field(init=False)
    """Every key comes from a built-in scope: the last inputs may serve again."""
    named_by_id: bool = field(init=False)
    """Every local name is its capability's id: one mapping serves both lookups."""
    last: tuple[Caller, str, str | None, tuple[AcquireInput, ...]] | None = None

    def __post_init__(self) -> None:
        self.walks = any(_walks_to_root(binding) for _, binding in self.steps)
        self.pure = not any(callable(binding.scope) for _, binding in self.steps)
        self.named_by_id = all(name == cap_id for name, cap_id in self.names)


def _walks_to_root(binding: CapabilityBinding[object]) -> bool:
    """Whether deriving this binding's key needs the thread's root (rootThread, custom)."""
    return binding.scope == "rootThread" or callable(binding.scope)
