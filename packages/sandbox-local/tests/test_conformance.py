"""The provider conformance suite against real bubblewrap sandboxes."""

from __future__ import annotations

from pathlib import Path

import pytest

from pai.sandbox.provider import SandboxProvider
from pai.sandbox.testing import SandboxProviderConformance
from pai.sandbox_local import LocalSandboxProvider


class TestLocalConformance(SandboxProviderConformance):
    timeout_seconds = 1.0

    @pytest.fixture(autouse=True)
    def _state(self, state_dir: Path) -> None:
        self._state_dir = state_dir

    def create_provider(self) -> SandboxProvider:
        return LocalSandboxProvider(state_dir=self._state_dir)
