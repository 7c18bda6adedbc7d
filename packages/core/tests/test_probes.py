"""Probes: the live checks of ``pai config --check --probe``, run each within its time limit."""

from __future__ import annotations

import time
from collections.abc import Sequence

import anyio
import anyio.lowlevel
import pytest

from pai.core import PaiConfig, PaiError
from pai.core._probes import ProbeResult, collect_probes, run_probes
from pai.core.ext import Plugins, Probe, hookimpl

pytestmark = pytest.mark.usefixtures("fresh_plugins")


async def _fine() -> None:
    await anyio.lowlevel.checkpoint()


async def _refused() -> None:
    raise PaiError("the engine at unix:///nowhere.sock refused the connection; start it")


async def _hangs() -> None:
    await anyio.sleep(60)


async def _buggy() -> None:
    raise KeyError("oops")


@pytest.mark.anyio
async def test_every_probe_runs_and_reports_in_order_within_its_time_limit() -> None:
    probes = [
        Probe(name="fine", check=_fine),
        Probe(name="refused", check=_refused),
        Probe(name="hangs", check=_hangs),
        Probe(name="buggy", check=_buggy),
    ]
    started = time.monotonic()

    results = await run_probes(probes, timeout=0.5)

    assert time.monotonic() - started < 5  # at once, and the hanging one was stopped
    assert [(r.name, r.status) for r in results] == [
        ("fine", "ok"),
        ("refused", "failed"),
        ("hangs", "failed"),
        ("buggy", "failed"),
    ]
    assert results[0].error is None
    assert results[1].error == (
        "the engine at unix:///nowhere.sock refused the connection; start it"
    )
    assert results[2].error is not None
    assert "no answer within 0.5 s" in results[2].error
    assert results[3].error == "the probe raised KeyError: 'oops'"


@pytest.mark.anyio
async def test_probe_errors_never_show_a_secret() -> None:
    key = "sk-proj-Zq81xTfA0b9Kc2Lm"

    async def leaks() -> None:
        raise PaiError(f"the server postgresql://me:hunter2pw@db/x refused the key {key}")

    (result,) = await run_probes([Probe(name="leaky", check=leaks)], timeout=5)

    assert result.error is not None
    assert key not in result.error
    assert "hunter2pw" not in result.error
    assert "postgresql://me:***@db/x" in result.error


@pytest.mark.anyio
async def test_a_probe_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive number of seconds"):
        await run_probes([Probe(name="fine", check=_fine)], timeout=0)


class _Plugin:
    def __init__(self, probes: Sequence[object] | Exception) -> None:
        self.probes = probes

    @hookimpl
    def pai_probes(self, config: PaiConfig) -> Sequence[object]:
        if isinstance(self.probes, Exception):
            raise self.probes
        assert isinstance(config, PaiConfig)
        return self.probes


def test_plugins_probes_are_collected_and_a_broken_hook_is_a_failed_result() -> None:
    plugins = Plugins()
    plugins.register(_Plugin([Probe(name="vault", check=_fine)]), name="vault", distribution="v")
    plugins.register(_Plugin(RuntimeError("no")), name="broken", distribution="b")
    plugins.register(_Plugin(["not a probe"]), name="junk", distribution="j")

    found = collect_probes(PaiConfig(), plugins=plugins)

    assert [item.name for item in found] == ["vault", "broken", "junk"]
    assert isinstance(found[0], Probe)
    broken, junk = found[1], found[2]
    assert isinstance(broken, ProbeResult)
    assert broken.status == "failed"
    assert broken.error is not None
    assert "raised RuntimeError: no" in broken.error
    assert isinstance(junk, ProbeResult)
    assert junk.error is not None
    assert "'not a probe', not a Probe" in junk.error


def test_no_model_configured_means_no_model_probe() -> None:
    assert collect_probes(PaiConfig(), plugins=Plugins()) == []


def test_model_options_alone_configure_no_model_to_probe() -> None:
    config = PaiConfig(data={"model": {"openai": {"base_url": "http://127.0.0.1:9/v1"}}})

    assert collect_probes(config, plugins=Plugins()) == []


@pytest.mark.anyio
async def test_a_huge_error_and_a_multi_line_name_are_bounded() -> None:
    async def floods() -> None:
        raise PaiError("x" * 1_000_000)

    (result,) = await run_probes([Probe(name="two\nlines" + "n" * 500, check=floods)], timeout=5)

    assert "\n" not in result.name
    assert len(result.name) == 80
    assert result.error is not None
    assert len(result.error) < 4100
    assert result.error.endswith("(cut: 1,000,000 characters in all)")
