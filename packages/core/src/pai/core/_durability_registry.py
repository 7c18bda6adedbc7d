"""How a durability engine is registered by its plugin, and what its factory is given."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pai.core._durability import DurabilityEngine


@dataclass(frozen=True, slots=True)
class DurabilitySettings:
    """What ``[durability]`` configures for an engine: its ``options`` (the table without
    ``engine``), where they were set (``source``, for messages) and the folder relative paths in
    them start from (``base``: the configuration file's folder)."""

    options: Mapping[str, Any]
    source: str
    base: Path


@dataclass(frozen=True, slots=True)
class DurabilityRegistration:
    """A durability engine, as its plugin registers it; ``[durability] engine`` picks it by
    ``name``. ``factory`` builds the engine from the settings, and raises a
    :class:`~pai.core.ConfigError` naming the key for an option it refuses.

    Example::

        @hookimpl
        def pai_durability_engines() -> list[DurabilityRegistration]:
            return [
                DurabilityRegistration(
                    name="dbos",
                    factory=engine_from_settings,
                    description="DBOS on SQLite or PostgreSQL",
                    install_hint="pip install pai-durable-dbos",
                )
            ]
    """

    name: str
    factory: Callable[[DurabilitySettings], DurabilityEngine]
    description: str = ""
    install_hint: str = ""
    distribution: str = field(default="")
    """Filled in by the plugin manager: the distribution whose plugin registered it."""


__all__ = ["DurabilityRegistration", "DurabilitySettings"]
