"""``[durability] engine = "dbos"``: the plugin builds the engine from the table (no DBOS import,
no connection), and a wrong key or value is a ConfigError naming it, with the password masked."""

from __future__ import annotations

from pathlib import Path

import pytest

from pai.core import ConfigError, PaiConfig, durability_from_config, load_config
from pai.core.ext import Plugins


def plugins() -> Plugins:
    import pai.durable_dbos._plugin as plugin

    found = Plugins()
    found.register(plugin, name="pai-durable-dbos", distribution="pai-durable-dbos")
    return found


def config(tmp_path: Path, text: str) -> PaiConfig:
    (tmp_path / "pai.toml").write_text(text)
    return load_config(tmp_path, environ={})


def test_the_engine_is_built_from_the_table_without_importing_dbos(tmp_path: Path) -> None:
    from pai.durable_dbos import DbosEngine

    loaded = config(
        tmp_path,
        '[durability]\nengine = "dbos"\nsystem_database_url = "sqlite:///runs.sqlite"\n'
        "recovery_interval = 0.25\n",
    )
    engine = durability_from_config(loaded, plugins=plugins())
    assert isinstance(engine, DbosEngine)
    assert engine.name == "dbos"
    # A relative SQLite file is taken from the configuration file's folder.
    assert engine.options.system_database_url == f"sqlite:///{tmp_path / 'runs.sqlite'}"
    assert engine.options.recovery_interval == 0.25


def test_a_misspelt_key_is_named_with_a_suggestion(tmp_path: Path) -> None:
    loaded = config(
        tmp_path,
        '[durability]\nengine = "dbos"\nsystem_database_url = "sqlite:///r.sqlite"\n'
        'executor = "w1"\n',
    )
    with pytest.raises(ConfigError) as caught:
        durability_from_config(loaded, plugins=plugins())
    message = str(caught.value)
    assert "durability.executor = 'w1': unknown key; did you mean 'executor_id'?" in message
    assert "pai.toml" in message


def test_a_bad_url_is_refused_with_its_password_masked(tmp_path: Path) -> None:
    loaded = config(
        tmp_path,
        '[durability]\nengine = "dbos"\nsystem_database_url = "mysql://app:hunter2@db/runs"\n',
    )
    with pytest.raises(ConfigError) as caught:
        durability_from_config(loaded, plugins=plugins())
    message = str(caught.value)
    assert "hunter2" not in message
    assert "mysql://app:***@db/runs" in message


def test_a_missing_url_says_what_to_write(tmp_path: Path) -> None:
    loaded = config(tmp_path, '[durability]\nengine = "dbos"\n')
    with pytest.raises(ConfigError, match=r"durability\.system_database_url: required"):
        durability_from_config(loaded, plugins=plugins())
