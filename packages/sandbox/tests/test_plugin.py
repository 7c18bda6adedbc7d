"""The ``sandbox`` capability package: configuration picks an installed provider by name.

A throwaway distribution (a ``*.dist-info`` folder on ``sys.path`` with a ``pai`` entry point)
registers a fake provider, ``fake``, built on the recording test double. ``PAI_LOAD_PLUGINS``
limits loading to it and pai-sandbox, so these tests see the same providers whether or not
pai-sandbox-inmemory is installed in the environment.
"""

from __future__ import annotations

import itertools
import os
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from fakes import FakeProvider
from pydantic import BaseModel

from pai.core import (
    AcquireInput,
    ConfigError,
    PaiConfig,
    ToolContext,
    bindings_from_config,
    create_agent_runtime,
    define_agent,
    define_tool,
    load_config,
)
from pai.core.ext import get_plugins
from pai.core.testing import ScriptedModel, reset_plugins, text, tool_call
from pai.sandbox import Sandbox, sandbox
from pai.sandbox._registry import (
    ProviderOptionsError,
    UnknownProviderError,
    build_provider,
    sandbox_providers,
)

_serial = itertools.count(1)

FAKE_PROVIDER = """
from pydantic import BaseModel, ConfigDict

from fakes import FakeProvider
from pai.core.ext import hookimpl
from pai.sandbox._registry import SandboxProviderRegistration

built = []


class FakeOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    image: str = "default"
    cpus: int = 1


def make(options):
    provider = FakeProvider()
    built.append((options, provider))
    return provider


@hookimpl
def pai_sandbox_providers():
    return [
        SandboxProviderRegistration(
            name="fake",
            factory=make,
            options=FakeOptions,
            description="A recording test double.",
            install_hint="pip install pai-sandbox-fake",
        )
    ]
"""


OTHER_PROVIDER = """

class OtherOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    endpoint: str
    retries: int = 3


@hookimpl
def pai_sandbox_providers():
    return [
        SandboxProviderRegistration(name="fake", factory=make, options=FakeOptions),
        SandboxProviderRegistration(name="other", factory=make, options=OtherOptions),
    ]
"""


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """Install the ``fake`` provider's distribution; load only it and pai-sandbox."""
    yield from _install(tmp_path, monkeypatch, FAKE_PROVIDER, ["fake"])


@pytest.fixture
def fake_and_other(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """As ``fake``, the distribution registering a second provider, ``other``, too (one option
    required)."""
    yield from _install(tmp_path, monkeypatch, FAKE_PROVIDER + OTHER_PROVIDER, ["fake", "other"])


def _install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, names: list[str]
) -> Iterator[ModuleType]:
    for name in list(os.environ):
        if name.startswith("PAI_"):
            monkeypatch.delenv(name)
    module = f"pai_throwaway_fake_provider_{next(_serial)}_{os.getpid()}"
    folder = tmp_path / "site"
    dist_info = folder / "pai_sandbox_fake-1.0.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: pai-sandbox-fake\nVersion: 1.0\n"
    )
    (dist_info / "entry_points.txt").write_text(f"[pai]\npai-sandbox-fake = {module}\n")
    (folder / f"{module}.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("PAI_LOAD_PLUGINS", "pai-sandbox,pai-sandbox-fake")
    reset_plugins()
    plugins = get_plugins()
    assert sorted(sandbox_providers(plugins)) == names
    yield sys.modules[module]
    reset_plugins()
    del sys.modules[module]


def config_of(tmp_path: Path, content: str, environ: dict[str, str] | None = None) -> PaiConfig:
    (tmp_path / "pai.toml").write_text(content)
    return load_config(tmp_path, environ=environ or {})


class RunInput(BaseModel):
    command: str


def coder() -> Any:
    async def run(ctx: ToolContext[RunInput]) -> str:
        box: Sandbox = ctx.capabilities[sandbox]
        return (await box.run_command(ctx.input.command)).stdout

    return define_agent(
        name="coder",
        tools={
            "runScript": define_tool(
                id="runScript",
                description="Run a command in the sandbox.",
                input_schema=RunInput,
                capabilities={"sandbox": sandbox},
                execute=run,
            )
        },
    )


def bind(config: PaiConfig) -> Any:
    return bindings_from_config(coder().requirements, config=config)["sandbox"]


def config_error(tmp_path: Path, content: str) -> ConfigError:
    """The ``ConfigError`` that binding the sandbox of the pai.toml ``content`` raises."""
    config = config_of(tmp_path, content)
    with pytest.raises(ConfigError) as caught:
        bind(config)
    return caught.value


# -- choosing a provider -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_an_agent_whose_tool_needs_a_sandbox_gets_it_from_configuration(
    fake: ModuleType, tmp_path: Path
) -> None:
    config = config_of(
        tmp_path,
        '[capabilities.sandbox]\nscope = "user"\nprovider = "fake"\n\n'
        '[capabilities.sandbox.fake]\nimage = "python:3.12"\n',
    )

    async with create_agent_runtime(
        agent=coder(),
        model=ScriptedModel([tool_call("runScript", {"command": "echo hi"}), text("done")]),
        scope_key=lambda identity: "acme",
        user_key=lambda identity: "ann",
        config=config,
    ) as runtime:
        assert runtime.bindings["sandbox"].scope == "user"
        thread = await runtime.admin(identity=None).create_thread()
        await thread.send("go")

    ((options, provider),) = fake.built
    assert (options.image, options.cpus) == ("python:3.12", 1)
    assert isinstance(provider, FakeProvider)
    assert [run.command for run in provider.runs] == ["echo hi"]


