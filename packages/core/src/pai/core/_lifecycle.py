"""Process-local bookkeeping of a runtime: work in flight per thread, known thread roots, and
the decoded history of recently used threads."""

from __future__ import annotations

import contextvars
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import islice
from typing import Literal, TypeAlias, TypeVar, cast, overload

import anyio
from pydantic import BaseModel

from pai.core._errors import StorageError, ThreadNotFoundError
from pai.core._messages import AssistantMessage, Message
from pai.core._storage import Storage, ThreadRecord

T = TypeVar("T")

RuntimeErrorSource: TypeAlias = Literal["capability", "tool", "model", "command", "runtime"]

_Incarnation: TypeAlias = tuple[str | None, datetime, str]


def _incarnation(thread: ThreadRecord) -> _Incarnation:
    """What tells two threads stored under one id apart (deleted, then created again)."""
    return (thread.parent_thread_id, thread.created_at, thread.scope_key)


@dataclass(frozen=True, slots=True)
class RuntimeErrorEvent:
    """A failure the runtime handled without failing the caller (see ``on_runtime_error``).

    ``source="capability"`` events come from a binding's ``dispose`` or ``close``.
    """

    source: RuntimeErrorSource
    error: BaseException
    message: str
    capability_id: str | None = None
    thread_id: str | None = None
    key: str | None = None


OnRuntimeError: TypeAlias = Callable[[RuntimeErrorEvent], Awaitable[None] | None]


@dataclass(eq=False, slots=True)
class ActiveOperation:
    cancel_scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    reason: Exception | None = None
    """Why it was cancelled, when not because its thread was deleted here (a run lease lost):
    the error its caller gets (see :meth:`ActiveWork.cancel_current`)."""
    finished: bool = False
    done: anyio.Event | None = None
    """Made by the first deleter that waits for the operation (most operations are never
    waited for), set when the operation ends."""

    async def wait(self) -> None:
        if self.finished:
            return
        if self.done is None:
            self.done = anyio.Event()
        await self.done.wait()


class ActiveWork:
    """Operations running in each thread, so deleting a thread can cancel them and wait.

    Each operation is remembered in the context of the task running it (and of the tasks it
    starts), so a deletion made from inside the thread's own work (a tool deleting its thread)
    cancels that work but does not wait for it: it would be waiting for itself.
    """

    def __init__(self) -> None:
        self._by_thread: dict[str, set[ActiveOperation]] = {}
        # The operations the current task is part of: a tuple, as they nest only a few deep (a
        # delegated run inside a run), and adding one to a tuple makes no set.
        self._current: contextvars.ContextVar[tuple[ActiveOperation, ...]] = contextvars.ContextVar(
            "pai_active_operations", default=()
        )

    async def run(
        self,
        thread_id: str,
        work: Awaitable[T],
        deleted: Callable[[str], Exception],
    ) -> T:
        """Await ``work`` (a coroutine not started yet) as work of ``thread_id``.

        If the thread is deleted meanwhile, the work is cancelled and ``deleted(thread_id)`` is raised
        instead of whatever the work then returned or raised (chained as its cause).

        The coroutine itself, not a function making it: a function and its arguments (a
        ``partial``) would be held for as long as the work runs, for every run in flight.
        """
        operation = ActiveOperation()
        operations = self._by_thread.get(thread_id)
        if operations is None:
            operations = self._by_thread[thread_id] = set()
        operations.add(operation)
        token = self._current.set((*self._current.get(), operation))
        try:
            with operation.cancel_scope:
                result = await work
                if not operation.cancel_scope.cancel_called:
                    return result
        except Exception as error:
            if operation.cancel_scope.cancel_called:
                raise (operation.reason or deleted(thread_id)) from error
            raise
        finally:
            self._current.reset(token)
            operations.discard(operation)
            if not operations and self._by_thread.get(thread_id) is operations:
                del self._by_thread[thread_id]
            operation.finished = True
            if operation.done is not None:
                operation.done.set()
        # Deleted meanwhile: the scope swallowed its cancellation, or the work ended anyway.
        raise operation.reason or deleted(thread_id)

    def current(self) -> ActiveOperation | None:
        """The innermost operation the calling task runs as (``None`` outside any)."""
        running = self._current.get()
        return running[-1] if running else None

    @staticmethod
    def cancel(operation: ActiveOperation, reason: Exception) -> None:
        """Cancel ``operation``; its caller gets ``reason`` (unless a deletion of its thread
        cancelled it first)."""
        if not operation.cancel_scope.cancel_called:
            operation.reason = reason
            operation.cancel_scope.cancel()

    def count(self, thread_id: str) -> int:
        """How many operations run in ``thread_id`` now."""
        return len(self._by_thread.get(thread_id, ()))

    async def cancel_and_settle(self, thread_ids: Iterable[str], window: float) -> bool:
        """Cancel the threads' work and wait up to ``window`` seconds; True if all of it ended.

        Work the caller itself is part of is cancelled but not waited for.
        """
        operations = [op for tid in thread_ids for op in self._by_thread.get(tid, ())]
        own = self._current.get()
        for operation in operations:
            operation.cancel_scope.cancel()
        with anyio.move_on_after(window):
            for operation in operations:
                if operation not in own:
                    await operation.wait()
            return True
        return False


