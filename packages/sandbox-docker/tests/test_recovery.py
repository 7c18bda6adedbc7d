"""Recovery on the real engine: a removed container is re-created and the cut-off command run
again (``environment_reset=True``); a stopped or paused one is brought back with its files."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.to_thread
import pytest

from pai.sandbox import Sandbox, create_sandbox, create_sandbox_session_manager
from pai.sandbox_docker import DockerSandboxProvider, container_name

pytestmark = pytest.mark.anyio

KEY = "recovery"


@pytest.fixture
async def provider(namespace: str, test_image: str) -> AsyncIterator[DockerSandboxProvider]:
    provider = DockerSandboxProvider(test_image, namespace=namespace)
    try:
        yield provider
    finally:
        await provider.destroy(KEY)
        await provider.aclose()


@pytest.fixture
async def sandbox(provider: DockerSandboxProvider) -> Sandbox:
    box = create_sandbox(create_sandbox_session_manager(provider=provider).handle(KEY))
    await box.write_file("kept.txt", "written before")
    return box


def _container(docker_client: Any, namespace: str) -> Any:
    return docker_client.containers.get(container_name(namespace, KEY))


async def _when_started(sandbox: Sandbox, command: str, action: Any) -> Any:
    """Run ``command``; once it printed ``started``, do ``action`` (in a thread) to its container."""
    started = anyio.Event()

    def on_stdout(text: str) -> None:
        if "started" in text:
            started.set()

    results: list[Any] = []

    async def run() -> None:
        results.append(await sandbox.run_command(command, on_stdout=on_stdout, timeout=60))

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        await started.wait()
        await anyio.to_thread.run_sync(action)
    return results[0]


async def test_a_command_cut_off_by_the_container_being_removed_runs_again_on_a_fresh_one(
    sandbox: Sandbox, docker_client: Any, namespace: str
) -> None:
    before = _container(docker_client, namespace).id
    result = await _when_started(
        sandbox,
        "echo started; sleep 2; echo finished",
        lambda: _container(docker_client, namespace).remove(force=True),
    )
    assert result.environment_reset
    assert (result.exit_code, result.stdout) == (0, "started\nfinished\n")
    assert _container(docker_client, namespace).id != before
    assert not await sandbox.exists("kept.txt")  # gone with the container, as reset said


async def test_a_command_cut_off_by_the_container_being_killed_runs_again_with_its_files(
    sandbox: Sandbox, docker_client: Any, namespace: str
) -> None:
    before = _container(docker_client, namespace).id
    result = await _when_started(
        sandbox,
        "echo started; sleep 2; cat kept.txt",
        lambda: _container(docker_client, namespace).kill(),
    )
    assert not result.environment_reset
    assert (result.exit_code, result.stdout) == (0, "started\nwritten before")
    assert _container(docker_client, namespace).id == before


async def test_a_killed_container_is_started_again_with_its_files(
    sandbox: Sandbox, docker_client: Any, namespace: str
) -> None:
    container = _container(docker_client, namespace)
    await anyio.to_thread.run_sync(container.kill)
    result = await sandbox.run_command("cat kept.txt")
    assert (result.stdout, result.environment_reset) == ("written before", False)
    container.reload()
    assert container.status == "running"


async def test_a_write_to_a_killed_container_starts_it_first_and_keeps_its_files(
    sandbox: Sandbox, docker_client: Any, namespace: str
) -> None:
    await anyio.to_thread.run_sync(_container(docker_client, namespace).kill)
    await sandbox.write_file("after.txt", "written after")
    result = await sandbox.run_command("cat kept.txt after.txt")
    assert (result.stdout, result.environment_reset) == ("written beforewritten after", False)


async def test_a_paused_container_is_unpaused_not_destroyed(
    sandbox: Sandbox, docker_client: Any, namespace: str
) -> None:
    container = _container(docker_client, namespace)
    await anyio.to_thread.run_sync(container.pause)
    result = await sandbox.run_command("cat kept.txt")
    assert (result.stdout, result.environment_reset) == ("written before", False)
    container.reload()
    assert container.status == "running"


async def test_a_fresh_provider_finds_a_stopped_or_paused_container_and_keeps_its_files(
    sandbox: Sandbox, docker_client: Any, namespace: str, test_image: str
) -> None:
    container = _container(docker_client, namespace)
    for stop, state in ((container.kill, "exited"), (container.pause, "paused")):
        await anyio.to_thread.run_sync(stop)
        container.reload()
        assert container.status == state
        other = DockerSandboxProvider(test_image, namespace=namespace)
        try:
            found = await other.find(KEY)
            assert found is not None
            assert found.instance_id == container.id
            assert await found.read_file("/workspace/kept.txt", max_bytes=100) == b"written before"
        finally:
            await other.aclose()
