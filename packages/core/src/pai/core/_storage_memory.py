"""An in-process :class:`~pai.core._storage.Storage` kept in dicts, for tests and throwaway runs.

It behaves like :class:`~pai.core._storage_sqlite.SqliteStorage` and costs little: a message
that cannot be serialized fails here too, and what a read returns is a value the caller cannot
change behind the store's back. A message with nothing mutable in it (text, an error, a scalar
tool output) is kept as a copy, shaped as a JSON round trip shapes it, and returned as it is; one holding dicts or lists (tool call
arguments, a structured tool output) is kept as the JSON a durable backend writes and decoded
afresh on every read. Threads are indexed by scope and by parent, so listing and deleting cost
what they return, not the number of threads stored.

Run leases live beside the threads (one per thread, dropped with it) and take their tokens from
one counter of the store; their clock is ``datetime.now(UTC)`` unless a test passes another.
Blobs (:class:`~pai.core.ext.BlobStore`) live in a dict of their thread, dropped with it.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from pai.core._errors import RunLeaseLostError, ThreadExistsError, ThreadNotFoundError
from pai.core._messages import AssistantMessage, ErrorMessage, UserMessage
from pai.core._storage import (
    RunLease,
    check_blob_data,
    check_blob_key,
    check_blob_prefix,
    check_ttl,
    run_lease_lost_message,
)
from pai.core._storage_codec import decode_message, encode_message

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from pai.core._messages import Message
    from pai.core._storage import ThreadRecord

__all__ = ["InMemoryStorage"]


def _immutable(message: Message) -> bool:
    """Whether ``message`` holds nothing anyone can change and stores exactly as it is: only
    strings and scalars (no dict or list), and no float a JSON round trip changes (NaN,
    infinity). Exact types, so a ``model_construct`` value of another type takes the JSON path,
    and fails there as it would in a durable store."""
    if isinstance(message, UserMessage):
        return type(message.content) is str
    if isinstance(message, ErrorMessage):
        return all(type(v) is str for v in (message.source, message.error_type, message.message))
    if isinstance(message, AssistantMessage):
        return not message.tool_calls and (message.content is None or type(message.content) is str)
    output = message.output
    return (
        all(type(v) is str for v in (message.tool_call_id, message.tool_name, message.content))
        and type(message.is_error) is bool
        and (
            output is None
            or type(output) in (str, int, bool)
            or (type(output) is float and math.isfinite(output))
        )
    )


_ALL_FIELDS: dict[type, set[str]] = {}
"""Per message class, the fields set a decoded message has: every field (JSON holds them all)."""


def _as_stored(message: Message) -> Message:
    """``message`` as a durable store would return it: a copy whose fields set names every
    field, as after a JSON round trip (``model_dump(exclude_unset=True)`` agrees across stores).
    One set per class serves every copy; frozen models never change it."""
    full = _ALL_FIELDS.get(type(message))
    if full is None:
        full = _ALL_FIELDS[type(message)] = set(type(message).model_fields)
    if message.__pydantic_fields_set__ == full:
        return message
    stored = message.__copy__()
    object.__setattr__(stored, "__pydantic_fields_set__", full)
    return stored


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


def _utc_now() -> datetime:
    return datetime.now(UTC)


class _Thread:
    __slots__ = ("blobs", "lease", "lease_released", "messages", "record", "seq")

    def __init__(self, record: ThreadRecord, seq: int) -> None:
        self.record = record
        self.seq = seq
        self.messages: list[Message | str | bytes] = []
        """Each message as it is (immutable ones) or as its stored JSON."""
        self.lease: RunLease | None = None
        """The thread's current run lease, if one was ever taken."""
        self.lease_released = False
        self.blobs: dict[str, bytes] = {}
        """The thread's blobs by key (``bytes`` are immutable: kept and returned as they are)."""


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

    def __init__(self, *, clock: Callable[[], datetime] = _utc_now) -> None:
        self.reads: int = 0
        """How many times :meth:`get_thread` has been called."""
        self._threads: dict[str, _Thread] = {}
        # Ids in creation order (dicts keep insertion order; the values are unused).
        self._by_listing: dict[tuple[str, str | None], dict[str, None]] = {}
        self._children: dict[str, dict[str, None]] = {}
        self._next_seq = 0
        self._clock = clock
        """What run leases read as now (an aware UTC datetime)."""
        self._tokens = itertools.count(1)

    async def create_thread(self, record: ThreadRecord) -> None:
        """Store a new thread. Raises :class:`ThreadExistsError` if ``record.id`` is taken."""
        if record.id in self._threads:
            raise ThreadExistsError(thread_exists_message(record.id))
        self._threads[record.id] = _Thread(record, self._next_seq)
        self._next_seq += 1
        listing = (record.scope_key, record.parent_thread_id)
        self._by_listing.setdefault(listing, {})[record.id] = None
        if record.parent_thread_id is not None:
            self._children.setdefault(record.parent_thread_id, {})[record.id] = None

    async def get_thread(self, thread_id: str) -> ThreadRecord | None:
        """The thread with this id, or ``None``. Counts one read in :attr:`reads`."""
        self.reads += 1
        entry = self._threads.get(thread_id)
        return None if entry is None else entry.record

    async def delete_thread(self, thread_id: str) -> Sequence[str]:
        """Delete the thread, its descendants and their messages; return the ids, parent first.

        An unknown id deletes nothing and returns ``()``.
        """
        if thread_id not in self._threads:
            return ()
        subtree: list[tuple[str, str | None, int]] = []
        seen = {thread_id}
        pending = [thread_id]
        while pending:
            entry = self._threads[pending.pop()]
            subtree.append((entry.record.id, entry.record.parent_thread_id, entry.seq))
            for child_id in self._children.get(entry.record.id, ()):
                if child_id not in seen:
                    seen.add(child_id)
                    pending.append(child_id)
        doomed = parent_first(thread_id, subtree)
        for doomed_id in doomed:
            record = self._threads.pop(doomed_id).record
            listing = (record.scope_key, record.parent_thread_id)
            del self._by_listing[listing][doomed_id]
            if not self._by_listing[listing]:
                del self._by_listing[listing]
            self._children.pop(doomed_id, None)
            if record.parent_thread_id is not None:
                siblings = self._children.get(record.parent_thread_id)
                if siblings is not None:
                    siblings.pop(doomed_id, None)
                    if not siblings:
                        del self._children[record.parent_thread_id]
        return tuple(doomed)

    async def list_threads(
        self, scope_key: str, *, parent_thread_id: str | None = None
    ) -> Sequence[ThreadRecord]:
        """Threads of a scope, oldest first: top-level ones, or the children of a parent."""
        ids = self._by_listing.get((scope_key, parent_thread_id), ())
        return tuple(self._threads[thread_id].record for thread_id in ids)

    async def append_messages(
        self, thread_id: str, messages: Sequence[Message], *, lease: RunLease | None = None
    ) -> None:
        """Append all of ``messages`` to the thread, or none of them if any fails to serialize.

        Raises :class:`ThreadNotFoundError` if the thread does not exist, and
        :class:`~pai.core.RunLeaseLostError` if ``lease`` is given and is not the thread's
        current run lease.
        """
        entry = self._threads.get(thread_id)
        if entry is None:
            raise ThreadNotFoundError(thread_id)
        if lease is not None and not _is_current(entry, lease):
            raise RunLeaseLostError(run_lease_lost_message(lease))
        entry.messages.extend(
            [_as_stored(m) if _immutable(m) else encode_message(m) for m in messages]
        )

    async def get_messages(self, thread_id: str, *, start: int = 0) -> Sequence[Message]:
        """The thread's messages from index ``start`` on, in the order appended; ``()`` for an
        unknown thread."""
        if start < 0:
            raise ValueError(
                f"get_messages(start={start!r}): start is a count of messages already read and "
                "must be >= 0; pass 0 to read the whole thread"
            )
        entry = self._threads.get(thread_id)
        if entry is None or start >= len(entry.messages):  # nothing (new) to read
            return ()
        return tuple(
            decode_message(stored) if isinstance(stored, (str, bytes)) else stored
            for stored in entry.messages[start:]
        )

    async def acquire_run(
        self, thread_id: str, *, holder: str, ttl: float, reclaim: bool = False
    ) -> RunLease | None:
        """Take the thread's run lease for ``ttl`` seconds, or ``None`` while another is live.

        With ``reclaim=True`` a live lease of the same ``holder`` is taken over too, with a new
        token and ``interrupted=None``: for resuming a run under the same holder after its
        process died. Raises :class:`ThreadNotFoundError` for an unknown thread,
        :class:`ValueError` for a ``ttl`` that is not a number of seconds > 0.
        """
        seconds = check_ttl(ttl, "acquire_run")
        entry = self._threads.get(thread_id)
        if entry is None:
            raise ThreadNotFoundError(thread_id)
        now = self._clock()
        held = entry.lease
        interrupted: str | None = None
        if held is not None and not entry.lease_released:
            if held.expires_at > now:
                if not (reclaim and held.holder == holder):
                    return None
            else:
                interrupted = held.holder
        lease = RunLease(
            thread_id, next(self._tokens), holder, now + timedelta(seconds=seconds), interrupted
        )
        entry.lease = lease
        entry.lease_released = False
        return lease

    async def renew_run(self, lease: RunLease, *, ttl: float) -> RunLease:
        """Extend ``lease`` to now + ``ttl`` while it is the thread's current lease.

        Raises :class:`ThreadNotFoundError` when the thread is gone and
        :class:`~pai.core.RunLeaseLostError` when the lease was released or taken over.
        """
        seconds = check_ttl(ttl, "renew_run")
        entry = self._threads.get(lease.thread_id)
        if entry is None:
            raise ThreadNotFoundError(lease.thread_id)
        if not _is_current(entry, lease):
            raise RunLeaseLostError(run_lease_lost_message(lease))
        renewed = dataclasses.replace(lease, expires_at=self._clock() + timedelta(seconds=seconds))
        entry.lease = renewed
        return renewed

    async def release_run(self, lease: RunLease) -> None:
        """Release ``lease`` if it is the thread's current lease; otherwise do nothing."""
        entry = self._threads.get(lease.thread_id)
        if entry is not None and _is_current(entry, lease):
            entry.lease_released = True

    async def put_blob(self, thread_id: str, key: str, data: bytes) -> None:
        """Store ``data`` under ``key`` in the thread, replacing what was there.

        Raises :class:`ThreadNotFoundError` for an unknown thread and :class:`ValueError` for
        a key or data over the limits (:data:`~pai.core.ext.MAX_BLOB_KEY_LENGTH`,
        :data:`~pai.core.ext.MAX_BLOB_BYTES`).
        """
        check_blob_key(key, "put_blob")
        data = check_blob_data(data, "put_blob")
        entry = self._threads.get(thread_id)
        if entry is None:
            raise ThreadNotFoundError(thread_id)
        entry.blobs[key] = data

    async def get_blob(self, thread_id: str, key: str) -> bytes | None:
        """The bytes under ``key`` in the thread; ``None`` when absent (or no such thread)."""
        check_blob_key(key, "get_blob")
        entry = self._threads.get(thread_id)
        return None if entry is None else entry.blobs.get(key)

    async def delete_blobs(self, thread_id: str, prefix: str) -> int:
        """Delete the thread's blobs whose key starts with ``prefix`` (``""``: all); how many."""
        check_blob_prefix(prefix, "delete_blobs")
        entry = self._threads.get(thread_id)
        if entry is None:
            return 0
        if not prefix:
            count = len(entry.blobs)
            entry.blobs.clear()
            return count
        doomed = [key for key in entry.blobs if key.startswith(prefix)]
        for key in doomed:
            del entry.blobs[key]
        return len(doomed)

    async def aclose(self) -> None:
        """Nothing to release: the storage stays usable and keeps its data."""


def _is_current(entry: _Thread, lease: RunLease) -> bool:
    """Whether ``lease`` is the thread's current lease: the same token, not released."""
    held = entry.lease
    return held is not None and held.token == lease.token and not entry.lease_released
