"""TemporalEngine against a real Temporal dev server, with a fake host (no runtime): each step is
performed once and recorded, a run attached to again returns what was recorded, a new worker
takes over a run from a worker that stopped, gather keeps order and limit, and a failed step
fails the run with its own exception class without being performed again."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
import trio
from temporal_fakes import FakeHost, spec

from pai.core import DurabilityError, StepLimitExceededError
from pai.durable_temporal import TemporalEngine, TemporalEngineError

pytestmark = pytest.mark.anyio


def queue() -> str:
    return f"tests-{uuid.uuid4().hex[:8]}"


def engine(temporal: str, task_queue: str, **options: Any) -> TemporalEngine:
    return TemporalEngine(
        target_host=temporal, task_queue=task_queue, heartbeat_timeout=2, **options
    )


async def test_each_step_is_performed_once_and_replays_from_its_record(temporal: str) -> None:
    host = FakeHost()
    run = spec(f"run-{uuid.uuid4().hex}", "d")
    durable = engine(temporal, queue())
    await durable.start(host)
    try:
        result = await durable.run(run)
        assert result == {
            "first": {"step": "a", "payload": {"n": 1}},
            "pair": [{"step": "b", "payload": {"n": 2}}, {"step": "c", "payload": {"n": 3}}],
            "more": [{"step": "d", "payload": None}],
        }
        assert sorted(host.calls) == ["a", "b", "c", "d"]
        # Attaching to the finished run returns its recorded result; nothing is performed.
        assert await durable.run(run) == result
        assert sorted(host.calls) == ["a", "b", "c", "d"]
    finally:
        await durable.aclose()
    assert not durable.started


async def test_gather_keeps_the_given_order_and_the_limit(temporal: str) -> None:
    # c finishes before b; the results keep the order asked for.
    host = FakeHost(limit=2, delays={"b": 0.5})
    durable = engine(temporal, queue())
    await durable.start(host)
    try:
        result = await durable.run(spec(f"run-{uuid.uuid4().hex}"))
        assert [item["step"] for item in result["pair"]] == ["b", "c"]
        assert host.calls == ["a", "b", "c"] or host.calls == ["a", "c", "b"]
        assert host.most_running == 2
        one_at_a_time = FakeHost(limit=1, delays={"b": 0.3})
        await durable.aclose()
        durable = engine(temporal, queue())
        await durable.start(one_at_a_time)
        result = await durable.run(spec(f"run-{uuid.uuid4().hex}"))
        assert [item["step"] for item in result["pair"]] == ["b", "c"]
        assert one_at_a_time.calls == ["a", "b", "c"]
        assert one_at_a_time.most_running == 1
    finally:
        await durable.aclose()


async def test_a_new_worker_takes_over_a_run_from_a_stopped_one(temporal: str) -> None:
    task_queue = queue()
    first, second = FakeHost(), FakeHost()
    first.hold["b"] = asyncio.Event()  # never set: the first worker never finishes step b
    run = spec(f"run-{uuid.uuid4().hex}")
    one = engine(temporal, task_queue, shutdown_grace=0)
    await one.start(first)
    waiting = asyncio.ensure_future(one.run(run))
    try:
        await asyncio.wait_for(first.started.setdefault("b", asyncio.Event()).wait(), 30)
        two = engine(temporal, task_queue, identity="second")
        await two.start(second)
        try:
            await one.aclose()  # its step b is cancelled, and Temporal retries it elsewhere
            with pytest.raises(DurabilityError, match="interrupted"):
                await waiting
            result = await asyncio.wait_for(two.run(run), 60)
        finally:
            await two.aclose()
    finally:
        waiting.cancel()
        await one.aclose()
    assert result["pair"][0] == {"step": "b", "payload": {"n": 2}}
    # Step a was recorded by the first worker: the second never performs it.
    assert "a" not in second.calls
    assert "b" in second.calls
    assert sorted(first.calls + second.calls).count("a") == 1


async def test_a_failed_step_fails_the_run_with_its_class_and_is_not_retried(
    temporal: str,
) -> None:
    host = FakeHost()
    durable = engine(temporal, queue())
    await durable.start(host)
    try:
        run = spec(f"run-{uuid.uuid4().hex}", "limit", "never")
        with pytest.raises(StepLimitExceededError, match="too many steps") as caught:
            await durable.run(run)
        assert caught.value.__cause__ is not None  # the Temporal failure it was read from
        assert host.calls.count("limit") == 1
        assert "never" not in host.calls
        # Attaching to the failed run raises the same.
        with pytest.raises(StepLimitExceededError):
            await durable.run(run)
        other = spec(f"run-{uuid.uuid4().hex}", "value-error")
        with pytest.raises(TemporalEngineError, match="ValueError: bad value") as failed:
            await durable.run(other)
        assert failed.value.error_type == "ValueError"
        assert host.calls.count("value-error") == 1
    finally:
        await durable.aclose()


async def test_only_json_crosses(temporal: str) -> None:
    host = FakeHost()
    durable = engine(temporal, queue())
    await durable.start(host)
    try:
        with pytest.raises(DurabilityError, match="not JSON"):
            await durable.run(spec(f"run-{uuid.uuid4().hex}", "not-json"))
        assert host.calls.count("not-json") == 1
        with pytest.raises(DurabilityError, match="not JSON"):
            await durable.run(spec(f"run-{uuid.uuid4().hex}", "not-json-payload"))
        assert "odd" not in host.calls
    finally:
        await durable.aclose()


async def test_run_before_start_is_refused() -> None:
    with pytest.raises(DurabilityError, match="before start"):
        await TemporalEngine().run(spec("r"))


async def test_an_unreachable_server_is_a_clear_error() -> None:
    durable = TemporalEngine(target_host="127.0.0.1:1", api_key="k-secret", tls=False)
    with pytest.raises(
        TemporalEngineError, match=r"could not connect to Temporal at 127\.0\.0\.1:1"
    ) as caught:
        await durable.start(FakeHost())
    assert "k-secret" not in str(caught.value)
    assert not durable.started


def test_trio_is_refused_with_a_clear_error() -> None:
    async def main() -> None:
        await TemporalEngine().start(FakeHost())

    with pytest.raises(DurabilityError, match="asyncio only"):
        trio.run(main)


async def test_a_workflow_input_pai_did_not_record_fails_the_run(temporal: str) -> None:
    from temporalio.client import Client, WorkflowFailureError
    from temporalio.exceptions import ApplicationError

    task_queue = queue()
    durable = engine(temporal, task_queue)
    await durable.start(FakeHost())
    try:
        client = await Client.connect(temporal)
        handle = await client.start_workflow(
            "pai.durable_run", "[1, 2]", id=f"odd-{uuid.uuid4().hex}", task_queue=task_queue
        )
        with pytest.raises(WorkflowFailureError) as caught:
            await asyncio.wait_for(handle.result(), 30)
        cause = caught.value.cause
        assert isinstance(cause, ApplicationError)
        assert cause.type == "DurabilityError"
        assert "RunSpec.to_json()" in cause.message
    finally:
        await durable.aclose()


async def test_a_step_longer_than_the_heartbeat_timeout_is_not_taken_for_dead(
    temporal: str,
) -> None:
    # Step b runs 3.5 s with heartbeat_timeout 2: its heartbeats keep it alive, so Temporal
    # neither times it out nor gives it to another attempt.
    host = FakeHost(delays={"b": 3.5})
    durable = engine(temporal, queue())
    await durable.start(host)
    try:
        result = await durable.run(spec(f"run-{uuid.uuid4().hex}"))
        assert result["pair"][0] == {"step": "b", "payload": {"n": 2}}
        assert host.calls.count("b") == 1
    finally:
        await durable.aclose()
