"""What the built-in stores do beyond the shared contract.

The contract itself (:class:`pai.core.testing.StorageConformance`) runs against every built-in
store in ``test_storage_conformance.py``; this module checks their own promises: read counters,
tolerance of parent cycles, SQLite's file handling, and every ``str`` through every store.
"""

from __future__ import annotations

import sqlite3
import sys
import tempfile
import threading
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path

import anyio
import anyio.from_thread
import anyio.lowlevel
import pytest
from helpers import SCHEMA_1
from hypothesis import HealthCheck, assume, example, find, given, settings
from hypothesis import strategies as st

from pai.core._errors import PaiError, StorageAccessError, StorageError, ThreadExistsError
from pai.core._messages import (
    AssistantMessage,
    ErrorMessage,
    Message,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    message_adapter,
)
from pai.core._storage import ThreadRecord
from pai.core._storage_memory import InMemoryStorage
from pai.core._storage_sqlite import SqliteStorage

pytestmark = pytest.mark.anyio

BuiltinStorage = InMemoryStorage | SqliteStorage


@pytest.fixture(params=["memory", "sqlite-memory", "sqlite-file"])
async def storage(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[BuiltinStorage]:
    kind: str = request.param
    store = fresh_store(kind, tmp_path)
    yield store
    await store.aclose()


def fresh_store(kind: str, folder: Path) -> BuiltinStorage:
    if kind == "memory":
        return InMemoryStorage()
    if kind == "sqlite-memory":
        return SqliteStorage()
    return SqliteStorage(tempfile.mkstemp(suffix=".db", dir=folder)[1])


def thread(
    thread_id: str, *, scope: str = "acme", parent: str | None = None, agent: str = "helper"
) -> ThreadRecord:
    return ThreadRecord(id=thread_id, scope_key=scope, agent_name=agent, parent_thread_id=parent)


async def test_get_thread_counts_reads(storage: BuiltinStorage) -> None:
    await storage.create_thread(thread("t1"))
    assert storage.reads == 0

    await storage.get_thread("t1")
    await storage.get_thread("missing")
    await storage.list_threads("acme")
    await storage.get_messages("t1")

    assert storage.reads == 2


async def test_delete_terminates_on_a_parent_cycle(storage: BuiltinStorage) -> None:
    # The built-in stores do not check parents on create, so two threads can name each other.
    await storage.create_thread(thread("a", parent="b"))
    await storage.create_thread(thread("b", parent="a"))

    assert list(await storage.delete_thread("a")) == ["a", "b"]
    assert await storage.get_thread("b") is None


async def test_every_store_returns_messages_as_a_json_round_trip_shapes_them(
    storage: BuiltinStorage,
) -> None:
    written: list[Message] = [
        UserMessage(content="hi"),  # role not set explicitly: pydantic's fields set omits it
        AssistantMessage(content=None),
        ToolResultMessage(tool_call_id="c", tool_name="t", content="x", output=float("inf")),
        ToolResultMessage(tool_call_id="c", tool_name="t", content="x", output=2.5),
        ErrorMessage(source="model", error_type="E", message="m"),
    ]
    await storage.create_thread(thread("t1"))
    await storage.append_messages("t1", written)

    read = list(await storage.get_messages("t1"))

    expected = [message_adapter.validate_json(message_adapter.dump_json(m)) for m in written]
    assert read == expected
    assert [m.model_dump(exclude_unset=True) for m in read] == [
        m.model_dump(exclude_unset=True) for m in expected
    ]


# -- sqlite specifics --------------------------------------------------------------------------


async def test_sqlite_file_uses_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "pai.db"
    store = SqliteStorage(path)
    await store.create_thread(thread("t1"))
    await store.aclose()

    connection = sqlite3.connect(path)
    try:
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        connection.close()


async def test_sqlite_opens_its_connection_lazily(tmp_path: Path) -> None:
    path = tmp_path / "lazy.db"
    store = SqliteStorage(path)
    assert not path.exists()

    await store.get_thread("t1")

    assert path.exists()
    await store.aclose()


@pytest.mark.parametrize("location", [":memory:", "file"])
async def test_sqlite_after_aclose_raises_saying_to_create_a_new_one(
    location: str, tmp_path: Path
) -> None:
    store = SqliteStorage(tmp_path / "pai.db" if location == "file" else ":memory:")
    await store.create_thread(thread("t1"))
    await store.aclose()
    await store.aclose()  # a second close is harmless

    with pytest.raises(StorageError, match=r"SqliteStorage is closed; create a new SqliteStorage"):
        await store.get_thread("t1")
    with pytest.raises(StorageError, match="SqliteStorage is closed"):
        await store.append_messages("t1", [UserMessage(content="late")])
    with pytest.raises(StorageError, match="SqliteStorage is closed"):
        await store.create_thread(thread("t2"))


async def test_sqlite_closed_before_first_use_still_refuses_use() -> None:
    store = SqliteStorage()
    await store.aclose()

    with pytest.raises(StorageError, match="SqliteStorage is closed"):
        await store.list_threads("acme")


async def test_sqlite_database_of_a_newer_schema_is_a_storage_error_saying_to_upgrade(
    tmp_path: Path,
) -> None:
    path = tmp_path / "pai.db"
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA user_version = 999")
    connection.close()
    store = SqliteStorage(path)

    with pytest.raises(
        StorageError, match=r"schema version 999, newer .* upgrade pai-core"
    ) as info:
        await store.get_thread("t1")
    assert isinstance(info.value, PaiError)
    assert isinstance(info.value, RuntimeError)  # what it raised before StorageError existed
    await store.aclose()


async def test_sqlite_unopenable_path_says_what_to_check(tmp_path: Path) -> None:
    store = SqliteStorage(tmp_path / "missing-dir" / "pai.db")

    with pytest.raises(
        StorageError, match=r"cannot open the SQLite database at .*directory exists"
    ):
        await store.get_thread("t1")
    await store.aclose()


def count_worker_calls(store: SqliteStorage, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record the thread name of every call ``store`` runs in a worker thread."""
    original = store._run_in_worker
    calls: list[str] = []

    def spy(operation: Callable[[sqlite3.Connection], object]) -> object:
        calls.append(threading.current_thread().name)
        return original(operation)

    monkeypatch.setattr(store, "_run_in_worker", spy)
    return calls


@pytest.mark.parametrize("location", [":memory:", "file"])
async def test_sqlite_uncontended_calls_run_on_the_loop_without_a_worker_thread(
    location: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SqliteStorage(tmp_path / "pai.db" if location == "file" else ":memory:")
    await store.create_thread(thread("t1"))  # opens the connection, in a worker
    calls = count_worker_calls(store, monkeypatch)

    for n in range(50):
        await store.append_messages("t1", [UserMessage(content=f"{n}")])
    await store.create_thread(thread("t2", parent="t1"))
    assert len(await store.get_messages("t1", start=10)) == 40
    assert await store.get_thread("t2") is not None
    assert len(await store.list_threads("acme", parent_thread_id="t1")) == 1
    assert list(await store.delete_thread("t1")) == ["t1", "t2"]

    assert calls == []
    await store.aclose()


async def test_sqlite_a_database_another_connection_locks_is_waited_for_in_a_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "pai.db"
    store = SqliteStorage(path, busy_timeout=30)
    await store.create_thread(thread("t1"))
    in_worker = anyio.Event()
    original = store._run_in_worker

    def spy(operation: Callable[[sqlite3.Connection], object]) -> object:
        anyio.from_thread.run_sync(in_worker.set)
        return original(operation)

    monkeypatch.setattr(store, "_run_in_worker", spy)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another writer holds the database
    try:
        # A loop blocked for busy_timeout (30 s) would find this deadline passed, and fail.
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(store.append_messages, "t1", [UserMessage(content="waited")])
                # Runs while the append waits in its worker thread.
                await in_worker.wait()
                other.execute("COMMIT")
    finally:
        other.close()

    assert list(await store.get_messages("t1")) == [UserMessage(content="waited")]
    await store.aclose()


async def test_sqlite_a_lock_held_past_busy_timeout_raises_saying_what_to_do(
    tmp_path: Path,
) -> None:
    path = tmp_path / "pai.db"
    store = SqliteStorage(path, busy_timeout=0)
    await store.create_thread(thread("t1"))
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StorageAccessError, match="locked") as raised:
            await store.append_messages("t1", [UserMessage(content="refused")])
    finally:
        other.execute("ROLLBACK")
        other.close()

    assert "pass a longer busy_timeout" in str(raised.value)
    assert isinstance(raised.value.__cause__, sqlite3.OperationalError)
    assert list(await store.get_messages("t1")) == []
    await store.append_messages("t1", [UserMessage(content="later")])  # still usable
    await store.aclose()


def test_sqlite_a_negative_busy_timeout_is_a_value_error() -> None:
    with pytest.raises(ValueError, match=r"busy_timeout=-1.*>= 0"):
        SqliteStorage(busy_timeout=-1)


async def test_sqlite_file_checkpoints_in_a_worker_so_the_wal_stays_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "pai.db"
    store = SqliteStorage(path)
    await store.create_thread(thread("t1"))
    checkpoints: list[str] = []
    original = store._checkpoint

    def spy(connection: sqlite3.Connection) -> None:
        checkpoints.append(threading.current_thread().name)
        original(connection)

    monkeypatch.setattr(store, "_checkpoint", spy)
    wal = anyio.Path(f"{path}-wal")
    page = [UserMessage(content="x" * 4_000)]  # about one page per append

    for _ in range(1_000):
        await store.append_messages("t1", page)
    size_after_one_round = (await wal.stat()).st_size
    for _ in range(3_000):
        await store.append_messages("t1", page)

    assert len(checkpoints) >= 3
    assert threading.current_thread().name not in checkpoints
    # A checkpointed WAL is written again from its start, so it stops growing.
    assert (await wal.stat()).st_size <= 2 * size_after_one_round
    assert len(await store.get_messages("t1")) == 4_000
    await store.aclose()


WRITER = """
import sqlite3, sys, time
connection = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
print("ready", flush=True)
for n in range(int(sys.argv[2])):
    connection.execute("BEGIN IMMEDIATE")
    (last,) = connection.execute(
        "SELECT COALESCE(MAX(seq), 0) FROM messages WHERE thread_id = 't1'"
    ).fetchone()
    connection.execute(
        "INSERT INTO messages VALUES ('t1', ?, ?)",
        (last + 1, '{"role":"user","content":"other process %d"}' % n),
    )
    connection.execute("COMMIT")
    time.sleep(0.0005)  # a steady writer, not a flood that starves every other
"""


async def test_sqlite_writers_in_another_process_and_this_one_lose_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "pai.db"
    store = SqliteStorage(path)
    await store.create_thread(thread("t1"))
    theirs = 100
    ours = 0
    async with await anyio.open_process(
        [sys.executable, "-c", WRITER, str(path), str(theirs)]
    ) as writer:
        assert writer.stdout is not None
        said = b""
        while not said.endswith(b"\n"):  # a pipe may deliver the line in pieces
            said += await writer.stdout.receive()
        assert said == b"ready\n"
        while writer.returncode is None and ours < 5_000:  # while the other process writes
            await store.append_messages(
                "t1",
                [UserMessage(content=f"ours {ours} a"), UserMessage(content=f"ours {ours} b")],
            )
            ours += 1
            await anyio.lowlevel.checkpoint()  # lets the loop notice the writer's exit
        assert await writer.wait() == 0

    contents = [m.content for m in await store.get_messages("t1") if isinstance(m, UserMessage)]
    assert len(contents) == theirs + 2 * ours
    assert [c for c in contents if c.startswith("other")] == [
        f"other process {n}" for n in range(theirs)
    ]
    position = {content: index for index, content in enumerate(contents)}
    assert all(position[f"ours {n} a"] + 1 == position[f"ours {n} b"] for n in range(ours))
    await store.aclose()


async def test_in_memory_storage_stays_usable_after_aclose() -> None:
    store = InMemoryStorage()
    await store.create_thread(thread("t1"))
    await store.aclose()

    assert await store.get_thread("t1") is not None
    await store.append_messages("t1", [UserMessage(content="still here")])
    assert list(await store.get_messages("t1")) == [UserMessage(content="still here")]


# -- every str, lone surrogates included -------------------------------------------------------

# Every code point, lone surrogates and NUL included (the default st.characters() leaves
# surrogates out, and they are 2048 of 1.1M code points, so they get a branch of their own).
any_char = st.one_of(
    st.characters(codec=None, exclude_categories=()),
    st.characters(codec=None, exclude_categories=(), min_codepoint=0xD800, max_codepoint=0xDFFF),
    st.sampled_from("\x00é'\"\\"),
)
any_text = st.lists(any_char, max_size=12).map("".join)


def test_any_text_generates_lone_surrogates() -> None:
    find(any_text, lambda s: any(0xD800 <= ord(c) <= 0xDFFF for c in s))


@pytest.mark.parametrize("kind", ["memory", "sqlite-memory", "sqlite-file"])
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    thread_id=any_text,
    parent_id=any_text,
    scope_key=any_text,
    agent_name=any_text,
    content=any_text,
    key=any_text,
)
@example(
    thread_id="\ud800",
    parent_id="\udfff\ud800",
    scope_key="\udc80",
    agent_name="a\ud83d",
    content="\ud800\x00",
    key="\udcff",
)
def test_every_str_round_trips_exactly_through_every_backend(
    tmp_path: Path,
    kind: str,
    backend: str,
    thread_id: str,
    parent_id: str,
    scope_key: str,
    agent_name: str,
    content: str,
    key: str,
) -> None:
    assume(thread_id != parent_id)
    parent = ThreadRecord(id=parent_id, scope_key=scope_key, agent_name=agent_name)
    child = ThreadRecord(
        id=thread_id, scope_key=scope_key, agent_name=agent_name, parent_thread_id=parent_id
    )
    messages: list[Message] = [
        UserMessage(content=content),
        AssistantMessage(
            content=content, tool_calls=(ToolCall(id=key, name=content, arguments={key: content}),)
        ),
        ToolResultMessage(
            tool_call_id=key, tool_name=agent_name, content=content, output={key: [content]}
        ),
        ErrorMessage(source=content, error_type=key, message=content),
    ]

    async def check() -> None:
        store = fresh_store(kind, tmp_path)
        try:
            await store.create_thread(parent)
            await store.create_thread(child)
            await store.append_messages(thread_id, messages)

            assert await store.get_thread(thread_id) == child
            assert list(await store.list_threads(scope_key)) == [parent]
            assert list(await store.list_threads(scope_key, parent_thread_id=parent_id)) == [child]
            assert list(await store.get_messages(thread_id)) == messages
            assert list(await store.get_messages(thread_id, start=3)) == messages[3:]
            with pytest.raises(ThreadExistsError):
                await store.create_thread(child)
            assert list(await store.delete_thread(parent_id)) == [parent_id, thread_id]
            assert await store.get_thread(thread_id) is None
        finally:
            await store.aclose()

    anyio.run(check, backend=backend)


async def test_sqlite_stores_encodable_strings_as_text_and_others_as_blobs(
    tmp_path: Path,
) -> None:
    path = tmp_path / "pai.db"
    store = SqliteStorage(path)
    await store.create_thread(thread("plain-é"))
    await store.create_thread(thread("lone-\ud800"))
    await store.append_messages("plain-é", [UserMessage(content="é")])
    await store.append_messages("lone-\ud800", [UserMessage(content="\ud800")])
    await store.aclose()

    connection = sqlite3.connect(path)
    try:
        threads = connection.execute("SELECT typeof(id), id FROM threads ORDER BY seq").fetchall()
        messages = connection.execute(
            "SELECT typeof(thread_id), typeof(json), json FROM messages ORDER BY thread_id"
        ).fetchall()
    finally:
        connection.close()
    assert threads == [
        ("text", "plain-é"),
        ("blob", "lone-\ud800".encode("utf-8", "surrogatepass")),
    ]
    assert messages[0] == ("text", "text", '{"role":"user","content":"é"}')
    assert messages[1][:2] == ("blob", "blob")


async def test_sqlite_reads_a_schema_1_file_written_before_blobs_the_same(tmp_path: Path) -> None:
    # Exactly what SqliteStorage wrote before strings with lone surrogates were accepted.
    path = tmp_path / "old.db"
    connection = sqlite3.connect(path, isolation_level=None)
    for statement in SCHEMA_1:
        connection.execute(statement)
    connection.execute("PRAGMA journal_mode = WAL")
    created_at = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC).isoformat()
    connection.executemany(
        "INSERT INTO threads VALUES (?, ?, ?, ?, ?, ?)",
        [("p", "acme", "lead", None, created_at, 1), ("c-é", "acme", "helper", "p", created_at, 2)],
    )
    connection.executemany(
        "INSERT INTO messages VALUES (?, ?, ?)",
        [("c-é", 1, '{"role":"user","content":"hé"}'), ("c-é", 2, '{"role":"assistant"}')],
    )
    connection.close()

    store = SqliteStorage(path)
    try:
        assert await store.get_thread("c-é") == ThreadRecord(
            id="c-é",
            scope_key="acme",
            agent_name="helper",
            parent_thread_id="p",
            created_at=datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC),
        )
        assert [r.id for r in await store.list_threads("acme", parent_thread_id="p")] == ["c-é"]
        assert list(await store.get_messages("c-é")) == [
            UserMessage(content="hé"),
            AssistantMessage(),
        ]
        await store.append_messages("c-é", [UserMessage(content="\ud800")])
        assert len(await store.get_messages("c-é", start=2)) == 1
        assert list(await store.delete_thread("p")) == ["p", "c-é"]
    finally:
        await store.aclose()
