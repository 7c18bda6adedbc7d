"""Sandboxes on E2B over their life: found again from another process, re-created with their seed
after they expired, resumed after a pause, connected with the configured timeout.

asyncio only: the e2b SDK is asyncio-only.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import anyio
import pytest
from e2b_helpers import provider_for, sandbox_of, sandbox_on

from pai.sandbox import SandboxFileTooLargeError, SeedFile
from pai.sandbox_e2b import E2BSandboxProvider
from pai.sandbox_e2b.testing import E2BEmulator

pytestmark = pytest.mark.anyio


@pytest.fixture
async def key(provider: E2BSandboxProvider) -> AsyncIterator[str]:
    """A fresh instance key; its sandboxes in the test's namespace are destroyed after the test."""
    key = uuid.uuid4().hex
    yield key
    await provider.destroy(key)


async def test_a_new_sandbox_carries_namespace_key_and_capability_metadata(
    emulator: E2BEmulator, namespace: str, provider: E2BSandboxProvider
) -> None:
    key = "thread:é/" + uuid.uuid4().hex
    instance = await provider.create(key)
    try:
        held = sandbox_of(emulator, namespace, key)
        assert held.sandbox_id == instance.instance_id
        assert held.metadata["pai.namespace"] == namespace
        assert held.metadata["pai.key"] == key
        assert held.metadata["pai.capability"] == "sandbox"
        assert held.allow_internet_access is False
    finally:
        await provider.destroy(key)


async def test_internet_access_is_asked_for_only_when_allowed(
    emulator: E2BEmulator, namespace: str, key: str
) -> None:
    await provider_for(emulator, namespace, allow_internet_access=True).create(key)
    assert sandbox_of(emulator, namespace, key).allow_internet_access is True


FIND_IN_ANOTHER_PROCESS = """
import asyncio, sys
from pai.sandbox_e2b import E2BSandboxProvider

async def main() -> None:
    provider = E2BSandboxProvider(namespace=sys.argv[1])
    instance = await provider.find(sys.argv[2])
    assert instance is not None, "not found"
    print(instance.instance_id)
    print((await instance.read_file("/workspace/marker.txt", max_bytes=100)).decode())

asyncio.run(main())
"""


