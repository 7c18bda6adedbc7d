"""``[durability]`` in configuration: the engine a plugin registers is built from its table, a
wrong name or table says what to write, and ``pai config --check`` sees the same mistakes."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from config_helpers import config_of

from pai.core import (
    ConfigError,
    InMemoryStorage,
    create_agent_runtime,
    define_agent,
    durability_from_config,
)
from pai.core._config_check import check_static
from pai.core.ext import DurabilityRegistration, DurabilitySettings, Plugins, hookimpl
from pai.core.testing import JournalEngine, ScriptedModel, text


class JournalPlugin:
    def __init__(self) -> None:
        self.settings: list[DurabilitySettings] = []
        self.engines: list[JournalEngine] = []

    @hookimpl
    def pai_durability_engines(self) -> Sequence[DurabilityRegistration]:
        def factory(settings: DurabilitySettings) -> JournalEngine:
            if "bad" in settings.options:
                raise ConfigError(f"durability.bad ({settings.source}) is not an option")
            self.settings.append(settings)
            engine = JournalEngine()
            self.engines.append(engine)
            return engine

        return [DurabilityRegistration(name="journal", factory=factory, description="memory")]


def plugins_with(plugin: JournalPlugin) -> Plugins:
    plugins = Plugins()
    plugins.register(plugin, name="journal", distribution="pai-durable-journal")
    return plugins


def test_the_configured_engine_is_built_from_its_table(tmp_path: Path) -> None:
    plugin = JournalPlugin()
    config = config_of(
        tmp_path, '[durability]\nengine = "journal"\ndatabase = "sqlite:///runs.db"\n'
    )
    engine = durability_from_config(config, plugins=plugins_with(plugin))
    assert engine is plugin.engines[0]
    [settings] = plugin.settings
    assert settings.options == {"database": "sqlite:///runs.db"}
    assert settings.base == tmp_path
    assert "pai.toml" in settings.source


def test_no_table_no_engine(tmp_path: Path) -> None:
    assert durability_from_config(config_of(tmp_path, ""), plugins=Plugins()) is None


def test_an_unknown_engine_names_the_adapter_to_install(tmp_path: Path) -> None:
    config = config_of(tmp_path, '[durability]\nengine = "dbso"\n')
    with pytest.raises(ConfigError) as caught:
        durability_from_config(config, plugins=Plugins())
    message = str(caught.value)
    assert "durability.engine = 'dbso'" in message
    assert "pai.toml" in message
    assert "did you mean 'dbos'?" in message
    assert "installed engines: none" in message
    assert "pai-durable-dbos" in message


def test_a_table_without_an_engine_says_what_to_add(tmp_path: Path) -> None:
    config = config_of(tmp_path, '[durability]\nsystem_database_url = "sqlite:///x"\n')
    with pytest.raises(ConfigError, match='has no engine; add engine = "dbos"'):
        durability_from_config(config, plugins=Plugins())


def test_the_engines_own_refusal_reaches_the_user(tmp_path: Path) -> None:
    config = config_of(tmp_path, '[durability]\nengine = "journal"\nbad = 1\n')
    with pytest.raises(ConfigError, match=r"durability.bad \(.*pai.toml\) is not an option"):
        durability_from_config(config, plugins=plugins_with(JournalPlugin()))


def test_a_misspelt_table_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"did you mean 'durability'\?"):
        config_of(tmp_path, '[durabilty]\nengine = "dbos"\n')


def test_config_check_builds_the_engine(tmp_path: Path) -> None:
    config = config_of(tmp_path, '[durability]\nengine = "jornal"\n')
    with pytest.raises(ConfigError, match="did you mean 'journal'"):
        check_static(config, plugins=plugins_with(JournalPlugin()))


def test_a_runtime_reading_configuration_runs_durably(tmp_path: Path) -> None:
    plugin = JournalPlugin()
    config = config_of(tmp_path, '[durability]\nengine = "journal"\n')
    runtime = create_agent_runtime(
        agent=define_agent(name="a", model=ScriptedModel([text("hi")])),
        storage=InMemoryStorage(),
        scope_key=lambda identity: "s",
        config=config,
        plugins=plugins_with(plugin),
    )
    assert runtime.durability is plugin.engines[0]
