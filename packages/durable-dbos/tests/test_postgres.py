"""DBOS on PostgreSQL as the system database: a durable run, workers killed with SIGKILL and
restarted with their executor id, and a live worker of another executor id that leaves a dead
worker's run alone.

The server is the one ``PAI_TEST_POSTGRES_URL`` names (``bash scripts/with-postgres.sh CMD``
starts one); without it these tests skip saying why, or fail when ``PAI_REQUIRE_POSTGRES=1``.
Each test keeps DBOS's tables in a schema of its own (``system_schema``), dropped afterwards.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from dbos_crash_worker import Scenario, dumped
from dbos_harness import Chain, ForkServer, check_resumed, recovery_report, run_chain

from pai.core import InMemoryStorage, SqliteStorage
from pai.durable_dbos import DbosEngine

URL_VARIABLE = "PAI_TEST_POSTGRES_URL"
REQUIRE_VARIABLE = "PAI_REQUIRE_POSTGRES"


def unavailable(reason: str) -> None:
    if os.environ.get(REQUIRE_VARIABLE) == "1":
        pytest.fail(f"{reason} ({REQUIRE_VARIABLE}=1: PostgreSQL tests must run)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def postgres_url() -> str:
    url = os.environ.get(URL_VARIABLE, "")
    if not url:
        unavailable(
            f"{URL_VARIABLE} is not set, so there is no PostgreSQL server to test against; run "
            "the tests under `bash scripts/with-postgres.sh ...`, or set it to a server's URL"
        )
    import psycopg

    from pai.durable_dbos._options import mask_url

    try:
        psycopg.connect(url, connect_timeout=5).close()
    except psycopg.Error as error:
        unavailable(
            f"the PostgreSQL server at {mask_url(url)} ({URL_VARIABLE}) does not answer: "
            f"{mask_url(' '.join(str(error).split()))}"
        )
    return url


@pytest.fixture
def schema(postgres_url: str) -> Iterator[str]:
    """A fresh schema for DBOS's tables, dropped after the test."""
    import psycopg

    name = f"pai_dbos_{uuid.uuid4().hex[:12]}"
    yield name
    with psycopg.connect(postgres_url, autocommit=True, connect_timeout=10) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE'.encode())


@pytest.mark.anyio
async def test_a_durable_run_on_postgres_stores_what_a_plain_run_stores(
    tmp_path: Path, postgres_url: str, schema: str
) -> None:
    engine = DbosEngine(
        system_database_url=postgres_url,
        system_schema=schema,
        executor_id="pai:pg-test",
        recovery_interval=0.1,
    )
    (tmp_path / "durable").mkdir()
    durable = Scenario(tmp_path / "durable")
    storage = SqliteStorage(tmp_path / "durable" / "threads.sqlite")
    async with durable.build(storage, engine) as runtime:
        thread = await runtime.admin(identity="ann").create_thread(thread_id="t")
        result = await thread.send("go")
        stored = dumped(await storage.get_messages("t"))
    plain_storage = InMemoryStorage()
    async with Scenario(tmp_path).build(plain_storage, None) as runtime:
        thread = await runtime.admin(identity="ann").create_thread(thread_id="t")
        expected = await thread.send("go")
        plain_stored = dumped(await plain_storage.get_messages("t"))
    assert result.text == "done"
    assert dumped(result.messages) == dumped(expected.messages)
    assert stored == plain_stored
    import psycopg

    with psycopg.connect(postgres_url, connect_timeout=10) as conn:
        query = f'SELECT status, executor_id, application_version FROM "{schema}".workflow_status'
        rows = conn.execute(query.encode()).fetchall()
    assert rows == [("SUCCESS", "pai:pg-test", "pai-durable-1")]


POINTS = ("model:1", "tool:b:after", "append:2", "model:3")


