"""The binding conformance suite: the keying and lifecycle contract every binding must keep.

Subclass :class:`CapabilityBindingConformance` in a test module of your package, implement its
three hooks, and pytest runs the whole contract against your real binding, through a real runtime:

- same key, same resource; distinct keys, distinct resources;
- lazy provisioning: acquiring provisions nothing until the facade is used;
- dispose only on the right deletions: a thread-scoped instance goes when its thread is deleted and
  no other; a rootThread-scoped one when its top-level thread is deleted, not a delegated one;
  other scopes never;
- dispose failures are routed to ``on_runtime_error`` and never fail the delete;
- ``close()`` releases local resources only: durable instances survive it;
- concurrent acquires of one key provision exactly once.

Example::

    from pai.core.testing._conformance import CapabilityBindingConformance

    class TestVaultBinding(CapabilityBindingConformance):
        durable_state = False

        def create_binding(self, scope):
            self.backend = FakeVaultServer()
            return vault_capability(server=self.backend, scope=scope)

        async def use(self, facade):
            return await facade.whoami()        # any real call; returns the resource's identity

        async def live_resources(self, binding):
            return self.backend.open_vaults()   # identities of resources that exist now

Tests run on asyncio and, when trio is installed, on trio; override the ``anyio_backend`` fixture
to narrow that. Requires pytest and the anyio pytest plugin (installed with anyio).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Collection, Hashable
from typing import Any, ClassVar

import anyio
import pytest
from pydantic import BaseModel

from pai.core._agent import define_agent
from pai.core._binding import CapabilityBinding, DisposeInput
from pai.core._lifecycle import RuntimeErrorEvent
from pai.core._operations import CommandContext, define_command
from pai.core._runtime import AgentRuntime
from pai.core._scope import CapabilityScope
from pai.core._storage import ThreadRecord
from pai.core.testing._test_runtime import create_test_runtime

_BACKENDS = ["asyncio", "trio"] if importlib.util.find_spec("trio") else ["asyncio"]


class _NoInput(BaseModel):
    use: bool = True


class CapabilityBindingConformance:
    """Subclass and implement :meth:`create_binding`, :meth:`use` and :meth:`live_resources`.

    Set ``durable_state = True`` when instances outlive the process (containers, remote
    sandboxes): the suite then checks that ``close()`` leaves them in place.
    """

    durable_state: ClassVar[bool] = False
    #: How many concurrent first uses of one key the single-flight test makes.
    concurrent_acquires: ClassVar[int] = 20

    pytestmark: ClassVar[list[pytest.MarkDecorator]] = [pytest.mark.anyio]

    # Kept (not pai.core.testing.pytest_plugin): users' suites subclass this class and rely on it
    # to run every test on each backend without a fixture of their own.
    @pytest.fixture(params=_BACKENDS)
    def anyio_backend(self, request: pytest.FixtureRequest) -> str:
        return str(request.param)

    # -- hooks --------------------------------------------------------------------------------

    def create_binding(self, scope: CapabilityScope) -> CapabilityBinding[Any]:
        """A fresh binding of yours with this scope (and fresh backing state for it)."""
        raise NotImplementedError("implement create_binding(scope) in your conformance subclass")

    async def use(self, facade: Any) -> Hashable:
        """Make one real call through ``facade``; return the identity of the resource behind it."""
        raise NotImplementedError("implement use(facade) in your conformance subclass")

    async def live_resources(self, binding: CapabilityBinding[Any]) -> Collection[Hashable]:
        """Identities of the resources of ``binding`` that exist now (provisioned, not disposed)."""
        raise NotImplementedError("implement live_resources(binding) in your conformance subclass")

    def reopen_binding(self, binding: CapabilityBinding[Any]) -> CapabilityBinding[Any]:
        """A new binding over the same backing state as ``binding`` (only for ``durable_state``).

        The default returns ``binding`` itself; override it when a closed binding cannot be used
        again, e.g. to build a new client for the same server.
        """
        return binding

    # -- machinery ----------------------------------------------------------------------------

    def _runtime(
        self, binding: CapabilityBinding[Any], errors: list[RuntimeErrorEvent] | None = None
    ) -> AgentRuntime:
        suite = self

        async def use(ctx: CommandContext[_NoInput]) -> Hashable | None:
            facade = ctx.capabilities[binding.capability]
            return await suite.use(facade) if ctx.input.use else None

        command = define_command(
            input=_NoInput, capabilities={"resource": binding.capability}, run=use
        )
        agent = define_agent(name="conformance", commands={"use": command})

        def record(event: RuntimeErrorEvent) -> None:
            if errors is not None:
                errors.append(event)

        return create_test_runtime(
            agent=agent,
            capabilities={binding.capability.id: binding},
            on_runtime_error=record,
            settlement_window=0.5,
        )

    @staticmethod
    async def _child(runtime: AgentRuntime, parent_id: str) -> str:
        """A delegated thread under ``parent_id``, as subagent delegation would store it."""
        parent = await runtime.storage.get_thread(parent_id)
        assert parent is not None
        child = ThreadRecord(
            id=f"{parent_id}-child",
            scope_key=parent.scope_key,
            agent_name=parent.agent_name,
            parent_thread_id=parent_id,
        )
        await runtime.storage.create_thread(child)
        return child.id

    @staticmethod
    async def _use(runtime: AgentRuntime, thread_id: str, *, use: bool = True) -> Any:
        return await runtime.admin(identity=None).thread(thread_id).commands.use({"use": use})

    # -- the contract -------------------------------------------------------------------------

    async def test_same_key_gives_the_same_resource(self) -> None:
        binding = self.create_binding("thread")
        async with self._runtime(binding) as runtime:
            thread = await runtime.admin(identity=None).create_thread()
            first = await self._use(runtime, thread.id)
            second = await self._use(runtime, thread.id)
            assert first == second, "two operations in one thread reached different resources"

    async def test_distinct_keys_give_distinct_resources(self) -> None:
        binding = self.create_binding("thread")
        async with self._runtime(binding) as runtime:
            admin = runtime.admin(identity=None)
            a = await admin.create_thread()
            b = await admin.create_thread()
            assert await self._use(runtime, a.id) != await self._use(runtime, b.id), (
                "two threads share one resource under thread scope"
            )

    async def test_acquire_provisions_nothing_until_the_facade_is_used(self) -> None:
        binding = self.create_binding("thread")
        async with self._runtime(binding) as runtime:
            thread = await runtime.admin(identity=None).create_thread()
            await self._use(runtime, thread.id, use=False)
            assert not list(await self.live_resources(binding)), (
                "acquire provisioned a resource before the facade was used; acquire must be cheap "
                "and return a lazy facade"
            )
            resource = await self._use(runtime, thread.id)
            assert resource in await self.live_resources(binding)

    async def test_thread_delete_disposes_that_threads_instance_only(self) -> None:
        binding = self.create_binding("thread")
        async with self._runtime(binding) as runtime:
            admin = runtime.admin(identity=None)
            doomed = await admin.create_thread()
            kept = await admin.create_thread()
            doomed_resource = await self._use(runtime, doomed.id)
            kept_resource = await self._use(runtime, kept.id)
            await doomed.delete()
            live = await self.live_resources(binding)
            assert doomed_resource not in live, "the deleted thread's instance was not disposed"
            assert kept_resource in live, "deleting one thread disposed another thread's instance"

    async def test_root_thread_instance_is_disposed_with_the_top_level_thread_only(self) -> None:
        binding = self.create_binding("rootThread")
        async with self._runtime(binding) as runtime:
            root = await runtime.admin(identity=None).create_thread()
            child_id = await self._child(runtime, root.id)
            resource = await self._use(runtime, child_id)
            assert resource == await self._use(runtime, root.id), (
                "a delegated thread did not share its root's instance under rootThread scope"
            )
            await runtime.admin(identity=None).thread(child_id).delete()
            assert resource in await self.live_resources(binding), (
                "deleting a delegated thread disposed the rootThread instance"
            )
            await root.delete()
            assert resource not in await self.live_resources(binding), (
                "deleting the top-level thread did not dispose its rootThread instance"
            )

    @pytest.mark.parametrize("scope", ["user", "scope", "global"])
    async def test_thread_delete_leaves_non_thread_scopes_alone(self, scope: str) -> None:
        binding = self.create_binding(scope)  # type: ignore[arg-type]
        async with self._runtime(binding) as runtime:
            thread = await runtime.admin(identity=None).create_thread()
            resource = await self._use(runtime, thread.id)
            await thread.delete()
            assert resource in await self.live_resources(binding), (
                f"deleting a thread disposed a {scope!r}-scoped instance the thread does not own"
            )

    async def test_dispose_failures_are_routed_and_never_fail_the_delete(self) -> None:
        inner = self.create_binding("thread")

        async def failing_dispose(input: DisposeInput) -> None:
            await inner.dispose(input)
            raise RuntimeError("dispose failed on purpose")

        binding = CapabilityBinding(
            capability=inner.capability,
            scope="thread",
            acquire=inner.acquire,
            dispose=failing_dispose,
            close=inner.close,
        )
        errors: list[RuntimeErrorEvent] = []
        async with self._runtime(binding, errors) as runtime:
            thread = await runtime.admin(identity=None).create_thread()
            await self._use(runtime, thread.id)
            await thread.delete()  # must not raise
            assert await runtime.storage.get_thread(thread.id) is None
        assert [(e.source, e.capability_id) for e in errors] == [
            ("capability", inner.capability.id)
        ]

    async def test_dispose_of_an_unprovisioned_key_is_harmless(self) -> None:
        binding = self.create_binding("thread")
        async with self._runtime(binding) as runtime:
            thread = await runtime.admin(identity=None).create_thread()
            await thread.delete()  # never used: dispose must cope with a key it never saw
        assert not list(await self.live_resources(binding))

    async def test_close_keeps_durable_state(self) -> None:
        if not self.durable_state:
            pytest.skip("this binding declares no durable state (durable_state = False)")
        binding = self.create_binding("thread")
        runtime = self._runtime(binding)
        thread = await runtime.admin(identity=None).create_thread()
        resource = await self._use(runtime, thread.id)
        await runtime.aclose()
        reopened = self.reopen_binding(binding)
        assert resource in await self.live_resources(reopened), (
            "close() destroyed a durable instance; close must release local resources only"
        )

    async def test_concurrent_acquires_of_one_key_provision_once(self) -> None:
        binding = self.create_binding("thread")
        async with self._runtime(binding) as runtime:
            thread = await runtime.admin(identity=None).create_thread()
            seen: list[Hashable] = []

            async def one() -> None:
                seen.append(await self._use(runtime, thread.id))

            async with anyio.create_task_group() as tg:
                for _ in range(self.concurrent_acquires):
                    tg.start_soon(one)
            assert len(set(seen)) == 1, (
                f"{self.concurrent_acquires} concurrent first uses of one key reached "
                f"{len(set(seen))} resources"
            )
            assert list(await self.live_resources(binding)) == [seen[0]], (
                "concurrent first uses of one key provisioned more than one resource"
            )
