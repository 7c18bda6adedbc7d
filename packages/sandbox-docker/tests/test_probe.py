"""``probe()``: the engine answers, the image is present, the runtime registered; one line each.

A stopped engine is a ``DOCKER_HOST`` at a socket nothing listens on (or no socket at all); the
other cases run against the real engine the rest of the suite uses.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pai.sandbox import SandboxUnavailableError, probe_provider
from pai.sandbox_docker import DockerSandboxProvider

pytestmark = pytest.mark.anyio


@pytest.fixture
def dead_socket(tmp_path: Path) -> Iterator[str]:
    """A unix socket path that exists but where nothing accepts connections (a stopped engine)."""
    path = tmp_path / "docker.sock"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))  # bound, never listening: connections are refused
    try:
        yield f"unix://{path}"
    finally:
        sock.close()


async def probe_error(provider: DockerSandboxProvider) -> str:
    try:
        with pytest.raises(SandboxUnavailableError) as raised:
            await probe_provider(provider)
    finally:
        await provider.aclose()
    message = str(raised.value)
    assert "\n" not in message  # one line
    return message


async def test_probe_passes_on_a_working_engine_and_creates_nothing(
    docker_client: Any, test_image: str, namespace: str
) -> None:
    provider = DockerSandboxProvider(image=test_image, namespace=namespace)
    try:
        assert await probe_provider(provider) is True
        assert await provider.list_instances() == []
    finally:
        await provider.aclose()
    assert (
        docker_client.containers.list(all=True, filters={"label": f"pai.namespace={namespace}"})
        == []
    )


async def test_probe_of_a_stopped_engine_names_the_socket_and_the_fix(
    dead_socket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", dead_socket)

    message = await probe_error(DockerSandboxProvider(image="busybox"))

    assert f"cannot connect to the Docker engine at {dead_socket} (DOCKER_HOST)" in message
    assert "connection refused" in message
    assert "start Docker" in message


async def test_probe_of_a_missing_socket_says_so(tmp_path: Path) -> None:
    where = f"unix://{tmp_path / 'nothing.sock'}"

    message = await probe_error(DockerSandboxProvider(image="busybox", docker_host=where))

    assert f"at {where} (option docker_host): no socket there" in message


async def test_probe_of_the_default_socket_says_docker_host_is_not_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if os.path.exists("/var/run/docker.sock"):  # noqa: ASYNC240 (a stat, before anything runs)
        pytest.skip("an engine socket exists at the default path on this machine")
    monkeypatch.delenv("DOCKER_HOST", raising=False)

    message = await probe_error(DockerSandboxProvider(image="busybox"))

    assert "unix:///var/run/docker.sock (the default socket; DOCKER_HOST is not set)" in message


async def test_probe_masks_a_password_in_the_engine_address(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("DOCKER_HOST", f"tcp://me:s3cretpass@127.0.0.1:{port}")

    message = await probe_error(DockerSandboxProvider(image="busybox"))

    assert "s3cretpass" not in message
    assert f"tcp://me:***@127.0.0.1:{port}" in message


async def test_probe_of_a_missing_image_says_how_to_get_it(
    docker_client: Any, namespace: str
) -> None:
    image = f"pai-test-absent-{namespace}:1"

    message = await probe_error(DockerSandboxProvider(image=image, namespace=namespace))

    assert f"image {image!r} (option image) is not present in the Docker engine at" in message
    assert f"docker pull {image}" in message
    assert f"docker build -t {image} ." in message
    with pytest.raises(Exception, match="No such image"):  # nothing was pulled
        docker_client.images.get(image)


async def test_probe_of_an_unregistered_runtime_names_the_registered_ones(
    docker_client: Any, test_image: str, namespace: str
) -> None:
    provider = DockerSandboxProvider(image=test_image, namespace=namespace, runtime="runcx")

    message = await probe_error(provider)

    assert "runtime 'runcx' (option runtime) is not registered" in message
    assert "did you mean 'runc'?" in message