def test_an_environment_variable_chooses_the_provider(fake: ModuleType, tmp_path: Path) -> None:
    config = load_config(
        tmp_path,
        environ={
            "PAI_CAPABILITIES__SANDBOX__PROVIDER": "fake",
            "PAI_CAPABILITIES__SANDBOX__FAKE__CPUS": "4",
        },
    )

    binding = bind(config)

    assert binding.capability is sandbox
    ((options, _),) = fake.built
    assert options.cpus == 4


# -- unknown providers ---------------------------------------------------------------------------


def test_an_unknown_provider_lists_the_installed_ones_and_what_to_pip_install(
    fake: ModuleType,
) -> None:
    with pytest.raises(UnknownProviderError) as caught:
        build_provider("docker")

    message = str(caught.value)
    assert "sandbox provider 'docker'" in message
    assert "is not installed" in message
    assert "installed providers: 'fake' (pai-sandbox-fake)" in message
    assert "pip install pai-sandbox-docker" in message


def test_an_unknown_provider_in_configuration_names_the_file_and_keeps_the_advice(
    fake: ModuleType, tmp_path: Path
) -> None:
    error = config_error(tmp_path, '[capabilities.sandbox]\nprovider = "docker"\n')

    assert isinstance(error.__cause__, UnknownProviderError)
    message = str(error)
    assert str(tmp_path / "pai.toml") in message
    assert "'docker'" in message
    assert "installed providers: 'fake' (pai-sandbox-fake)" in message
    assert "pip install pai-sandbox-docker" in message


def test_the_default_provider_when_it_is_not_installed_says_what_to_install(
    fake: ModuleType, tmp_path: Path
) -> None:
    error = config_error(tmp_path, "")  # no provider named: the embedded default, inmemory

    assert isinstance(error.__cause__, UnknownProviderError)
    message = str(error)
    assert "'inmemory'" in message
    assert "its defaults ([capabilities.sandbox] is not configured" in message
    assert "pip install pai-sandbox-inmemory" in message


def test_a_misspelt_provider_suggests_the_closest_and_offers_no_install_for_the_typo(
    fake: ModuleType,
) -> None:
    with pytest.raises(UnknownProviderError) as caught:
        build_provider("fkae")

    message = str(caught.value)
    assert "did you mean 'fake'?" in message
    assert "pip install" not in message  # "fkae" is no package anyone publishes


def test_a_misspelt_known_provider_suggests_it_and_offers_no_install_for_the_typo(
    fake: ModuleType,
) -> None:
    with pytest.raises(UnknownProviderError) as caught:
        build_provider("dokcer")

    message = str(caught.value)
    assert "did you mean 'docker'?" in message
    assert "pai-sandbox-dokcer" not in message


# -- options -------------------------------------------------------------------------------------


def test_a_bad_provider_option_names_the_key_and_the_valid_keys(
    fake: ModuleType, tmp_path: Path
) -> None:
    error = config_error(
        tmp_path,
        '[capabilities.sandbox]\nprovider = "fake"\n\n[capabilities.sandbox.fake]\nimgae = "x"\n',
    )

    assert isinstance(error.__cause__, ProviderOptionsError)
    message = str(error)
    assert "[capabilities.sandbox.fake].imgae" in message
    assert "Valid keys: ['cpus', 'image']" in message
    assert str(tmp_path / "pai.toml") in message


def test_a_bad_provider_option_value_names_the_key(fake: ModuleType, tmp_path: Path) -> None:
    with pytest.raises(ProviderOptionsError) as caught:
        build_provider("fake", {"cpus": "many"})

    message = str(caught.value)
    assert "invalid options for sandbox provider 'fake'" in message
    assert "[capabilities.sandbox.fake].cpus" in message
    assert "Valid keys" in message


def test_an_unknown_key_in_the_sandbox_section_is_reported_with_the_valid_keys(
    fake: ModuleType, tmp_path: Path
) -> None:
    error = config_error(tmp_path, '[capabilities.sandbox]\nprovider = "fake"\ntimout = 5\n')

    assert isinstance(error.__cause__, ProviderOptionsError)
    message = str(error)
    assert "unknown key(s) ['timout']" in message
    assert "'default_timeout'" in message  # among the valid keys
    assert "[capabilities.sandbox]" in message


