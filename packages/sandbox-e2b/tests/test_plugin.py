"""Registration through the ``pai`` entry point, options, errors when building, import weight."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pai.sandbox import ProviderOptionsError, build_provider, sandbox_providers
from pai.sandbox.provider import SandboxProvider
from pai.sandbox_e2b import E2BApiKeyMissingError, E2BOptions, E2BSandboxProvider


@pytest.fixture(autouse=True)
def _no_e2b_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("E2B_API_KEY", "E2B_API_URL", "E2B_SANDBOX_URL", "E2B_DOMAIN"):
        monkeypatch.delenv(name, raising=False)


def test_the_e2b_provider_is_registered() -> None:
    registration = sandbox_providers()["e2b"]
    assert registration.options is E2BOptions
    assert registration.distribution == "pai-sandbox-e2b"
    assert "pip install pai-sandbox-e2b" in registration.install_hint


def test_options_default_to_no_internet_and_the_base_template() -> None:
    options = E2BOptions()
    assert (options.template, options.timeout, options.allow_internet_access) == (
        "base",
        300,
        False,
    )
    assert (options.namespace, options.user, options.api_key) == ("pai", "user", None)


def test_a_misspelt_option_is_refused_by_name() -> None:
    with pytest.raises(ProviderOptionsError, match="tempalte"):
        build_provider("e2b", {"tempalte": "base", "api_key": "k"})


@pytest.mark.parametrize("timeout", [0, -5, 86_401, "soon", "5", 5.5, True])
def test_a_sandbox_timeout_e2b_cannot_take_is_refused_when_the_options_are_read(
    timeout: object,
) -> None:
    with pytest.raises(ProviderOptionsError, match="timeout"):
        build_provider("e2b", {"timeout": timeout, "api_key": "k"})


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("api_url", "127.0.0.1:8000"),
        ("sandbox_url", "ftp://127.0.0.1"),
        ("metadata", {"pai.key": "mine"}),
        ("request_timeout", float("inf")),
    ],
)
def test_a_bad_url_a_pai_metadata_key_or_an_endless_request_timeout_is_refused_when_the_options_are_read(
    option: str, value: object
) -> None:
    with pytest.raises(ProviderOptionsError, match=option):
        build_provider("e2b", {option: value, "api_key": "k"})


def test_a_misspelt_option_gets_a_did_you_mean() -> None:
    with pytest.raises(ProviderOptionsError, match="did you mean 'allow_internet_access'"):
        build_provider("e2b", {"allow_internet": True, "api_key": "k"})


def test_the_factory_builds_a_provider_without_connecting() -> None:
    provider = build_provider(
        "e2b",
        {
            "api_key": "e2b_test",
            "api_url": "http://127.0.0.1:9",
            "sandbox_url": "http://127.0.0.1:9",
            "template": "python",
            "timeout": 600,
            "namespace": "ns",
        },
    )
    assert isinstance(provider, E2BSandboxProvider)
    assert isinstance(provider, SandboxProvider)
    assert provider.name == "e2b"
    assert (provider.template, provider.timeout, provider.namespace) == ("python", 600, "ns")
    assert provider.allow_internet_access is False
    assert provider.features.cross_process
    assert provider.features.durable


def test_a_missing_api_key_names_e2b_api_key() -> None:
    with pytest.raises(E2BApiKeyMissingError, match="E2B_API_KEY"):
        E2BSandboxProvider()


def test_the_api_key_comes_from_e2b_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("E2B_API_KEY", "e2b_from_env")
    assert E2BSandboxProvider().name == "e2b"


# Runs a command line in a fresh interpreter, then reports which modules it imported.
PROBE = """
import json, runpy, sys
sys.argv = {argv!r}
try:
    runpy.run_module({module!r}, run_name="__main__")
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)))
"""


def test_pai_plugins_loads_the_plugin_without_importing_the_sdk() -> None:
    argv = ["pai.core.cli", "plugins"]
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(argv=argv, module="pai.core.cli")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    modules = set(json.loads(done.stdout.strip().splitlines()[-1]))
    assert "pai.sandbox_e2b._plugin" in modules
    heavy = sorted(m for m in modules if m.split(".")[0] in ("e2b", "httpx", "uvicorn"))
    assert heavy == []
    assert "pai.sandbox_e2b._provider" not in modules


def test_choosing_the_provider_imports_the_sdk() -> None:
    code = (
        "import sys; from pai.sandbox import build_provider; "
        "build_provider('e2b', {'api_key': 'k'}); print('e2b' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stdout.strip()) == (0, "True"), done.stderr
