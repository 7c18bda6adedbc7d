"""Registration through the ``pai`` entry point, options, and the errors of a machine that
cannot run bwrap."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pai.sandbox import (
    ProviderOptionsError,
    SandboxInputError,
    SandboxUnavailableError,
    build_provider,
    sandbox_providers,
)
from pai.sandbox_local import LocalOptions, LocalSandboxProvider
from pai.sandbox_local._bwrap import explain_bwrap_failure, find_bwrap


def test_the_local_provider_is_registered() -> None:
    registration = sandbox_providers()["local"]
    assert registration.options is LocalOptions
    assert registration.distribution == "pai-sandbox-local"
    assert "pip install pai-sandbox-local" in registration.install_hint


def test_options_have_confining_defaults_and_forbid_typos(tmp_path: Path) -> None:
    options = LocalOptions()
    assert (options.network, options.user, options.memory, options.processes) == (
        False,
        "user",
        "512m",
        512,
    )
    provider = build_provider("local", {"state_dir": str(tmp_path), "namespace": "app"})
    assert isinstance(provider, LocalSandboxProvider)
    assert provider.root == tmp_path / "app"
    with pytest.raises(ProviderOptionsError, match="netwrok"):
        build_provider("local", {"netwrok": True})


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("memory", "lots"),
        ("memory", 0),
        ("file_size", "-1g"),
        ("namespace", "../x"),
        ("user", "admin"),
        ("processes", 0),
    ],
)
def test_a_bad_option_is_refused_naming_it(option: str, value: object) -> None:
    with pytest.raises(ProviderOptionsError, match=option):
        build_provider("local", {option: value})
    with pytest.raises(SandboxInputError, match=option):
        LocalSandboxProvider(**{option: value})  # type: ignore[arg-type]


def test_importing_the_plugin_loads_neither_pydantic_nor_the_provider() -> None:
    code = (
        "import sys; import pai.sandbox_local._plugin; "
        "print('pydantic' in sys.modules, 'pai.sandbox_local._provider' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False"], done


@pytest.mark.parametrize(
    "message",
    [
        # bubblewrap's own words on kernels that refuse unprivileged user namespaces
        "bwrap: No permissions to create a new namespace, likely because the kernel does not "
        "allow non-privileged user namespaces. On e.g. debian this can be enabled with "
        "'sysctl kernel.unprivileged_userns_clone=1'.",
        "bwrap: setting up uid map: Permission denied",
        "bwrap: Creating new namespace failed: Operation not permitted",
    ],
)
def test_a_kernel_refusing_user_namespaces_is_named_with_the_fix(message: str) -> None:
    error = explain_bwrap_failure(1, message)
    text = str(error)
    assert "unprivileged user namespaces" in text
    assert "sysctl" in text
    assert 'provider = "docker"' in text


def test_an_explicit_bwrap_that_is_not_a_program_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SandboxUnavailableError, match="option bwrap"):
        find_bwrap(str(tmp_path / "nothing"))
