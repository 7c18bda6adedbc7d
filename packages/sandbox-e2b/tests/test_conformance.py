"""The provider conformance suite, through the real e2b SDK, against the E2B emulator.

asyncio only: the e2b SDK is asyncio-only.
"""

from __future__ import annotations

import pytest

from pai.sandbox.provider import SandboxProvider
from pai.sandbox.testing import SandboxProviderConformance
from pai.sandbox_e2b import E2BSandboxProvider, key_hash
from pai.sandbox_e2b.testing import E2BEmulator


class TestE2BConformance(SandboxProviderConformance):
    @pytest.fixture
    def anyio_backend(self) -> str:  # asyncio only: the e2b SDK does not run on trio
        return "asyncio"

    @pytest.fixture(autouse=True)
    def _emulator(self, emulator: E2BEmulator, namespace: str) -> None:
        self._emu = emulator
        self._namespace = namespace

    def create_provider(self) -> SandboxProvider:
        return E2BSandboxProvider(
            api_key=self._emu.api_key,
            api_url=self._emu.url,
            sandbox_url=self._emu.url,
            namespace=self._namespace,
        )

    async def remove_behind_our_back(self, provider: SandboxProvider, key: str) -> None:
        for sandbox in self._emu.find(**{"pai.namespace": self._namespace}):
            if sandbox.metadata.get("pai.key-sha256") == key_hash(key):
                self._emu.expire(sandbox.sandbox_id)
