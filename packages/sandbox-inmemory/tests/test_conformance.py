"""The in-memory provider passes the provider conformance suite."""

from __future__ import annotations

from pai.sandbox.provider import SandboxProvider
from pai.sandbox.testing import SandboxProviderConformance
from pai.sandbox_inmemory import InMemorySandboxProvider, create_in_memory_sandbox_provider


class TestInMemoryProvider(SandboxProviderConformance):
    def create_provider(self) -> SandboxProvider:
        return create_in_memory_sandbox_provider()

    async def remove_behind_our_back(self, provider: SandboxProvider, key: str) -> None:
        assert isinstance(provider, InMemorySandboxProvider)
        await provider.forget(key)