def test_killed_workers_resume_on_postgres(
    tmp_path: Path, postgres_url: str, schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    server = ForkServer({"PAI_DBOS_URL": postgres_url, "PAI_DBOS_SCHEMA": schema})
    try:
        chains = {"uncrashed": run_chain(Chain(None, tmp_path / "uncrashed"), server.run)}
        for point in POINTS:
            chains[point] = run_chain(Chain(point, tmp_path / point.replace(":", "-")), server.run)
    finally:
        server.close()
    assert chains["uncrashed"].first == 0, chains["uncrashed"].explain()
    for point in POINTS:
        check_resumed(chains[point], chains["uncrashed"])
    with capsys.disabled():
        killed = {point: chains[point] for point in POINTS}
        print("\nrecovery after SIGKILL (PostgreSQL):\n  " + recovery_report(killed))


def test_a_live_worker_of_another_executor_id_leaves_a_dead_workers_run_alone(
    tmp_path: Path, postgres_url: str, schema: str
) -> None:
    """With takeover off: worker w1 dies in a run; worker w2 starts on the same DBOS schema and
    runs its own run to the end without touching w1's (DBOS resumes only its own executor id's
    runs); w1 restarted resumes its run."""
    base = {"PAI_DBOS_URL": postgres_url, "PAI_DBOS_SCHEMA": schema, "PAI_TAKEOVER_AFTER": "none"}
    first = ForkServer({**base, "PAI_DURABLE_EXECUTOR": "w1"})
    second = ForkServer({**base, "PAI_DURABLE_EXECUTOR": "w2"})
    try:
        dead = Chain("tool:c:before", tmp_path / "w1")
        dead.folder.mkdir()
        dead.first = first.run(dead.folder, "run", "tool:c:before")
        other = run_chain(Chain(None, tmp_path / "w2"), second.run)
        dead.second = first.run(dead.folder, "recover", None)
    finally:
        first.close()
        second.close()
    dead.load()
    assert other.first == 0, other.explain()
    dead_run = json.loads((dead.folder / "spec.json").read_text())["run_id"]
    other_run = json.loads((other.folder / "spec.json").read_text())["run_id"]
    # w2 ran only its own run: every effect in its folder is keyed by its run id.
    keys = [line.split("\t")[0] for line in (other.folder / "lines.txt").read_text().splitlines()]
    assert keys
    assert all(key.startswith(f"{other_run}/") for key in keys)
    check_resumed(dead, other)
    keys = [line.split("\t")[0] for line in (dead.folder / "lines.txt").read_text().splitlines()]
    assert all(key.startswith(f"{dead_run}/") for key in keys)


def test_a_live_worker_takes_over_the_run_of_a_silent_one(
    tmp_path: Path, postgres_url: str, schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Worker w1 dies in a run (SIGKILL); worker w2, another executor id on the same database and
    thread storage, attaches to the run and, once w1 is silent for ``takeover_after``, claims
    it: DBOS resumes it on w2, which completes it. Each effect happens once, and the thread
    equals an uncrashed run's."""
    base = {"PAI_DBOS_URL": postgres_url, "PAI_DBOS_SCHEMA": schema, "PAI_TAKEOVER_AFTER": "1"}
    first = ForkServer({**base, "PAI_DURABLE_EXECUTOR": "w1"})
    second = ForkServer({**base, "PAI_DURABLE_EXECUTOR": "w2"})
    try:
        expected = run_chain(Chain(None, tmp_path / "uncrashed"), first.run)
        dead = Chain("tool:c:before", tmp_path / "w1")
        dead.folder.mkdir()
        dead.first = first.run(dead.folder, "run", "tool:c:before")
        killed = time.time()
        dead.second = second.run(dead.folder, "recover", None)
    finally:
        first.close()
        second.close()
    dead.load()
    check_resumed(dead, expected)
    run_id = json.loads((dead.folder / "spec.json").read_text())["run_id"]
    import psycopg

    with psycopg.connect(postgres_url, connect_timeout=10) as conn:
        query = (
            f'SELECT status, executor_id FROM "{schema}".workflow_status WHERE workflow_uuid = %s'
        )
        [(status, executor)] = conn.execute(query.encode(), (run_id,)).fetchall()
    assert status == "SUCCESS"
    assert executor.endswith(":w2"), executor
    resumed = [
        when for when, name in dead.events[dead.restart_index() :] if name.startswith("tool:c")
    ]
    assert resumed, dead.explain()
    with capsys.disabled():
        print(
            f"\ntakeover (takeover_after=1 s): the dead worker's tool step started again on "
            f"another executor {resumed[0] - killed:.2f} s after the kill"
        )
