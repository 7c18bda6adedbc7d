"""The same conformance suite against the real E2B cloud, when ``E2B_API_KEY`` is set.

Skipped otherwise (no key: nothing to run against). ``E2B_TEST_TEMPLATE`` picks the template
(default ``base``). Sandboxes are made in a namespace of their own and destroyed afterwards.
asyncio only: the e2b SDK is asyncio-only.
"""

from __future__ import annotations

import os
import uuid
from typing import ClassVar

import pytest

from pai.sandbox.provider import SandboxProvider
from pai.sandbox.testing import SandboxProviderConformance
from pai.sandbox_e2b import E2BSandboxProvider

LIVE_KEY = os.environ.get("E2B_API_KEY")


@pytest.mark.skipif(
    not LIVE_KEY, reason="E2B_API_KEY is not set: no E2B account to run the live suite against"
)
class TestE2BLiveConformance(SandboxProviderConformance):
    timeout_seconds: ClassVar[float] = 2.0
    live_namespace: ClassVar[str] = f"pai-live-test-{uuid.uuid4().hex[:8]}"

    @pytest.fixture
    def anyio_backend(self) -> str:  # asyncio only: the e2b SDK does not run on trio
        return "asyncio"

    def create_provider(self) -> SandboxProvider:
        return E2BSandboxProvider(
            template=os.environ.get("E2B_TEST_TEMPLATE", "base"),
            timeout=600,
            namespace=self.live_namespace,
        )
