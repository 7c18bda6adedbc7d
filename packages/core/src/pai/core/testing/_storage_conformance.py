"""The storage conformance suite: the contract every :class:`~pai.core.ext.Storage` backend keeps.

Subclass :class:`StorageConformance` in a test module of your package and implement
:meth:`~StorageConformance.create_storage`; pytest then runs the whole contract (see
:mod:`pai.core._storage`) against your backend:

- threads: create, read back with every field, a taken id refused, unknown ids, parent links;
- ``list_threads``: one scope's top-level threads or one parent's children, in creation order;
- messages: every type round-trips equal, in order, also read from ``start=``; a negative start
  is a ``ValueError``; appends are atomic (a batch with an unserializable message stores none);
  appending to an unknown or deleted thread raises ``ThreadNotFoundError``;
- delete: the thread and its descendants at any depth with their messages, ids parent first; an
  unknown id deletes nothing and returns ``[]``; a recreated id starts empty;
- concurrent writers: many concurrent appends to one thread and to many threads lose nothing and
  keep each batch contiguous; incremental readers see every message once; concurrent creates and
  deletes of one id take effect once;
- the root walk: following ``parent_thread_id`` through ``get_thread`` reaches the root;
- every Python ``str``, lone surrogates included, round-trips exactly and stays distinct;
- run leases: a free thread's lease is taken, a live one is not (``None``), released or expired
  ones are (expired: ``interrupted`` names the previous holder); tokens only grow, also across a
  thread deleted and created again; renewal extends a current lease and refuses a lost one
  (``RunLeaseLostError``); release is idempotent and a stale release frees nothing; an append
  with a lease stores only while it is current; a deleted thread's lease renews and appends as
  ``ThreadNotFoundError``; concurrent acquisitions let exactly one win;
- ``acquire_run(reclaim=True)``: a live lease of the same holder is taken with a greater token
  and ``interrupted=None``, and the old lease is fenced (appends and renewals refused, its
  release a no-op); another holder's live lease is not taken; with nothing live it acquires as
  usual; concurrent reclaims by one holder each get a token, the greatest the current lease;
- across storage objects, for a backend that implements
  :meth:`~StorageConformance.open_second` (a second object over the same data, as another
  process would open it): leases are exclusive across the two, and a lease taken over (or
  reclaimed) through one is fenced in the other;
- blobs, for a backend that implements :class:`~pai.core.ext.BlobStore` (skipped, saying so,
  for one that does not): binary data (NUL bytes, empty, ~5 MiB) round-trips exactly, a put
  replaces, an absent key or thread reads ``None``, a put to an unknown thread raises
  ``ThreadNotFoundError``, a prefix delete counts and removes only that prefix of that thread
  (``%`` and ``_`` are plain characters), ``delete_thread`` removes the blobs of the thread and
  its descendants, blobs are not messages, keys and data over the limits are a ``ValueError``,
  and a blob written through one storage object reads through another and after reopening;
- ``aclose``, and, for a durable backend (one that implements :meth:`~StorageConformance.reopen`),
  that a new instance reads what a closed one wrote.

Example::

    from pai.core.testing import StorageConformance

    class TestPostgresStorage(StorageConformance):
        async def create_storage(self):
            self.dsn = await fresh_database()
            return PostgresStorage(self.dsn)

        def reopen(self, storage):
            return PostgresStorage(self.dsn)

        def open_second(self, storage):
            return PostgresStorage(self.dsn)

Each test gets a fresh storage from :meth:`~StorageConformance.create_storage` (sync or async)
through the ``storage`` fixture, and closes it afterwards. Tests run on asyncio and, when trio is
installed, on trio; override the ``anyio_backend`` fixture to narrow that. Requires pytest and the
anyio pytest plugin (installed with anyio): ``pip install pai-core[testing]``.
"""

from __future__ import annotations

import importlib.util
import itertools
import random
from collections.abc import AsyncIterator, Awaitable, Sequence
from datetime import UTC, datetime, timedelta, timezone
from typing import ClassVar

import anyio
import anyio.lowlevel
import pytest

