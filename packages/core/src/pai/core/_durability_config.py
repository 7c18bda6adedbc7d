"""``[durability]`` in configuration: which engine makes runs durable, and its options.

    [durability]
    engine = "dbos"
    system_database_url = "sqlite:///pai-runs.sqlite"

``engine`` names a durability engine a plugin registers (``pai-durable-dbos`` registers
``dbos``); every other key is that engine's option, checked by its factory.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from pai.core._config import PaiConfig, describe_source, did_you_mean, source_folder
from pai.core._durability import DurabilityEngine, check_engine
from pai.core._durability_registry import DurabilitySettings
from pai.core._errors import ConfigError
from pai.core._plugins import Plugins, get_plugins

KNOWN_ENGINES: Final = {"dbos": "pai-durable-dbos", "temporal": "pai-durable-temporal"}
"""Engines this project publishes an adapter for: name -> the distribution to install."""


def durability_from_config(
    config: PaiConfig, *, plugins: Plugins | None = None
) -> DurabilityEngine | None:
    """The engine ``[durability]`` configures, or ``None`` when the configuration has none.

    Example::

        # pai.toml:  [durability]
        #            engine = "dbos"
        #            system_database_url = "sqlite:///pai-runs.sqlite"
        engine = durability_from_config(load_config())
    """
    table = config.data.get("durability")
    if table is None:
        return None
    where = describe_source(_table_source(config))
    if not isinstance(table, Mapping):
        raise ConfigError(
            f"durability = {table!r} ({where}) is not a table; write [durability] with "
            'engine = "dbos" and that engine\'s options'
        )
    section: Mapping[str, Any] = table  # pyright: ignore[reportUnknownVariableType]
    name = section.get("engine")
    origin = describe_source(config.sources.get(("durability", "engine"), _table_source(config)))
    if name is None:
        raise ConfigError(
            f'[durability] ({where}) has no engine; add engine = "dbos" (pip install '
            "pai-durable-dbos), or remove the table to run without durability"
        )
    if not isinstance(name, str) or not name:
        raise ConfigError(
            f"durability.engine = {name!r} ({origin}) must be an engine's name, such as 'dbos'"
        )
    engines = (plugins if plugins is not None else get_plugins()).durability_engines()
    registration = engines.get(name)
    if registration is None:
        known = sorted(engines)
        distribution = KNOWN_ENGINES.get(name)
        install = f"pip install {distribution} for it; " if distribution else ""
        hint = did_you_mean(name, sorted({*engines, *KNOWN_ENGINES}))
        raise ConfigError(
            f"durability.engine = {name!r} ({origin}): no durability engine of that name is "
            f"installed; {install}{hint}installed engines: {', '.join(known) or 'none'} "
            f"(adapters: {', '.join(f'{k} from {v}' for k, v in KNOWN_ENGINES.items())})"
        )
    options = {key: value for key, value in section.items() if key != "engine"}
    base = source_folder(_table_source(config)) or Path.cwd()
    settings = DurabilitySettings(options=options, source=where, base=base)
    try:
        engine = registration.factory(settings)
    except ConfigError:
        raise
    except Exception as error:
        raise ConfigError(
            f"[durability] ({where}): the {name!r} engine of "
            f"{registration.distribution or 'a plugin'} could not be built: "
            f"{type(error).__name__}: {error}"
        ) from error
    return check_engine(engine, f"[durability] engine {name!r} ({where})")


def _table_source(config: PaiConfig) -> str:
    below = sorted({src for key, src in config.sources.items() if key[:1] == ("durability",)})
    return below[0] if below else (str(config.files[0]) if config.files else "code")


__all__ = ["KNOWN_ENGINES", "durability_from_config"]
