"""The run channel conformance suite: the contract every :class:`~pai.core.ext.RunChannel` keeps.

Subclass :class:`RunChannelConformance` in a test module of your package and implement
:meth:`~RunChannelConformance.create_channel`; pytest then runs the contract (see
:mod:`pai.core._realtime`) against your channel:

- begin: a run is registered and found by id and as its thread's live run; a second run on a
  busy thread, a run past its key's limit and a taken id are refused, storing nothing;
- frames: appended frames are read back in order from any position, every string exactly; a
  reader waiting for frames is woken by an append; a live run with no new frame answers an
  empty, unfinished read after ``wait``;
- end: readers learn it, the thread and the key are free again, a second end and a late append
  change nothing, and an ended run is forgotten after the retention;
- cancel: a request reaches the owner waiting in ``wait_cancel``; a run that is not live
  cannot be cancelled;
- attended: a read marks the run attended;
- across channel objects, for a backend that implements
  :meth:`~RunChannelConformance.open_second` (a second channel over the same data, as another
  process would open it): runs, frames, ends and cancel requests cross, and two begins on one
  thread let exactly one win.

Tests run on asyncio and, when trio is installed, on trio; override the ``anyio_backend``
fixture to narrow that.
"""

from __future__ import annotations

import importlib.util
import uuid
from collections.abc import AsyncIterator, Awaitable
from typing import ClassVar

import anyio
import anyio.lowlevel
import pytest

from pai.core._awaitables import resolve
from pai.core._realtime import RunChannel, RunInfo

__all__ = ["RunChannelConformance"]

_BACKENDS = ["asyncio", "trio"] if importlib.util.find_spec("trio") else ["asyncio"]

ODD_FRAMES: tuple[str, ...] = (
    "data: {}\n\n",
    "id: 3\ndata: \u00e9\u6f22\U0001f600\n\n",
    "",
    "x" * 70_000,
    "\x00\ud800 lone surrogate and NUL",
)


def _run(
    thread_id: str = "t1", *, key: str = "alice", run_id: str | None = None, scope: str = "acme"
) -> RunInfo:
    return RunInfo(
        run_id=run_id or uuid.uuid4().hex,
        thread_id=thread_id,
        scope_key=scope,
        agent="helper",
        protocol="ag-ui",
        limit_key=key,
    )


