"""Registration through the ``pai`` entry point, options, and import weight."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pai.sandbox import ProviderOptionsError, build_provider, sandbox_providers
from pai.sandbox.provider import SandboxProvider
from pai.sandbox_docker import DockerOptions, DockerSandboxProvider


def test_the_docker_provider_is_registered() -> None:
    registration = sandbox_providers()["docker"]
    assert registration.options is DockerOptions
    assert registration.distribution == "pai-sandbox-docker"
    assert "pip install pai-sandbox-docker" in registration.install_hint


def test_options_have_safe_defaults_and_forbid_typos() -> None:
    options = DockerOptions(image="x:1")
    assert (options.workdir, options.network, options.memory, options.pids_limit) == (
        "/workspace",
        "none",
        "512m",
        256,
    )
    assert (options.user, options.idle_ttl, options.docker_host, options.namespace) == (
        "1000:1000",
        None,
        None,
        "pai",
    )
    assert (
        options.max_concurrent_commands,
        options.list_limit,
        options.helper_timeout,
    ) == (8, 10_000, 30.0)
    with pytest.raises(ProviderOptionsError, match="imgae"):
        build_provider("docker", {"imgae": "x"})
    with pytest.raises(ProviderOptionsError, match="image"):
        build_provider("docker", {})


@pytest.mark.parametrize("memory", ["lots", "512 m", "-1g", "0", 0, -5])
def test_a_memory_size_docker_cannot_read_is_refused_when_the_options_are_read(
    memory: str | int,
) -> None:
    with pytest.raises(ProviderOptionsError, match="memory"):
        build_provider("docker", {"image": "x:1", "memory": memory})


@pytest.mark.parametrize("memory", ["512m", "1g", "1.5G", "1048576", 1048576, "64k", "100b"])
def test_memory_sizes_docker_reads_are_accepted(memory: str | int) -> None:
    assert DockerOptions(image="x:1", memory=memory).memory == memory


def test_the_factory_builds_a_provider_without_connecting() -> None:
    provider = build_provider(
        "docker",
        {"image": "busybox:latest", "memory": "1g", "network": "bridge", "namespace": "ns"},
    )
    assert isinstance(provider, DockerSandboxProvider)
    assert isinstance(provider, SandboxProvider)
    assert provider.name == "docker"
    assert (provider.memory, provider.network, provider.namespace) == ("1g", "bridge", "ns")
    assert provider.features.cross_process
    assert provider.features.durable


def test_the_plugin_module_does_not_import_docker() -> None:
    code = (
        "import sys; import pai.sandbox_docker._plugin, pai.sandbox_docker; "
        "from pai.sandbox import sandbox_providers; sandbox_providers(); "
        "print('docker' in sys.modules, 'pai.sandbox_docker._provider' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_container_names_stay_short_for_any_key() -> None:
    from pai.sandbox_docker import container_name

    long_key = "k" * 10_000 + "\ud800/é"
    name = container_name("pai", long_key)
    assert len(name) < 64
    assert container_name("pai", "a") != container_name("pai", "b")
    assert container_name("pai", "a") != container_name("other", "a")
