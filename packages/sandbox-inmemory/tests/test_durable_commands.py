"""Durable runs on the in-memory provider, which keeps no receipts of commands: its commands are
refused inside a durable run, unless at-least-once is allowed; outside durable runs nothing
changes."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from pai.core import AcquireInput
from pai.core.testing import durable_call
from pai.sandbox import (
    RESERVED,
    Sandbox,
    SandboxInputError,
    SandboxNotDurableError,
    SandboxSettings,
    create_sandbox,
    create_sandbox_session_manager,
    sandbox_capability,
)
from pai.sandbox.testing import RecordingProvider
from pai.sandbox_inmemory import InMemorySandboxProvider

pytestmark = pytest.mark.anyio


async def test_a_durable_run_is_refused_saying_why_and_how_to_allow_it(
    provider: InMemorySandboxProvider,
) -> None:
    box = create_sandbox(create_sandbox_session_manager(provider=provider).handle("t"))
    with durable_call("run/1/0"), pytest.raises(SandboxNotDurableError) as refused:
        await box.run_command("echo line >> log.txt")
    message = str(refused.value)
    assert "'inmemory'" in message
    assert "keeps no receipts" in message
    assert 'durable_commands="at-least-once"' in message
    assert "[capabilities.sandbox]" in message
    assert not await box.exists("log.txt")  # refused before anything ran


async def test_at_least_once_runs_the_command_again_on_replay(
    provider: InMemorySandboxProvider,
) -> None:
    binding = sandbox_capability(provider=provider, durable_commands="at-least-once")
    box = binding.acquire(AcquireInput("k", "sandbox", "thread", "t", None, "acme", None, None))
    assert isinstance(box, Sandbox)
    for _ in range(2):
        with durable_call("run/1/0"):
            result = await box.run_command("echo line >> log.txt; echo ok")
        assert (result.exit_code, result.stdout) == (0, "ok\n")
    assert await box.read_text("log.txt") == "line\nline\n"  # at least once: here, twice
    assert not await box.exists(RESERVED)  # no receipts, no claims


async def test_outside_durable_runs_a_command_is_one_call_to_the_provider(
    provider: InMemorySandboxProvider,
) -> None:
    recording = RecordingProvider(provider)
    box = create_sandbox(create_sandbox_session_manager(provider=recording).handle("t"))
    await box.run_command("true")
    recording.calls.clear()
    await box.run_command("echo plain")
    assert [call.operation for call in recording.calls] == ["run"]


def test_the_option_is_read_from_the_settings_and_checked() -> None:
    settings = SandboxSettings.model_validate({"durable_commands": "at-least-once"})
    assert settings.durable_commands == "at-least-once"
    assert SandboxSettings().durable_commands == "exactly-once"
    with pytest.raises(ValidationError, match="durable_commands"):
        SandboxSettings.model_validate({"durable_commands": "twice"})


def test_a_bad_value_in_code_is_refused_naming_the_option() -> None:
    with pytest.raises(SandboxInputError, match=r"^durable_commands must be"):
        sandbox_capability(provider=InMemorySandboxProvider(), durable_commands="twice")  # pyright: ignore[reportArgumentType]