class RunChannelConformance:
    """The run channel contract as pytest tests (see the module documentation)."""

    backends: ClassVar[list[str]] = _BACKENDS

    # Kept (not pai.core.testing.pytest_plugin): users' suites subclass this class and rely on it
    # to run every test on each backend without a fixture of their own.
    @pytest.fixture(params=_BACKENDS)
    def anyio_backend(self, request: pytest.FixtureRequest) -> str:
        return str(request.param)

    def create_channel(self, *, retain_finished: float) -> RunChannel | Awaitable[RunChannel]:
        """A fresh, empty channel keeping ended runs ``retain_finished`` seconds."""
        raise NotImplementedError

    def open_second(self, channel: RunChannel) -> RunChannel | Awaitable[RunChannel] | None:
        """A second channel over the same data as ``channel`` (as another process would open
        it), or ``None`` (the default) for a channel of one process."""
        return None

    @pytest.fixture
    async def channel(self) -> AsyncIterator[RunChannel]:
        channel = await resolve(self.create_channel(retain_finished=300.0))
        try:
            yield channel
        finally:
            await channel.aclose()

    @pytest.fixture
    async def second(self, channel: RunChannel) -> AsyncIterator[RunChannel]:
        other = self.open_second(channel)
        if other is None:
            pytest.skip("the channel serves one process (open_second returns None)")
        second = await resolve(other)
        try:
            yield second
        finally:
            await second.aclose()

    # -- begin ---------------------------------------------------------------------------------

    @pytest.mark.anyio
    async def test_a_run_begins_and_is_found(self, channel: RunChannel) -> None:
        info = _run()
        assert await channel.begin(info, max_live_per_key=4) is None
        assert await channel.get(info.run_id) == info
        assert await channel.live("t1") == info
        assert await channel.live("t2") is None
        assert await channel.get("no-such-run") is None

    @pytest.mark.anyio
    async def test_a_busy_thread_refuses_a_second_run(self, channel: RunChannel) -> None:
        first = _run()
        assert await channel.begin(first, max_live_per_key=4) is None
        second = _run()
        refused = await channel.begin(second, max_live_per_key=4)
        assert refused is not None
        assert refused.reason == "busy"
        assert refused.busy == first
        assert await channel.get(second.run_id) is None

    @pytest.mark.anyio
    async def test_a_key_past_its_limit_is_refused(self, channel: RunChannel) -> None:
        assert await channel.begin(_run("t1"), max_live_per_key=2) is None
        assert await channel.begin(_run("t2"), max_live_per_key=2) is None
        third = _run("t3")
        refused = await channel.begin(third, max_live_per_key=2)
        assert refused is not None
        assert refused.reason == "limit"
        assert refused.live_for_key == 2
        assert await channel.get(third.run_id) is None
        # Another key is counted apart.
        assert await channel.begin(_run("t4", key="bob"), max_live_per_key=2) is None

    @pytest.mark.anyio
    async def test_a_taken_run_id_is_refused(self, channel: RunChannel) -> None:
        first = _run("t1", run_id="run-1")
        assert await channel.begin(first, max_live_per_key=4) is None
        await channel.end("run-1")
        refused = await channel.begin(_run("t2", run_id="run-1"), max_live_per_key=4)
        assert refused is not None
        assert refused.reason == "taken"
        assert await channel.live("t2") is None

    # -- frames --------------------------------------------------------------------------------

    @pytest.mark.anyio
    async def test_frames_read_back_in_order_from_any_position(self, channel: RunChannel) -> None:
        info = _run()
        await channel.begin(info, max_live_per_key=4)
        await channel.append(info.run_id, ["a", "b"])
        await channel.append(info.run_id, list(ODD_FRAMES))
        everything = ("a", "b", *ODD_FRAMES)
        read = await channel.read(info.run_id, after=0, wait=0)
        assert read is not None
        assert read.frames == everything
        assert not read.finished
        later = await channel.read(info.run_id, after=3, wait=0)
        assert later is not None
        assert later.frames == everything[3:]
        past = await channel.read(info.run_id, after=len(everything), wait=0.05)
        assert past is not None
        assert past.frames == ()
        assert not past.finished
        assert await channel.read("no-such-run", after=0, wait=0) is None

    @pytest.mark.anyio
    async def test_an_append_wakes_a_waiting_reader(self, channel: RunChannel) -> None:
        info = _run()
        await channel.begin(info, max_live_per_key=4)
        got: list[tuple[str, ...]] = []

        async def reader() -> None:
            read = await channel.read(info.run_id, after=0, wait=60)
            assert read is not None
            got.append(read.frames)

        with anyio.fail_after(30):
            async with anyio.create_task_group() as group:
                group.start_soon(reader)
                await anyio.sleep(0.1)
                await channel.append(info.run_id, ["hello"])
        assert got == [("hello",)]

    @pytest.mark.anyio
    async def test_an_incremental_reader_sees_every_frame_once(self, channel: RunChannel) -> None:
        info = _run()
        await channel.begin(info, max_live_per_key=4)
        sent = [f"frame {n}" for n in range(200)]
        seen: list[str] = []

        async def reader() -> None:
            while True:
                read = await channel.read(info.run_id, after=len(seen), wait=10)
                assert read is not None
                seen.extend(read.frames)
                if read.finished:
                    return

        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                group.start_soon(reader)
                for start in range(0, len(sent), 7):
                    await channel.append(info.run_id, sent[start : start + 7])
                    await anyio.lowlevel.checkpoint()
                await channel.end(info.run_id)
        assert seen == sent

    # -- end -----------------------------------------------------------------------------------

    @pytest.mark.anyio
    async def test_an_ended_run_frees_its_thread_and_key(self, channel: RunChannel) -> None:
        info = _run()
        await channel.begin(info, max_live_per_key=1)
        await channel.append(info.run_id, ["last"])
        await channel.end(info.run_id)
        await channel.end(info.run_id)  # harmless
        await channel.append(info.run_id, ["too late"])
        read = await channel.read(info.run_id, after=0, wait=60)
        assert read is not None
        assert read.frames == ("last",)
        assert read.finished
        ended = await channel.get(info.run_id)
        assert ended is not None
        assert ended.finished
        assert await channel.live("t1") is None
        assert await channel.begin(_run("t1"), max_live_per_key=1) is None

    @pytest.mark.anyio
    async def test_an_end_wakes_a_waiting_reader(self, channel: RunChannel) -> None:
        info = _run()
        await channel.begin(info, max_live_per_key=4)
        with anyio.fail_after(30):
            async with anyio.create_task_group() as group:

                async def reader() -> None:
                    read = await channel.read(info.run_id, after=0, wait=60)
                    assert read is not None
                    assert read.finished

                group.start_soon(reader)
                await anyio.sleep(0.1)
                await channel.end(info.run_id)

    @pytest.mark.anyio
    async def test_an_ended_run_is_forgotten_after_the_retention(self) -> None:
        channel = await resolve(self.create_channel(retain_finished=0.0))
        try:
            old = _run("t1")
            await channel.begin(old, max_live_per_key=4)
            await channel.end(old.run_id)
            await anyio.sleep(0.05)
            live = _run("t2")
            await channel.begin(live, max_live_per_key=4)  # forgetting happens on a begin
            assert await channel.get(old.run_id) is None
            assert await channel.get(live.run_id) == live  # live runs are never forgotten
        finally:
            await channel.aclose()

    # -- cancel and attendance -----------------------------------------------------------------

    @pytest.mark.anyio
    async def test_a_cancel_request_reaches_the_waiting_owner(self, channel: RunChannel) -> None:
        info = _run()
        await channel.begin(info, max_live_per_key=4)
        assert await channel.wait_cancel(info.run_id, wait=0.05) is None
        reasons: list[str | None] = []

        async def owner() -> None:
            reasons.append(await channel.wait_cancel(info.run_id, wait=60))

        with anyio.fail_after(30):
            async with anyio.create_task_group() as group:
                group.start_soon(owner)
                await anyio.sleep(0.1)
                assert await channel.cancel(info.run_id, "stop, please")
        assert reasons == ["stop, please"]
        await channel.end(info.run_id)
        assert not await channel.cancel(info.run_id, "again")
        assert not await channel.cancel("no-such-run", "again")

    @pytest.mark.anyio
    async def test_a_read_marks_the_run_attended(self, channel: RunChannel) -> None:
        info = _run()
        await channel.begin(info, max_live_per_key=4)
        assert not await channel.attended(info.run_id, within=60)
        await channel.read(info.run_id, after=0, wait=0)
        assert await channel.attended(info.run_id, within=60)
        assert not await channel.attended("no-such-run", within=60)

    # -- across channel objects ----------------------------------------------------------------

    @pytest.mark.anyio
    async def test_runs_cross_to_a_second_channel(
        self, channel: RunChannel, second: RunChannel
    ) -> None:
        info = _run()
        await channel.begin(info, max_live_per_key=4)
        assert await second.get(info.run_id) == info
        assert await second.live("t1") == info
        refused = await second.begin(_run("t1"), max_live_per_key=4)
        assert refused is not None
        assert refused.reason == "busy"
        got: list[tuple[str, ...]] = []

        async def remote_reader() -> None:
            seen: list[str] = []
            while True:
                read = await second.read(info.run_id, after=len(seen), wait=60)
                assert read is not None
                seen.extend(read.frames)
                if read.finished:
                    got.append(tuple(seen))
                    return

        with anyio.fail_after(30):
            async with anyio.create_task_group() as group:
                group.start_soon(remote_reader)
                await anyio.sleep(0.1)
                await channel.append(info.run_id, ["a", *ODD_FRAMES])
                await anyio.sleep(0.1)
                await channel.append(info.run_id, ["z"])
                await channel.end(info.run_id)
        assert got == [("a", *ODD_FRAMES, "z")]
        assert await channel.attended(info.run_id, within=60)
        assert await second.live("t1") is None

    @pytest.mark.anyio
    async def test_a_cancel_request_crosses_to_the_owner(
        self, channel: RunChannel, second: RunChannel
    ) -> None:
        info = _run()
        await channel.begin(info, max_live_per_key=4)
        reasons: list[str | None] = []

        async def owner() -> None:
            reasons.append(await channel.wait_cancel(info.run_id, wait=60))

        with anyio.fail_after(30):
            async with anyio.create_task_group() as group:
                group.start_soon(owner)
                await anyio.sleep(0.1)
                assert await second.cancel(info.run_id, "from elsewhere")
        assert reasons == ["from elsewhere"]

    @pytest.mark.anyio
    async def test_two_begins_on_one_thread_let_one_win(
        self, channel: RunChannel, second: RunChannel
    ) -> None:
        for attempt in range(5):
            thread_id = f"race-{attempt}"
            results: list[object] = []

            async def begin(
                on: RunChannel, tid: str = thread_id, into: list[object] = results
            ) -> None:
                into.append(await on.begin(_run(tid), max_live_per_key=100))

            async with anyio.create_task_group() as group:
                group.start_soon(begin, channel)
                group.start_soon(begin, second)
            assert sorted(result is None for result in results) == [False, True]
