"""A sandbox in use is kept alive: ``timeout`` more once half of it has passed, never past
``max_lifetime``, and no request when no extension is due.

Time is simulated on both sides, so no test waits: the provider's lifetime clock is replaced, and
the emulator's sandbox is given the matching remaining life (``E2BEmulator.set_timeout``), or
ended (``expire``) when none is left, exactly as E2B would after that much time.

asyncio only: the e2b SDK is asyncio-only.
"""

from __future__ import annotations

import base64
import logging
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from e2b import AsyncSandbox
from e2b_helpers import provider_for, sandbox_of, sandbox_on

from pai.sandbox import ProviderOptionsError, SandboxInputError, SeedFile, build_provider
from pai.sandbox_e2b import E2BSandboxProvider, _lifetime, key_hash
from pai.sandbox_e2b.testing import E2BEmulator, EmulatedRequest

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("no_fault_left")]


class Clock:
    """The provider's lifetime clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 10_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(_lifetime, "clock", fake)
    return fake


async def settled(provider: E2BSandboxProvider, sandbox_id: str) -> None:
    """Wait for the extension in flight, if any (the operation that started it did not)."""
    extension = provider.lifetime(sandbox_id).extension
    if extension is not None:
        await extension


async def let_pass(
    emulator: E2BEmulator,
    clock: Clock,
    provider: E2BSandboxProvider,
    sandbox_id: str,
    seconds: float,
) -> None:
    """``seconds`` pass for the provider and for the sandbox (which ends when its life does)."""
    await settled(provider, sandbox_id)
    clock.now += seconds
    (held,) = [s for s in emulator.sandboxes() if s.sandbox_id == sandbox_id]
    left = (held.end_at - datetime.now(UTC)).total_seconds() - seconds
    if left > 0:
        emulator.set_timeout(sandbox_id, left)
    else:
        emulator.expire(sandbox_id)


def seconds_left(emulator: E2BEmulator, sandbox_id: str) -> float:
    (held,) = [s for s in emulator.sandboxes() if s.sandbox_id == sandbox_id]
    return (held.end_at - datetime.now(UTC)).total_seconds()


def extensions(emulator: E2BEmulator, sandbox_id: str) -> list[EmulatedRequest]:
    """The requests that gave the sandbox a new timeout after it was created."""
    return [
        r
        for r in emulator.requests(sandbox_id)
        if r.method == "POST" and r.path.endswith(("/connect", "/timeout"))
    ]


@pytest.fixture
async def key(emulator: E2BEmulator, namespace: str) -> AsyncIterator[str]:
    key = uuid.uuid4().hex
    yield key
    await provider_for(emulator, namespace).destroy(key)


async def test_a_sandbox_used_continuously_past_its_timeout_keeps_its_files(
    emulator: E2BEmulator, namespace: str, key: str, clock: Clock
) -> None:
    provider = provider_for(emulator, namespace, timeout=300)
    sandbox = sandbox_on(provider, key)
    await sandbox.write_file("work.txt", "an hour of work")
    sandbox_id = sandbox_of(emulator, namespace, key).sandbox_id
    for _ in range(12):  # 1,200 s of use, one command every 100 s
        await let_pass(emulator, clock, provider, sandbox_id, 100)
        result = await sandbox.run_command("cat work.txt")
        assert (result.stdout, result.environment_reset) == ("an hour of work", False)
    assert sandbox.environment_resets == 0
    assert sandbox_of(emulator, namespace, key).sandbox_id == sandbox_id


async def test_the_life_is_extended_once_per_half_timeout_and_never_when_not_due(
    emulator: E2BEmulator, namespace: str, key: str, clock: Clock
) -> None:
    provider = provider_for(emulator, namespace, timeout=300)
    sandbox = sandbox_on(provider, key)
    await sandbox.run_command("true")
    sandbox_id = sandbox_of(emulator, namespace, key).sandbox_id

    await let_pass(emulator, clock, provider, sandbox_id, 140)  # under half of it: nothing due
    await sandbox.write_file("a.txt", "a")
    await sandbox.run_command("cat a.txt")
    assert await sandbox.read_text("a.txt") == "a"
    assert extensions(emulator, sandbox_id) == []

    await let_pass(emulator, clock, provider, sandbox_id, 20)  # 160 s: due, one extension in all
    for _ in range(5):
        await sandbox.run_command("true")
    await settled(provider, sandbox_id)
    (extension,) = extensions(emulator, sandbox_id)
    assert extension.path.endswith("/connect")  # a connect never shortens another's timeout
    assert (extension.body or {}).get("timeout") == 300
    assert seconds_left(emulator, sandbox_id) > 250

    await let_pass(emulator, clock, provider, sandbox_id, 140)
    await sandbox.run_command("true")
    assert len(extensions(emulator, sandbox_id)) == 1


async def test_the_command_does_not_wait_for_the_extension(
    emulator: E2BEmulator, namespace: str, key: str, clock: Clock
) -> None:
    provider = provider_for(emulator, namespace, timeout=300)
    sandbox = sandbox_on(provider, key)
    await sandbox.run_command("true")
    sandbox_id = sandbox_of(emulator, namespace, key).sandbox_id
    await let_pass(emulator, clock, provider, sandbox_id, 200)
    emulator.faults.delay("sandboxes.connect", 10, sandbox_id=sandbox_id)
    assert (await sandbox.run_command("echo done")).stdout == "done\n"
    assert provider.lifetime(sandbox_id).extension is not None  # still held by the emulator


async def test_max_lifetime_bounds_every_extension(
    emulator: E2BEmulator, namespace: str, key: str, clock: Clock
) -> None:
    provider = provider_for(emulator, namespace, timeout=300, max_lifetime=500)
    sandbox = sandbox_on(provider, key, SeedFile("/workspace/seed.txt", "seed"))
    await sandbox.write_file("work.txt", "work")
    sandbox_id = sandbox_of(emulator, namespace, key).sandbox_id
    for _ in range(4):  # to 400 s: extended at 200 s up to 500 s, and no further
        await let_pass(emulator, clock, provider, sandbox_id, 100)
        assert not (await sandbox.run_command("cat work.txt")).environment_reset
    assert [(r.body or {}).get("timeout") for r in extensions(emulator, sandbox_id)] == [300]

    await let_pass(emulator, clock, provider, sandbox_id, 100)  # 500 s: the end, however busy
    result = await sandbox.run_command("ls")
    assert result.environment_reset
    assert result.stdout == "seed.txt\n"


async def test_max_lifetime_shorter_than_the_timeout_is_the_first_timeout(
    emulator: E2BEmulator, namespace: str, key: str, clock: Clock
) -> None:
    instance = await provider_for(emulator, namespace, timeout=300, max_lifetime=120).create(key)
    (create,) = [
        r
        for r in emulator.requests()
        if r.method == "POST"
        and r.path == "/v2/sandboxes"
        and key_hash(key) in str((r.body or {}).get("metadata"))
    ]
    assert (create.body or {}).get("timeout") == 120
    assert seconds_left(emulator, instance.instance_id) <= 120


async def found_key_created(emulator: E2BEmulator, namespace: str, key: str, ago: float) -> str:
    """A sandbox of ``key`` made ``ago`` seconds ago (by its ``pai.created`` metadata)."""
    created = (datetime.now(UTC) - timedelta(seconds=ago)).isoformat()
    sandbox = await AsyncSandbox.create(
        timeout=600,
        metadata={
            "pai.namespace": namespace,
            "pai.key-sha256": key_hash(key),
            "pai.key-b64": base64.b64encode(key.encode()).decode(),
            "pai.key": key,
            "pai.capability": "sandbox",
            "pai.created": created,
        },
        api_key=emulator.api_key,
        api_url=emulator.url,
        sandbox_url=emulator.url,
    )
    return sandbox.sandbox_id


async def test_a_found_sandbox_counts_its_age_toward_max_lifetime(
    emulator: E2BEmulator, namespace: str, key: str, clock: Clock
) -> None:
    sandbox_id = await found_key_created(emulator, namespace, key, ago=3_600)
    assert await provider_for(emulator, namespace, max_lifetime=1_800).find(key) is None

    found = await provider_for(emulator, namespace, timeout=300, max_lifetime=3_700).find(key)
    assert found is not None
    assert found.instance_id == sandbox_id
    (connect,) = extensions(emulator, sandbox_id)
    timeout = (connect.body or {}).get("timeout")
    assert isinstance(timeout, int)
    assert 90 <= timeout <= 100


async def test_a_sandbox_found_elsewhere_is_kept_alive_from_its_connect(
    emulator: E2BEmulator, namespace: str, key: str, clock: Clock
) -> None:
    first = provider_for(emulator, namespace, timeout=300)
    await first.create(key)
    sandbox_id = sandbox_of(emulator, namespace, key).sandbox_id
    await let_pass(emulator, clock, first, sandbox_id, 250)  # nearly over for its maker
    provider = provider_for(emulator, namespace, timeout=300)  # as in another process
    other = sandbox_on(provider, key)
    await other.run_command("true")  # finds it: the connect gives it 300 s
    assert len(extensions(emulator, sandbox_id)) == 1

    await let_pass(emulator, clock, provider, sandbox_id, 100)
    await other.run_command("true")
    assert len(extensions(emulator, sandbox_id)) == 1
    await let_pass(emulator, clock, provider, sandbox_id, 100)
    await other.run_command("true")
    await settled(provider, sandbox_id)
    assert len(extensions(emulator, sandbox_id)) == 2
    assert seconds_left(emulator, sandbox_id) > 250


async def test_a_failed_extension_is_logged_and_tried_again_by_the_next_operation(
    emulator: E2BEmulator,
    namespace: str,
    key: str,
    clock: Clock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    provider = provider_for(emulator, namespace, timeout=300)
    sandbox = sandbox_on(provider, key)
    await sandbox.run_command("true")
    sandbox_id = sandbox_of(emulator, namespace, key).sandbox_id
    await let_pass(emulator, clock, provider, sandbox_id, 200)
    emulator.faults.fail("sandboxes.connect", 503, times=4, sandbox_id=sandbox_id)  # + SDK's
    with caplog.at_level(logging.WARNING, logger="pai.sandbox_e2b"):
        assert (await sandbox.run_command("echo still")).stdout == "still\n"
        await settled(provider, sandbox_id)
    assert "could not extend the life of E2B sandbox" in caplog.text
    assert "503" in caplog.text
    assert emulator.api_key not in caplog.text
    assert seconds_left(emulator, sandbox_id) < 120

    await sandbox.run_command("true")  # tries again, and succeeds
    await settled(provider, sandbox_id)
    assert seconds_left(emulator, sandbox_id) > 250


async def test_a_sandbox_at_the_plans_longest_life_is_no_longer_extended(
    emulator: E2BEmulator,
    namespace: str,
    key: str,
    clock: Clock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    provider = provider_for(emulator, namespace, timeout=300)
    sandbox = sandbox_on(provider, key)
    await sandbox.run_command("true")
    sandbox_id = sandbox_of(emulator, namespace, key).sandbox_id
    await let_pass(emulator, clock, provider, sandbox_id, 200)
    emulator.faults.fail(
        "sandboxes.connect", 400, message="Max instance length exceeded", sandbox_id=sandbox_id
    )
    with caplog.at_level(logging.WARNING, logger="pai.sandbox_e2b"):
        await sandbox.run_command("true")
        await settled(provider, sandbox_id)
    assert "is no longer kept alive" in caplog.text
    assert "Max instance length exceeded" in caplog.text
    await sandbox.run_command("true")
    await settled(provider, sandbox_id)
    assert len(extensions(emulator, sandbox_id)) == 1  # the refused one only


@pytest.mark.parametrize("value", [0, -5, 1.5, "600", True])
def test_a_bad_max_lifetime_is_refused_naming_it(value: object) -> None:
    with pytest.raises(SandboxInputError, match="max_lifetime"):
        E2BSandboxProvider(api_key="e2b_key", max_lifetime=value)  # type: ignore[arg-type]


def test_max_lifetime_in_the_options_reaches_the_provider() -> None:
    provider = build_provider("e2b", {"max_lifetime": 3_600, "api_key": "e2b_key"})
    assert isinstance(provider, E2BSandboxProvider)
    assert provider.max_lifetime == 3_600
    with pytest.raises(ProviderOptionsError, match="max_lifetime"):
        build_provider("e2b", {"max_lifetime": 0, "api_key": "e2b_key"})
