"""Commands change the host-held files the way a POSIX kernel would, whatever they ask.

Every file operation of a command is a request served by the host's filesystem; a hostile
command must not be able to make one of them destroy files, loop without end, raise in the host
or take time out of proportion to the files it touches. Run on asyncio and on trio.
"""

from __future__ import annotations

import threading
import time
import tracemalloc

import anyio
import pytest
from inmemory_helpers import MakeProvider

from pai.sandbox.provider import FileWrite, RawCommandResult
from pai.sandbox_inmemory import (
    InMemorySandboxInstance,
)
from pai.sandbox_inmemory._hostfs import PATH_MAX, HostFs, drive

pytestmark = pytest.mark.anyio


MiB = 1024 * 1024


async def run(
    instance: InMemorySandboxInstance, command: str, *, timeout: float = 30.0
) -> RawCommandResult:
    return await instance.run(
        command, cwd="/workspace", env={}, stdin=None, timeout=timeout, output_limit=4 * MiB
    )


async def test_copying_a_folder_into_itself_fails_and_leaves_it_unchanged(
    instance: InMemorySandboxInstance,
) -> None:
    await run(instance, "mkdir -p q/s && echo 1 > q/s/k")
    result = await run(instance, "cp -r q q/r")
    assert result.exit_code != 0
    assert b"into itself" in result.stderr
    assert [entry.name for entry in await instance.list_dir("/workspace/q")] == ["s"]


async def test_moving_a_folder_into_itself_fails_and_leaves_it_unchanged(
    instance: InMemorySandboxInstance,
) -> None:
    await run(instance, "mkdir -p q/s && echo 1 > q/s/k")
    result = await run(instance, "mv q q/r")
    assert result.exit_code != 0
    assert b"into itself" in result.stderr
    assert await instance.read_file("/workspace/q/s/k", max_bytes=10) == b"1\n"
    assert [entry.name for entry in await instance.list_dir("/workspace/q")] == ["s"]


async def test_moving_a_file_onto_itself_keeps_it(instance: InMemorySandboxInstance) -> None:
    result = await run(instance, "echo kept > f && mv f f; cat f")
    assert result.stdout == b"kept\n"


async def test_moving_a_folder_moves_everything_in_it(instance: InMemorySandboxInstance) -> None:
    result = await run(instance, "mkdir -p a/b && echo 1 > a/b/c && mv a z && cat z/b/c")
    assert (result.exit_code, result.stdout) == (0, b"1\n")
    assert not await instance.exists("/workspace/a")


async def test_writing_below_a_file_fails_and_leaves_the_file(
    instance: InMemorySandboxInstance,
) -> None:
    result = await run(instance, "echo x > f; echo y > f/g")
    assert result.exit_code != 0
    assert b"not a directory" in result.stderr.lower()
    assert await instance.read_file("/workspace/f", max_bytes=10) == b"x\n"
    assert not await instance.exists("/workspace/f/g")


async def test_a_redirection_through_a_symlink_writes_its_target(
    instance: InMemorySandboxInstance,
) -> None:
    result = await run(instance, "echo old > f && ln -s /workspace/f l && echo new > l && cat f")
    assert result.stdout == b"new\n"
    assert [(e.name, e.type) for e in await instance.list_dir("/workspace")] == [
        ("f", "file"),
        ("l", "symlink"),
    ]


async def test_copying_a_tree_keeps_the_links_in_it(instance: InMemorySandboxInstance) -> None:
    result = await run(instance, "mkdir e && ln -s .. e/up && cp -r e e2 && readlink e2/up")
    assert (result.exit_code, result.stdout) == (0, b"..\n")


async def test_copying_and_removing_a_wide_tree_ends_in_time(
    instance: InMemorySandboxInstance,
) -> None:
    # Listing a folder used to scan every path of the filesystem, so copying this tree took
    # over half a minute of the host's time (and ran on past the command's timeout).
    made = await run(instance, "mkdir -p t/d{1..20000}", timeout=60)
    assert made.exit_code == 0, made.stderr
    result = await run(instance, "cp -r t u && rm -r u && ls t | wc -l", timeout=20)
    assert not result.timed_out
    assert (result.exit_code, result.stdout.strip()) == (0, b"20000")


