"""The storage contract (see ``pai.core._storage``), checked on every backend and both event loops."""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, assume, example, find, given, settings
from hypothesis import strategies as st
from pydantic_core import PydanticSerializationError

from pai.core._errors import ThreadExistsError, ThreadNotFoundError
from pai.core._messages import (
    AssistantMessage,
    ErrorMessage,
    Message,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from pai.core._storage import Storage, ThreadRecord
from pai.core._storage_memory import InMemoryStorage
from pai.core._storage_sqlite import SqliteStorage

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return request.param


StorageFactory = Callable[[], InMemoryStorage | SqliteStorage]


@pytest.fixture(params=["memory", "sqlite-memory", "sqlite-file"])
def make_storage(request: pytest.FixtureRequest, tmp_path: Path) -> StorageFactory:
    """Builds a fresh storage of one backend (the sqlite file one: a new instance on one path)."""
    kind: str = request.param
    if kind == "memory":
        return InMemoryStorage
    if kind == "sqlite-memory":
        return SqliteStorage
    return lambda: SqliteStorage(tmp_path / "pai.db")


@pytest.fixture
async def storage(make_storage: StorageFactory) -> AsyncIterator[InMemoryStorage | SqliteStorage]:
    store = make_storage()
    yield store
    await store.aclose()


def thread(
    thread_id: str, *, scope: str = "acme", parent: str | None = None, agent: str = "helper"
) -> ThreadRecord:
    return ThreadRecord(id=thread_id, scope_key=scope, agent_name=agent, parent_thread_id=parent)


def unserializable_tool_result() -> ToolResultMessage:
    """A real message whose JSON dump fails: ``model_construct`` skips the JsonValue check."""
    return ToolResultMessage.model_construct(
        tool_call_id="call-1", tool_name="broken", content="x", output=object()
    )


ONE_OF_EACH: tuple[Message, ...] = (
    UserMessage(content="list the files, please"),
    AssistantMessage(content="Sure.", tool_calls=[]),
    AssistantMessage(
        content=None,
        tool_calls=[
            ToolCall(id="call-1", name="runScript", arguments={"command": "ls", "env": {"A": 1}}),
            ToolCall(id="call-2", name="noArgs"),
        ],
    ),
    ToolResultMessage(
        tool_call_id="call-1",
        tool_name="runScript",
        content="a.txt\nb.txt",
        output={"files": ["a.txt", "b.txt"], "size": 2.5, "ok": True, "none": None},
    ),
    ToolResultMessage(tool_call_id="call-2", tool_name="noArgs", content="boom", is_error=True),
    ErrorMessage(source="model", error_type="TimeoutError", message="the model did not answer"),
)


async def test_every_backend_satisfies_the_storage_protocol(storage: Storage) -> None:
    assert isinstance(storage, Storage)


# -- threads -----------------------------------------------------------------------------------


async def test_created_thread_reads_back_with_every_field(storage: Storage) -> None:
    created_at = datetime(2024, 5, 17, 9, 30, 12, 345678, tzinfo=timezone(timedelta(hours=5.5)))
    parent = ThreadRecord(id="p", scope_key="acme", agent_name="lead")
    child = ThreadRecord(
        id="c",
        scope_key="acme",
        agent_name="researcher",
        parent_thread_id="p",
        created_at=created_at,
    )
    await storage.create_thread(parent)
    await storage.create_thread(child)

    got_parent = await storage.get_thread("p")
    got_child = await storage.get_thread("c")

    assert got_parent == parent
    assert got_child == child
    assert got_child is not None
    assert got_child.created_at.utcoffset() == timedelta(hours=5.5)


async def test_creating_a_taken_id_raises_thread_exists_and_keeps_the_original(
    storage: Storage,
) -> None:
    original = thread("t1", agent="first")
    await storage.create_thread(original)

    with pytest.raises(ThreadExistsError, match=r"'t1' already exists; .*new id"):
        await storage.create_thread(thread("t1", agent="second", scope="other"))

    assert await storage.get_thread("t1") == original


async def test_getting_an_unknown_thread_returns_none(storage: Storage) -> None:
    assert await storage.get_thread("nope") is None


async def test_get_thread_counts_reads(storage: InMemoryStorage | SqliteStorage) -> None:
    await storage.create_thread(thread("t1"))
    assert storage.reads == 0

    await storage.get_thread("t1")
    await storage.get_thread("missing")
    await storage.list_threads("acme")
    await storage.get_messages("t1")

    assert storage.reads == 2


async def test_list_threads_returns_top_level_threads_of_the_scope_oldest_first(
    storage: Storage,
) -> None:
    for record in [
        thread("b", scope="acme"),
        thread("other-scope", scope="globex"),
        thread("a", scope="acme"),
        thread("child", scope="acme", parent="b"),
        thread("c", scope="acme"),
    ]:
        await storage.create_thread(record)

    listed = await storage.list_threads("acme")

    assert [r.id for r in listed] == ["b", "a", "c"]
    assert [r.id for r in await storage.list_threads("globex")] == ["other-scope"]
    assert list(await storage.list_threads("nobody")) == []


async def test_list_threads_with_a_parent_returns_its_children_in_that_scope_oldest_first(
    storage: Storage,
) -> None:
    for record in [
        thread("p"),
        thread("q"),
        thread("p-2", parent="p"),
        thread("q-1", parent="q"),
        thread("p-1", parent="p"),
        thread("p-2-a", parent="p-2"),
        thread("p-foreign", parent="p", scope="globex"),
    ]:
        await storage.create_thread(record)

    children = await storage.list_threads("acme", parent_thread_id="p")

    assert [r.id for r in children] == ["p-2", "p-1"]
    assert children[0] == await storage.get_thread("p-2")
    assert [r.id for r in await storage.list_threads("globex", parent_thread_id="p")] == [
        "p-foreign"
    ]
    assert list(await storage.list_threads("acme", parent_thread_id="p-1")) == []


async def test_a_recreated_id_lists_as_the_newest(storage: Storage) -> None:
    for thread_id in ["a", "b", "c"]:
        await storage.create_thread(thread(thread_id))

    await storage.delete_thread("a")
    await storage.create_thread(thread("a"))

    assert [r.id for r in await storage.list_threads("acme")] == ["b", "c", "a"]


# -- delete ------------------------------------------------------------------------------------


async def test_delete_removes_children_grandchildren_and_their_messages_parent_first(
    storage: Storage,
) -> None:
    for record in [
        thread("root"),
        thread("child-1", parent="root"),
        thread("child-2", parent="root"),
        thread("grandchild-2a", parent="child-2"),
        thread("grandchild-1a", parent="child-1"),
        thread("great-grandchild", parent="grandchild-1a"),
        thread("sibling"),
        thread("sibling-child", parent="sibling"),
    ]:
        await storage.create_thread(record)
    for thread_id in ["root", "child-2", "grandchild-1a", "great-grandchild", "sibling-child"]:
        await storage.append_messages(thread_id, [UserMessage(content=f"to {thread_id}")])

    deleted = await storage.delete_thread("root")

    # Level by level, each level in creation order.
    assert list(deleted) == [
        "root",
        "child-1",
        "child-2",
        "grandchild-2a",
        "grandchild-1a",
        "great-grandchild",
    ]
    parents = {"child-1": "root", "child-2": "root", "grandchild-2a": "child-2"}
    parents |= {"grandchild-1a": "child-1", "great-grandchild": "grandchild-1a"}
    for child, parent in parents.items():
        assert list(deleted).index(parent) < list(deleted).index(child)
    for thread_id in deleted:
        assert await storage.get_thread(thread_id) is None
        assert list(await storage.get_messages(thread_id)) == []
    assert [r.id for r in await storage.list_threads("acme")] == ["sibling"]
    assert [r.id for r in await storage.list_threads("acme", parent_thread_id="sibling")] == [
        "sibling-child"
    ]
    assert list(await storage.get_messages("sibling-child")) == [
        UserMessage(content="to sibling-child")
    ]


async def test_deleting_a_child_leaves_its_parent(storage: Storage) -> None:
    await storage.create_thread(thread("p"))
    await storage.create_thread(thread("c", parent="p"))
    await storage.create_thread(thread("g", parent="c"))

    assert list(await storage.delete_thread("c")) == ["c", "g"]

    assert await storage.get_thread("p") is not None
    assert list(await storage.list_threads("acme", parent_thread_id="p")) == []


async def test_deleting_an_unknown_thread_returns_an_empty_list(storage: Storage) -> None:
    await storage.create_thread(thread("kept"))

    assert list(await storage.delete_thread("nope")) == []

    assert await storage.get_thread("kept") is not None


async def test_delete_terminates_on_a_parent_cycle(storage: Storage) -> None:
    # Parents are not checked on create, so two threads can name each other.
    await storage.create_thread(thread("a", parent="b"))
    await storage.create_thread(thread("b", parent="a"))

    assert list(await storage.delete_thread("a")) == ["a", "b"]
    assert await storage.get_thread("b") is None


# -- messages ----------------------------------------------------------------------------------


async def test_messages_of_every_type_round_trip_equal_and_in_order(storage: Storage) -> None:
    await storage.create_thread(thread("t1"))

    await storage.append_messages("t1", ONE_OF_EACH[:2])
    await storage.append_messages("t1", [])
    await storage.append_messages("t1", ONE_OF_EACH[2:])

    got = await storage.get_messages("t1")
    assert list(got) == list(ONE_OF_EACH)
    assert [type(m) for m in got] == [type(m) for m in ONE_OF_EACH]


async def test_assistant_message_with_default_tool_calls_round_trips_equal(
    storage: Storage,
) -> None:
    await storage.create_thread(thread("t1"))
    await storage.append_messages("t1", [AssistantMessage(content="no tools")])

    assert list(await storage.get_messages("t1")) == [AssistantMessage(content="no tools")]


async def test_stored_messages_do_not_change_when_the_caller_mutates_its_values(
    storage: Storage,
) -> None:
    arguments: dict[str, object] = {"command": "ls"}
    call = ToolCall.model_validate({"id": "call-1", "name": "runScript", "arguments": arguments})
    await storage.create_thread(thread("t1"))
    await storage.append_messages("t1", [AssistantMessage(tool_calls=[call])])

    assert isinstance(call.arguments, dict)
    call.arguments["command"] = "rm -rf /"

    (stored,) = await storage.get_messages("t1")
    assert isinstance(stored, AssistantMessage)
    assert stored.tool_calls[0].arguments == {"command": "ls"}


async def test_getting_messages_of_an_unknown_thread_returns_an_empty_list(
    storage: Storage,
) -> None:
    assert list(await storage.get_messages("nope")) == []


async def test_appending_to_an_unknown_thread_raises_thread_not_found(storage: Storage) -> None:
    with pytest.raises(ThreadNotFoundError, match="'nope' does not exist") as raised:
        await storage.append_messages("nope", [UserMessage(content="hi")])

    assert raised.value.thread_id == "nope"
    assert await storage.get_thread("nope") is None


async def test_appending_to_a_deleted_thread_raises_thread_not_found(storage: Storage) -> None:
    await storage.create_thread(thread("t1"))
    await storage.delete_thread("t1")

    with pytest.raises(ThreadNotFoundError):
        await storage.append_messages("t1", [UserMessage(content="late")])

    assert list(await storage.get_messages("t1")) == []


async def test_a_batch_failing_mid_way_stores_none_of_its_messages(storage: Storage) -> None:
    await storage.create_thread(thread("t1"))
    await storage.append_messages("t1", [UserMessage(content="before")])

    with pytest.raises(PydanticSerializationError):
        await storage.append_messages(
            "t1",
            [
                UserMessage(content="first of the batch"),
                unserializable_tool_result(),
                UserMessage(content="third of the batch"),
            ],
        )

    assert list(await storage.get_messages("t1")) == [UserMessage(content="before")]
    await storage.append_messages("t1", [UserMessage(content="after")])
    assert list(await storage.get_messages("t1")) == [
        UserMessage(content="before"),
        UserMessage(content="after"),
    ]


async def test_fifty_concurrent_appends_all_land_each_batch_in_one_piece(storage: Storage) -> None:
    await storage.create_thread(thread("t1"))

    async def append(i: int) -> None:
        await storage.append_messages(
            "t1", [UserMessage(content=f"{i}:first"), UserMessage(content=f"{i}:second")]
        )

    async with anyio.create_task_group() as tg:
        for i in range(50):
            tg.start_soon(append, i)

    got = await storage.get_messages("t1")
    assert len(got) == 100
    contents = [m.content for m in got if isinstance(m, UserMessage)]
    pairs = [(contents[k], contents[k + 1]) for k in range(0, 100, 2)]
    assert sorted(pairs) == sorted((f"{i}:first", f"{i}:second") for i in range(50))


async def test_concurrent_creates_of_one_id_let_exactly_one_win(storage: Storage) -> None:
    outcomes: list[str] = []

    async def create(agent: str) -> None:
        try:
            await storage.create_thread(thread("t1", agent=agent))
            outcomes.append("created")
        except ThreadExistsError:
            outcomes.append("exists")

    async with anyio.create_task_group() as tg:
        for i in range(20):
            tg.start_soon(create, f"agent-{i}")

    assert sorted(outcomes) == ["created"] + ["exists"] * 19


# -- sqlite specifics --------------------------------------------------------------------------


async def test_sqlite_file_keeps_everything_across_instances(tmp_path: Path) -> None:
    path = tmp_path / "pai.db"
    created_at = datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=UTC)
    first = SqliteStorage(path)
    await first.create_thread(
        ThreadRecord(id="p", scope_key="acme", agent_name="lead", created_at=created_at)
    )
    await first.create_thread(thread("c", parent="p"))
    await first.append_messages("p", ONE_OF_EACH)
    await first.aclose()

    second = SqliteStorage(str(path))
    try:
        assert await second.get_thread("p") == ThreadRecord(
            id="p", scope_key="acme", agent_name="lead", created_at=created_at
        )
        assert [r.id for r in await second.list_threads("acme", parent_thread_id="p")] == ["c"]
        assert list(await second.get_messages("p")) == list(ONE_OF_EACH)
        await second.append_messages("p", [UserMessage(content="after reopen")])
        await second.create_thread(thread("d"))
        assert [r.id for r in await second.list_threads("acme")] == ["p", "d"]
        assert list(await second.delete_thread("p")) == ["p", "c"]
    finally:
        await second.aclose()

    third = SqliteStorage(path)
    try:
        assert await third.get_thread("p") is None
        assert [r.id for r in await third.list_threads("acme")] == ["d"]
    finally:
        await third.aclose()


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


