"""pai-durable-temporal as a plugin: registers the ``temporal`` durability engine, which
``[durability] engine = "temporal"`` selects. Nothing imports this module; loading it imports
neither Temporal's SDK nor the engine until a runtime is built from such a configuration (and
building the engine connects to nothing: its start does)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pai.core.ext import hookimpl

if TYPE_CHECKING:
    from pai.core.ext import DurabilityEngine, DurabilityRegistration, DurabilitySettings


def _engine(settings: DurabilitySettings) -> DurabilityEngine:
    from pydantic import ValidationError

    from pai.core import ConfigError
    from pai.core.ext import did_you_mean
    from pai.durable_temporal._engine import TemporalEngine
    from pai.durable_temporal._options import TemporalOptions

    try:
        parsed = TemporalOptions.model_validate(dict(settings.options))
    except ValidationError as error:
        lines: list[str] = []
        keys = sorted(TemporalOptions.model_fields)
        for problem in error.errors():
            key = ".".join(("durability", *(str(part) for part in problem["loc"])))
            secret = problem["loc"][:1] == ("api_key",)
            value = "***" if secret else problem.get("input")
            what = problem["msg"].removeprefix("Value error, ")
            if problem["type"] == "extra_forbidden":
                what = "unknown key" + did_you_mean(
                    str(problem["loc"][-1]), keys, before="; ", after=""
                )
            lines.append(f"{key} = {value!r}: {what}" if not secret else f"{key}: {what}")
        raise ConfigError(
            f'[durability] engine = "temporal" ({settings.source}) is misconfigured:\n  '
            + "\n  ".join(lines)
            + f"\nIts keys: {', '.join(keys)} (see the pai-durable-temporal README)"
        ) from None
    return TemporalEngine(parsed)


@hookimpl
def pai_durability_engines() -> list[DurabilityRegistration]:
    from pai.core.ext import DurabilityRegistration

    return [
        DurabilityRegistration(
            name="temporal",
            factory=_engine,
            description="Temporal: runs as workflows on a Temporal service, steps as activities "
            "any worker can take over",
            install_hint="pip install pai-durable-temporal",
        )
    ]
