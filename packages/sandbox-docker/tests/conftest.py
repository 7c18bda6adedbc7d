"""Shared fixtures: a real Docker engine (skip without one, fail with ``PAI_REQUIRE_DOCKER=1``),
the test image, unique namespaces, and a final check that no test container is left behind."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

# anyio_backend: every anyio test on asyncio and on trio (one fixture for every package).
from pai.core.testing.pytest_plugin import anyio_backend as anyio_backend

IMAGE = os.environ.get("PAI_DOCKER_TEST_IMAGE", "pai-test-busybox:latest")
REQUIRE = os.environ.get("PAI_REQUIRE_DOCKER") == "1"

#: Every namespace a test used; the session finalizer checks none of them has a container left.
NAMESPACES: set[str] = set()


def new_namespace() -> str:
    namespace = f"pai-test-{uuid.uuid4().hex[:12]}"
    NAMESPACES.add(namespace)
    return namespace


def _connect() -> Any:
    import docker

    client = docker.from_env()
    client.ping()
    client.images.get(IMAGE)
    return client


@pytest.fixture(scope="session")
def docker_client() -> Iterator[Any]:
    """The raw docker SDK client; skips (or fails, with PAI_REQUIRE_DOCKER=1) without an engine
    and the test image."""
    try:
        client = _connect()
    except Exception as error:
        reason = f"no usable Docker engine with image {IMAGE!r}: {error}"
        if REQUIRE:
            pytest.fail(f"PAI_REQUIRE_DOCKER=1 but {reason}")
        pytest.skip(reason)
    yield client
    leftovers = [
        f"{c.name} ({c.labels.get('pai.namespace')})"
        for c in client.containers.list(all=True, filters={"label": "pai.namespace"})
        if c.labels.get("pai.namespace") in NAMESPACES
    ]
    for container in client.containers.list(all=True, filters={"label": "pai.namespace"}):
        if container.labels.get("pai.namespace") in NAMESPACES:
            container.remove(force=True)
    client.close()
    assert not leftovers, f"test containers were left behind: {leftovers}"


@pytest.fixture
def namespace(docker_client: Any) -> str:
    """A fresh namespace for one test (tracked for the leftover check)."""
    return new_namespace()


@pytest.fixture
def test_image(docker_client: Any) -> str:
    """The local test image (``PAI_DOCKER_TEST_IMAGE``, default ``pai-test-busybox:latest``)."""
    return IMAGE
