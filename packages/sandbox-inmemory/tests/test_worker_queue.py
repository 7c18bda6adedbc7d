"""Commands waiting for a free worker (``max_workers``): served in arrival order, their wait
counted against their timeout, and a waiter that gives up (timeout or cancelled caller) never
costs the others a worker."""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator

import anyio
import pytest

from pai.sandbox.provider import RawCommandResult
from pai.sandbox_inmemory import (
    EXIT_TIMEOUT,
    InMemorySandboxInstance,
    create_in_memory_sandbox_provider,
)
from pai.sandbox_inmemory._pool import _Slots

pytestmark = pytest.mark.anyio


@pytest.fixture
async def one_worker() -> AsyncIterator[InMemorySandboxInstance]:
    """An instance of a provider with a single worker, already started."""
    provider = create_in_memory_sandbox_provider(max_workers=1)
    try:
        instance = await provider.create("k")
        assert (await run(instance, "true")).exit_code == 0
        yield instance
    finally:
        await provider.aclose()


async def run(
    instance: InMemorySandboxInstance, command: str, timeout: float | None = 10
) -> RawCommandResult:
    return await instance.run(
        command, cwd="/workspace", env={}, stdin=None, timeout=timeout, output_limit=1 << 16
    )


async def test_with_one_worker_commands_run_one_at_a_time_in_arrival_order(
    one_worker: InMemorySandboxInstance,
) -> None:
    script = (
        "[ -f busy ] && echo overlap >> log; touch busy; sleep 0.1; echo {name} >> log; rm busy"
    )
    async with anyio.create_task_group() as group:
        for name in ("a", "b", "c", "d"):
            group.start_soon(run, one_worker, script.format(name=name))
            await anyio.sleep(0.02)  # so that each has queued before the next one starts

    log = await one_worker.read_file("/workspace/log", max_bytes=1 << 16)
    assert log.split() == [b"a", b"b", b"c", b"d"]


async def test_the_wait_for_a_worker_counts_against_the_timeout_and_loses_no_worker(
    one_worker: InMemorySandboxInstance,
) -> None:
    results: dict[str, RawCommandResult] = {}
    waited = math.inf

    async def hold() -> None:
        results["hold"] = await run(one_worker, "sleep 0.6; echo held")

    async with anyio.create_task_group() as group:
        group.start_soon(hold)
        await anyio.sleep(0.05)
        started = time.monotonic()
        results["waiter"] = await run(one_worker, "echo ran > waiter-ran", timeout=0.2)
        waited = time.monotonic() - started

    assert (results["waiter"].exit_code, results["waiter"].timed_out) == (EXIT_TIMEOUT, True)
    assert waited < 0.55  # it gave up at its timeout, not when the worker came free
    assert results["hold"].stdout == b"held\n"
    assert not await one_worker.exists("/workspace/waiter-ran")
    with anyio.fail_after(5):  # the worker is free again for the next command
        assert (await run(one_worker, "echo next")).stdout == b"next\n"


async def test_a_caller_cancelled_while_waiting_for_a_worker_leaves_the_queue(
    one_worker: InMemorySandboxInstance,
) -> None:
    async with anyio.create_task_group() as group:
        group.start_soon(run, one_worker, "sleep 0.4")
        await anyio.sleep(0.05)
        with anyio.move_on_after(0.1) as waiting:
            await run(one_worker, "echo ran > cancelled-ran", timeout=None)
        assert waiting.cancelled_caught

    with anyio.fail_after(5):
        assert (await run(one_worker, "echo next")).stdout == b"next\n"
    assert not await one_worker.exists("/workspace/cancelled-ran")


async def test_a_slot_handed_to_a_waiter_already_cancelled_goes_to_the_next() -> None:
    slots = _Slots(1)
    assert await slots.take(math.inf)
    got: list[str] = []

    async def waiter(name: str, scope: anyio.CancelScope) -> None:
        with scope:
            if await slots.take(math.inf):
                try:
                    got.append(name)
                    await anyio.sleep(0.05)
                finally:
                    slots.give()

    first, second = anyio.CancelScope(), anyio.CancelScope()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(waiter, "first", first)
            group.start_soon(waiter, "second", second)
            await anyio.sleep(0.05)  # both wait
            first.cancel()  # the first waiter is cancelled, and before it runs again ...
            slots.give()  # ... the freed slot is handed to it: it must pass the slot on

    assert got == ["second"]
    assert await slots.take(-math.inf)  # and every slot came back: one is free at once


@pytest.mark.parametrize("max_workers", [1, 2, 3])
async def test_rounds_of_commands_reuse_the_workers_and_their_spare(max_workers: int) -> None:
    # A worker back from a command is kept while fewer than max_workers + 1 are idle (one for
    # each command that may run next, and the warm spare): rounds of commands, one after the
    # other or max_workers at once, start no process after the first round.
    provider = create_in_memory_sandbox_provider(max_workers=max_workers)
    seen: set[int] = set()

    async def watch() -> None:
        while True:
            seen.update(provider.worker_pids())
            await anyio.sleep(0.01)

    try:
        instance = await provider.create("k")
        async with anyio.create_task_group() as watcher:
            watcher.start_soon(watch)
            for _ in range(6):
                async with anyio.create_task_group() as group:
                    for _ in range(max_workers):
                        group.start_soon(run, instance, "sleep 0.1")
            watcher.cancel_scope.cancel()
    finally:
        await provider.aclose()

    assert len(seen) <= max_workers + 1, f"{len(seen)} worker processes started"
