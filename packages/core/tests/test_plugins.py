"""Plugin discovery through real entry points: each test installs throwaway distributions (a
``*.dist-info`` folder with ``METADATA`` and ``entry_points.txt``, and the plugin's module) into a
folder of its own on ``sys.path``."""

from __future__ import annotations

import itertools
import logging
import os
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from pai.core import (
    CapabilityBindingError,
    DuplicateRegistrationError,
    PluginError,
    ToolContext,
    ToolResultMessage,
    UserError,
    create_agent_runtime,
    define_agent,
    define_capability,
    define_tool,
)
from pai.core.ext import get_plugins
from pai.core.testing import ScriptedModel, reset_plugins, text, tool_call

_serial = itertools.count(1)


class Site:
    """Installs throwaway distributions whose plugins join the ``pai`` entry-point group."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root = root
        self.monkeypatch = monkeypatch
        self.prefix = f"pai_throwaway_{next(_serial)}_{os.getpid()}"

    def module_name(self, name: str) -> str:
        return f"{self.prefix}_{name.replace('-', '_')}"

    def install(
        self,
        distribution: str,
        source: str,
        *,
        entry_point: str | None = None,
        version: str = "1.0",
    ) -> str:
        """Install ``distribution`` with one plugin module holding ``source``; its module name."""
        folder = self.root / f"{distribution}-{next(_serial)}"
        dist_info = folder / f"{distribution.replace('-', '_')}-{version}.dist-info"
        dist_info.mkdir(parents=True)
        (dist_info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n"
        )
        module = self.module_name(distribution)
        (dist_info / "entry_points.txt").write_text(
            f"[pai]\n{entry_point or distribution} = {module}\n"
        )
        (folder / f"{module}.py").write_text(textwrap.dedent(source))
        self.monkeypatch.syspath_prepend(str(folder))
        return module

    def capability_plugin(self, distribution: str, capability_id: str, **kwargs: str) -> str:
        """A distribution whose plugin registers capability ``capability_id`` (no options)."""
        return self.install(
            distribution,
            f"""
            from pai.core.ext import CapabilityRegistration, hookimpl
            from pai.core import create_capability_binding, define_capability

            class Facade:
                source = {distribution!r}

            token = define_capability(Facade, id={capability_id!r})

            @hookimpl
            def pai_capabilities():
                return [
                    CapabilityRegistration(
                        capability=token,
                        factory=lambda settings: create_capability_binding(
                            capability=token, acquire=lambda _input: Facade()
                        ),
                        install_hint="pip install {distribution}",
                    )
                ]
            """,
            **kwargs,
        )

    def broken_plugin(self, distribution: str) -> str:
        """A distribution whose plugin module fails to import."""
        return self.install(distribution, "import pai_throwaway_missing_sdk\n")

    def cleanup(self) -> None:
        for name in [name for name in sys.modules if name.startswith(self.prefix)]:
            del sys.modules[name]


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    for name in ("PAI_STRICT_PLUGINS", "PAI_LOAD_PLUGINS"):
        monkeypatch.delenv(name, raising=False)
    installed = Site(tmp_path, monkeypatch)
    reset_plugins()
    yield installed
    reset_plugins()
    installed.cleanup()


# -- broken plugins ------------------------------------------------------------------------------


def test_a_plugin_that_fails_to_import_is_skipped_and_reported_with_its_distribution_and_error(
    site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    site.broken_plugin("broken-plugin")
    site.capability_plugin("good-plugin", "acme.good")

    with caplog.at_level(logging.WARNING, logger="pai.core.plugins"):
        plugins = get_plugins()

    infos = {info.distribution: info for info in plugins.plugins()}
    broken = infos["broken-plugin"]
    assert broken.status == "failed"
    assert broken.version == "1.0"
    assert broken.error is not None
    assert "ModuleNotFoundError" in broken.error
    assert "pai_throwaway_missing_sdk" in broken.error
    good = infos["good-plugin"]
    assert good.status == "loaded"
    assert good.hooks == ("pai_capabilities",)
    assert "acme.good" in plugins.capabilities()
    assert "skipping plugin 'broken-plugin' from broken-plugin 1.0" in caplog.text


def test_strict_plugins_makes_a_broken_plugin_an_error_naming_it_and_the_fix(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    site.broken_plugin("broken-plugin")
    monkeypatch.setenv("PAI_STRICT_PLUGINS", "1")

    with pytest.raises(PluginError) as caught:
        get_plugins()

    message = str(caught.value)
    assert "'broken-plugin' from broken-plugin 1.0 failed to load" in message
    assert "pai_throwaway_missing_sdk" in message
    assert "Fix or uninstall it" in message
    assert "unset PAI_STRICT_PLUGINS" in message


def test_an_unbound_capability_error_mentions_plugins_that_failed_to_load(site: Site) -> None:
    site.broken_plugin("acme-ledger")
    ledger = define_capability(object, id="acme.ledger")
    agent = define_agent(
        name="main",
        tools={
            "use": define_tool(
                id="use",
                description="Uses the ledger.",
                input_schema=NoInput,
                capabilities={"ledger": ledger},
                execute=lambda ctx: "x",
            )
        },
    )

    with pytest.raises(CapabilityBindingError) as caught:
        create_agent_runtime(agent=agent, scope_key=lambda identity: "s")

    message = str(caught.value)
    assert "'acme.ledger' is not bound (declared by tool 'use')" in message
    assert "plugins that failed to load" in message
    assert "from acme-ledger (ModuleNotFoundError" in message


# -- which plugins load --------------------------------------------------------------------------


def test_load_plugins_limits_loading_to_the_named_distributions(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = site.broken_plugin("broken-plugin")
    site.capability_plugin("good-plugin", "acme.good")
    site.capability_plugin("other-plugin", "acme.other")
    monkeypatch.setenv("PAI_LOAD_PLUGINS", "Good_Plugin")  # names compare normalized

    plugins = get_plugins()

    statuses = {info.distribution: info.status for info in plugins.plugins()}
    assert statuses["good-plugin"] == "loaded"
    assert statuses["other-plugin"] == "skipped"
    assert statuses["broken-plugin"] == "skipped"
    assert set(statuses.values()) == {"loaded", "skipped"}  # nothing else failed
    assert list(plugins.capabilities()) == ["acme.good"]
    assert broken not in sys.modules  # never imported


def test_an_empty_load_plugins_loads_none(site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    module = site.capability_plugin("good-plugin", "acme.good")
    monkeypatch.setenv("PAI_LOAD_PLUGINS", "")

    plugins = get_plugins()

    assert {info.status for info in plugins.plugins()} == {"skipped"}
    assert plugins.capabilities() == {}
    assert module not in sys.modules


# -- duplicates ----------------------------------------------------------------------------------


def test_two_plugins_registering_one_capability_id_is_an_error_naming_both_distributions(
    site: Site,
) -> None:
    site.capability_plugin("acme-vault", "acme.vault")
    site.capability_plugin("acme-vault-fork", "acme.vault")
    plugins = get_plugins()

    with pytest.raises(DuplicateRegistrationError) as caught:
        plugins.capabilities()

    assert isinstance(caught.value, UserError)
    message = str(caught.value)
    assert "capability 'acme.vault' is registered twice" in message
    assert "acme-vault and by acme-vault-fork" in message
    assert "uninstall one of them" in message


def test_two_distributions_using_one_plugin_name_is_an_error_naming_both(site: Site) -> None:
    site.capability_plugin("acme-one", "acme.one", entry_point="acme")
    site.capability_plugin("acme-two", "acme.two", entry_point="acme")

    with pytest.raises(DuplicateRegistrationError) as caught:
        get_plugins()

    message = str(caught.value)
    assert "plugin name 'acme'" in message
    assert "acme-one" in message
    assert "acme-two" in message
    assert "uninstall one of them" in message


def test_a_hook_that_raises_is_a_plugin_error_naming_its_distribution(site: Site) -> None:
    site.install(
        "flaky-plugin",
        """
        from pai.core.ext import hookimpl

        @hookimpl
        def pai_capabilities():
            raise RuntimeError("no network")
        """,
    )
    plugins = get_plugins()

    with pytest.raises(PluginError) as caught:
        plugins.capabilities()

    message = str(caught.value)
    assert "pai_capabilities hook of plugin 'flaky-plugin' (flaky-plugin)" in message
    assert "RuntimeError: no network" in message
    assert "fix or uninstall flaky-plugin" in message


# -- the cached manager --------------------------------------------------------------------------


def test_get_plugins_is_cached_and_reset_plugins_loads_them_again(site: Site) -> None:
    first = get_plugins()
    assert get_plugins() is first

    site.capability_plugin("late-plugin", "acme.late")
    assert "acme.late" not in get_plugins().capabilities()  # still the cached manager

    reset_plugins()
    again = get_plugins()
    assert again is not first
    assert "acme.late" in again.capabilities()


# -- an installed capability package binds what code does not -----------------------------------


class NoInput(BaseModel):
    pass


@pytest.mark.anyio
async def test_an_installed_capability_package_binds_a_capability_code_leaves_unbound(
    site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = site.capability_plugin("acme-good", "acme.good")
    monkeypatch.chdir(tmp_path)  # no configuration file: the package's defaults
    token = __import__(module).token

    async def use(ctx: ToolContext[NoInput]) -> str:
        return ctx.capabilities[token].source

    agent = define_agent(
        name="main",
        tools={
            "use": define_tool(
                id="use",
                description="Uses the good capability.",
                input_schema=NoInput,
                capabilities={"good": token},
                execute=use,
            )
        },
    )

    async with create_agent_runtime(
        agent=agent,
        model=ScriptedModel([tool_call("use"), text("done")]),
        scope_key=lambda identity: "s",
    ) as runtime:
        thread = await runtime.admin(identity=None).create_thread()
        result = await thread.send("go")

    (output,) = [m.content for m in result.messages if isinstance(m, ToolResultMessage)]
    assert output == "acme-good"  # the installed package's facade
