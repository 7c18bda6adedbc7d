"""acme.vault keeps the binding contract: PAI's binding conformance suite, run on the real binding.

Subclassing ``CapabilityBindingConformance`` is all it takes: pytest collects every check of the
suite (keying, laziness, dispose on the right deletions only, close keeps durable state, single
flight) and runs each on asyncio and trio.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable
from typing import Any

from pai.core import CapabilityBinding, CapabilityScope
from pai.core.testing import CapabilityBindingConformance

from acme_vault import Vault, VaultServer, memory_server, vault_capability


class TestVaultBindingConformance(CapabilityBindingConformance):
    # Vaults live on the service, not in the client: close() must leave them there.
    durable_state = True

    server: VaultServer

    def create_binding(self, scope: CapabilityScope) -> CapabilityBinding[Any]:
        self.server = memory_server()  # a fresh service per test
        return vault_capability(url=self.server.url, scope=scope, retry_delay=0)

    async def use(self, facade: Vault) -> Hashable:
        return await facade.vault_id()  # a real call: opens the vault on first use

    async def live_resources(self, binding: CapabilityBinding[Any]) -> Collection[Hashable]:
        return list(self.server.vault_ids().values())

    def reopen_binding(self, binding: CapabilityBinding[Any]) -> CapabilityBinding[Any]:
        # A closed binding's client is done; a new process would build a new binding over the
        # same service, and must find the vaults there.
        return vault_capability(url=self.server.url, scope=binding.scope, retry_delay=0)