async def test_another_process_finds_the_sandbox_by_key(
    emulator: E2BEmulator, namespace: str, provider: E2BSandboxProvider, key: str
) -> None:
    sandbox = sandbox_on(provider, key)
    await sandbox.write_file("marker.txt", "written by the first process")
    done = await anyio.run_process(
        [sys.executable, "-c", FIND_IN_ANOTHER_PROCESS, namespace, key],
        env={**os.environ, **emulator.env},
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    instance_id, marker = done.stdout.decode().splitlines()
    assert instance_id == sandbox_of(emulator, namespace, key).sandbox_id
    assert marker == "written by the first process"


async def test_a_process_that_used_the_provider_exits_cleanly(
    emulator: E2BEmulator, namespace: str, provider: E2BSandboxProvider, key: str
) -> None:
    # The SDK's I/O threads could still be handing a result over when the interpreter shut
    # down, which aborted about one process in four (SIGABRT) after a successful run; the
    # provider's exit hook waits for them. Eight runs make a regression all but certain to show.
    sandbox = sandbox_on(provider, key)
    await sandbox.write_file("marker.txt", "written by the first process")
    codes: list[int] = []
    for _ in range(8):
        done = await anyio.run_process(
            [sys.executable, "-c", FIND_IN_ANOTHER_PROCESS, namespace, key],
            env={**os.environ, **emulator.env},
            check=False,
        )
        codes.append(done.returncode)
    assert codes == [0] * 8


async def test_expiry_mid_conversation_gives_a_fresh_sandbox_with_the_seed(
    emulator: E2BEmulator, namespace: str, provider: E2BSandboxProvider, key: str
) -> None:
    sandbox = sandbox_on(provider, key, SeedFile("/workspace/seed.txt", "seed\n"))
    first = await sandbox.run_command("echo scratch > scratch.txt && cat seed.txt")
    assert (first.stdout, first.environment_reset) == ("seed\n", False)
    emulator.expire(sandbox_of(emulator, namespace, key).sandbox_id)

    second = await sandbox.run_command("cat seed.txt; ls")
    assert second.environment_reset
    assert second.stdout == "seed\nseed.txt\n"
    assert sandbox.environment_resets == 1
    assert not (await sandbox.run_command("true")).environment_reset


async def test_a_sandbox_whose_lifetime_ran_out_is_re_created_by_a_file_operation(
    emulator: E2BEmulator, namespace: str, provider: E2BSandboxProvider, key: str
) -> None:
    sandbox = sandbox_on(provider, key, SeedFile("/workspace/seed.txt", "seed"))
    await sandbox.write_file("scratch.txt", "lost")
    emulator.set_timeout(sandbox_of(emulator, namespace, key).sandbox_id, 0)
    assert await sandbox.read_text("seed.txt") == "seed"
    assert not await sandbox.exists("scratch.txt")
    assert sandbox.environment_resets == 1


async def test_a_paused_sandbox_is_resumed_with_its_files(
    emulator: E2BEmulator, namespace: str, provider: E2BSandboxProvider, key: str
) -> None:
    sandbox = sandbox_on(provider, key)
    await sandbox.write_file("kept.txt", "kept")
    held = sandbox_of(emulator, namespace, key)
    emulator.pause(held.sandbox_id)
    result = await sandbox.run_command("cat kept.txt")
    assert (result.stdout, result.environment_reset) == ("kept", False)
    assert sandbox_of(emulator, namespace, key).sandbox_id == held.sandbox_id


async def test_find_connects_with_the_configured_timeout(
    emulator: E2BEmulator, namespace: str, key: str
) -> None:
    await provider_for(emulator, namespace, timeout=60).create(key)
    held = sandbox_of(emulator, namespace, key)
    emulator.set_timeout(held.sandbox_id, 5)
    found = await provider_for(emulator, namespace, timeout=900).find(key)
    assert found is not None
    remaining = sandbox_of(emulator, namespace, key).end_at - datetime.now(UTC)
    assert remaining > timedelta(seconds=800)


async def test_list_instances_sees_its_own_namespace_only(
    emulator: E2BEmulator, namespace: str, provider: E2BSandboxProvider
) -> None:
    other = provider_for(emulator, namespace + "-other")
    await provider.create("shared-key")
    await other.create("shared-key")
    try:
        listed = await provider.list_instances()
        assert [(i.key, i.provider) for i in listed] == [("shared-key", "e2b")]
        assert listed[0].instance_id == sandbox_of(emulator, namespace, "shared-key").sandbox_id
        assert listed[0].details["state"] == "running"
    finally:
        await provider.destroy("shared-key")
        await other.destroy("shared-key")
    assert await provider.find("shared-key") is None


async def test_a_sandbox_that_expires_during_a_command_is_re_created_and_the_command_rerun(
    emulator: E2BEmulator, namespace: str, provider: E2BSandboxProvider, key: str
) -> None:
    sandbox = sandbox_on(provider, key, SeedFile("/workspace/seed.txt", "seed\n"))
    await sandbox.write_file("first-life.txt", "only in the first sandbox")
    started = anyio.Event()

    def expire_once(text: str) -> None:
        if not started.is_set():
            started.set()
            emulator.expire(sandbox_of(emulator, namespace, key).sandbox_id)

    result = await sandbox.run_command(
        "cat seed.txt; if [ -f first-life.txt ]; then sleep 30; fi",
        on_stdout=expire_once,
    )
    assert result.environment_reset
    assert result.stdout == "seed\n"
    assert result.duration < 10
    assert sandbox.environment_resets == 1


async def test_every_connect_passes_the_configured_timeout(
    emulator: E2BEmulator, namespace: str, key: str
) -> None:
    sandbox = sandbox_on(provider_for(emulator, namespace, timeout=77), key)
    await sandbox.write_file("kept.txt", "kept")
    held = sandbox_of(emulator, namespace, key)
    await provider_for(emulator, namespace, timeout=77).find(key)  # another provider object
    emulator.pause(held.sandbox_id)
    assert (await sandbox.run_command("cat kept.txt")).stdout == "kept"  # resumed
    connects = [r for r in emulator.requests(held.sandbox_id) if r.path.endswith("/connect")]
    assert len(connects) >= 2
    assert [(r.body or {}).get("timeout") for r in connects] == [77] * len(connects)


async def test_an_intermittent_not_found_is_retried_on_the_same_sandbox(
    emulator: E2BEmulator, namespace: str, provider: E2BSandboxProvider, key: str
) -> None:
    sandbox = sandbox_on(provider, key)
    await sandbox.write_file("kept.txt", "kept")
    held = sandbox_of(emulator, namespace, key)
    emulator.answer_not_found(held.sandbox_id, times=1)
    result = await sandbox.run_command("cat kept.txt")
    assert (result.stdout, result.environment_reset) == ("kept", False)
    assert sandbox_of(emulator, namespace, key).sandbox_id == held.sandbox_id


async def test_a_batch_write_is_one_upload_request(
    emulator: E2BEmulator, namespace: str, provider: E2BSandboxProvider, key: str
) -> None:
    sandbox = sandbox_on(provider, key)
    await sandbox.run_command("true")
    held = sandbox_of(emulator, namespace, key)
    before = len(emulator.requests(held.sandbox_id))
    await sandbox.write_files({f"batch/{i}.txt": f"file {i}" for i in range(50)})
    uploads = [r for r in emulator.requests(held.sandbox_id)[before:] if r.path == "/files"]
    assert [r.method for r in uploads] == ["POST"]
    assert await sandbox.read_text("batch/49.txt") == "file 49"


async def test_a_read_over_the_limit_is_refused_without_downloading_the_file(
    emulator: E2BEmulator, provider: E2BSandboxProvider, key: str
) -> None:
    instance = await provider.create(key)
    await instance.run(
        "head -c 100000 /dev/zero > /workspace/big",
        cwd="/workspace",
        env={},
        stdin=None,
        timeout=10,
        output_limit=1024,
    )
    before = len(emulator.requests(instance.instance_id))
    with pytest.raises(SandboxFileTooLargeError):
        await instance.read_file("/workspace/big", max_bytes=1000)
    downloads = [r for r in emulator.requests(instance.instance_id)[before:] if r.path == "/files"]
    assert downloads == []


async def test_a_sandbox_killed_behind_our_back_is_re_created_with_the_seed(
    emulator: E2BEmulator, namespace: str, provider: E2BSandboxProvider, key: str
) -> None:
    sandbox = sandbox_on(provider, key, SeedFile("/workspace/seed.txt", "seed"))
    await sandbox.write_file("scratch.txt", "lost")
    emulator.remove(sandbox_of(emulator, namespace, key).sandbox_id)
    result = await sandbox.run_command("cat seed.txt; ls")
    assert result.environment_reset
    assert result.stdout == "seedseed.txt\n"
