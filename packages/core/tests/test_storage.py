"""What the built-in stores do beyond the shared contract.

The contract itself (:class:`pai.core.testing.StorageConformance`) runs against every built-in
store in ``test_storage_conformance.py``; this module checks their own promises: read counters,
tolerance of parent cycles, SQLite's file handling, and every ``str`` through every store.
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, assume, example, find, given, settings
from hypothesis import strategies as st

from pai.core._errors import ThreadExistsError
from pai.core._messages import (
    AssistantMessage,
    ErrorMessage,
    Message,
    ToolCall,
    ToolResultMessage,
    UserMessage,
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

    with pytest.raises(RuntimeError, match=r"SqliteStorage is closed; create a new SqliteStorage"):
        await store.get_thread("t1")
    with pytest.raises(RuntimeError, match="SqliteStorage is closed"):
        await store.append_messages("t1", [UserMessage(content="late")])
    with pytest.raises(RuntimeError, match="SqliteStorage is closed"):
        await store.create_thread(thread("t2"))


async def test_sqlite_closed_before_first_use_still_refuses_use() -> None:
    store = SqliteStorage()
    await store.aclose()

    with pytest.raises(RuntimeError, match="SqliteStorage is closed"):
        await store.list_threads("acme")


async def test_sqlite_unopenable_path_says_what_to_check(tmp_path: Path) -> None:
    store = SqliteStorage(tmp_path / "missing-dir" / "pai.db")

    with pytest.raises(
        RuntimeError, match=r"cannot open the SQLite database at .*directory exists"
    ):
        await store.get_thread("t1")
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
            content=content, tool_calls=[ToolCall(id=key, name=content, arguments={key: content})]
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


SCHEMA_1 = (
    """CREATE TABLE threads (
        id TEXT PRIMARY KEY NOT NULL,
        scope_key TEXT NOT NULL,
        agent_name TEXT NOT NULL,
        parent_thread_id TEXT,
        created_at TEXT NOT NULL,
        seq INTEGER NOT NULL UNIQUE
    )""",
    "CREATE INDEX threads_by_scope ON threads (scope_key, parent_thread_id, seq)",
    "CREATE INDEX threads_by_parent ON threads (parent_thread_id)",
    """CREATE TABLE messages (
        thread_id TEXT NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        json TEXT NOT NULL,
        PRIMARY KEY (thread_id, seq)
    ) WITHOUT ROWID""",
    "PRAGMA user_version = 1",
)
