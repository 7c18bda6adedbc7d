"""Errors: bad options are refused when the provider is built, naming the option; no raw
``docker`` exception escapes; messages never show the engine's host paths."""

from __future__ import annotations

from typing import Any

import pytest

from pai.sandbox import (
    SandboxInputError,
    SandboxProviderError,
    create_sandbox,
    create_sandbox_session_manager,
)
from pai.sandbox_docker import DockerSandboxProvider
from pai.sandbox_docker._engine import scrub

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("option", "value", "named"),
    [
        ("memory", "lots", "memory"),
        ("cpus", 0, "cpus"),
        ("pids_limit", -1, "pids_limit"),
        ("workdir", "relative", "workdir"),
        ("disk", "big", "disk"),
        ("runtime", "run sc", "runtime"),
        ("labels", {"pai.key": "mine"}, "labels"),
        ("namespace", "", "namespace"),
    ],
)
def test_a_bad_option_is_refused_when_the_provider_is_built(
    option: str, value: object, named: str
) -> None:
    with pytest.raises(SandboxInputError, match=f"option {named}"):
        DockerSandboxProvider("busybox", **{option: value})  # type: ignore[arg-type]


def test_every_bad_option_is_named_at_once() -> None:
    with pytest.raises(SandboxInputError) as caught:
        DockerSandboxProvider("busybox", memory="lots", disk="huge")
    assert "option memory" in str(caught.value)
    assert "option disk" in str(caught.value)


def test_engine_host_paths_are_removed_from_messages() -> None:
    text = (
        "mkdir /var/lib/docker/overlay2/3f2a/merged/x: permission denied; "
        "open /tmp/dockerd/data/vfs/dir/abc/etc: no such file; /run/containerd/io.x/y failed"
    )
    cleaned = scrub(text)
    for leaked in ("/var/lib/docker", "/tmp/dockerd", "/run/containerd", "overlay2", "vfs/dir"):
        assert leaked not in cleaned
    assert cleaned.count("<engine path>") == 3
    assert scrub("no such file: /workspace/notes.txt") == "no such file: /workspace/notes.txt"


async def test_an_unreachable_engine_is_a_provider_error_not_a_docker_exception(
    namespace: str,
) -> None:
    provider = DockerSandboxProvider(
        "busybox", namespace=namespace, docker_host="unix:///nonexistent/docker.sock"
    )
    try:
        with pytest.raises(SandboxProviderError, match="Docker"):
            await provider.create("k")
        with pytest.raises(SandboxProviderError):
            await provider.list_instances()
    finally:
        await provider.aclose()


async def test_an_invalid_image_name_is_a_clear_provider_error(namespace: str) -> None:
    provider = DockerSandboxProvider("Not A/Valid:Image:Name", namespace=namespace)
    try:
        with pytest.raises(SandboxProviderError, match="image"):
            await provider.create("k")
    finally:
        await provider.aclose()


async def test_an_unknown_runtime_names_the_option_and_the_engines_runtimes(
    namespace: str, test_image: str, docker_client: Any
) -> None:
    provider = DockerSandboxProvider(test_image, namespace=namespace, runtime="runcc")
    try:
        with pytest.raises(SandboxProviderError) as caught:
            await provider.create("k")
        message = str(caught.value)
        assert "runtime 'runcc' (option runtime) is not registered" in message
        assert "did you mean 'runc'?" in message
        assert await provider.list_instances() == []
    finally:
        await provider.aclose()


async def test_a_disk_limit_the_storage_driver_cannot_give_is_a_clear_error(
    namespace: str, test_image: str, docker_client: Any
) -> None:
    driver = docker_client.info().get("Driver")
    provider = DockerSandboxProvider(test_image, namespace=namespace, disk="1g")
    sandbox = create_sandbox(create_sandbox_session_manager(provider=provider).handle("k"))
    try:
        try:
            result = await sandbox.run_command("df -k /")
        except SandboxProviderError as error:
            message = str(error)
            assert "the disk limit (option disk='1g') is not supported" in message
            assert repr(driver) in message
            assert "/var/lib/docker" not in message
            assert await provider.list_instances() == []
        else:  # a driver with quotas (overlay2 on xfs with pquota, btrfs, zfs): in force
            assert result.exit_code == 0
            assert int(result.stdout.split()[-5]) <= 1024 * 1024
    finally:
        await provider.destroy("k")
        await provider.aclose()
