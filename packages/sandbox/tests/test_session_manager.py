"""The session manager: lazy, find-before-create, single flight per key, dispose and close."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta

import anyio
import pytest
from fakes import FakeProvider

from pai.sandbox import (
    SandboxClosedError,
    SandboxSessionManager,
    SeedFile,
    create_sandbox,
    create_sandbox_session_manager,
)
from pai.sandbox.provider import SandboxInstance

pytestmark = pytest.mark.anyio

SEED = (SeedFile("/workspace/README.md", "# seeded\n"),)


async def test_handle_provisions_nothing(provider: FakeProvider) -> None:
    sessions = create_sandbox_session_manager(provider=provider, seed=SEED)
    handle = sessions.handle("k")
    create_sandbox(handle)
    assert provider.log == []
    assert not sessions.is_provisioned("k")


async def test_first_use_finds_then_creates_and_writes_the_seed(
    provider: FakeProvider,
) -> None:
    sessions = create_sandbox_session_manager(provider=provider, seed=SEED)
    instance = await sessions.handle("k").instance()
    assert provider.log == [
        ("find", "k"),
        ("create", "k"),
        ("write_files", instance.instance_id, ("/workspace/README.md",)),
    ]
    assert sessions.is_provisioned("k")
    assert provider.live["k"].file("/workspace/README.md") is not None


async def test_later_uses_reuse_the_cached_instance_without_provider_calls(
    provider: FakeProvider,
) -> None:
    sessions = create_sandbox_session_manager(provider=provider)
    first = await sessions.instance("k")
    calls = len(provider.log)
    assert await sessions.instance("k") is first
    assert len(provider.log) == calls


async def test_an_instance_the_provider_already_has_is_found_not_recreated(
    provider: FakeProvider,
) -> None:
    existing = await provider.create("k")  # made earlier (another process, a previous run)
    provider.log.clear()
    provider.creates.clear()
    sessions = create_sandbox_session_manager(provider=provider, seed=SEED)
    assert await sessions.instance("k") is existing
    assert provider.creates == []
    assert provider.log == [("find", "k")]  # no create, no seed write
    assert existing.file("/workspace/README.md") is None


async def test_seed_is_written_again_after_replace(provider: FakeProvider) -> None:
    sessions = create_sandbox_session_manager(provider=provider, seed=SEED)
    first = await sessions.instance("k")
    second = await sessions.replace("k", first)
    assert second is not first
    assert second is provider.live["k"]
    assert provider.destroys == ["k"]
    assert provider.creates == ["k", "k"]
    seeded = provider.live["k"].file("/workspace/README.md")
    assert seeded is not None
    assert seeded.content == b"# seeded\n"


async def test_executable_seed_files_get_mode_0755(provider: FakeProvider) -> None:
    sessions = create_sandbox_session_manager(
        provider=provider,
        seed=[
            SeedFile("/workspace/bin/run.sh", "#!/bin/sh\n", executable=True),
            SeedFile("/workspace/data.bin", b"\x00\x01"),
        ],
    )
    await sessions.instance("k")
    script = provider.live["k"].file("/workspace/bin/run.sh")
    data = provider.live["k"].file("/workspace/data.bin")
    assert script is not None
    assert data is not None
    assert (script.mode, script.content) == (0o755, b"#!/bin/sh\n")
    assert (data.mode, data.content) == (0o644, b"\x00\x01")


async def test_1000_concurrent_acquires_over_100_keys_create_exactly_100_instances(
    provider: FakeProvider,
) -> None:
    """The issue's proof of single flight: creations are held open until every caller waits."""
    provider.gate = anyio.Event()
    sessions = create_sandbox_session_manager(provider=provider, seed=SEED)
    keys = [f"key-{i}" for i in range(100)]
    callers = 1000
    got: dict[int, SandboxInstance] = {}
    entered = 0
    all_entered = anyio.Event()

    async def acquire(i: int) -> None:
        nonlocal entered
        entered += 1
        if entered == callers:
            all_entered.set()
        got[i] = await sessions.handle(keys[i % len(keys)]).instance()

    async with anyio.create_task_group() as tg:
        for i in range(callers):
            tg.start_soon(acquire, i)
        await all_entered.wait()
        await provider.wait_for_creates(len(keys))
        # Every caller is inside instance() and 100 creations are in flight at once.
        assert got == {}
        assert provider.creating_now == len(keys)
        provider.gate.set()

    assert sorted(provider.creates) == sorted(keys)
    assert provider.most_creating_at_once == len(keys)
    assert len(provider.live) == len(keys)
    for i, instance in got.items():
        assert instance is provider.live[keys[i % len(keys)]]
    seed_writes = [entry for entry in provider.log if entry[0] == "write_files"]
    assert len(seed_writes) == len(keys)


