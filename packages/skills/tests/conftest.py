"""Shared fixtures: every async test runs on asyncio and on trio; sandbox providers (in-memory,
and Docker when an engine answers) wrapped to count what reaches them."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

# The tests import their helpers (skills_helpers, skills_golden) from this folder.
HERE = str(Path(__file__).parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from skills_helpers import CountingProvider  # noqa: E402

# anyio_backend: every anyio test on asyncio and on trio (one fixture for every package).
from pai.core.testing.pytest_plugin import anyio_backend as anyio_backend  # noqa: E402
from pai.sandbox.provider import SandboxProvider  # noqa: E402

IMAGE = os.environ.get("PAI_DOCKER_TEST_IMAGE", "pai-test-busybox:latest")
REQUIRE_DOCKER = os.environ.get("PAI_REQUIRE_DOCKER") == "1"


def _docker_provider() -> SandboxProvider:
    try:
        import docker

        client = docker.from_env()
        client.ping()
        client.images.get(IMAGE)
        client.close()
    except Exception as error:
        reason = f"no usable Docker engine with image {IMAGE!r}: {error}"
        if REQUIRE_DOCKER:
            pytest.fail(f"PAI_REQUIRE_DOCKER=1 but {reason}")
        pytest.skip(reason)
    from pai.sandbox_docker import DockerSandboxProvider

    return DockerSandboxProvider(image=IMAGE, namespace=f"pai-test-skills-{uuid.uuid4().hex[:12]}")


@pytest.fixture(params=["inmemory", "docker"])
def provider(request: pytest.FixtureRequest) -> Iterator[CountingProvider]:
    """A real provider (in-memory; Docker against the engine), counting its writes. Docker
    containers a test leaves are removed afterwards."""
    if request.param == "inmemory":
        from pai.sandbox_inmemory import create_in_memory_sandbox_provider

        yield CountingProvider(create_in_memory_sandbox_provider())
        return
    inner = _docker_provider()
    yield CountingProvider(inner)
    import docker

    client = docker.from_env()
    namespace: str = inner.namespace  # type: ignore[attr-defined]
    for container in client.containers.list(all=True, filters={"label": "pai.namespace"}):
        if container.labels.get("pai.namespace") == namespace:
            container.remove(force=True)
    client.close()
