"""pai-durable-dbos as a plugin: registers the ``dbos`` durability engine, which ``[durability]
engine = "dbos"`` selects. Nothing imports this module; loading it imports neither DBOS nor the
engine until a runtime is built from such a configuration."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pai.core.ext import hookimpl

if TYPE_CHECKING:
    from pai.core.ext import DurabilityEngine, DurabilityRegistration, DurabilitySettings


def _engine(settings: DurabilitySettings) -> DurabilityEngine:
    from pydantic import ValidationError

    from pai.core import ConfigError
    from pai.core.ext import did_you_mean
    from pai.durable_dbos._engine import DbosEngine
    from pai.durable_dbos._options import DbosOptions, mask_url

    options = dict(settings.options)
    url = options.get("system_database_url")
    if isinstance(url, str) and url.startswith("sqlite:///") and not url.startswith("sqlite:////"):
        # A relative file is taken from the configuration file's folder, as [storage] url is.
        options["system_database_url"] = f"sqlite:///{settings.base / url[len('sqlite:///') :]}"
    try:
        parsed = DbosOptions.model_validate(options)
    except ValidationError as error:
        lines: list[str] = []
        keys = sorted(DbosOptions.model_fields)
        for problem in error.errors():
            key = ".".join(("durability", *(str(part) for part in problem["loc"])))
            if problem["type"] == "missing":
                lines.append(
                    f"{key}: required, and not set (e.g. "
                    f'{problem["loc"][-1]} = "sqlite:///pai-runs.sqlite")'
                )
                continue
            value = problem.get("input")
            shown = mask_url(value) if isinstance(value, str) else value
            what = problem["msg"].removeprefix("Value error, ")
            if problem["type"] == "extra_forbidden":
                what = "unknown key" + did_you_mean(
                    str(problem["loc"][-1]), keys, before="; ", after=""
                )
            lines.append(f"{key} = {shown!r}: {what}")
        raise ConfigError(
            f'[durability] engine = "dbos" ({settings.source}) is misconfigured:\n  '
            + "\n  ".join(lines)
            + f"\nIts keys: {', '.join(keys)} (see the pai-durable-dbos README)"
        ) from None
    return DbosEngine(parsed)


@hookimpl
def pai_durability_engines() -> list[DurabilityRegistration]:
    from pai.core.ext import DurabilityRegistration

    return [
        DurabilityRegistration(
            name="dbos",
            factory=_engine,
            description="DBOS: runs recorded in SQLite (one machine) or PostgreSQL (many)",
            install_hint="pip install pai-durable-dbos",
        )
    ]