class RootCache:
    """Known ``thread -> root thread id`` links, and the walk up ``parent_thread_id`` that finds
    the rest. Bounded, least recently used out first.

    A thread's parent never changes, but a thread can be deleted (by any runtime on the same
    storage) and its id used again under another root. So each link is kept with the incarnation
    of the thread it was learnt for (parent id, creation time, scope) and used only for a record of
    that same incarnation: a walk validates every cached link against a record it read.
    """

    def __init__(self, max_size: int = 10_000) -> None:
        self._roots: OrderedDict[str, tuple[_Incarnation, str]] = OrderedDict()
        self._max_size = max_size

    def get(self, thread: ThreadRecord) -> str | None:
        """The known root of this incarnation of ``thread``, or ``None``."""
        if thread.parent_thread_id is None:
            return thread.id
        entry = self._roots.get(thread.id)
        if entry is None or entry[0] != _incarnation(thread):
            return None
        self._roots.move_to_end(thread.id)
        return entry[1]

    def put(self, thread: ThreadRecord, root_id: str) -> None:
        self._roots[thread.id] = (_incarnation(thread), root_id)
        self._roots.move_to_end(thread.id)
        while len(self._roots) > self._max_size:
            self._roots.popitem(last=False)

    def forget(self, thread_ids: Iterable[str]) -> None:
        for thread_id in thread_ids:
            self._roots.pop(thread_id, None)

    async def root_of(self, storage: Storage, thread: ThreadRecord) -> str:
        """The id of the top-level thread ``thread`` was delegated from (its own id if none).

        Reads a record per level until the top, or until a level whose link is known; a known
        thread costs no read at all.
        """
        known = self.get(thread)
        if known is not None:
            return known
        visited = [thread]
        seen = {thread.id}
        current = thread.parent_thread_id
        while True:
            assert current is not None
            record = await storage.get_thread(current)
            if record is None:
                raise ThreadNotFoundError(current)
            known = self.get(record)
            if known is not None:
                root = known
                break
            if record.id in seen:
                raise StorageError(
                    f"the stored parent links of thread {thread.id!r} form a cycle through "
                    f"{record.id!r}; the storage is corrupt: delete those threads"
                )
            seen.add(record.id)
            visited.append(record)
            current = record.parent_thread_id
        for record in visited:
            self.put(record, root)
        return root