async def test_concurrent_replaces_of_one_vanished_instance_make_one_replacement(
    provider: FakeProvider,
) -> None:
    sessions = create_sandbox_session_manager(provider=provider, seed=SEED)
    stale = await sessions.instance("k")
    provider.vanish("k")
    provider.gate = anyio.Event()
    callers = 50
    got: list[SandboxInstance] = []
    entered = 0
    all_entered = anyio.Event()

    async def replace() -> None:
        nonlocal entered
        entered += 1
        if entered == callers:
            all_entered.set()
        got.append(await sessions.handle("k").replace(stale))

    async with anyio.create_task_group() as tg:
        for _ in range(callers):
            tg.start_soon(replace)
        await all_entered.wait()
        await provider.wait_for_creates(2)
        assert got == []
        provider.gate.set()

    assert provider.creates == ["k", "k"]
    assert provider.destroys == ["k"]
    replacement = provider.live["k"]
    assert replacement is not stale
    assert all(instance is replacement for instance in got)
    assert len(got) == callers
    assert replacement.file("/workspace/README.md") is not None


async def test_replace_without_stale_always_makes_a_fresh_instance(
    provider: FakeProvider,
) -> None:
    sessions = create_sandbox_session_manager(provider=provider)
    first = await sessions.instance("k")
    second = await sessions.replace("k")
    third = await sessions.replace("k")
    assert len({first.instance_id, second.instance_id, third.instance_id}) == 3
    assert provider.destroys == ["k", "k"]


async def test_dispose_destroys_and_forgets(provider: FakeProvider) -> None:
    sessions = create_sandbox_session_manager(provider=provider)
    handle = sessions.handle("k")
    first = await handle.instance()
    await handle.dispose()
    assert provider.destroys == ["k"]
    assert not sessions.is_provisioned("k")
    assert "k" not in provider.live
    second = await handle.instance()
    assert second.instance_id != first.instance_id
    assert provider.creates == ["k", "k"]


async def test_dispose_of_a_never_used_key_only_asks_the_provider_to_destroy(
    provider: FakeProvider,
) -> None:
    sessions = create_sandbox_session_manager(provider=provider)
    await sessions.dispose("never-used")
    assert provider.log == [("destroy", "never-used")]


