"""``[durability] engine = "temporal"``: the plugin builds the engine from the table (no Temporal
import, no connection), and a wrong key or value is a ConfigError naming it, the API key never
shown."""

from __future__ import annotations

from pathlib import Path

import pytest

from pai.core import ConfigError, PaiConfig, durability_from_config, load_config
from pai.core.ext import Plugins


def plugins() -> Plugins:
    import pai.durable_temporal._plugin as plugin

    found = Plugins()
    found.register(plugin, name="pai-durable-temporal", distribution="pai-durable-temporal")
    return found


def config(tmp_path: Path, text: str) -> PaiConfig:
    (tmp_path / "pai.toml").write_text(text)
    return load_config(tmp_path, environ={})


def test_the_engine_is_built_from_the_table(tmp_path: Path) -> None:
    from pai.durable_temporal import TemporalEngine

    loaded = config(
        tmp_path,
        '[durability]\nengine = "temporal"\ntarget_host = "temporal.internal:7233"\n'
        'task_queue = "support"\nheartbeat_timeout = 5\n',
    )
    engine = durability_from_config(loaded, plugins=plugins())
    assert isinstance(engine, TemporalEngine)
    assert engine.name == "temporal"
    assert engine.options.target_host == "temporal.internal:7233"
    assert engine.options.task_queue == "support"
    assert engine.options.heartbeat_timeout == 5
    assert not engine.started


def test_defaults_need_no_keys(tmp_path: Path) -> None:
    from pai.durable_temporal import TemporalEngine

    engine = durability_from_config(
        config(tmp_path, '[durability]\nengine = "temporal"\n'), plugins=plugins()
    )
    assert isinstance(engine, TemporalEngine)
    assert engine.options.target_host == "127.0.0.1:7233"


def test_a_misspelt_key_is_named_with_a_suggestion(tmp_path: Path) -> None:
    loaded = config(tmp_path, '[durability]\nengine = "temporal"\ntaskqueue = "q"\n')
    with pytest.raises(ConfigError) as caught:
        durability_from_config(loaded, plugins=plugins())
    message = str(caught.value)
    assert "durability.taskqueue = 'q': unknown key; did you mean 'task_queue'?" in message
    assert "pai.toml" in message
    assert "Its keys: api_key" in message


def test_a_bad_value_is_named_and_the_key_never_shown(tmp_path: Path) -> None:
    loaded = config(
        tmp_path,
        '[durability]\nengine = "temporal"\napi_key = " "\ntarget_host = "nohost"\n',
    )
    with pytest.raises(ConfigError) as caught:
        durability_from_config(loaded, plugins=plugins())
    message = str(caught.value)
    assert "durability.api_key: api_key is empty" in message
    assert "durability.target_host = 'nohost': target_host 'nohost' must be host:port" in message
