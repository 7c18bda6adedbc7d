"""Live checks: ``pai config --check --probe`` asks each configured thing whether it answers.

A :class:`Probe` is a name and an async ``check`` that returns when the thing answers and raises
a :class:`~pai.core.PaiError` saying what is wrong (and how to fix it) when it does not. The
core probes the configured ``[model]`` (a minimal request); plugins add theirs through the
``pai_probes(config)`` hook (pai-sandbox probes the configured sandbox provider: the engine
answers, the image exists)::

    from pai.core import PaiError
    from pai.core.ext import Probe, hookimpl

    @hookimpl
    def pai_probes(config):
        section = config.capability("acme.vault")
        if section is None:
            return []

        async def vault_answers() -> None:
            if not await ping(section["url"]):
                raise PaiError(f"the vault at {section['url']} does not answer; is it running?")

        return [Probe(name="acme.vault", check=vault_answers)]

Every probe runs at once with its own time limit; a probe that raises anything else, or does
not finish in time, is reported as failed too (never a traceback). Messages are masked: no
secret is printed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, cast

from pai.core._errors import PaiError

if TYPE_CHECKING:
    from pai.core._config import PaiConfig
    from pai.core._model import Model
    from pai.core._plugins import Plugins

DEFAULT_PROBE_TIMEOUT = 10.0
"""Seconds one probe may take by default (``pai config --check --probe --probe-timeout``)."""

MAX_ERROR_CHARS = 4000
"""A probe's error is cut to this many characters (a server may answer with megabytes)."""

MAX_NAME_CHARS = 80
"""A probe's name is shown on one line of at most this many characters."""


@dataclass(frozen=True, slots=True)
class Probe:
    """One live check ``pai config --check --probe`` runs.

    ``name`` says what is checked (``model``, ``sandbox``, ``acme.vault``), one line per probe;
    ``check()`` returns when the thing answers and raises a :class:`~pai.core.PaiError` whose
    message says what is wrong and what to do (without secrets) when it does not. Plugins return
    probes from their ``pai_probes(config)`` hook.
    """

    name: str
    check: Callable[[], Awaitable[None]]


ProbeStatus = Literal["ok", "failed"]


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """What one probe found: ``ok``, or ``failed`` with the (masked) error."""

    name: str
    status: ProbeStatus
    seconds: float
    error: str | None = None


def model_probe(config: PaiConfig, *, plugins: Plugins) -> Probe | None:
    """The probe of the ``[model]`` configured (a one-word request), or ``None`` without one."""
    from pai.core._model_config import model_from_config

    table = config.data.get("model")
    if not isinstance(table, Mapping) or not {"provider", "name"} <= set(
        cast("Mapping[str, object]", table)
    ):
        return None  # no model configured (only options of providers, for models in code)

    async def check() -> None:
        from pai.core._messages import UserMessage
        from pai.core._model import ModelRequest, aclose_if_closable

        model = model_from_config(config, plugins=plugins)
        if model is None:  # the table was checked above: never, short of a bug
            raise PaiError("[model] configures no model to probe")
        where = _model_where(config, model)
        try:
            await model.request(
                ModelRequest(
                    instructions="This is a connectivity check. Reply with the word: ok",
                    messages=[UserMessage(content="ping")],
                    tools=(),
                    step=1,
                )
            )
        except PaiError as error:
            raise PaiError(f"{where} did not answer: {error}") from error
        finally:
            await aclose_if_closable(model)

    return Probe(name="model", check=check)


def _model_where(config: PaiConfig, model: Model) -> str:
    from pai.core._secrets import mask_url

    section = cast("dict[str, object]", config.data.get("model") or {})
    spec = f"{section.get('provider')}:{section.get('name')}"
    base_url: object = getattr(model, "base_url", None)
    at = f" at {mask_url(base_url)}" if isinstance(base_url, str) and base_url else ""
    return f"the model {spec}{at} ([model])"