async def test_a_dispose_racing_first_use_keeps_single_flight(
    provider: FakeProvider,
) -> None:
    """A caller queued behind a dispose and a caller arriving later share one creation."""
    sessions = create_sandbox_session_manager(provider=provider)
    provider.destroy_gate = anyio.Event()
    provider.gate = anyio.Event()
    got: list[SandboxInstance] = []

    async def use(entered: anyio.Event) -> None:
        entered.set()
        got.append(await sessions.instance("k"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(sessions.dispose, "k")
        await provider.wait_for_destroys(1)  # the dispose holds the key's lock
        queued = anyio.Event()
        tg.start_soon(use, queued)
        await queued.wait()  # this first use waits for the dispose
        provider.destroy_gate.set()
        await provider.wait_for_creates(1)  # the queued use now creates, held open by the gate
        later = anyio.Event()
        tg.start_soon(use, later)
        await later.wait()
        await anyio.wait_all_tasks_blocked()
        assert provider.creates == ["k"], "a second creation started for the same key"
        provider.gate.set()

    assert provider.creates == ["k"]
    assert len(got) == 2
    assert got[0] is got[1]


async def test_aclose_closes_the_provider_and_keeps_instances(
    provider: FakeProvider,
) -> None:
    sessions = create_sandbox_session_manager(provider=provider)
    await sessions.instance("a")
    await sessions.instance("b")
    await sessions.aclose()
    assert provider.aclose_calls == 1
    assert provider.destroys == []
    assert set(provider.live) == {"a", "b"}
    await sessions.aclose()  # idempotent
    assert provider.aclose_calls == 1


USES_AFTER_CLOSE: dict[str, Callable[[SandboxSessionManager], Awaitable[object]]] = {
    "instance": lambda sessions: sessions.handle("k").instance(),
    "replace": lambda sessions: sessions.handle("k").replace(),
    "dispose": lambda sessions: sessions.dispose("k"),
    "facade": lambda sessions: create_sandbox(sessions.handle("k")).run_command("true"),
}


@pytest.mark.parametrize("use", list(USES_AFTER_CLOSE))
async def test_use_after_aclose_raises_a_clear_closed_error(
    provider: FakeProvider, use: str
) -> None:
    sessions = create_sandbox_session_manager(provider=provider)
    await sessions.instance("k")
    await sessions.aclose()
    calls = len(provider.log)
    with pytest.raises(SandboxClosedError) as closed:
        await USES_AFTER_CLOSE[use](sessions)
    message = str(closed.value)
    assert "closed" in message
    assert "'recording'" in message
    assert isinstance(closed.value, RuntimeError)
    assert len(provider.log) == calls


async def test_a_first_use_waiting_on_the_key_lock_sees_the_close(
    provider: FakeProvider,
) -> None:
    sessions = create_sandbox_session_manager(provider=provider)
    provider.gate = anyio.Event()
    failures: list[BaseException] = []

    async def second_use() -> None:
        try:
            await sessions.instance("k")
        except SandboxClosedError as error:
            failures.append(error)

    async with anyio.create_task_group() as tg:
        tg.start_soon(sessions.instance, "k")
        await provider.wait_for_creates(1)  # the first use holds the key's lock, creating
        tg.start_soon(second_use)  # queues on the lock
        await anyio.lowlevel.checkpoint()
        await sessions.aclose()
        provider.gate.set()
    assert len(failures) == 1
    assert len(provider.creates) == 1


async def test_an_owner_older_than_the_manager_with_no_instance_is_told_it_was_lost(
    provider: FakeProvider,
) -> None:
    sessions = create_sandbox_session_manager(provider=provider, seed=SEED)
    before = sessions.started_at - timedelta(seconds=1)  # a thread of an earlier process
    instance, lost = await sessions.resume("k", owner_created_at=before)
    assert lost
    assert instance is provider.live["k"]
    assert provider.live["k"].file("/workspace/README.md") is not None
    again, lost_again = await sessions.resume("k", owner_created_at=before)
    assert (again, lost_again) == (instance, False)


async def test_an_owner_older_than_the_manager_whose_instance_is_found_lost_nothing(
    provider: FakeProvider,
) -> None:
    existing = await provider.create("k")  # made by an earlier process, still there
    sessions = create_sandbox_session_manager(provider=provider, seed=SEED)
    before = sessions.started_at - timedelta(days=1)
    assert await sessions.resume("k", owner_created_at=before) == (existing, False)


@pytest.mark.parametrize("owner", ["newer", "unknown"])
async def test_a_new_or_unknown_owner_with_no_instance_starts_without_a_loss(
    provider: FakeProvider, owner: str
) -> None:
    sessions = create_sandbox_session_manager(provider=provider, seed=SEED)
    created_at = sessions.started_at + timedelta(seconds=1) if owner == "newer" else None
    instance, lost = await sessions.resume("k", owner_created_at=created_at)
    assert (instance, lost) == (provider.live["k"], False)


async def test_an_owner_time_without_a_zone_is_taken_as_utc(provider: FakeProvider) -> None:
    sessions = create_sandbox_session_manager(provider=provider)
    before = (sessions.started_at - timedelta(hours=1)).replace(tzinfo=None)
    _, lost = await sessions.resume("k", owner_created_at=before)
    assert lost


async def test_every_caller_waiting_for_the_re_creation_of_a_lost_instance_is_told(
    provider: FakeProvider,
) -> None:
    sessions = create_sandbox_session_manager(provider=provider, seed=SEED)
    before = sessions.started_at - timedelta(seconds=1)
    provider.gate = anyio.Event()
    callers = 20
    got: list[tuple[SandboxInstance, bool]] = []
    entered = 0
    all_entered = anyio.Event()

    async def resume() -> None:
        nonlocal entered
        entered += 1
        if entered == callers:
            all_entered.set()
        got.append(await sessions.handle("k", owner_created_at=before).resume())

    async with anyio.create_task_group() as tg:
        for _ in range(callers):
            tg.start_soon(resume)
        await all_entered.wait()
        await provider.wait_for_creates(1)
        provider.gate.set()

    assert provider.creates == ["k"]
    assert got == [(provider.live["k"], True)] * callers
    assert await sessions.handle("k", owner_created_at=before).resume() == (
        provider.live["k"],
        False,
    )