# -- incremental reads -------------------------------------------------------------------------


async def test_get_messages_from_start_returns_only_what_follows(storage: Storage) -> None:
    await storage.create_thread(thread("t1"))
    batch = [UserMessage(content=f"m{i}") for i in range(5)]
    await storage.append_messages("t1", batch[:3])
    first = await storage.get_messages("t1")
    await storage.append_messages("t1", batch[3:])

    assert list(await storage.get_messages("t1", start=len(first))) == batch[3:]
    assert list(await storage.get_messages("t1", start=0)) == batch
    assert list(await storage.get_messages("t1", start=4)) == batch[4:]
    assert list(await storage.get_messages("t1", start=5)) == []
    assert list(await storage.get_messages("t1", start=99)) == []


async def test_get_messages_with_a_negative_start_is_a_value_error(storage: Storage) -> None:
    await storage.create_thread(thread("t1"))

    with pytest.raises(ValueError, match=r"start=-1.*must be >= 0"):
        await storage.get_messages("t1", start=-1)


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


def fresh_store(kind: str, folder: Path) -> InMemoryStorage | SqliteStorage:
    if kind == "memory":
        return InMemoryStorage()
    if kind == "sqlite-memory":
        return SqliteStorage()
    return SqliteStorage(tempfile.mkstemp(suffix=".db", dir=folder)[1])


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