from pai.core._awaitables import resolve
from pai.core._errors import RunLeaseLostError, ThreadExistsError, ThreadNotFoundError
from pai.core._messages import (
    AssistantMessage,
    ErrorMessage,
    Message,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from pai.core._storage import (
    MAX_BLOB_BYTES,
    MAX_BLOB_KEY_LENGTH,
    BlobStore,
    RunLease,
    Storage,
    ThreadRecord,
)

__all__ = ["StorageConformance"]

_BACKENDS = ["asyncio", "trio"] if importlib.util.find_spec("trio") else ["asyncio"]

ONE_OF_EACH: tuple[Message, ...] = (
    UserMessage(content="list the files, please"),
    AssistantMessage(content="Sure.", tool_calls=()),
    AssistantMessage(
        content=None,
        tool_calls=(
            ToolCall(id="call-1", name="runScript", arguments={"command": "ls", "env": {"A": 1}}),
            ToolCall(id="call-2", name="noArgs"),
        ),
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
"""One message of every type and shape, for round trips."""

# Strings a lossy encoding would merge: "?" and U+FFFD (what "replace" error handlers write), a
# surrogate pair written as two code points and the character it would combine into.
LOOKALIKE_IDS: tuple[str, ...] = (
    "t-\ud800",
    "t-\udc00",
    "t-?",
    "t-\ufffd",
    "t-\ud800\udc00",
    "t-\U00010000",
    "t-\x00",
    "t-",
)


def _thread(
    thread_id: str, *, scope: str = "acme", parent: str | None = None, agent: str = "helper"
) -> ThreadRecord:
    return ThreadRecord(id=thread_id, scope_key=scope, agent_name=agent, parent_thread_id=parent)


def _unserializable() -> ToolResultMessage:
    """A message whose JSON dump fails: ``model_construct`` skips the ``JsonValue`` check."""
    return ToolResultMessage.model_construct(
        tool_call_id="call-1", tool_name="broken", content="x", output=object()
    )


def _ids(records: Sequence[ThreadRecord]) -> list[str]:
    return [record.id for record in records]


class StorageConformance:
    """Subclass and implement :meth:`create_storage` (and, for a durable backend, :meth:`reopen`).

    Example::

        class TestMyStorage(StorageConformance):
            def create_storage(self):
                return MyStorage()
    """

    concurrent_writers: ClassVar[int] = 50
    """How many concurrent appends (and run lease acquisitions) the concurrency tests make."""

    short_ttl: ClassVar[float] = 0.2
    """The time to live, in seconds, of the leases the expiry tests let expire (they wait a
    little longer than this); raise it for a backend whose calls take a good part of it."""

    pytestmark: ClassVar[list[pytest.MarkDecorator]] = [pytest.mark.anyio]

    # Kept (not pai.core.testing.pytest_plugin): users' suites subclass this class and rely on it
    # to run every test on each backend without a fixture of their own.
    @pytest.fixture(params=_BACKENDS)
    def anyio_backend(self, request: pytest.FixtureRequest) -> str:
        return str(request.param)

    # -- hooks --------------------------------------------------------------------------------

    def create_storage(self) -> Storage | Awaitable[Storage]:
        """A fresh, empty storage of yours (sync or async). The suite closes it after the test."""
        raise NotImplementedError(
            "implement create_storage() in your StorageConformance subclass: return a fresh, "
            "empty storage"
        )

    def reopen(self, storage: Storage) -> Storage | Awaitable[Storage]:
        """A new instance over the data of ``storage`` (closed by then), for a durable backend
        (sync or async). Not implemented: the durability tests skip, saying so."""
        raise NotImplementedError(
            "implement reopen(storage) in your StorageConformance subclass: return a new "
            "instance over the same data, e.g. the same path or database"
        )

    def open_second(self, storage: Storage) -> Storage | Awaitable[Storage]:
        """A second, open instance over the same data as ``storage`` (which stays open), as
        another process would have it (sync or async); the suite closes it. Not implemented:
        the cross-object lease tests skip, saying so."""
        raise NotImplementedError(
            "implement open_second(storage) in your StorageConformance subclass: return a "
            "second instance over the same data, e.g. the same path or database"
        )

    @pytest.fixture
    async def storage(self) -> AsyncIterator[Storage]:
        """A fresh storage from :meth:`create_storage`, closed after the test."""
        store = await resolve(self.create_storage())
        try:
            yield store
        finally:
            await store.aclose()

    # -- threads ------------------------------------------------------------------------------

    async def test_storage_satisfies_the_storage_protocol(self, storage: Storage) -> None:
        assert isinstance(storage, Storage), (
            f"{type(storage).__name__} lacks methods of the Storage protocol"
        )

    async def test_a_created_thread_reads_back_with_every_field(self, storage: Storage) -> None:
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

        assert await storage.get_thread("p") == parent
        got = await storage.get_thread("c")
        assert got == child, f"stored {child!r}, read back {got!r}"
        assert got is not None
        assert got.created_at.utcoffset() == timedelta(hours=5.5), "created_at lost its UTC offset"

    async def test_creating_a_taken_id_raises_thread_exists_and_keeps_the_original(
        self, storage: Storage
    ) -> None:
        original = _thread("t1", agent="first")
        await storage.create_thread(original)

        with pytest.raises(ThreadExistsError, match="'t1'"):
            await storage.create_thread(_thread("t1", agent="second", scope="other"))

        assert await storage.get_thread("t1") == original, "a refused create changed the thread"

    async def test_getting_an_unknown_thread_returns_none(self, storage: Storage) -> None:
        assert await storage.get_thread("nope") is None

    async def test_list_threads_returns_top_level_threads_of_the_scope_in_creation_order(
        self, storage: Storage
    ) -> None:
        earlier = datetime(2000, 1, 1, tzinfo=UTC)
        for record in [
            _thread("b"),
            _thread("other-scope", scope="globex"),
            _thread("a"),
            _thread("child", parent="b"),
            ThreadRecord(id="c", scope_key="acme", agent_name="helper", created_at=earlier),
        ]:
            await storage.create_thread(record)

        assert _ids(await storage.list_threads("acme")) == ["b", "a", "c"], (
            "list_threads must return the scope's top-level threads in the order created "
            "(not by id or created_at)"
        )
        assert _ids(await storage.list_threads("globex")) == ["other-scope"]
        assert _ids(await storage.list_threads("nobody")) == []

    async def test_list_threads_with_a_parent_returns_its_children_in_that_scope(
        self, storage: Storage
    ) -> None:
        for record in [
            _thread("p"),
            _thread("q"),
            _thread("p-2", parent="p"),
            _thread("q-1", parent="q"),
            _thread("p-1", parent="p"),
            _thread("p-2-a", parent="p-2"),
            _thread("p-foreign", parent="p", scope="globex"),
        ]:
            await storage.create_thread(record)

        children = await storage.list_threads("acme", parent_thread_id="p")

        assert _ids(children) == ["p-2", "p-1"], "children of p, in creation order, only acme's"
        assert children[0] == await storage.get_thread("p-2")
        assert _ids(await storage.list_threads("globex", parent_thread_id="p")) == ["p-foreign"]
        assert _ids(await storage.list_threads("acme", parent_thread_id="p-1")) == []

    async def test_a_recreated_id_lists_as_the_newest(self, storage: Storage) -> None:
        for thread_id in ["a", "b", "c"]:
            await storage.create_thread(_thread(thread_id))

        await storage.delete_thread("a")
        await storage.create_thread(_thread("a"))

        assert _ids(await storage.list_threads("acme")) == ["b", "c", "a"]

    async def test_following_parent_links_from_any_depth_reaches_the_root(
        self, storage: Storage
    ) -> None:
        depth = 12
        chain = [f"level-{n}" for n in range(depth)]
        await storage.create_thread(_thread(chain[0]))
        for parent, child in itertools.pairwise(chain):
            await storage.create_thread(_thread(child, parent=parent))

        walked: list[str] = []
        current = await storage.get_thread(chain[-1])
        while current is not None:
            walked.append(current.id)
            if current.parent_thread_id is None:
                break
            current = await storage.get_thread(current.parent_thread_id)

        assert walked == chain[::-1], (
            f"walking parent_thread_id up from {chain[-1]!r} gave {walked}, not the chain to "
            f"the root {chain[0]!r}"
        )

    # -- delete -------------------------------------------------------------------------------

    async def test_delete_removes_descendants_at_any_depth_and_their_messages_parent_first(
        self, storage: Storage
    ) -> None:
        for record in [
            _thread("root"),
            _thread("child-1", parent="root"),
            _thread("child-2", parent="root"),
            _thread("grandchild-2a", parent="child-2"),
            _thread("grandchild-1a", parent="child-1"),
            _thread("great-grandchild", parent="grandchild-1a"),
            _thread("sibling"),
            _thread("sibling-child", parent="sibling"),
        ]:
            await storage.create_thread(record)
        for thread_id in ["root", "child-2", "grandchild-1a", "great-grandchild", "sibling-child"]:
            await storage.append_messages(thread_id, [UserMessage(content=f"to {thread_id}")])

        deleted = list(await storage.delete_thread("root"))

        doomed = {"root", "child-1", "child-2", "grandchild-2a", "grandchild-1a"}
        doomed.add("great-grandchild")
        assert sorted(deleted) == sorted(doomed), f"deleted {deleted}, expected {sorted(doomed)}"
        parents = {"child-1": "root", "child-2": "root", "grandchild-2a": "child-2"}
        parents |= {"grandchild-1a": "child-1", "great-grandchild": "grandchild-1a"}
        for child, parent in parents.items():
            assert deleted.index(parent) < deleted.index(child), (
                f"{child!r} came before its parent {parent!r} in {deleted}; return ids parent first"
            )
        for thread_id in deleted:
            assert await storage.get_thread(thread_id) is None
            assert list(await storage.get_messages(thread_id)) == []
        assert _ids(await storage.list_threads("acme")) == ["sibling"]
        assert _ids(await storage.list_threads("acme", parent_thread_id="sibling")) == [
            "sibling-child"
        ]
        assert list(await storage.get_messages("sibling-child")) == [
            UserMessage(content="to sibling-child")
        ]

    async def test_deleting_a_child_leaves_its_parent(self, storage: Storage) -> None:
        await storage.create_thread(_thread("p"))
        await storage.create_thread(_thread("c", parent="p"))
        await storage.create_thread(_thread("g", parent="c"))

        assert list(await storage.delete_thread("c")) == ["c", "g"]

        assert await storage.get_thread("p") is not None
        assert _ids(await storage.list_threads("acme", parent_thread_id="p")) == []

    async def test_deleting_an_unknown_thread_returns_an_empty_list(self, storage: Storage) -> None:
        await storage.create_thread(_thread("kept"))

        assert list(await storage.delete_thread("nope")) == []

        assert await storage.get_thread("kept") is not None

    async def test_a_recreated_thread_starts_with_no_messages(self, storage: Storage) -> None:
        await storage.create_thread(_thread("t1"))
        await storage.append_messages("t1", [UserMessage(content="first life")])
        await storage.delete_thread("t1")

        await storage.create_thread(_thread("t1"))

        assert list(await storage.get_messages("t1")) == [], (
            "a thread created again under a deleted id saw the old thread's messages"
        )

    # -- messages -----------------------------------------------------------------------------

    async def test_messages_of_every_type_round_trip_equal_and_in_order(
        self, storage: Storage
    ) -> None:
        await storage.create_thread(_thread("t1"))

        await storage.append_messages("t1", ONE_OF_EACH[:2])
        await storage.append_messages("t1", [])
        await storage.append_messages("t1", ONE_OF_EACH[2:])

        got = list(await storage.get_messages("t1"))
        assert got == list(ONE_OF_EACH)
        assert [type(m) for m in got] == [type(m) for m in ONE_OF_EACH]

    async def test_an_assistant_message_with_default_tool_calls_round_trips_equal(
        self, storage: Storage
    ) -> None:
        await storage.create_thread(_thread("t1"))
        await storage.append_messages("t1", [AssistantMessage(content="no tools")])

        assert list(await storage.get_messages("t1")) == [AssistantMessage(content="no tools")]

    async def test_stored_messages_do_not_change_when_the_caller_mutates_its_values(
        self, storage: Storage
    ) -> None:
        arguments: dict[str, object] = {"command": "ls"}
        call = ToolCall.model_validate(
            {"id": "call-1", "name": "runScript", "arguments": arguments}
        )
        output: dict[str, object] = {"files": ["a"]}
        result = ToolResultMessage.model_validate(
            {"tool_call_id": "call-1", "tool_name": "runScript", "content": "a", "output": output}
        )
        await storage.create_thread(_thread("t1"))
        await storage.append_messages("t1", [AssistantMessage(tool_calls=(call,)), result])

        assert isinstance(call.arguments, dict)
        call.arguments["command"] = "rm -rf /"
        assert isinstance(result.output, dict)
        result.output["files"] = []

        stored_call, stored_result = await storage.get_messages("t1")
        assert isinstance(stored_call, AssistantMessage)
        assert stored_call.tool_calls[0].arguments == {"command": "ls"}, (
            "the store kept a reference to the caller's arguments dict"
        )
        assert isinstance(stored_result, ToolResultMessage)
        assert stored_result.output == {"files": ["a"]}

    async def test_messages_read_are_not_changed_by_a_reader_mutating_an_earlier_read(
        self, storage: Storage
    ) -> None:
        call = ToolCall(id="call-1", name="runScript", arguments={"command": "ls"})
        await storage.create_thread(_thread("t1"))
        await storage.append_messages("t1", [AssistantMessage(tool_calls=(call,))])

        (first,) = await storage.get_messages("t1")
        assert isinstance(first, AssistantMessage)
        arguments = first.tool_calls[0].arguments
        assert isinstance(arguments, dict)
        arguments["command"] = "rm -rf /"

        (again,) = await storage.get_messages("t1")
        assert isinstance(again, AssistantMessage)
        assert again.tool_calls[0].arguments == {"command": "ls"}, (
            "a reader changing what it read changed what the store returns to the next reader"
        )

    async def test_getting_messages_of_an_unknown_thread_returns_an_empty_list(
        self, storage: Storage
    ) -> None:
        assert list(await storage.get_messages("nope")) == []

    async def test_get_messages_from_start_returns_only_what_follows(
        self, storage: Storage
    ) -> None:
        await storage.create_thread(_thread("t1"))
        batch = [UserMessage(content=f"m{i}") for i in range(5)]
        await storage.append_messages("t1", batch[:3])
        first = await storage.get_messages("t1")
        await storage.append_messages("t1", batch[3:])

        assert list(await storage.get_messages("t1", start=len(first))) == batch[3:], (
            "get_messages(start=n) must return the messages after the first n"
        )
        assert list(await storage.get_messages("t1", start=0)) == batch
        assert list(await storage.get_messages("t1", start=4)) == batch[4:]
        assert list(await storage.get_messages("t1", start=5)) == []
        assert list(await storage.get_messages("t1", start=99)) == []
        assert list(await storage.get_messages("nope", start=2)) == []

    async def test_get_messages_with_a_negative_start_is_a_value_error(
        self, storage: Storage
    ) -> None:
        await storage.create_thread(_thread("t1"))
        await storage.append_messages("t1", [UserMessage(content="hi")])

        with pytest.raises(ValueError, match="-1"):
            await storage.get_messages("t1", start=-1)

    async def test_appending_to_an_unknown_thread_raises_thread_not_found(
        self, storage: Storage
    ) -> None:
        with pytest.raises(ThreadNotFoundError) as raised:
            await storage.append_messages("nope", [UserMessage(content="hi")])

        assert raised.value.thread_id == "nope"
        assert await storage.get_thread("nope") is None, "an append created the thread"
        assert list(await storage.get_messages("nope")) == []

    async def test_appending_to_a_deleted_thread_raises_thread_not_found(
        self, storage: Storage
    ) -> None:
        await storage.create_thread(_thread("t1"))
        await storage.delete_thread("t1")

        with pytest.raises(ThreadNotFoundError):
            await storage.append_messages("t1", [UserMessage(content="late")])

        assert list(await storage.get_messages("t1")) == []

    async def test_a_batch_with_an_unserializable_message_stores_none_of_it(
        self, storage: Storage
    ) -> None:
        await storage.create_thread(_thread("t1"))
        await storage.append_messages("t1", [UserMessage(content="before")])

        with pytest.raises((ValueError, TypeError)):
            await storage.append_messages(
                "t1",
                [
                    UserMessage(content="first of the batch"),
                    _unserializable(),
                    UserMessage(content="third of the batch"),
                ],
            )

        assert list(await storage.get_messages("t1")) == [UserMessage(content="before")], (
            "a batch that failed part way stored some of its messages; appends must be atomic"
        )
        await storage.append_messages("t1", [UserMessage(content="after")])
        assert list(await storage.get_messages("t1")) == [
            UserMessage(content="before"),
            UserMessage(content="after"),
        ]
        assert list(await storage.get_messages("t1", start=1)) == [UserMessage(content="after")]

    # -- concurrent writers -------------------------------------------------------------------

    async def test_concurrent_appends_to_one_thread_lose_nothing_and_keep_each_batch_whole(
        self, storage: Storage
    ) -> None:
        writers = self.concurrent_writers
        await storage.create_thread(_thread("t1"))

        async def append(i: int) -> None:
            await storage.append_messages(
                "t1", [UserMessage(content=f"{i}:{part}") for part in ("a", "b", "c")]
            )

        async with anyio.create_task_group() as tg:
            for i in range(writers):
                tg.start_soon(append, i)

        got = [m.content for m in await storage.get_messages("t1") if isinstance(m, UserMessage)]
        assert len(got) == 3 * writers, f"{writers} batches of 3 left {len(got)} messages"
        batches = [tuple(got[k : k + 3]) for k in range(0, len(got), 3)]
        expected = [(f"{i}:a", f"{i}:b", f"{i}:c") for i in range(writers)]
        assert sorted(batches) == sorted(expected), (
            "concurrent batches interleaved or lost messages; each batch must be stored whole, "
            "in order, and contiguous"
        )

    async def test_concurrent_appends_to_many_threads_lose_nothing(self, storage: Storage) -> None:
        threads, appends = 10, max(1, self.concurrent_writers // 10)

        async def converse(t: int) -> None:
            await storage.create_thread(_thread(f"t{t}"))
            for n in range(appends):
                await storage.append_messages(
                    f"t{t}", [UserMessage(content=f"t{t}:{n}"), AssistantMessage(content=f"{n}")]
                )

        async with anyio.create_task_group() as tg:
            for t in range(threads):
                tg.start_soon(converse, t)

        for t in range(threads):
            expected: list[Message] = []
            for n in range(appends):
                expected += [UserMessage(content=f"t{t}:{n}"), AssistantMessage(content=f"{n}")]
            assert list(await storage.get_messages(f"t{t}")) == expected, (
                f"thread t{t} lost or reordered messages written concurrently with other threads"
            )
        assert len(await storage.list_threads("acme")) == threads

    async def test_an_incremental_reader_sees_every_message_once_in_order_during_appends(
        self, storage: Storage
    ) -> None:
        writers = self.concurrent_writers
        await storage.create_thread(_thread("t1"))
        done = anyio.Event()
        seen: list[Message] = []

        async def write(i: int) -> None:
            await storage.append_messages(
                "t1", [UserMessage(content=f"{i}:a"), UserMessage(content=f"{i}:b")]
            )

        async def writers_then_done() -> None:
            async with anyio.create_task_group() as tg:
                for i in range(writers):
                    tg.start_soon(write, i)
            done.set()

        async def read() -> None:
            while not done.is_set():
                seen.extend(await storage.get_messages("t1", start=len(seen)))
                await anyio.lowlevel.checkpoint()  # a turn for the writers, not a wait for them
            seen.extend(await storage.get_messages("t1", start=len(seen)))

        async with anyio.create_task_group() as tg:
            tg.start_soon(read)
            tg.start_soon(writers_then_done)

        assert seen == list(await storage.get_messages("t1")), (
            "reading from start=len(seen) while writers appended missed, repeated or reordered "
            "messages"
        )
        assert len(seen) == 2 * writers

    async def test_concurrent_creates_of_one_id_let_exactly_one_win(self, storage: Storage) -> None:
        outcomes: list[str] = []

        async def create(agent: str) -> None:
            try:
                await storage.create_thread(_thread("t1", agent=agent))
                outcomes.append(agent)
            except ThreadExistsError:
                outcomes.append("exists")

        async with anyio.create_task_group() as tg:
            for i in range(20):
                tg.start_soon(create, f"agent-{i}")

        winners = [o for o in outcomes if o != "exists"]
        assert len(winners) == 1, f"{len(winners)} of 20 concurrent creates of one id succeeded"
        stored = await storage.get_thread("t1")
        assert stored is not None
        assert stored.agent_name == winners[0], "the stored thread is not the one that won"

    async def test_concurrent_deletes_of_one_tree_delete_each_thread_once(
        self, storage: Storage
    ) -> None:
        await storage.create_thread(_thread("root"))
        for n in range(5):
            await storage.create_thread(_thread(f"child-{n}", parent="root"))
        results: list[list[str]] = []

        async def delete() -> None:
            results.append(list(await storage.delete_thread("root")))

        async with anyio.create_task_group() as tg:
            for _ in range(5):
                tg.start_soon(delete)

        reported = [thread_id for result in results for thread_id in result]
        assert sorted(reported) == sorted(["root", *(f"child-{n}" for n in range(5))]), (
            f"five concurrent deletes of one tree reported {reported}; each thread must be "
            "reported deleted exactly once"
        )

    async def test_an_append_racing_a_delete_leaves_nothing_behind(self, storage: Storage) -> None:
        await storage.create_thread(_thread("t1"))
        landed: list[bool] = []

        async def append(i: int) -> None:
            try:
                await storage.append_messages("t1", [UserMessage(content=f"{i}")])
                landed.append(True)
            except ThreadNotFoundError:
                landed.append(False)

        async with anyio.create_task_group() as tg:
            for i in range(self.concurrent_writers // 2):
                tg.start_soon(append, i)
            tg.start_soon(storage.delete_thread, "t1")
            for i in range(self.concurrent_writers // 2, self.concurrent_writers):
                tg.start_soon(append, i)

        assert await storage.get_thread("t1") is None
        await storage.create_thread(_thread("t1"))
        assert list(await storage.get_messages("t1")) == [], (
            "messages appended while the thread was being deleted outlived it"
        )

    # -- run leases ---------------------------------------------------------------------------

    async def _expire(self) -> None:
        """Wait until a lease taken with ``short_ttl`` has expired, by any clock near ours."""
        await anyio.sleep(self.short_ttl * 1.5 + 0.05)

    async def test_acquiring_a_free_thread_returns_a_fresh_lease(self, storage: Storage) -> None:
        await storage.create_thread(_thread("t1"))
        before = datetime.now(UTC)

        lease = await storage.acquire_run("t1", holder="host:1:aaaaaaaa", ttl=30)

        assert lease is not None, "acquire_run on a thread nobody holds returned None"
        assert (lease.thread_id, lease.holder, lease.interrupted) == ("t1", "host:1:aaaaaaaa", None)
        assert isinstance(lease.token, int)
        assert lease.expires_at.utcoffset() == timedelta(0), "expires_at must be in UTC"
        # The storage's clock may be another machine's: allow it some seconds of skew.
        assert before + timedelta(seconds=25) < lease.expires_at, (
            f"a 30 s lease taken at {before} expires at {lease.expires_at}"
        )
        assert lease.expires_at < datetime.now(UTC) + timedelta(seconds=35)

    async def test_a_live_lease_is_not_taken_by_a_second_acquire(self, storage: Storage) -> None:
        await storage.create_thread(_thread("t1"))
        first = await storage.acquire_run("t1", holder="first", ttl=30)

        assert await storage.acquire_run("t1", holder="second", ttl=30) is None
        assert await storage.acquire_run("t1", holder="first", ttl=30) is None, (
            "a live lease was taken again by the same holder string; only its token proves it"
        )
        assert first is not None

    async def test_a_released_lease_is_taken_again_with_a_larger_token(
        self, storage: Storage
    ) -> None:
        await storage.create_thread(_thread("t1"))
        first = await storage.acquire_run("t1", holder="first", ttl=30)
        assert first is not None

        await storage.release_run(first)
        second = await storage.acquire_run("t1", holder="second", ttl=30)

        assert second is not None, "a released lease could not be taken again"
        assert second.token > first.token
        assert second.interrupted is None, (
            "a lease taken after a release said the previous run was interrupted"
        )

    async def test_releasing_twice_or_after_delete_does_nothing(self, storage: Storage) -> None:
        await storage.create_thread(_thread("t1"))
        lease = await storage.acquire_run("t1", holder="first", ttl=30)
        assert lease is not None

        await storage.release_run(lease)
        await storage.release_run(lease)
        again = await storage.acquire_run("t1", holder="second", ttl=30)
        assert again is not None
        await storage.delete_thread("t1")
        await storage.release_run(again)

    async def test_a_stale_release_does_not_free_the_current_lease(self, storage: Storage) -> None:
        await storage.create_thread(_thread("t1"))
        stale = await storage.acquire_run("t1", holder="stalled", ttl=self.short_ttl)
        assert stale is not None
        await self._expire()
        current = await storage.acquire_run("t1", holder="current", ttl=30)
        assert current is not None

        await storage.release_run(stale)

        assert await storage.acquire_run("t1", holder="third", ttl=30) is None, (
            "releasing a lease that was taken over freed its successor's"
        )

    async def test_an_expired_lease_is_taken_over_naming_the_interrupted_holder(
        self, storage: Storage
    ) -> None:
        await storage.create_thread(_thread("t1"))
        old = await storage.acquire_run("t1", holder="host:7:deadbeef", ttl=self.short_ttl)
        assert old is not None
        assert await storage.acquire_run("t1", holder="early", ttl=30) is None
        await self._expire()

        new = await storage.acquire_run("t1", holder="later", ttl=30)

        assert new is not None, "a lease past its expiry was not taken over"
        assert new.token > old.token
        assert new.interrupted == "host:7:deadbeef", (
            "a lease taken over after it expired must name the holder whose run was interrupted"
        )

    async def test_renewing_extends_a_current_lease_also_past_its_expiry(
        self, storage: Storage
    ) -> None:
        await storage.create_thread(_thread("t1"))
        lease = await storage.acquire_run("t1", holder="runner", ttl=self.short_ttl)
        assert lease is not None

        renewed = await storage.renew_run(lease, ttl=30)
        await self._expire()

        assert renewed.token == lease.token
        assert renewed.expires_at > lease.expires_at
        assert await storage.acquire_run("t1", holder="other", ttl=30) is None, (
            "a renewed lease was taken over at its first expiry"
        )
        short = await storage.renew_run(renewed, ttl=self.short_ttl)
        await self._expire()
        revived = await storage.renew_run(short, ttl=30)  # expired, but nobody took it over
        assert revived.token == lease.token
        assert await storage.acquire_run("t1", holder="other", ttl=30) is None

    async def test_renewing_a_lease_taken_over_or_released_raises_lease_lost(
        self, storage: Storage
    ) -> None:
        await storage.create_thread(_thread("t1"))
        old = await storage.acquire_run("t1", holder="stalled", ttl=self.short_ttl)
        assert old is not None
        await self._expire()
        new = await storage.acquire_run("t1", holder="new", ttl=30)
        assert new is not None

        with pytest.raises(RunLeaseLostError):
            await storage.renew_run(old, ttl=30)
        await storage.release_run(new)
        with pytest.raises(RunLeaseLostError):
            await storage.renew_run(new, ttl=30)

    async def test_a_deleted_threads_lease_renews_and_appends_as_thread_not_found(
        self, storage: Storage
    ) -> None:
        await storage.create_thread(_thread("t1"))
        lease = await storage.acquire_run("t1", holder="runner", ttl=30)
        assert lease is not None

        await storage.delete_thread("t1")

        with pytest.raises(ThreadNotFoundError):
            await storage.renew_run(lease, ttl=30)
        with pytest.raises(ThreadNotFoundError):
            await storage.append_messages("t1", [UserMessage(content="late")], lease=lease)
        await storage.release_run(lease)

    async def test_an_append_with_the_current_lease_stores_and_with_a_stale_one_stores_nothing(
        self, storage: Storage
    ) -> None:
        await storage.create_thread(_thread("t1"))
        stale = await storage.acquire_run("t1", holder="stalled", ttl=self.short_ttl)
        assert stale is not None
        await storage.append_messages("t1", [UserMessage(content="in time")], lease=stale)
        await self._expire()
        # Expired but not taken over: still the current lease, so still fenced in.
        await storage.append_messages("t1", [UserMessage(content="late, alone")], lease=stale)
        current = await storage.acquire_run("t1", holder="current", ttl=30)
        assert current is not None

        with pytest.raises(RunLeaseLostError):
            await storage.append_messages(
                "t1", [UserMessage(content="stale 1"), UserMessage(content="stale 2")], lease=stale
            )
        await storage.append_messages("t1", [UserMessage(content="current")], lease=current)
        await storage.release_run(current)
        with pytest.raises(RunLeaseLostError):
            await storage.append_messages("t1", [UserMessage(content="released")], lease=current)

        assert list(await storage.get_messages("t1")) == [
            UserMessage(content="in time"),
            UserMessage(content="late, alone"),
            UserMessage(content="current"),
        ], "an append with a lease that was not the thread's current one stored something"

    async def test_tokens_grow_across_a_thread_deleted_and_created_again(
        self, storage: Storage
    ) -> None:
        await storage.create_thread(_thread("t1"))
        await storage.create_thread(_thread("other"))
        old = await storage.acquire_run("t1", holder="old life", ttl=30)
        beside = await storage.acquire_run("other", holder="beside", ttl=30)
        assert old is not None
        assert beside is not None
        await storage.delete_thread("t1")
        await storage.create_thread(_thread("t1"))

        with pytest.raises(RunLeaseLostError):
            await storage.append_messages("t1", [UserMessage(content="ghost")], lease=old)
        with pytest.raises(RunLeaseLostError):
            await storage.renew_run(old, ttl=30)
        new = await storage.acquire_run("t1", holder="new life", ttl=30)
        assert new is not None, "a thread created again under a deleted id kept the old lease"
        assert new.token > max(old.token, beside.token), (
            "a token was reused (or went back) after the thread was deleted and created again"
        )
        assert new.interrupted is None
        with pytest.raises(RunLeaseLostError):
            await storage.append_messages("t1", [UserMessage(content="ghost")], lease=old)
        assert list(await storage.get_messages("t1")) == []

    async def test_acquiring_an_unknown_thread_raises_thread_not_found(
        self, storage: Storage
    ) -> None:
        with pytest.raises(ThreadNotFoundError):
            await storage.acquire_run("nope", holder="runner", ttl=30)

    @pytest.mark.parametrize("ttl", [0, -1.5])
    async def test_a_ttl_that_is_not_positive_is_a_value_error(
        self, storage: Storage, ttl: float
    ) -> None:
        await storage.create_thread(_thread("t1"))
        with pytest.raises(ValueError, match="ttl"):
            await storage.acquire_run("t1", holder="runner", ttl=ttl)
        lease = await storage.acquire_run("t1", holder="runner", ttl=30)
        assert lease is not None, "a refused acquire_run left the thread held"
        with pytest.raises(ValueError, match="ttl"):
            await storage.renew_run(lease, ttl=ttl)

    async def test_concurrent_acquires_let_exactly_one_win(self, storage: Storage) -> None:
        await storage.create_thread(_thread("t1"))
        won: list[RunLease] = []
        lost: list[str] = []

        async def acquire(i: int) -> None:
            lease = await storage.acquire_run("t1", holder=f"runner-{i}", ttl=30)
            if lease is None:
                lost.append(f"runner-{i}")
            else:
                won.append(lease)

        async with anyio.create_task_group() as tg:
            for i in range(self.concurrent_writers):
                tg.start_soon(acquire, i)

        assert len(won) == 1, f"{len(won)} of {self.concurrent_writers} concurrent acquires won"
        assert len(lost) == self.concurrent_writers - 1

    # -- reclaim: the same holder resuming after its process died -----------------------------

    async def test_reclaim_takes_a_live_lease_of_the_same_holder_with_a_greater_token(
        self, storage: Storage
    ) -> None:
        await storage.create_thread(_thread("t1"))
        await storage.create_thread(_thread("other"))
        old = await storage.acquire_run("t1", holder="durable:run-1", ttl=30)
        beside = await storage.acquire_run("other", holder="beside", ttl=30)
        assert old is not None
        assert beside is not None

        new = await storage.acquire_run("t1", holder="durable:run-1", ttl=30, reclaim=True)

        assert new is not None, (
            "acquire_run(reclaim=True) did not take the live lease of the same holder"
        )
        assert (new.thread_id, new.holder) == ("t1", "durable:run-1")
        assert new.token > max(old.token, beside.token), (
            "a reclaimed lease must get a new token, greater than every token issued before"
        )
        assert new.interrupted is None, (
            "the same holder reclaiming its live lease is not an interruption"
        )
        assert new.expires_at >= old.expires_at
        assert await storage.acquire_run("t1", holder="durable:run-1", ttl=30) is None, (
            "without reclaim, the same holder took a live lease"
        )
        assert await storage.acquire_run("t1", holder="other", ttl=30) is None
        again = await storage.acquire_run("t1", holder="durable:run-1", ttl=30, reclaim=True)
        assert again is not None, "a reclaimed lease could not be reclaimed again"
        assert again.token > new.token
        assert again.interrupted is None

    async def test_a_reclaimed_lease_is_fenced_and_its_release_does_nothing(
        self, storage: Storage
    ) -> None:
        await storage.create_thread(_thread("t1"))
        old = await storage.acquire_run("t1", holder="durable:run-1", ttl=30)
        assert old is not None
        await storage.append_messages("t1", [UserMessage(content="before")], lease=old)
        new = await storage.acquire_run("t1", holder="durable:run-1", ttl=30, reclaim=True)
        assert new is not None

        with pytest.raises(RunLeaseLostError):
            await storage.append_messages("t1", [UserMessage(content="zombie")], lease=old)
        with pytest.raises(RunLeaseLostError):
            await storage.renew_run(old, ttl=30)
        await storage.release_run(old)

        assert await storage.acquire_run("t1", holder="other", ttl=30) is None, (
            "releasing a lease that was reclaimed freed its successor's"
        )
        assert await storage.acquire_run("t1", holder="durable:run-1", ttl=30) is None
        renewed = await storage.renew_run(new, ttl=30)
        assert renewed.token == new.token
        await storage.append_messages("t1", [UserMessage(content="after")], lease=new)
        assert list(await storage.get_messages("t1")) == [
            UserMessage(content="before"),
            UserMessage(content="after"),
        ], "an append with a reclaimed (stale) lease stored something"

    async def test_reclaim_does_not_take_a_live_lease_of_another_holder(
        self, storage: Storage
    ) -> None:
        await storage.create_thread(_thread("t1"))
        held = await storage.acquire_run("t1", holder="durable:run-1", ttl=30)
        assert held is not None

        for other in ("durable:run-2", "durable:run-1 ", "durable:run-", "DURABLE:RUN-1"):
            assert await storage.acquire_run("t1", holder=other, ttl=30, reclaim=True) is None, (
                f"reclaim by {other!r} took the live lease of 'durable:run-1'"
            )
        await storage.append_messages("t1", [UserMessage(content="still mine")], lease=held)
        await storage.renew_run(held, ttl=30)

    async def test_reclaim_when_nothing_is_live_acquires_as_usual(self, storage: Storage) -> None:
        await storage.create_thread(_thread("t1"))
        first = await storage.acquire_run("t1", holder="durable:run-1", ttl=30, reclaim=True)
        assert first is not None, "reclaim on a thread nobody holds returned None"
        assert (first.holder, first.interrupted) == ("durable:run-1", None)

        await storage.release_run(first)
        after_release = await storage.acquire_run("t1", holder="someone", ttl=30, reclaim=True)
        assert after_release is not None, "reclaim could not take a released lease"
        assert after_release.token > first.token
        assert after_release.interrupted is None
        await storage.release_run(after_release)

        mine = await storage.acquire_run("t1", holder="durable:run-1", ttl=self.short_ttl)
        assert mine is not None
        await self._expire()
        resumed = await storage.acquire_run("t1", holder="durable:run-1", ttl=30, reclaim=True)
        assert resumed is not None, "reclaim could not take its own expired lease"
        assert resumed.token > mine.token
        assert resumed.interrupted == "durable:run-1", (
            "a lease taken over after it expired unreleased names the interrupted holder, also "
            "when the same holder reclaims it"
        )

        gone = await storage.acquire_run("t1", holder="durable:run-1", ttl=self.short_ttl)
        assert gone is None
        await storage.release_run(resumed)
        theirs = await storage.acquire_run("t1", holder="host:7:deadbeef", ttl=self.short_ttl)
        assert theirs is not None
        await self._expire()
        taken = await storage.acquire_run("t1", holder="durable:run-1", ttl=30, reclaim=True)
        assert taken is not None, "reclaim could not take another holder's expired lease"
        assert taken.token > theirs.token
        assert taken.interrupted == "host:7:deadbeef"
        with pytest.raises(RunLeaseLostError):
            await storage.renew_run(theirs, ttl=30)

    async def test_reclaim_of_an_unknown_thread_or_with_a_bad_ttl_is_refused(
        self, storage: Storage
    ) -> None:
        with pytest.raises(ThreadNotFoundError):
            await storage.acquire_run("nope", holder="durable:run-1", ttl=30, reclaim=True)
        await storage.create_thread(_thread("t1"))
        held = await storage.acquire_run("t1", holder="durable:run-1", ttl=30)
        assert held is not None
        with pytest.raises(ValueError, match="ttl"):
            await storage.acquire_run("t1", holder="durable:run-1", ttl=0, reclaim=True)
        await storage.append_messages("t1", [UserMessage(content="still mine")], lease=held)

    async def test_concurrent_reclaims_by_one_holder_each_get_a_token_the_last_one_current(
        self, storage: Storage
    ) -> None:
        await storage.create_thread(_thread("t1"))
        first = await storage.acquire_run("t1", holder="durable:run-1", ttl=30)
        assert first is not None
        got: list[RunLease | None] = []

        async def reclaim() -> None:
            got.append(
                await storage.acquire_run("t1", holder="durable:run-1", ttl=30, reclaim=True)
            )

        async with anyio.create_task_group() as tg:
            for _ in range(self.concurrent_writers):
                tg.start_soon(reclaim)

        leases = [lease for lease in got if lease is not None]
        assert len(leases) == self.concurrent_writers, (
            f"{self.concurrent_writers - len(leases)} of {self.concurrent_writers} concurrent "
            "reclaims by the same holder returned None"
        )
        tokens = sorted(lease.token for lease in leases)
        assert len(set(tokens)) == len(tokens), "concurrent reclaims were given the same token"
        assert tokens[0] > first.token
        last = max(leases, key=lambda lease: lease.token)
        await storage.append_messages("t1", [UserMessage(content="last")], lease=last)
        for lease in [first, *leases]:
            if lease is not last:
                with pytest.raises(RunLeaseLostError):
                    await storage.append_messages("t1", [UserMessage(content="x")], lease=lease)
        assert list(await storage.get_messages("t1")) == [UserMessage(content="last")], (
            "the reclaimed lease with the greatest token must be the thread's current one"
        )

    # -- run leases across storage objects ----------------------------------------------------

    async def _second(self, storage: Storage, *, what: str = "leases") -> Storage:
        if type(self).open_second is StorageConformance.open_second:
            pytest.skip(
                f"{type(self).__name__} does not implement open_second(storage), so {what} "
                "across storage objects (as across processes) are not checked; implement it "
                "for a backend processes share"
            )
        return await resolve(self.open_second(storage))

    async def test_leases_are_exclusive_across_storage_objects(self, storage: Storage) -> None:
        second = await self._second(storage)
        try:
            await storage.create_thread(_thread("t1"))
            lease = await storage.acquire_run("t1", holder="here", ttl=30)
            assert lease is not None

            assert await second.acquire_run("t1", holder="there", ttl=30) is None, (
                "another storage object over the same data took a live lease"
            )
            await storage.release_run(lease)
            theirs = await second.acquire_run("t1", holder="there", ttl=30)
            assert theirs is not None
            assert theirs.token > lease.token
            assert await storage.acquire_run("t1", holder="here", ttl=30) is None

            won: list[RunLease] = []
            await second.release_run(theirs)

            async def acquire(store: Storage, name: str) -> None:
                got = await store.acquire_run("t1", holder=name, ttl=30)
                if got is not None:
                    won.append(got)

            async with anyio.create_task_group() as tg:
                for i in range(self.concurrent_writers // 2):
                    tg.start_soon(acquire, storage, f"here-{i}")
                    tg.start_soon(acquire, second, f"there-{i}")
            assert len(won) == 1, f"{len(won)} concurrent acquires over two storage objects won"
        finally:
            await second.aclose()

    async def test_a_lease_taken_over_through_one_object_is_fenced_in_the_other(
        self, storage: Storage
    ) -> None:
        second = await self._second(storage)
        try:
            await storage.create_thread(_thread("t1"))
            stale = await storage.acquire_run("t1", holder="stalled", ttl=self.short_ttl)
            assert stale is not None
            await self._expire()
            current = await second.acquire_run("t1", holder="current", ttl=30)
            assert current is not None
            assert current.interrupted == "stalled"

            with pytest.raises(RunLeaseLostError):
                await storage.append_messages("t1", [UserMessage(content="late")], lease=stale)
            with pytest.raises(RunLeaseLostError):
                await storage.renew_run(stale, ttl=30)
            await storage.release_run(stale)
            await storage.append_messages("t1", [UserMessage(content="current")], lease=current)

            assert list(await second.get_messages("t1")) == [UserMessage(content="current")]
            await storage.delete_thread("t1")
            with pytest.raises(ThreadNotFoundError):
                await second.renew_run(current, ttl=30)
        finally:
            await second.aclose()

    async def test_a_lease_reclaimed_through_one_object_is_fenced_in_the_other(
        self, storage: Storage
    ) -> None:
        second = await self._second(storage)
        try:
            await storage.create_thread(_thread("t1"))
            old = await storage.acquire_run("t1", holder="durable:run-1", ttl=30)
            assert old is not None
            assert (
                await second.acquire_run("t1", holder="durable:run-2", ttl=30, reclaim=True) is None
            ), "a reclaim through another storage object took another holder's live lease"

            new = await second.acquire_run("t1", holder="durable:run-1", ttl=30, reclaim=True)

            assert new is not None, (
                "a reclaim through another storage object did not take the same holder's lease"
            )
            assert new.token > old.token
            assert new.interrupted is None
            with pytest.raises(RunLeaseLostError):
                await storage.append_messages("t1", [UserMessage(content="zombie")], lease=old)
            with pytest.raises(RunLeaseLostError):
                await storage.renew_run(old, ttl=30)
            await storage.release_run(old)
            assert await storage.acquire_run("t1", holder="other", ttl=30) is None
            await storage.append_messages("t1", [UserMessage(content="resumed")], lease=new)
            assert list(await second.get_messages("t1")) == [UserMessage(content="resumed")]
        finally:
            await second.aclose()

    # -- blobs --------------------------------------------------------------------------------

    def _blobs(self, storage: Storage) -> BlobStore:
        if not isinstance(storage, BlobStore):
            pytest.skip(
                f"{type(storage).__name__} does not implement BlobStore (put_blob, get_blob, "
                "delete_blobs), so blobs kept with a thread are not checked; it is optional: "
                "durable runs then keep large step outputs in the durability engine's records"
            )
        return storage

    async def test_blobs_of_any_bytes_round_trip_exactly(self, storage: Storage) -> None:
        blobs = self._blobs(storage)
        await storage.create_thread(_thread("t1"))
        large = random.Random(7).randbytes(5 * 1024 * 1024 + 3)
        values = {
            "nul": b"\x00a\x00\x00b\x00",
            "every byte": bytes(range(256)) * 3,
            "empty": b"",
            "large": large,
        }
        for key, data in values.items():
            await blobs.put_blob("t1", key, data)
        for key, data in values.items():
            got = await blobs.get_blob("t1", key)
            assert type(got) is bytes, f"get_blob returned a {type(got).__name__}, not bytes"
            assert got == data, f"blob {key!r} ({len(data)} bytes) read back as {len(got)} bytes"

    async def test_putting_a_blob_again_replaces_it(self, storage: Storage) -> None:
        blobs = self._blobs(storage)
        await storage.create_thread(_thread("t1"))
        await blobs.put_blob("t1", "k", b"first, and longer")
        await blobs.put_blob("t1", "k", b"second")
        assert await blobs.get_blob("t1", "k") == b"second"
        await blobs.put_blob("t1", "k", b"")
        assert await blobs.get_blob("t1", "k") == b""
        assert await blobs.delete_blobs("t1", "") == 1, "a replaced blob was kept twice"

    async def test_an_absent_blob_or_thread_reads_none_and_a_put_to_an_unknown_thread_raises(
        self, storage: Storage
    ) -> None:
        blobs = self._blobs(storage)
        await storage.create_thread(_thread("t1"))
        await blobs.put_blob("t1", "here", b"x")
        assert await blobs.get_blob("t1", "absent") is None
        assert await blobs.get_blob("t1", "her") is None, "a key read its extension's blob"
        assert await blobs.get_blob("nope", "here") is None
        with pytest.raises(ThreadNotFoundError):
            await blobs.put_blob("nope", "k", b"x")
        assert await blobs.get_blob("nope", "k") is None
        assert await blobs.delete_blobs("nope", "") == 0

    async def test_blobs_are_per_thread_and_not_messages(self, storage: Storage) -> None:
        blobs = self._blobs(storage)
        await storage.create_thread(_thread("t1"))
        await storage.create_thread(_thread("t2"))
        await storage.append_messages("t1", [UserMessage(content="hi")])
        await blobs.put_blob("t1", "k", b"one")
        await blobs.put_blob("t2", "k", b"two")
        assert await blobs.get_blob("t1", "k") == b"one"
        assert await blobs.get_blob("t2", "k") == b"two"
        assert list(await storage.get_messages("t1")) == [UserMessage(content="hi")]
        assert list(await storage.get_messages("t2")) == [], "a blob was read as a message"
        assert list(await storage.get_messages("t1", start=1)) == []

    async def test_deleting_blobs_by_prefix_counts_and_leaves_the_rest(
        self, storage: Storage
    ) -> None:
        blobs = self._blobs(storage)
        keys = [
            "run-1/a",
            "run-1/b",
            "run-1",
            "run-10/a",
            "run-2/a",
            "run%/x",
            "run%%",
            "run_/x",
            "runX/x",
            "runXY",
            "run\\/x",
            "é/1",
            "é/2",
            "ê",
            "\ud800/x",
            "\ud800",
            "\U0010ffff/x",
            "\U0010ffff",
            "\x00",
            "\x00\x00",
        ]
        for thread_id in ("t1", "t2"):
            await storage.create_thread(_thread(thread_id))
            for key in keys:
                await blobs.put_blob(thread_id, key, key.encode("utf-8", "surrogatepass"))

        async def left() -> list[str]:
            return [key for key in keys if await blobs.get_blob("t1", key) is not None]

        expected = list(keys)
        for prefix, deleted in [
            ("run-1/", ["run-1/a", "run-1/b"]),
            ("run%", ["run%/x", "run%%"]),
            ("run_", ["run_/x"]),
            ("run\\", ["run\\/x"]),
            ("absent", []),
            ("é", ["é/1", "é/2"]),
            ("\ud800", ["\ud800/x", "\ud800"]),
            ("\U0010ffff", ["\U0010ffff/x", "\U0010ffff"]),
            ("\x00\x00", ["\x00\x00"]),
            ("run-1", ["run-1", "run-10/a"]),
        ]:
            count = await blobs.delete_blobs("t1", prefix)
            expected = [key for key in expected if key not in deleted]
            assert (count, await left()) == (len(deleted), expected), (
                f"delete_blobs(prefix={prefix!r}) deleted other keys than those starting with it"
            )
        assert expected == ["run-2/a", "runX/x", "runXY", "ê", "\x00"]
        assert await blobs.delete_blobs("t1", "") == len(expected)
        assert await left() == []
        for key in keys:
            assert await blobs.get_blob("t2", key) == key.encode("utf-8", "surrogatepass"), (
                f"deleting blobs of thread t1 deleted {key!r} of thread t2"
            )

    async def test_keys_differing_only_by_characters_a_lossy_encoding_merges_stay_distinct(
        self, storage: Storage
    ) -> None:
        blobs = self._blobs(storage)
        await storage.create_thread(_thread("t1"))
        for index, key in enumerate(LOOKALIKE_IDS):
            await blobs.put_blob("t1", key, bytes([index]))
        for index, key in enumerate(LOOKALIKE_IDS):
            assert await blobs.get_blob("t1", key) == bytes([index]), f"blob {key!r} was merged"

    async def test_deleting_a_thread_deletes_its_blobs_and_its_descendants(
        self, storage: Storage
    ) -> None:
        blobs = self._blobs(storage)
        await storage.create_thread(_thread("p"))
        await storage.create_thread(_thread("c", parent="p"))
        await storage.create_thread(_thread("g", parent="c"))
        await storage.create_thread(_thread("other"))
        for thread_id in ("p", "c", "g", "other"):
            await blobs.put_blob(thread_id, "k", thread_id.encode())
            await blobs.put_blob(thread_id, "step/1", b"x")

        assert list(await storage.delete_thread("c")) == ["c", "g"]
        assert await blobs.get_blob("c", "k") is None
        assert await blobs.get_blob("p", "k") == b"p", "deleting a child deleted its parent's blobs"
        assert list(await storage.delete_thread("p")) == ["p"]
        for thread_id in ("p", "c", "g"):
            assert await blobs.get_blob(thread_id, "k") is None, (
                f"thread {thread_id!r} was deleted, but its blob was not"
            )
            assert await blobs.delete_blobs(thread_id, "") == 0
            await storage.create_thread(_thread(thread_id))
            assert await blobs.get_blob(thread_id, "k") is None, (
                f"thread {thread_id!r} created again found the blobs of the deleted one"
            )
        assert await blobs.get_blob("other", "k") == b"other"
        assert await blobs.delete_blobs("other", "") == 2

    async def test_blob_keys_and_data_over_the_limits_are_a_value_error(
        self, storage: Storage
    ) -> None:
        blobs = self._blobs(storage)
        await storage.create_thread(_thread("t1"))
        longest = "k" * MAX_BLOB_KEY_LENGTH
        await blobs.put_blob("t1", longest, b"ok")
        assert await blobs.get_blob("t1", longest) == b"ok"
        longest_wide = "\U0010ffff" * MAX_BLOB_KEY_LENGTH  # characters count, not bytes
        await blobs.put_blob("t1", longest_wide, b"wide")
        assert await blobs.get_blob("t1", longest_wide) == b"wide"

        with pytest.raises(ValueError, match=str(MAX_BLOB_KEY_LENGTH)):
            await blobs.put_blob("t1", longest + "k", b"x")
        with pytest.raises(ValueError, match=str(MAX_BLOB_KEY_LENGTH)):
            await blobs.put_blob("t1", "", b"x")
        with pytest.raises(ValueError, match=str(MAX_BLOB_KEY_LENGTH)):
            await blobs.get_blob("t1", "")
        with pytest.raises(ValueError, match=str(MAX_BLOB_BYTES)):
            await blobs.put_blob("t1", "huge", bytes(MAX_BLOB_BYTES + 1))
        assert await blobs.get_blob("t1", "huge") is None, "a blob over the limit was stored"
        with pytest.raises(ValueError, match=str(MAX_BLOB_KEY_LENGTH)):
            await blobs.put_blob("nope", "", b"x")  # the arguments are checked first

    async def test_concurrent_blob_puts_lose_nothing(self, storage: Storage) -> None:
        blobs = self._blobs(storage)
        await storage.create_thread(_thread("t1"))

        async def put(i: int) -> None:
            await blobs.put_blob("t1", f"k{i}", i.to_bytes(2, "big") * 100)
            await blobs.put_blob("t1", "shared", i.to_bytes(2, "big"))

        async with anyio.create_task_group() as tg:
            for i in range(self.concurrent_writers):
                tg.start_soon(put, i)
        for i in range(self.concurrent_writers):
            assert await blobs.get_blob("t1", f"k{i}") == i.to_bytes(2, "big") * 100
        shared = await blobs.get_blob("t1", "shared")
        assert shared is not None
        assert int.from_bytes(shared, "big") in range(self.concurrent_writers)
        assert await blobs.delete_blobs("t1", "k") == self.concurrent_writers

    async def test_a_blob_put_through_one_storage_object_reads_through_another(
        self, storage: Storage
    ) -> None:
        blobs = self._blobs(storage)
        second = await self._second(storage, what="blobs")
        try:
            theirs = self._blobs(second)
            await storage.create_thread(_thread("t1"))
            data = random.Random(1).randbytes(100_000)
            await blobs.put_blob("t1", "step/1", data)
            assert await theirs.get_blob("t1", "step/1") == data
            await theirs.put_blob("t1", "step/1", b"replaced")
            await theirs.put_blob("t1", "step/2", b"\x00")
            assert await blobs.get_blob("t1", "step/1") == b"replaced"
            assert await blobs.delete_blobs("t1", "step/") == 2
            assert await theirs.get_blob("t1", "step/2") is None
            await theirs.put_blob("t1", "kept", b"k")
            await storage.delete_thread("t1")
            assert await theirs.get_blob("t1", "kept") is None
            with pytest.raises(ThreadNotFoundError):
                await theirs.put_blob("t1", "kept", b"k")
        finally:
            await second.aclose()

    # -- every str ----------------------------------------------------------------------------

    async def test_a_lone_surrogate_only_in_a_key_round_trips_exactly(
        self, storage: Storage
    ) -> None:
        # pydantic refuses a lone surrogate in a value but writes one in a dict key as U+FFFD:
        # a codec trusting its JSON would store "\ufffd" here, silently.
        messages: list[Message] = [
            AssistantMessage(
                content="", tool_calls=(ToolCall(id="c1", name="f", arguments={"\ud800": ""}),)
            ),
            ToolResultMessage(tool_call_id="c1", tool_name="f", content="x", output={"\udfff": 1}),
            UserMessage(content="a real \ufffd stays one"),
        ]
        await storage.create_thread(_thread("t1"))
        await storage.append_messages("t1", messages)
        assert list(await storage.get_messages("t1")) == messages

    async def test_lone_surrogates_round_trip_exactly_in_every_field(
        self, storage: Storage
    ) -> None:
        odd = "\ud800-\udfff\x00é"
        parent = ThreadRecord(id=f"p{odd}", scope_key=f"s{odd}", agent_name=f"a{odd}")
        child = ThreadRecord(
            id=f"c{odd}", scope_key=parent.scope_key, agent_name=odd, parent_thread_id=parent.id
        )
        messages: list[Message] = [
            UserMessage(content=odd),
            AssistantMessage(
                content=odd, tool_calls=(ToolCall(id=odd, name=odd, arguments={odd: [odd]}),)
            ),
            ToolResultMessage(tool_call_id=odd, tool_name=odd, content=odd, output={odd: odd}),
            ErrorMessage(source=odd, error_type=odd, message=odd),
        ]
        await storage.create_thread(parent)
        await storage.create_thread(child)
        await storage.append_messages(child.id, messages)

        assert await storage.get_thread(child.id) == child
        assert list(await storage.list_threads(parent.scope_key)) == [parent]
        assert list(await storage.list_threads(parent.scope_key, parent_thread_id=parent.id)) == [
            child
        ]
        assert list(await storage.get_messages(child.id)) == messages, (
            "a message holding lone surrogates did not read back exactly"
        )
        assert list(await storage.get_messages(child.id, start=2)) == messages[2:]
        assert list(await storage.delete_thread(parent.id)) == [parent.id, child.id]

    async def test_ids_differing_only_by_characters_a_lossy_encoding_merges_stay_distinct(
        self, storage: Storage
    ) -> None:
        for thread_id in LOOKALIKE_IDS:
            await storage.create_thread(_thread(thread_id, scope=thread_id))
            await storage.append_messages(thread_id, [UserMessage(content=thread_id)])

        for thread_id in LOOKALIKE_IDS:
            record = await storage.get_thread(thread_id)
            assert record is not None
            assert (record.id, record.scope_key) == (thread_id, thread_id)
            assert list(await storage.get_messages(thread_id)) == [UserMessage(content=thread_id)]
            assert _ids(await storage.list_threads(thread_id)) == [thread_id], (
                f"scope {thread_id!r} lists threads of another scope"
            )
        assert list(await storage.delete_thread(LOOKALIKE_IDS[0])) == [LOOKALIKE_IDS[0]]
        for thread_id in LOOKALIKE_IDS[1:]:
            assert await storage.get_thread(thread_id) is not None, (
                f"deleting {LOOKALIKE_IDS[0]!r} deleted {thread_id!r}"
            )

    # -- close and reopen ---------------------------------------------------------------------

    async def test_aclose_can_be_called_twice(self) -> None:
        store = await resolve(self.create_storage())
        await store.create_thread(_thread("t1"))
        await store.aclose()
        await store.aclose()

    async def test_a_new_instance_reads_what_a_closed_one_wrote(self) -> None:
        if type(self).reopen is StorageConformance.reopen:
            pytest.skip(
                f"{type(self).__name__} does not implement reopen(storage), so durability is not "
                "checked; implement it (a new instance over the same data) for a durable backend"
            )
        created_at = datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=UTC)
        first = await resolve(self.create_storage())
        await first.create_thread(
            ThreadRecord(id="p", scope_key="acme", agent_name="lead", created_at=created_at)
        )
        await first.create_thread(_thread("c", parent="p"))
        await first.append_messages("p", ONE_OF_EACH)
        await first.aclose()

        second = await resolve(self.reopen(first))
        try:
            assert await second.get_thread("p") == ThreadRecord(
                id="p", scope_key="acme", agent_name="lead", created_at=created_at
            )
            assert _ids(await second.list_threads("acme", parent_thread_id="p")) == ["c"]
            assert list(await second.get_messages("p")) == list(ONE_OF_EACH)
            await second.append_messages("p", [UserMessage(content="after reopen")])
            assert list(await second.get_messages("p", start=len(ONE_OF_EACH))) == [
                UserMessage(content="after reopen")
            ], "appends after reopening did not continue the thread"
            await second.create_thread(_thread("d"))
            assert _ids(await second.list_threads("acme")) == ["p", "d"]
            assert list(await second.delete_thread("p")) == ["p", "c"]
        finally:
            await second.aclose()

        third = await resolve(self.reopen(second))
        try:
            assert await third.get_thread("p") is None, "a delete did not outlive the instance"
            assert _ids(await third.list_threads("acme")) == ["d"]
        finally:
            await third.aclose()

    async def test_blobs_survive_a_new_instance(self) -> None:
        if type(self).reopen is StorageConformance.reopen:
            pytest.skip(
                f"{type(self).__name__} does not implement reopen(storage), so the durability "
                "of blobs is not checked; implement it (a new instance over the same data) for "
                "a durable backend"
            )
        first = await resolve(self.create_storage())
        try:
            blobs = self._blobs(first)
        except BaseException:
            await first.aclose()
            raise
        data = random.Random(2).randbytes(300_000)
        await first.create_thread(_thread("p"))
        await first.create_thread(_thread("c", parent="p"))
        await blobs.put_blob("p", "step/1", data)
        await blobs.put_blob("c", "step/1", b"\x00child")
        await first.aclose()

        second = await resolve(self.reopen(first))
        try:
            again = self._blobs(second)
            assert await again.get_blob("p", "step/1") == data, "a blob did not survive reopening"
            assert await again.get_blob("c", "step/1") == b"\x00child"
            await again.put_blob("p", "step/2", b"after reopen")
            assert await again.delete_blobs("p", "step/1") == 1
        finally:
            await second.aclose()

        third = await resolve(self.reopen(second))
        try:
            last = self._blobs(third)
            assert await last.get_blob("p", "step/1") is None, "a blob delete did not persist"
            assert await last.get_blob("p", "step/2") == b"after reopen"
            assert list(await third.delete_thread("p")) == ["p", "c"]
            assert await last.get_blob("c", "step/1") is None
        finally:
            await third.aclose()
