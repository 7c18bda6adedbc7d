"""Reclaiming containers (prune, the idle TTL) and the missing-image error, on the real engine."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from pai.sandbox import SandboxProviderError, create_sandbox, create_sandbox_session_manager
from pai.sandbox_docker import DockerSandboxProvider

pytestmark = pytest.mark.anyio


async def _sandbox_in(provider: DockerSandboxProvider, key: str) -> None:
    sandbox = create_sandbox(create_sandbox_session_manager(provider=provider).handle(key))
    assert (await sandbox.run_command("true")).exit_code == 0


async def test_prune_removes_idle_containers_of_its_namespace_only(
    namespace: str, test_image: str, docker_client: Any
) -> None:
    provider = DockerSandboxProvider(test_image, namespace=namespace)
    try:
        await _sandbox_in(provider, "old")
        assert await provider.prune(timedelta(hours=1)) == []  # nothing is an hour old
        assert [i.key for i in await provider.list_instances()] == ["old"]

        assert await provider.prune(timedelta(0)) == ["old"]

        assert await provider.list_instances() == []
        assert (
            docker_client.containers.list(all=True, filters={"label": f"pai.namespace={namespace}"})
            == []
        )
    finally:
        await provider.destroy("old")
        await provider.aclose()


async def test_the_idle_ttl_reclaims_old_containers_when_new_ones_are_made(
    namespace: str, test_image: str
) -> None:
    first = DockerSandboxProvider(test_image, namespace=namespace)
    try:
        await _sandbox_in(first, "idle")
    finally:
        await first.aclose()
    # A later process (a fresh provider object) with a TTL the idle container has outlived.
    later = DockerSandboxProvider(test_image, namespace=namespace, idle_ttl=0)
    try:
        await _sandbox_in(later, "fresh")
        assert [i.key for i in await later.list_instances()] == ["fresh"]
    finally:
        for key in ("idle", "fresh"):
            await later.destroy(key)
        await later.aclose()


async def test_a_missing_image_is_a_clear_error_that_says_what_to_do(namespace: str) -> None:
    # The registry named here is on loopback and closed, so the pull fails at once and no traffic
    # leaves the machine.
    image = "127.0.0.1:9/pai-missing:latest"
    provider = DockerSandboxProvider(image, namespace=namespace)
    try:
        with pytest.raises(SandboxProviderError) as caught:
            await provider.create("k")
        message = str(caught.value)
        assert f"image {image!r} is not present and could not be pulled" in message
        assert "set image=" in message
        assert await provider.list_instances() == []
    finally:
        await provider.destroy("k")
        await provider.aclose()