class HistorySnapshot(Sequence[Message]):
    """The messages a model step reads, without copying the thread's history.

    The first ``len(base)`` messages are a prefix of an append-only list (a cached history), then
    ``tail`` holds the run's own; both lengths are fixed when the snapshot is made, so later
    appends never show through. Compares equal to any sequence of the same messages (a list, say).
    """

    __slots__ = ("_base", "_base_length", "_length", "_tail")

    def __init__(self, base: list[Message], base_length: int, tail: Sequence[Message] = ()) -> None:
        self._base = base
        self._base_length = base_length
        self._tail = tuple(tail)
        self._length = base_length + len(self._tail)

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._length))]
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError("message index out of range")
        if index < self._base_length:
            return self._base[index]
        return self._tail[index - self._base_length]

    def __iter__(self) -> Iterator[Message]:
        yield from islice(self._base, self._base_length)
        yield from self._tail

    def __reversed__(self) -> Iterator[Message]:
        yield from reversed(self._tail)
        for index in range(self._base_length - 1, -1, -1):
            yield self._base[index]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        items = cast("Sequence[object]", other)
        return len(items) == self._length and all(
            mine == theirs for mine, theirs in zip(self, items, strict=True)
        )

    __hash__ = None  # type: ignore[assignment]  # mutable-looking, like a list

    def __repr__(self) -> str:
        return repr(list(self))

    def prefix(self, length: int) -> HistorySnapshot:
        """The first ``length`` messages of this snapshot's cached part (all of it when shorter)."""
        return HistorySnapshot(self._base, min(max(length, 0), self._base_length))

    def extended(self, messages: Sequence[Message]) -> HistorySnapshot:
        """This snapshot followed by ``messages``: what the next step reads."""
        return HistorySnapshot(self._base, self._base_length, (*self._tail, *messages))


@dataclass(eq=False, slots=True)
class _History:
    incarnation: _Incarnation
    count: int
    """How many stored messages (errors included) have been read."""
    messages: list[Message]
    """The messages a model reads (errors left out), in order."""


class HistoryCache:
    """The decoded history of recently used threads, so a turn reads and decodes only what is new.

    A thread's messages are append-only while it exists, so what was read stays true and the next
    read asks storage for messages from the count already read (``start=``), also picking up what
    other processes appended meanwhile. An entry is kept for one incarnation of a thread (see
    :class:`RootCache`): a thread deleted and created again under the same id is read afresh.
    """

    def __init__(self, max_threads: int = 1_000) -> None:
        self._entries: OrderedDict[str, _History] = OrderedDict()
        self._max_threads = max_threads
        self._fields_sets: dict[tuple[type, frozenset[str]], set[str]] = {}

    def _compact(self, message: Message) -> Message:
        """Let the message (and its tool calls) share one fields-set with every cached message of
        its shape.

        Every pydantic model carries a ``set`` of the fields it was given; a history of thousands
        of messages is thousands of sets that the cyclic garbage collector traverses on every
        full collection (measured: most of its time with 1,000 busy threads). The messages are
        frozen, so pydantic never changes the set (``model_copy`` and ``copy`` copy it), and one
        set per shape serves them all.
        """
        self._share(message)
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls:
                self._share(call)
        return message

    def _share(self, model: BaseModel) -> None:
        own = model.__pydantic_fields_set__
        shape = (type(model), frozenset(own))
        shared = self._fields_sets.setdefault(shape, own)
        if shared is not own:
            object.__setattr__(model, "__pydantic_fields_set__", shared)

    async def read(self, storage: Storage, thread: ThreadRecord) -> HistorySnapshot:
        """Every message of ``thread`` a model reads, in order (a snapshot: made without copying,
        and unchanged by later reads)."""
        incarnation = _incarnation(thread)
        entry = self._entries.get(thread.id)
        if entry is None or entry.incarnation != incarnation:
            entry = _History(incarnation, 0, [])
        start = entry.count
        new = await storage.get_messages(thread.id, start=start)
        # Another read of this thread may have finished meanwhile and stored a longer entry:
        # extend that one, unless it stops short of where this read started.
        current = self._entries.get(thread.id)
        if current is not None and current.incarnation == incarnation and current.count >= start:
            entry = current
        for message in new[entry.count - start :]:
            if message.role != "error":
                entry.messages.append(self._compact(message))
        entry.count = max(entry.count, start + len(new))
        self._entries[thread.id] = entry
        self._entries.move_to_end(thread.id)
        while len(self._entries) > self._max_threads:
            self._entries.popitem(last=False)
        return HistorySnapshot(entry.messages, len(entry.messages))

    def stored_count(self, thread_id: str) -> int:
        """How many messages (errors included) the last :meth:`read` of ``thread_id`` found
        stored: asked right after that read, with no ``await`` between, the count its snapshot
        ends at (where the run's next append lands)."""
        entry = self._entries.get(thread_id)
        return 0 if entry is None else entry.count

    def forget(self, thread_ids: Sequence[str]) -> None:
        for thread_id in thread_ids:
            self._entries.pop(thread_id, None)
