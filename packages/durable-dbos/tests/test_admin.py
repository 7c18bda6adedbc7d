"""DbosEngine as a DurableRunAdmin, on real DBOS with SQLite files under tmp_path: runs are read
through a DBOSClient (no start, no recovery), a finished run is succeeded, a run interrupted by
closing its runtime is running (DBOS's PENDING), cancel stops it from being resumed, resume hands
it back to the next start, which finishes it, and ``pai runs`` does the same from pai.toml
through the real plugin."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from test_engine import Gate, engine_at, gated_runtime

from pai.core import DurabilityError, SqliteStorage, UnknownDurableRunError
from pai.core.cli import create_cli
from pai.core.ext import DurableRunAdmin, DurableRunInfo
from pai.core.testing import reset_plugins
from pai.durable_dbos import DbosEngine, DbosEngineError


async def finished_run(folder: Path, thread_id: str = "t") -> str:
    """A run of the gated agent that finished; its id."""
    gate = Gate()
    gate.release.set()
    async with gated_runtime(
        SqliteStorage(folder / "threads.sqlite"), engine_at(folder), gate
    ) as rt:
        thread = await rt.admin(identity="ann").create_thread(thread_id=thread_id)
        result = await thread.send("go")
        assert result.status == "completed"
    return (await admin_runs(folder))[0].run_id  # the newest


async def interrupted_run(folder: Path, thread_id: str = "t") -> str:
    """A run of the gated agent interrupted inside tool ``c`` by closing its runtime; its id."""
    gate = Gate()
    runtime = gated_runtime(SqliteStorage(folder / "threads.sqlite"), engine_at(folder), gate)
    await runtime.__aenter__()
    try:
        thread = await runtime.admin(identity="ann").create_thread(thread_id=thread_id)
        sending = asyncio.ensure_future(thread.send("go"))
        await asyncio.wait_for(gate.reached_c.wait(), 30)
    finally:
        await runtime.aclose()
    with pytest.raises(DurabilityError, match="interrupted"):
        await sending
    return (await admin_runs(folder))[0].run_id  # the newest


async def admin_runs(folder: Path, **filters: Any) -> list[DurableRunInfo]:
    admin = engine_at(folder)
    try:
        return list(await admin.list_runs(**filters))
    finally:
        await admin.aclose_admin()


async def status_of(folder: Path, run_id: str) -> DurableRunInfo:
    [run] = [run for run in await admin_runs(folder) if run.run_id == run_id]
    return run


@pytest.mark.anyio
async def test_a_finished_run_lists_as_succeeded(tmp_path: Path) -> None:
    before = time.time()
    run_id = await finished_run(tmp_path)
    admin = engine_at(tmp_path)
    assert isinstance(admin, DurableRunAdmin)
    try:
        [run] = await admin.list_runs()
        assert not admin.started  # read through a client: DBOS was not launched
    finally:
        await admin.aclose_admin()
    assert run.run_id == run_id
    assert run.status == "succeeded"
    assert run.engine_status == "SUCCESS"
    assert (run.thread_id, run.agent_name) == ("t", "main")
    assert run.executor == "pai:test"
    assert run.error is None
    assert run.created_at is not None
    assert run.updated_at is not None
    assert before - 1 <= run.created_at.timestamp() <= run.updated_at.timestamp() <= time.time()
    assert await admin_runs(tmp_path, status="succeeded") == [run]
    assert await admin_runs(tmp_path, status="running") == []
    # A finished run is neither cancelled nor resumed (DBOS would leave it as it is).
    admin = engine_at(tmp_path)
    try:
        with pytest.raises(DurabilityError, match=r"already succeeded; there is nothing to cancel"):
            await admin.cancel_run(run_id)
        with pytest.raises(DurabilityError, match=r"already succeeded; DBOS resumes only"):
            await admin.resume_run(run_id)
    finally:
        await admin.aclose_admin()
    assert (await status_of(tmp_path, run_id)).status == "succeeded"


@pytest.mark.anyio
async def test_cancel_keeps_a_run_from_resuming_and_resume_hands_it_to_the_next_start(
    tmp_path: Path,
) -> None:
    run_id = await interrupted_run(tmp_path)
    run = await status_of(tmp_path, run_id)
    assert (run.status, run.engine_status) == ("running", "PENDING")

    admin = engine_at(tmp_path)
    try:
        await admin.cancel_run(run_id)
        await admin.cancel_run(run_id)  # cancelling a cancelled run changes nothing
    finally:
        await admin.aclose_admin()
    run = await status_of(tmp_path, run_id)
    assert (run.status, run.engine_status) == ("cancelled", "CANCELLED")

    # The next start does not resume a cancelled run.
    gate = Gate()
    gate.release.set()
    async with gated_runtime(SqliteStorage(tmp_path / "threads.sqlite"), engine_at(tmp_path), gate):
        await asyncio.sleep(1.0)  # ten recovery intervals
    assert gate.ran == []
    assert (await status_of(tmp_path, run_id)).status == "cancelled"

    # Resumed with no process running: DBOS enqueues it (pending) ...
    admin = engine_at(tmp_path)
    try:
        await admin.resume_run(run_id)
    finally:
        await admin.aclose_admin()
    run = await status_of(tmp_path, run_id)
    assert (run.status, run.engine_status) == ("pending", "ENQUEUED")

    # ... and the next start finishes it from its last recorded step: only c runs again.
    gate = Gate()
    gate.release.set()
    storage = SqliteStorage(tmp_path / "threads.sqlite")
    async with gated_runtime(storage, engine_at(tmp_path), gate):
        with anyio.fail_after(30):
            while (await status_of(tmp_path, run_id)).status != "succeeded":  # noqa: ASYNC110
                await asyncio.sleep(0.1)
        messages = await storage.get_messages("t")
    assert gate.ran == ["c"]
    assert [m.role for m in messages] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]


@pytest.mark.anyio
async def test_cancelling_a_live_run_stops_it_after_the_step_it_is_in(tmp_path: Path) -> None:
    """The step running when the run is cancelled finishes; the run takes no further step (the
    thread gets no more appends) and its caller gets a DurabilityError saying so."""
    gate = Gate()
    storage = SqliteStorage(tmp_path / "threads.sqlite")
    async with gated_runtime(storage, engine_at(tmp_path), gate) as runtime:
        thread = await runtime.admin(identity="ann").create_thread(thread_id="t")
        sending = asyncio.ensure_future(thread.send("go"))
        await asyncio.wait_for(gate.reached_c.wait(), 30)
        [run] = await admin_runs(tmp_path)
        admin = engine_at(tmp_path)
        try:
            await admin.cancel_run(run.run_id)
        finally:
            await admin.aclose_admin()
        gate.release.set()
        with pytest.raises(DurabilityError, match=r"was cancelled \(pai runs cancel\)"):
            await asyncio.wait_for(sending, 30)
        messages = await storage.get_messages("t")
    assert gate.finished == ["b", "a", "c"]
    assert [m.role for m in messages] == ["user", "assistant", "tool", "tool"]
    assert (await status_of(tmp_path, run.run_id)).status == "cancelled"


@pytest.mark.anyio
async def test_a_resumed_run_is_taken_by_a_process_of_another_executor_id(tmp_path: Path) -> None:
    run_id = await interrupted_run(tmp_path)
    admin = engine_at(tmp_path)
    try:
        await admin.resume_run(run_id)
    finally:
        await admin.aclose_admin()
    gate = Gate()
    gate.release.set()
    other = DbosEngine(
        system_database_url=f"sqlite:///{tmp_path / 'dbos.sqlite'}",
        executor_id="pai:other",
        recovery_interval=0.1,
    )
    async with gated_runtime(SqliteStorage(tmp_path / "threads.sqlite"), other, gate):
        with anyio.fail_after(30):
            while (await status_of(tmp_path, run_id)).status != "succeeded":  # noqa: ASYNC110
                await asyncio.sleep(0.1)
    assert gate.ran == ["c"]
    assert (await status_of(tmp_path, run_id)).executor == "pai:other"


@pytest.mark.anyio
async def test_an_unknown_run_is_named(tmp_path: Path) -> None:
    admin = engine_at(tmp_path)
    try:
        # No SQLite file yet: no runs, and the file is not created.
        assert await admin.list_runs() == []
        with pytest.raises(UnknownDurableRunError, match=r"no durable run 'nope' is recorded in"):
            await admin.cancel_run("nope")
        assert not (tmp_path / "dbos.sqlite").exists()
    finally:
        await admin.aclose_admin()
    await finished_run(tmp_path)
    admin = engine_at(tmp_path)
    try:
        for act in (admin.cancel_run, admin.resume_run):
            with pytest.raises(UnknownDurableRunError) as caught:
                await act("nope")
            assert caught.value.run_id == "nope"
            assert f"the DBOS system database sqlite:///{tmp_path / 'dbos.sqlite'}" in str(
                caught.value
            )
        with pytest.raises(DurabilityError, match="unknown durable run status 'done'"):
            await admin.list_runs(status="done")
    finally:
        await admin.aclose_admin()


@pytest.mark.anyio
async def test_an_unreachable_database_fails_at_once_with_its_password_masked() -> None:
    admin = DbosEngine(system_database_url="postgresql://app:topsecret@127.0.0.1:1/runs")
    try:
        with anyio.fail_after(30), pytest.raises(DbosEngineError) as caught:
            await admin.list_runs()
    finally:
        await admin.aclose_admin()
    message = str(caught.value)
    assert "postgresql://app:***@127.0.0.1:1/runs" in message
    assert "topsecret" not in message


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder with a pai.toml configuring the real plugin's engine on a relative SQLite file,
    as the working directory; only pai-durable-dbos's plugin loaded."""
    for name in list(os.environ):
        if name.startswith("PAI_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("PAI_LOAD_PLUGINS", "pai-durable-dbos")
    (tmp_path / "pai.toml").write_text(
        '[durability]\nengine = "dbos"\nsystem_database_url = "sqlite:///dbos.sqlite"\n'
        'executor_id = "pai:test"\nrecovery_interval = 0.1\n'
    )
    monkeypatch.chdir(tmp_path)
    reset_plugins()
    yield tmp_path
    reset_plugins()


def pai(*args: str) -> Any:
    return CliRunner().invoke(create_cli(), ["runs", *args])


def test_pai_runs_end_to_end_through_the_plugin(project: Path) -> None:
    empty = pai("ls")
    assert empty.exit_code == 0, empty.output
    assert empty.stderr == "pai: no durable runs recorded\n"

    done = anyio.run(finished_run, project, backend="asyncio")
    lost = anyio.run(interrupted_run, project, "t2", backend="asyncio")

    listed = pai("ls")
    assert listed.exit_code == 0, listed.output
    rows = [line.split()[:4] for line in listed.stdout.splitlines()]
    assert rows[0] == ["RUN", "STATUS", "THREAD", "AGENT"]
    assert sorted(rows[1:]) == sorted(
        [[done, "succeeded", "t", "main"], [lost, "running", "t2", "main"]]
    )

    cancelled = pai("cancel", lost)
    assert cancelled.exit_code == 0, cancelled.output
    assert cancelled.stdout == f"{lost}\n"
    [run] = json.loads(pai("ls", "--status", "cancelled", "--json").stdout)["runs"]
    assert (run["id"], run["status"], run["engine_status"]) == (lost, "cancelled", "CANCELLED")
    assert run["executor"] == "pai:test"

    resumed = pai("resume", lost, "--json")
    assert resumed.exit_code == 0, resumed.output
    assert json.loads(resumed.stdout) == {"id": lost, "status": "pending"}
    [run] = json.loads(pai("ls", "--status", "pending", "--json").stdout)["runs"]
    assert run["engine_status"] == "ENQUEUED"

    again = pai("cancel", done)
    assert again.exit_code == 1
    assert f"durable run '{done}' already succeeded" in again.stderr
    unknown = pai("resume", "nope")
    assert unknown.exit_code == 1
    assert "no durable run 'nope' is recorded in the DBOS system database sqlite:///" in (
        unknown.stderr
    )
    newest = json.loads(pai("ls", "--limit", "1", "--json").stdout)["runs"]
    assert [run["id"] for run in newest] == [lost]


def test_pai_runs_masks_the_database_password(
    project: Path,
) -> None:
    (project / "pai.toml").write_text(
        '[durability]\nengine = "dbos"\n'
        'system_database_url = "postgresql://app:topsecret@127.0.0.1:1/runs"\n'
    )
    result = pai("ls")
    assert result.exit_code == 1
    assert "postgresql://app:***@127.0.0.1:1/runs" in result.stderr
    assert "topsecret" not in result.output