def test_an_unknown_key_in_the_sandbox_section_suggests_the_closest_and_lists_scope(
    fake: ModuleType, tmp_path: Path
) -> None:
    error = config_error(tmp_path, '[capabilities.sandbox]\nprovider = "fake"\nscop = "thread"\n')

    message = str(error)
    assert "unknown key(s) ['scop']; did you mean 'scope'?" in message
    assert "'scope'" in message.split("valid keys are", 1)[1]
    assert str(tmp_path / "pai.toml") in message


def test_a_bad_sandbox_setting_names_the_key(fake: ModuleType, tmp_path: Path) -> None:
    error = config_error(
        tmp_path, '[capabilities.sandbox]\nprovider = "fake"\noutput_limit = "lots"\n'
    )

    message = str(error)
    assert "capabilities.sandbox.output_limit = 'lots'" in message
    assert "output_limit" in message


def test_a_misspelt_provider_option_suggests_the_closest_key(
    fake: ModuleType, tmp_path: Path
) -> None:
    error = config_error(
        tmp_path,
        '[capabilities.sandbox]\nprovider = "fake"\n[capabilities.sandbox.fake]\nimgae = "x"\n',
    )

    message = str(error)
    assert "[capabilities.sandbox.fake].imgae: unknown key; did you mean 'image'?" in message
    assert str(tmp_path / "pai.toml") in message


def test_a_misspelt_option_of_a_provider_not_selected_is_reported_all_the_same(
    fake_and_other: ModuleType, tmp_path: Path
) -> None:
    # A typo in the table of a provider not in use would otherwise wait, silent, for the day
    # someone switches to it.
    error = config_error(
        tmp_path,
        '[capabilities.sandbox]\nprovider = "fake"\n[capabilities.sandbox.other]\nretires = 5\n',
    )

    message = str(error)
    assert "invalid options for sandbox provider 'other' (not the one selected, 'fake')" in message
    assert "[capabilities.sandbox.other].retires: unknown key; did you mean 'retries'?" in message
    assert str(tmp_path / "pai.toml") in message
    # A required option it lacks is no mistake while it is not selected.
    assert "endpoint" not in message.split("Valid keys")[0]


def test_a_provider_not_selected_may_lack_its_required_options(
    fake_and_other: ModuleType, tmp_path: Path
) -> None:
    config = config_of(
        tmp_path,
        '[capabilities.sandbox]\nprovider = "fake"\n[capabilities.sandbox.other]\nretries = 5\n',
    )
    bind(config)  # no error: other's endpoint is needed only once other is selected


def test_running_on_the_embedded_default_is_announced_once_at_warning(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    import anyio

    import pai.sandbox._settings as sandbox_settings

    for name in list(os.environ):
        if name.startswith("PAI_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("PAI_LOAD_PLUGINS", "pai-sandbox,pai-sandbox-inmemory")
    monkeypatch.setattr(sandbox_settings, "_told_default", False)
    reset_plugins()
    config = config_of(tmp_path, "")  # nothing configured: the embedded default

    try:
        with caplog.at_level("WARNING", logger="pai.sandbox"):
            for _ in range(2):
                anyio.run(bind(config).close)
    finally:
        reset_plugins()

    warnings = [r for r in caplog.records if "embedded in-memory provider" in r.getMessage()]
    assert len(warnings) == 1
    assert warnings[0].levelname == "WARNING"
    assert "[capabilities.sandbox]" in warnings[0].getMessage()


@pytest.mark.usefixtures("fake")
@pytest.mark.parametrize(
    "content",
    [
        "",  # the default, inmemory, is not installed here
        "[capabilities.sandbox]\ntimeout = 5\n",  # a mistake in the table
    ],
)
def test_no_default_warning_comes_with_an_error_about_the_sandbox_table(
    content: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    import pai.sandbox._settings as sandbox_settings

    monkeypatch.setattr(sandbox_settings, "_told_default", False)

    with caplog.at_level("WARNING", logger="pai.sandbox"):
        config_error(tmp_path, content)

    assert [r.getMessage() for r in caplog.records if "embedded" in r.getMessage()] == []


def test_the_read_limit_comes_from_configuration(fake: ModuleType, tmp_path: Path) -> None:
    config = config_of(tmp_path, '[capabilities.sandbox]\nprovider = "fake"\nread_limit = 4096\n')

    facade = bind(config).acquire(
        AcquireInput("some-key", "sandbox", "thread", "t-1", None, "acme", None, None)
    )

    assert facade.read_limit == 4096


def test_a_read_limit_below_one_byte_in_configuration_names_the_option(
    fake: ModuleType, tmp_path: Path
) -> None:
    error = config_error(tmp_path, '[capabilities.sandbox]\nprovider = "fake"\nread_limit = 0\n')

    message = str(error)
    assert "capabilities.sandbox.read_limit = 0" in message
    assert "greater than or equal to 1" in message
