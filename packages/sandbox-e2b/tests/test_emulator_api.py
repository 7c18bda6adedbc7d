"""The control plane as strict as E2B's API: timeouts against the plan's maximum, templates,
lifetimes that never pass the plan's maximum from the sandbox's start.

asyncio only: the e2b SDK is asyncio-only.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import httpx
import pytest
from e2b import AsyncSandbox, SandboxException, SandboxNotFoundException
from e2b_helpers import options

from pai.sandbox_e2b.testing import E2BEmulator

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def pro() -> Iterator[E2BEmulator]:
    """An emulator of E2B's Pro plan (24 hours) with a second template."""
    with E2BEmulator(max_timeout=86_400, templates=("base", "my-template")) as emulator:
        yield emulator


@pytest.mark.parametrize("timeout", [0, -5])
async def test_a_timeout_of_zero_or_less_is_refused_on_create(
    emulator: E2BEmulator, timeout: int
) -> None:
    with pytest.raises(SandboxException, match=r"^400: Timeout must be greater than 0$"):
        await AsyncSandbox.create(timeout=timeout, **options(emulator))


async def test_a_timeout_beyond_the_plans_maximum_is_refused_on_create_and_connect(
    emulator: E2BEmulator, raw: AsyncSandbox
) -> None:
    assert emulator.max_timeout == 3600
    with pytest.raises(SandboxException, match=r"^400: Timeout cannot be greater than 1 hours$"):
        await AsyncSandbox.create(timeout=3601, **options(emulator))
    with pytest.raises(SandboxException, match=r"^400: Timeout cannot be greater than 1 hours$"):
        await AsyncSandbox.connect(raw.sandbox_id, timeout=3601, **options(emulator))


async def test_a_pro_plan_takes_a_day_and_not_a_second_more(pro: E2BEmulator) -> None:
    sandbox = await AsyncSandbox.create(timeout=86_400, **options(pro))
    try:
        with pytest.raises(SandboxException, match="Timeout cannot be greater than 24 hours"):
            await AsyncSandbox.create(timeout=86_401, **options(pro))
    finally:
        await sandbox.kill()


async def test_set_timeout_never_takes_a_sandbox_past_the_maximum_from_its_start(
    emulator: E2BEmulator, raw: AsyncSandbox
) -> None:
    await raw.set_timeout(10_000)  # E2B's API clamps it, without an error
    (held,) = [s for s in emulator.sandboxes() if s.sandbox_id == raw.sandbox_id]
    info = await raw.get_info()
    assert held.end_at - info.started_at <= timedelta(seconds=3600)
    assert held.end_at - info.started_at > timedelta(seconds=3590)


async def test_set_timeout_on_a_paused_sandbox_is_not_found(
    emulator: E2BEmulator, raw: AsyncSandbox
) -> None:
    emulator.pause(raw.sandbox_id)
    with pytest.raises(SandboxNotFoundException):
        await raw.set_timeout(60)


async def test_an_unknown_template_is_not_found(emulator: E2BEmulator) -> None:
    with pytest.raises(SandboxException, match=r"^404: template 'no-such-template' not found$"):
        await AsyncSandbox.create(template="no-such-template", timeout=60, **options(emulator))


async def test_a_template_the_emulator_was_given_exists(pro: E2BEmulator) -> None:
    sandbox = await AsyncSandbox.create(template="my-template", timeout=60, **options(pro))
    try:
        assert (await sandbox.get_info()).template_id == "my-template"
    finally:
        await sandbox.kill()


async def test_a_sandbox_made_without_a_timeout_lives_the_default_fifteen_seconds(
    emulator: E2BEmulator,
) -> None:
    async with httpx.AsyncClient(base_url=emulator.url) as client:
        made = await client.post(
            "/v2/sandboxes",
            json={"templateID": "base"},
            headers={"X-API-KEY": emulator.api_key},
        )
    assert made.status_code == 201
    sandbox_id = made.json()["sandboxID"]
    try:
        (held,) = [s for s in emulator.sandboxes() if s.sandbox_id == sandbox_id]
        info = await AsyncSandbox.get_info(sandbox_id, **options(emulator))
        assert held.end_at - info.started_at == timedelta(seconds=15)
    finally:
        emulator.remove(sandbox_id)


async def test_a_missing_sandbox_is_named_as_e2b_names_it(emulator: E2BEmulator) -> None:
    with pytest.raises(SandboxNotFoundException):
        await AsyncSandbox.connect("inothere", timeout=60, **options(emulator))
    async with httpx.AsyncClient(base_url=emulator.url) as client:
        answer = await client.get("/sandboxes/inothere", headers={"X-API-KEY": emulator.api_key})
    assert (answer.status_code, answer.json()) == (
        404,
        {
            "code": 404,
            "message": "Sandbox \"inothere\" doesn't exist or you don't have access to it",
        },
    )


@pytest.mark.parametrize(
    ("arguments", "complaint"),
    [
        ({"max_timeout": 5000}, "whole hours"),
        ({"max_timeout": 0}, "max_timeout must be"),
        ({"default_timeout": 7200}, "beyond max_timeout"),
        ({"templates": "base"}, "collection of names"),
        ({"templates": ()}, "at least one"),
    ],
)
def test_an_emulator_made_with_impossible_settings_is_refused(
    arguments: dict[str, object], complaint: str
) -> None:
    with pytest.raises(ValueError, match=complaint):
        E2BEmulator(**arguments)  # type: ignore[arg-type]
