"""Fault injection: the emulator answers as E2B's API, its proxy and envd do when they fail,
and the real SDK turns each answer into its own exception.

asyncio only: the e2b SDK is asyncio-only.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import AsyncIterator

import pytest
from e2b import (
    AsyncSandbox,
    AuthenticationException,
    InvalidArgumentException,
    RateLimitException,
    SandboxException,
    SandboxQuery,
    SandboxUnreachableException,
    TimeoutException,
)
from e2b.exceptions import ServiceBusyException
from e2b_helpers import options

from pai.sandbox_e2b.testing import E2BEmulator, EmulatorFaults

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("no_fault_left")]


@pytest.fixture
async def raw(raw: AsyncSandbox, emulator: E2BEmulator) -> AsyncIterator[AsyncSandbox]:
    """The shared ``raw`` sandbox, its faults cleared before it is killed."""
    try:
        yield raw
    finally:
        emulator.faults.clear()


# -- arming ------------------------------------------------------------------------------------


def test_an_unknown_route_is_refused_with_a_suggestion() -> None:
    faults = EmulatorFaults()
    with pytest.raises(
        ValueError, match=r"unknown route 'sandbox\.create'; did you mean 'sandboxes\.create'"
    ):
        faults.fail("sandbox.create", 503)
    with pytest.raises(ValueError, match=r"did you mean 'envd\.files'"):
        faults.delay("envd.file", 1)


@pytest.mark.parametrize(
    ("arguments", "complaint"),
    [
        ({"status": 200}, "HTTP error status"),
        ({"status": 600}, "HTTP error status"),
        ({"status": True}, "HTTP error status"),
        ({"status": 503, "times": 0}, "times must be"),
        ({"status": 503, "times": 1.5}, "times must be"),
        ({"status": 503, "message": 7}, "message must be"),
        ({"status": 503, "sandbox_id": 7}, "sandbox_id must be"),
    ],
)
def test_a_failure_with_a_bad_argument_is_refused(
    arguments: dict[str, object], complaint: str
) -> None:
    with pytest.raises(ValueError, match=complaint):
        EmulatorFaults().fail("sandboxes.list", **arguments)  # type: ignore[arg-type]


@pytest.mark.parametrize("seconds", [-1, float("inf"), float("nan"), "1", True])
def test_a_delay_of_no_real_duration_is_refused(seconds: object) -> None:
    with pytest.raises(ValueError, match="seconds must be"):
        EmulatorFaults().delay("envd.files", seconds)  # type: ignore[arg-type]


def test_faults_armed_and_used_from_many_threads_are_each_used_once() -> None:
    faults = EmulatorFaults()
    used: list[int] = []
    lock = threading.Lock()

    def arm_and_use() -> None:
        for _ in range(200):
            faults.fail("envd.process", 502)
        mine = 0
        for _ in range(400):
            if faults.consume("envd.process", "any")[1] is not None:
                mine += 1
        with lock:
            used.append(mine)

    threads = [threading.Thread(target=arm_and_use) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(used) == 8 * 200
    assert faults.consume("envd.process", "any") == (0.0, None)


# -- the control plane -------------------------------------------------------------------------


async def test_429_on_create_is_the_sdks_rate_limit_error_and_creates_nothing(
    emulator: E2BEmulator,
) -> None:
    tag = {"suite": uuid.uuid4().hex}
    emulator.faults.fail("sandboxes.create", 429, times=4)  # the SDK tries 4 times
    with pytest.raises(RateLimitException, match="maximum number of concurrent E2B sandboxes"):
        await AsyncSandbox.create(metadata=tag, timeout=60, **options(emulator))
    assert emulator.find(**tag) == []
    creates = [r for r in emulator.requests() if r.body and r.body.get("metadata") == tag]
    assert len(creates) == 4


async def test_a_single_429_is_retried_by_the_sdk(emulator: E2BEmulator) -> None:
    tag = {"suite": uuid.uuid4().hex}
    emulator.faults.fail("sandboxes.create", 429)
    sandbox = await AsyncSandbox.create(metadata=tag, timeout=60, **options(emulator))
    try:
        creates = [r for r in emulator.requests() if r.body and r.body.get("metadata") == tag]
        assert len(creates) == 2
    finally:
        await sandbox.kill()


async def test_503_on_kill_is_service_busy_and_the_sandbox_lives_on(
    emulator: E2BEmulator, raw: AsyncSandbox
) -> None:
    emulator.faults.fail("sandboxes.kill", 503, times=4)
    with pytest.raises(ServiceBusyException):
        await raw.kill()
    assert await raw.is_running()
    assert (await raw.commands.run("echo alive")).stdout == "alive\n"


async def test_409_on_connect_says_the_sandbox_is_changing_state(
    emulator: E2BEmulator, raw: AsyncSandbox
) -> None:
    emulator.faults.fail("sandboxes.connect", 409, sandbox_id=raw.sandbox_id)
    with pytest.raises(SandboxException, match=f'409: Sandbox "{raw.sandbox_id}" is being killed'):
        await AsyncSandbox.connect(raw.sandbox_id, timeout=60, **options(emulator))


async def test_400_on_set_timeout_is_a_sandbox_error_with_its_status(
    emulator: E2BEmulator, raw: AsyncSandbox
) -> None:
    emulator.faults.fail("sandboxes.timeout", 400, message="Timeout must be greater than 0")
    with pytest.raises(SandboxException, match="400: Timeout must be greater than 0") as caught:
        await raw.set_timeout(60)
    assert caught.value.status_code == 400


async def test_401_on_list_is_an_authentication_error(emulator: E2BEmulator) -> None:
    emulator.faults.fail("sandboxes.list", 401)
    with pytest.raises(AuthenticationException, match="Invalid API key"):
        await AsyncSandbox.list(
            query=SandboxQuery(metadata={"x": "y"}), **options(emulator)
        ).next_items()


async def test_502_on_get_is_a_sandbox_error_after_the_sdks_retries(
    emulator: E2BEmulator, raw: AsyncSandbox
) -> None:
    emulator.faults.fail("sandboxes.get", 502, times=4)
    with pytest.raises(SandboxException, match="502"):
        await raw.get_info()
    assert (await raw.get_info()).sandbox_id == raw.sandbox_id


async def test_409_on_pause_is_what_the_sdk_takes_for_already_paused(
    emulator: E2BEmulator, raw: AsyncSandbox
) -> None:
    emulator.faults.fail("sandboxes.pause", 409)
    assert await raw.pause() is False
    assert [s.state for s in emulator.sandboxes() if s.sandbox_id == raw.sandbox_id] == ["running"]


# -- envd, behind E2B's proxy ------------------------------------------------------------------


async def test_502_on_a_process_rpc_is_the_proxys_port_not_open(
    emulator: E2BEmulator, raw: AsyncSandbox
) -> None:
    emulator.faults.fail("envd.process", 502)
    with pytest.raises(SandboxUnreachableException, match="port is not open"):
        await raw.commands.run("echo hi")
    assert (await raw.commands.run("echo hi")).stdout == "hi\n"


async def test_429_on_a_filesystem_rpc_is_the_proxys_connection_limit(
    emulator: E2BEmulator, raw: AsyncSandbox
) -> None:
    emulator.faults.fail("envd.filesystem", 429)
    with pytest.raises(RateLimitException, match="too many concurrent incoming connections"):
        await raw.files.exists("/home/user")


async def test_409_on_files_is_the_proxys_still_transitioning_and_writes_nothing(
    emulator: E2BEmulator, raw: AsyncSandbox
) -> None:
    emulator.faults.fail("envd.files", 409)
    with pytest.raises(SandboxException, match="409: The sandbox is still transitioning"):
        await raw.files.write("/home/user/not-written.txt", b"x")
    assert not await raw.files.exists("/home/user/not-written.txt")


async def test_503_on_a_process_rpc_leaves_the_sandbox_state_unknown(
    emulator: E2BEmulator, raw: AsyncSandbox
) -> None:
    emulator.faults.fail("envd.process", 503)
    with pytest.raises(SandboxUnreachableException, match="Service Unavailable"):
        await raw.commands.run("true")


@pytest.mark.parametrize(
    ("status", "exception"), [(400, InvalidArgumentException), (401, AuthenticationException)]
)
async def test_envds_own_statuses_become_the_sdks_errors(
    emulator: E2BEmulator, raw: AsyncSandbox, status: int, exception: type[Exception]
) -> None:
    emulator.faults.fail("envd.filesystem", status)
    with pytest.raises(exception):
        await raw.files.exists("/home/user")


async def test_a_502_health_check_reads_as_not_running_to_the_sdk(
    emulator: E2BEmulator, raw: AsyncSandbox
) -> None:
    emulator.faults.fail("envd.health", 502, message="The sandbox was not found")
    assert not await raw.is_running()
    assert await raw.is_running()


async def test_a_fault_for_one_sandbox_leaves_the_others_alone(
    emulator: E2BEmulator, raw: AsyncSandbox
) -> None:
    other = await AsyncSandbox.create(timeout=60, **options(emulator))
    try:
        emulator.faults.fail("envd.process", 502, times=None, sandbox_id=raw.sandbox_id)
        assert (await other.commands.run("echo other")).stdout == "other\n"
        for _ in range(2):
            with pytest.raises(SandboxUnreachableException):
                await raw.commands.run("echo raw")
        emulator.faults.clear()
        assert (await raw.commands.run("echo raw")).stdout == "raw\n"
    finally:
        await other.kill()


async def test_a_delay_longer_than_the_request_timeout_times_the_client_out(
    emulator: E2BEmulator, raw: AsyncSandbox
) -> None:
    emulator.faults.delay("envd.filesystem", 3, sandbox_id=raw.sandbox_id)
    with pytest.raises(TimeoutException):
        await raw.files.exists("/home/user", request_timeout=0.3)
    assert await raw.files.exists("/home/user")
