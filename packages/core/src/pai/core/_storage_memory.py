"""An in-process :class:`~pai.core._storage.Storage` kept in dicts, for tests and throwaway runs.

Messages are kept as the same JSON a durable backend writes, so this backend behaves like
:class:`~pai.core._storage_sqlite.SqliteStorage`: a message that cannot be serialized fails here
too, and what a read returns is a fresh value the caller cannot change behind the store's back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pai.core._errors import ThreadExistsError, ThreadNotFoundError
from pai.core._storage_codec import decode_message, encode_message

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from pai.core._messages import Message
    from pai.core._storage import ThreadRecord

__all__ = ["InMemoryStorage"]


def thread_exists_message(thread_id: str) -> str:
    """The text of the :class:`ThreadExistsError` every backend raises for a taken id."""
    return (
        f"thread {thread_id!r} already exists; create the thread with a new id, "
        "or delete the existing thread first"
    )


def parent_first(root_id: str, subtree: Iterable[tuple[str, str | None, int]]) -> list[str]:
    """Order the ids of a thread subtree parent first.

    ``subtree`` holds ``(id, parent_thread_id, seq)`` for the root and every descendant (any
    order); ``seq`` is the creation order. The result is breadth first: the root, then its
    children, then theirs, each level oldest first. A parent cycle cannot loop forever.
    """
    children: dict[str, list[tuple[int, str]]] = {}
    for thread_id, parent_id, seq in subtree:
        if parent_id is not None:
            children.setdefault(parent_id, []).append((seq, thread_id))
    order = [root_id]
    seen = {root_id}
    level = [root_id]
    while level:
        below = sorted(pair for parent_id in level for pair in children.get(parent_id, ()))
        level = [thread_id for _, thread_id in below if thread_id not in seen]
        seen.update(level)
        order.extend(level)
    return order


class InMemoryStorage:
    """Threads and messages in process memory; everything is gone when the object is.

    Every method completes without yielding to the event loop, so each call is atomic under
    concurrent tasks. ``reads`` counts :meth:`get_thread` calls, for tests and benchmarks that
    measure how often a runtime reads thread records.

    Example::

        storage = InMemoryStorage()
        await storage.create_thread(ThreadRecord(id="t1", scope_key="acme", agent_name="helper"))
        await storage.append_messages("t1", [UserMessage(content="hi")])
        assert await storage.get_messages("t1") == (UserMessage(content="hi"),)
    """

    def __init__(self) -> None:
        self.reads: int = 0
        """How many times :meth:`get_thread` has been called."""
        self._threads: dict[str, tuple[ThreadRecord, int]] = {}
        self._messages: dict[str, list[str | bytes]] = {}
        self._next_seq = 0

    async def create_thread(self, record: ThreadRecord) -> None:
        """Store a new thread. Raises :class:`ThreadExistsError` if ``record.id`` is taken."""
        if record.id in self._threads:
            raise ThreadExistsError(thread_exists_message(record.id))
        self._threads[record.id] = (record, self._next_seq)
        self._messages[record.id] = []
        self._next_seq += 1

    async def get_thread(self, thread_id: str) -> ThreadRecord | None:
        """The thread with this id, or ``None``. Counts one read in :attr:`reads`."""
        self.reads += 1
        entry = self._threads.get(thread_id)
        return None if entry is None else entry[0]

    async def delete_thread(self, thread_id: str) -> Sequence[str]:
        """Delete the thread, its descendants and their messages; return the ids, parent first.

        An unknown id deletes nothing and returns ``()``.
        """
        if thread_id not in self._threads:
            return ()
        subtree = [
            (record.id, record.parent_thread_id, seq) for record, seq in self._threads.values()
        ]
        doomed = parent_first(thread_id, subtree)
        for doomed_id in doomed:
            del self._threads[doomed_id]
            del self._messages[doomed_id]
        return tuple(doomed)

    async def list_threads(
        self, scope_key: str, *, parent_thread_id: str | None = None
    ) -> Sequence[ThreadRecord]:
        """Threads of a scope, oldest first: top-level ones, or the children of a parent."""
        return tuple(
            record
            for record, _ in self._threads.values()
            if record.scope_key == scope_key and record.parent_thread_id == parent_thread_id
        )

    async def append_messages(self, thread_id: str, messages: Sequence[Message]) -> None:
        """Append all of ``messages`` to the thread, or none of them if any fails to serialize.

        Raises :class:`ThreadNotFoundError` if the thread does not exist.
        """
        stored = self._messages.get(thread_id)
        if stored is None:
            raise ThreadNotFoundError(thread_id)
        encoded = [encode_message(message) for message in messages]
        stored.extend(encoded)

    async def get_messages(self, thread_id: str, *, start: int = 0) -> Sequence[Message]:
        """The thread's messages from index ``start`` on, in the order appended; ``()`` for an
        unknown thread."""
        if start < 0:
            raise ValueError(
                f"get_messages(start={start!r}): start is a count of messages already read and "
                "must be >= 0; pass 0 to read the whole thread"
            )
        stored = self._messages.get(thread_id, ())
        return tuple(decode_message(raw) for raw in stored[start:])

    async def aclose(self) -> None:
        """Nothing to release: the storage stays usable and keeps its data."""
