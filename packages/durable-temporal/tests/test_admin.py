"""Administering runs on a real Temporal dev server: list (statuses, thread and agent from the
memo, the worker running a step, the error of a failed run), cancel and resume, through an
engine that was never started."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Sequence

import pytest
from temporal_fakes import FakeHost, spec

from pai.core import DurabilityError, StepLimitExceededError, UnknownDurableRunError
from pai.core.ext import DurableRunAdmin, DurableRunInfo
from pai.durable_temporal import TemporalEngine

pytestmark = pytest.mark.anyio


async def eventually(
    admin: TemporalEngine,
    check: Callable[[Sequence[DurableRunInfo]], bool],
    status: str | None = None,
) -> Sequence[DurableRunInfo]:
    """The runs listed, once ``check`` holds (Temporal's list is eventually consistent)."""
    deadline = time.monotonic() + 20
    while True:
        runs = await admin.list_runs(status=status)
        if check(runs) or time.monotonic() > deadline:
            return runs
        await asyncio.sleep(0.1)


async def test_list_cancel_and_resume(temporal: str) -> None:
    task_queue = f"admin-{uuid.uuid4().hex[:8]}"
    host = FakeHost()
    host.hold["wait"] = asyncio.Event()
    worker = TemporalEngine(
        target_host=temporal, task_queue=task_queue, heartbeat_timeout=2, identity="worker-x"
    )
    admin = TemporalEngine(target_host=temporal, task_queue=task_queue)
    assert isinstance(admin, DurableRunAdmin)
    await worker.start(host)
    held = spec(f"held-{uuid.uuid4().hex}", "wait")
    waiting = asyncio.ensure_future(worker.run(held))
    try:
        await asyncio.wait_for(host.started.setdefault("wait", asyncio.Event()).wait(), 30)
        ok = spec(f"ok-{uuid.uuid4().hex}")
        await worker.run(ok)
        failed = spec(f"failed-{uuid.uuid4().hex}", "limit")
        with pytest.raises(StepLimitExceededError):
            await worker.run(failed)

        runs = await eventually(admin, lambda runs: len(runs) == 3)
        by_id = {run.run_id: run for run in runs}
        assert by_id[ok.run_id].status == "succeeded"
        assert by_id[ok.run_id].engine_status == "COMPLETED"
        assert by_id[ok.run_id].thread_id == ok.thread_id
        assert by_id[ok.run_id].agent_name == "main"
        assert by_id[failed.run_id].status == "failed"
        assert by_id[failed.run_id].error == "StepLimitExceededError: the run took too many steps"
        # Newest first.
        assert [run.run_id for run in runs][-1] == held.run_id
        running = by_id[held.run_id]
        assert running.status == "running"
        assert running.executor == "worker-x"
        assert running.created_at is not None
        assert [r.run_id for r in await admin.list_runs(status="failed")] == [failed.run_id]
        assert await admin.list_runs(status="pending") == []
        assert len(await admin.list_runs(limit=1)) == 1
        with pytest.raises(DurabilityError, match="unknown durable run status"):
            await admin.list_runs(status="done")

        # A running run resumes by itself: resume is a no-op.
        await admin.resume_run(held.run_id)
        await admin.cancel_run(held.run_id)
        with pytest.raises(DurabilityError, match="was cancelled"):
            await asyncio.wait_for(waiting, 30)
        runs = await eventually(
            admin, lambda runs: [r.run_id for r in runs] == [held.run_id], status="cancelled"
        )
        assert [r.run_id for r in runs] == [held.run_id]
        assert runs[0].engine_status == "CANCELED"

        with pytest.raises(DurabilityError, match="already succeeded"):
            await admin.cancel_run(ok.run_id)
        with pytest.raises(DurabilityError, match="never a closed one"):
            await admin.resume_run(held.run_id)
        with pytest.raises(UnknownDurableRunError):
            await admin.cancel_run("no-such-run")
        with pytest.raises(UnknownDurableRunError):
            await admin.resume_run("no-such-run")
    finally:
        waiting.cancel()
        await worker.aclose()
        await admin.aclose_admin()


async def test_an_empty_queue_lists_nothing(temporal: str) -> None:
    admin = TemporalEngine(target_host=temporal, task_queue=f"empty-{uuid.uuid4().hex[:8]}")
    try:
        assert await admin.list_runs() == []
    finally:
        await admin.aclose_admin()