async def test_a_deep_tree_can_be_made_copied_and_removed(
    instance: InMemorySandboxInstance,
) -> None:
    deep = "/".join(["d"] * 1500)
    result = await run(instance, f"mkdir -p {deep} && cp -r d c && rm -r d c && echo done")
    assert (result.exit_code, result.stdout) == (0, b"done\n"), result.stderr
    assert [entry.name for entry in await instance.list_dir("/workspace")] == []


async def test_a_path_longer_than_path_max_is_refused(instance: InMemorySandboxInstance) -> None:
    path = "x" * (PATH_MAX + 1)
    result = await run(instance, f"touch {path}")
    assert result.exit_code != 0
    assert b"ENAMETOOLONG" in result.stderr
    assert [entry.name for entry in await instance.list_dir("/workspace")] == []


async def test_removing_the_root_is_refused(instance: InMemorySandboxInstance) -> None:
    result = await run(instance, "rm -rf / ; echo after > /workspace/f; cat /workspace/f")
    assert result.stdout == b"after\n"
    assert await instance.exists("/workspace/f")


async def test_many_small_entries_are_counted_at_no_less_than_they_cost_the_host() -> None:
    # A flood of empty files, folders and links must hit the memory budget before the host
    # holds more than the budget (each entry costs the host far more than its path).
    fs = HostFs(1 << 40)
    drive(fs.mkdir("/workspace/d", recursive=True))
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        counted_before = fs.used
        for i in range(20_000):
            drive(fs.write_file(f"/workspace/d/f{i}", b""))
            drive(fs.mkdir(f"/workspace/d/g{i}"))
            drive(fs.symlink("f", f"/workspace/d/l{i}"))
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert fs.used - counted_before >= held


async def test_a_folder_whose_listing_is_over_four_mib_lists_in_full(
    instance: InMemorySandboxInstance,
) -> None:
    # 110,000 names of 45 characters: the listing's answer to the shell is about 5.5 MiB.
    names = [f"{'d' * 39}{i:06d}" for i in range(110_000)]
    await instance.write_files([FileWrite(f"/workspace/t/{name}", b"") for name in names])
    result = await run(instance, "ls t | wc -l; echo t/* | wc -w")
    assert (result.exit_code, result.stdout.split()) == (0, [b"110000", b"110000"]), result.stderr


async def test_a_write_the_budget_has_no_room_for_is_refused_without_the_host_holding_it(
    make_provider: MakeProvider,
) -> None:
    instance = await make_provider(memory_budget=64 * MiB).create("k")
    await instance.write_files([FileWrite(f"/workspace/f{i}", b"x" * 20 * MiB) for i in (1, 2)])
    assert (await run(instance, "true")).exit_code == 0
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        result = await run(instance, "printf '%*s' 30000000 x > big; echo $?")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert b"memory_budget" in result.stderr
    assert not await instance.exists("/workspace/big")
    # None of the 30 MB the shell tried to write (its capped output is held, 4 MiB).
    assert peak - before < 16 * MiB


async def test_reading_a_large_file_holds_it_once_in_the_host(
    instance: InMemorySandboxInstance,
) -> None:
    await instance.write_files([FileWrite("/workspace/f", b"x" * 30 * MiB)])
    await run(instance, "echo y >> f")  # grown in place: a buffer the read must not copy twice
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        result = await run(instance, "wc -c < f")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.stdout.strip() == str(30 * MiB + 2).encode()
    assert peak - before < 30 * MiB + 8 * MiB


async def test_the_event_loop_never_waits_for_an_instance_busy_with_a_large_request(
    instance: InMemorySandboxInstance,
) -> None:
    # A command's large request (a copy of a big tree) holds the instance's lock in a thread;
    # file calls and commands then wait in a thread too, never on the event loop.
    assert (await run(instance, "true")).exit_code == 0
    lock = instance._state.lock
    released = threading.Event()
    lock.acquire()
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while not released.is_set():
            ticks += 1
            await anyio.sleep(0.01)

    def release_later() -> None:
        time.sleep(0.5)
        lock.release()
        released.set()

    threading.Thread(target=release_later).start()
    async with anyio.create_task_group() as group:
        group.start_soon(tick)
        assert await instance.exists("/workspace")
        assert (await run(instance, "echo x > f && cat f")).stdout == b"x\n"
    assert ticks >= 10
