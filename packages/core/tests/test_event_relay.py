"""The relay between a streamed run's producers and its reader: no buffer, nothing lost or
repeated with several producers at once, a cancelled hand-over withdrawn, an end after what
waits."""

from __future__ import annotations

import anyio
import pytest

from pai.core._relay import EventRelay

pytestmark = pytest.mark.anyio


async def drain(relay: EventRelay[int], log: list[str]) -> list[int]:
    got: list[int] = []
    while True:
        try:
            item = await relay.get()
        except StopAsyncIteration:
            return got
        log.append(f"read {item}")
        got.append(item)


async def test_a_producer_goes_on_only_after_the_reader_took_its_item() -> None:
    relay: EventRelay[int] = EventRelay()
    log: list[str] = []

    async def produce() -> None:
        for item in (1, 2, 3):
            log.append(f"put {item}")
            await relay.put(item)
            log.append(f"taken {item}")
        relay.end()

    got: list[int] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(produce)
        got += await drain(relay, log)

    assert got == [1, 2, 3]
    # The reader handles each item before its producer resumes: never two items in flight.
    assert log == [
        "put 1", "read 1", "taken 1",
        "put 2", "read 2", "taken 2",
        "put 3", "read 3", "taken 3",
    ]  # fmt: skip


async def test_a_slow_reader_holds_the_producer_back() -> None:
    relay: EventRelay[int] = EventRelay()
    produced: list[int] = []

    async def produce() -> None:
        for item in range(5):
            produced.append(item)
            await relay.put(item)
        relay.end()

    async with anyio.create_task_group() as tg:
        tg.start_soon(produce)
        for expected in range(5):
            await anyio.sleep(0.01)  # a slow reader: the producer may not run ahead meanwhile
            assert produced == list(range(expected + 1))
            assert await relay.get() == expected
        with pytest.raises(StopAsyncIteration):
            await relay.get()


async def test_items_of_many_producers_at_once_each_arrive_exactly_once() -> None:
    relay: EventRelay[int] = EventRelay()
    returned: list[int] = []

    async def produce(base: int) -> None:
        for item in range(base, base + 20):
            await relay.put(item)
            returned.append(item)

    async def producers() -> None:
        async with anyio.create_task_group() as tg:
            for base in range(0, 200, 20):
                tg.start_soon(produce, base)
        relay.end()

    got: list[int] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(producers)
        got += await drain(relay, [])

    assert sorted(got) == list(range(200))
    assert sorted(returned) == list(range(200))
    for base in range(0, 200, 20):  # each producer's items in its own order
        mine = [item for item in got if base <= item < base + 20]
        assert mine == list(range(base, base + 20))


async def test_a_cancelled_hand_over_is_withdrawn() -> None:
    relay: EventRelay[str] = EventRelay()
    async with anyio.create_task_group() as tg:
        with anyio.move_on_after(0.01):
            await relay.put("never read")  # nobody reads: cancelled while waiting
        tg.start_soon(relay.put, "read")
        assert await relay.get() == "read"
        relay.end()
        with pytest.raises(StopAsyncIteration):
            await relay.get()


async def test_an_end_comes_after_the_items_still_waiting() -> None:
    relay: EventRelay[int] = EventRelay()
    async with anyio.create_task_group() as tg:
        tg.start_soon(relay.put, 1)
        tg.start_soon(relay.put, 2)
        await anyio.sleep(0.01)  # both wait with their items
        relay.end()
        assert sorted([await relay.get(), await relay.get()]) == [1, 2]
        with pytest.raises(StopAsyncIteration):
            await relay.get()
