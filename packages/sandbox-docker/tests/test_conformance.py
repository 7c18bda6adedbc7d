"""The provider conformance suite against the real Docker engine."""

from __future__ import annotations

from typing import Any

import anyio.to_thread
import pytest

from pai.sandbox.provider import SandboxProvider
from pai.sandbox.testing import SandboxProviderConformance
from pai.sandbox_docker import DockerSandboxProvider, container_name


class TestDockerConformance(SandboxProviderConformance):
    timeout_seconds = 1.0
    # max_concurrent_commands (8) threads for commands, and a few for a kill or a probe.
    max_command_threads = 8 + 2

    @pytest.fixture(autouse=True)
    def _engine(self, docker_client: Any, namespace: str, test_image: str) -> None:
        self._client = docker_client
        self._namespace = namespace
        self._image = test_image

    def create_provider(self) -> SandboxProvider:
        return DockerSandboxProvider(self._image, namespace=self._namespace)

    async def remove_behind_our_back(self, provider: SandboxProvider, key: str) -> None:
        name = container_name(self._namespace, key)

        def remove() -> None:
            self._client.containers.get(name).remove(force=True)

        await anyio.to_thread.run_sync(remove)
