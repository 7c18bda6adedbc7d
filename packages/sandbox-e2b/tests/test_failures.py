"""E2B's failure modes, injected with the emulator's faults: retried where retrying helps, each
else one E2BError subclass naming the cause and the fix (never the API key), and a sandbox
that still runs never given up for a transient "not found".

asyncio only: the e2b SDK is asyncio-only.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from e2b_helpers import provider_for, sandbox_ids, sandbox_on

from pai.sandbox import SeedFile
from pai.sandbox.provider import FileWrite, SandboxInstance
from pai.sandbox_e2b import (
    E2BAuthenticationError,
    E2BError,
    E2BRateLimitError,
    E2BSandboxBusyError,
    E2BSandboxProvider,
    E2BServiceBusyError,
    E2BTemplateNotFoundError,
    E2BTimeoutLimitError,
    E2BUnreachableError,
    key_hash,
)
from pai.sandbox_e2b.testing import E2BEmulator, EmulatedRequest

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("no_fault_left")]

#: The SDK's own attempts at a control-plane request answered 429, 502, 503 or 504.
SDK_ATTEMPTS = 4


def creates_of(emulator: E2BEmulator, key: str) -> list[EmulatedRequest]:
    return [
        r
        for r in emulator.requests()
        if r.method == "POST"
        and r.path == "/v2/sandboxes"
        and key_hash(key) in str((r.body or {}).get("metadata"))
    ]


async def run(instance: SandboxInstance, command: str) -> str:
    result = await instance.run(
        command, cwd="/workspace", env={}, stdin=None, timeout=30, output_limit=4096
    )
    return result.stdout.decode()


@pytest.fixture
def key() -> str:
    return uuid.uuid4().hex


@pytest.fixture
async def provider(
    emulator: E2BEmulator, namespace: str, key: str
) -> AsyncIterator[E2BSandboxProvider]:
    provider = provider_for(emulator, namespace)
    yield provider
    emulator.faults.clear()
    await provider.destroy(key)


@pytest.fixture
async def instance(provider: E2BSandboxProvider, key: str) -> SandboxInstance:
    return await provider.create(key)


# -- the control plane: what each refusal becomes ----------------------------------------------


async def test_the_teams_sandbox_limit_is_a_rate_limit_error_saying_what_to_do(
    emulator: E2BEmulator, provider: E2BSandboxProvider, key: str
) -> None:
    emulator.faults.fail("sandboxes.create", 429, times=SDK_ATTEMPTS)
    with pytest.raises(E2BRateLimitError) as raised:
        await provider.create(key)
    message = str(raised.value)
    assert "concurrent" in message
    assert "pai sandbox prune" in message
    assert "https://e2b.dev/docs/billing" in message
    assert emulator.api_key not in message
    assert sandbox_ids(emulator, provider.namespace, key) == []


async def test_the_api_rate_limit_is_a_rate_limit_error(
    emulator: E2BEmulator, provider: E2BSandboxProvider
) -> None:
    emulator.faults.fail("sandboxes.list", 429, times=SDK_ATTEMPTS)
    with pytest.raises(E2BRateLimitError, match="rate limit") as raised:
        await provider.list_instances()
    assert emulator.api_key not in str(raised.value)


async def test_an_api_with_no_capacity_is_a_service_busy_error(
    emulator: E2BEmulator, provider: E2BSandboxProvider, key: str
) -> None:
    emulator.faults.fail("sandboxes.create", 503, times=SDK_ATTEMPTS)
    with pytest.raises(E2BServiceBusyError, match=r"503.*try again in a moment"):
        await provider.create(key)


async def test_a_bad_gateway_on_kill_is_a_service_busy_error_and_the_sandbox_stays(
    emulator: E2BEmulator, provider: E2BSandboxProvider, key: str, instance: SandboxInstance
) -> None:
    emulator.faults.fail("sandboxes.kill", 502, times=SDK_ATTEMPTS)
    with pytest.raises(E2BServiceBusyError, match="502"):
        await provider.destroy(key)
    assert sandbox_ids(emulator, provider.namespace, key) == [instance.instance_id]


async def test_a_connect_during_a_state_change_is_retried(
    emulator: E2BEmulator, provider: E2BSandboxProvider, key: str, instance: SandboxInstance
) -> None:
    emulator.faults.fail("sandboxes.connect", 409, times=2, sandbox_id=instance.instance_id)
    found = await provider_for(emulator, provider.namespace).find(key)
    assert found is not None
    assert found.instance_id == instance.instance_id
    connects = [r for r in emulator.requests(instance.instance_id) if r.path.endswith("/connect")]
    assert len(connects) == 3


async def test_a_sandbox_that_stays_in_a_state_change_is_a_sandbox_busy_error(
    emulator: E2BEmulator, provider: E2BSandboxProvider, instance: SandboxInstance
) -> None:
    await run(instance, "echo kept > kept.txt")
    emulator.answer_not_found(instance.instance_id)
    emulator.faults.fail(
        "sandboxes.connect",
        409,
        times=None,
        sandbox_id=instance.instance_id,
        message=f'Sandbox "{instance.instance_id}" is being paused',
    )
    with pytest.raises(E2BSandboxBusyError, match="being paused"):
        await run(instance, "cat kept.txt")
    emulator.faults.clear()
    assert await run(instance, "cat kept.txt") == "kept\n"


async def test_a_timeout_beyond_the_plan_says_the_plans_maximum_and_is_not_retried(
    emulator: E2BEmulator, namespace: str, key: str
) -> None:
    provider = provider_for(emulator, namespace, timeout=7_200)
    emulator.faults.fail("sandboxes.create", 400, message="Timeout cannot be greater than 1 hours")
    with pytest.raises(E2BTimeoutLimitError) as raised:
        await provider.create(key)
    assert "your plan allows at most 3,600 s (Hobby: 3,600; Pro: 86,400): lower `timeout`" in str(
        raised.value
    )
    assert "7200" in str(raised.value)
    assert len(creates_of(emulator, key)) == 1


async def test_a_connect_beyond_the_plan_says_the_plans_maximum(
    emulator: E2BEmulator, provider: E2BSandboxProvider, key: str, instance: SandboxInstance
) -> None:
    emulator.faults.fail(
        "sandboxes.connect", 400, message="Timeout cannot be greater than 24 hours"
    )
    with pytest.raises(E2BTimeoutLimitError, match=r"at most 86,400 s"):
        await provider_for(emulator, provider.namespace).find(key)


async def test_an_unknown_template_names_it_and_is_not_retried(
    emulator: E2BEmulator, namespace: str, key: str
) -> None:
    provider = provider_for(emulator, namespace, template="no-such-template")
    emulator.faults.fail("sandboxes.create", 404, message="template 'no-such-template' not found")
    with pytest.raises(E2BTemplateNotFoundError) as raised:
        await provider.create(key)
    assert "'no-such-template'" in str(raised.value)
    assert "`template`" in str(raised.value)
    assert len(creates_of(emulator, key)) == 1


async def test_a_refused_key_is_an_authentication_error_not_retried_and_not_printed(
    emulator: E2BEmulator, provider: E2BSandboxProvider, key: str
) -> None:
    emulator.faults.fail("sandboxes.create", 401)
    with pytest.raises(E2BAuthenticationError, match="E2B_API_KEY") as raised:
        await provider.create(key)
    assert emulator.api_key not in str(raised.value)
    assert len(creates_of(emulator, key)) == 1


async def test_an_unexpected_api_status_is_an_e2b_error_naming_it(
    emulator: E2BEmulator, provider: E2BSandboxProvider, key: str
) -> None:
    emulator.faults.fail("sandboxes.create", 500, message="Failed to create sandbox: boom")
    with pytest.raises(E2BError, match="boom"):
        await provider.create(key)


# -- envd, behind E2B's proxy ------------------------------------------------------------------


@pytest.mark.parametrize("status", [429, 409, 502, 503])
async def test_a_command_refused_by_the_proxy_is_retried_and_runs_once(
    emulator: E2BEmulator, instance: SandboxInstance, status: int
) -> None:
    emulator.faults.fail("envd.process", status, times=2, sandbox_id=instance.instance_id)
    assert await run(instance, "echo ran >> runs.txt; cat runs.txt") == "ran\n"


@pytest.mark.parametrize("status", [429, 409, 502, 503])
async def test_a_file_write_refused_by_the_proxy_is_retried(
    emulator: E2BEmulator, instance: SandboxInstance, status: int
) -> None:
    emulator.faults.fail("envd.files", status, sandbox_id=instance.instance_id)
    await instance.write_files([FileWrite("/workspace/w.txt", b"written", 0o644)])
    assert await instance.read_file("/workspace/w.txt", max_bytes=100) == b"written"


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (429, E2BRateLimitError),
        (409, E2BSandboxBusyError),
        (503, E2BServiceBusyError),
        (401, E2BAuthenticationError),
    ],
)
async def test_a_proxy_that_keeps_refusing_is_one_clear_error(
    emulator: E2BEmulator, instance: SandboxInstance, status: int, error: type[E2BError]
) -> None:
    emulator.faults.fail("envd.filesystem", status, times=None, sandbox_id=instance.instance_id)
    with pytest.raises(error, match=instance.instance_id) as raised:
        await instance.exists("/workspace")
    assert emulator.api_key not in str(raised.value)


# -- a sandbox reported gone: confirmed before it is given up ----------------------------------


async def test_two_not_found_answers_in_a_row_keep_the_sandbox(
    emulator: E2BEmulator, provider: E2BSandboxProvider, key: str
) -> None:
    sandbox = sandbox_on(provider, key, SeedFile("/workspace/seed.txt", "seed"))
    await sandbox.write_file("kept.txt", "kept")
    (sandbox_id,) = sandbox_ids(emulator, provider.namespace, key)
    emulator.answer_not_found(sandbox_id, times=2)
    result = await sandbox.run_command("cat kept.txt")
    assert (result.stdout, result.environment_reset) == ("kept", False)
    assert sandbox_ids(emulator, provider.namespace, key) == [sandbox_id]


async def test_an_api_timeout_during_the_recovery_connect_is_unreachable_not_vanished(
    emulator: E2BEmulator, namespace: str, key: str
) -> None:
    provider = provider_for(emulator, namespace, request_timeout=1)
    sandbox = sandbox_on(provider, key)
    try:
        await sandbox.write_file("kept.txt", "kept")
        (sandbox_id,) = sandbox_ids(emulator, namespace, key)
        emulator.answer_not_found(sandbox_id)
        emulator.faults.delay("sandboxes.connect", 3, sandbox_id=sandbox_id)
        with pytest.raises(E2BUnreachableError):
            await sandbox.run_command("cat kept.txt")
        assert sandbox.environment_resets == 0
        assert sandbox_ids(emulator, namespace, key) == [sandbox_id]
        assert (await sandbox.run_command("cat kept.txt")).stdout == "kept"
    finally:
        emulator.faults.clear()
        await provider.destroy(key)


async def test_an_api_with_no_capacity_during_the_recovery_connect_is_not_vanished(
    emulator: E2BEmulator, provider: E2BSandboxProvider, key: str
) -> None:
    sandbox = sandbox_on(provider, key)
    await sandbox.write_file("kept.txt", "kept")
    (sandbox_id,) = sandbox_ids(emulator, provider.namespace, key)
    emulator.answer_not_found(sandbox_id)
    emulator.faults.fail("sandboxes.connect", 503, times=SDK_ATTEMPTS, sandbox_id=sandbox_id)
    with pytest.raises(E2BServiceBusyError):
        await sandbox.run_command("cat kept.txt")
    assert sandbox.environment_resets == 0
    assert sandbox_ids(emulator, provider.namespace, key) == [sandbox_id]


async def test_a_not_found_that_persists_on_a_running_sandbox_is_unreachable_and_keeps_it(
    emulator: E2BEmulator, provider: E2BSandboxProvider, key: str
) -> None:
    sandbox = sandbox_on(provider, key)
    await sandbox.write_file("kept.txt", "kept")
    (sandbox_id,) = sandbox_ids(emulator, provider.namespace, key)
    emulator.answer_not_found(sandbox_id, times=100)
    with pytest.raises(E2BUnreachableError, match="says it is running"):
        await sandbox.run_command("cat kept.txt")
    assert sandbox.environment_resets == 0
    assert sandbox_ids(emulator, provider.namespace, key) == [sandbox_id]


async def test_a_command_cut_off_by_a_pause_keeps_the_sandbox_and_its_files(
    emulator: E2BEmulator, provider: E2BSandboxProvider, key: str
) -> None:
    sandbox = sandbox_on(provider, key)
    await sandbox.write_file("kept.txt", "kept")
    (sandbox_id,) = sandbox_ids(emulator, provider.namespace, key)
    paused: list[str] = []

    def pause_once(text: str) -> None:
        if not paused:
            paused.append(text)
            emulator.pause(sandbox_id)

    with pytest.raises(E2BUnreachableError, match="paused"):
        await sandbox.run_command("echo started; sleep 30", on_stdout=pause_once)
    assert sandbox.environment_resets == 0
    result = await sandbox.run_command("cat kept.txt")  # resumed
    assert (result.stdout, result.environment_reset) == ("kept", False)
    assert sandbox_ids(emulator, provider.namespace, key) == [sandbox_id]