def collect_probes(config: PaiConfig, *, plugins: Plugins) -> list[Probe | ProbeResult]:
    """The core's model probe and every plugin's (``pai_probes`` hook), in that order. A hook
    that raises or returns something else than probes is a failed :class:`ProbeResult` naming
    the plugin, so the others still run."""
    found: list[Probe | ProbeResult] = []
    model = model_probe(config, plugins=plugins)
    if model is not None:
        found.append(model)
    caller = plugins.manager.hook.pai_probes
    for impl in caller.get_hookimpls():  # in registration order
        distribution = plugins.distribution_of(impl.plugin_name)
        label = f"plugin {impl.plugin_name!r} ({distribution})"
        try:
            arguments = {"config": config}
            records = impl.function(*(arguments[name] for name in impl.argnames))
            probes = list(cast("Sequence[object]", records or ()))
        except Exception as error:
            found.append(
                _hook_failed(
                    impl.plugin_name,
                    f"the pai_probes hook of {label} raised {type(error).__name__}: {error}; "
                    f"fix or uninstall {distribution}",
                )
            )
            continue
        found.extend(
            probe
            if isinstance(probe, Probe)
            else _hook_failed(
                impl.plugin_name,
                f"the pai_probes hook of {label} returned {probe!r}, not a Probe; that is a bug "
                f"in {distribution}",
            )
            for probe in probes
        )
    return found


def _hook_failed(plugin: str, error: str) -> ProbeResult:
    """What a plugin's broken ``pai_probes`` hook gives: a failed result under the plugin's name."""
    return ProbeResult(name=plugin, status="failed", seconds=0.0, error=error)


async def run_probes(
    probes: Sequence[Probe | ProbeResult],
    *,
    timeout: float = DEFAULT_PROBE_TIMEOUT,
    secrets: Sequence[str] = (),
) -> list[ProbeResult]:
    """Run every probe at once, each within ``timeout`` seconds; results in the given order
    (a :class:`ProbeResult` given is passed through). Error texts are masked."""
    import anyio

    from pai.core._secrets import mask_text

    if not (timeout > 0 and math.isfinite(timeout)):
        raise ValueError(f"the probe timeout must be a positive number of seconds, not {timeout}")
    results: list[ProbeResult | None] = [
        probe if isinstance(probe, ProbeResult) else None for probe in probes
    ]

    async def one(index: int, probe: Probe) -> None:
        started = time.monotonic()
        error: str | None = None
        try:
            with anyio.fail_after(timeout):
                await probe.check()
        except PaiError as failure:  # before TimeoutError: a model's timeout is both
            error = str(failure)
        except TimeoutError:
            error = (
                f"no answer within {timeout:g} s (the probe's time limit; a longer one: "
                "--probe-timeout SECONDS)"
            )
        except Exception as failure:  # a bug in the probe: reported, never a traceback
            error = f"the probe raised {type(failure).__name__}: {failure}"
        results[index] = ProbeResult(
            name=_one_line(str(probe.name), MAX_NAME_CHARS),
            status="ok" if error is None else "failed",
            seconds=round(time.monotonic() - started, 3),
            error=None if error is None else _bounded(mask_text(error, secrets)),
        )

    async with anyio.create_task_group() as group:
        for index, probe in enumerate(probes):
            if isinstance(probe, Probe):
                group.start_soon(one, index, probe)
    return [result for result in results if result is not None]


def _one_line(text: str, limit: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _bounded(text: str) -> str:
    if len(text) <= MAX_ERROR_CHARS:
        return text
    return f"{text[:MAX_ERROR_CHARS]}... (cut: {len(text):,} characters in all)"


__all__ = [
    "DEFAULT_PROBE_TIMEOUT",
    "MAX_ERROR_CHARS",
    "MAX_NAME_CHARS",
    "Probe",
    "ProbeResult",
    "ProbeStatus",
    "collect_probes",
    "model_probe",
    "run_probes",
]
