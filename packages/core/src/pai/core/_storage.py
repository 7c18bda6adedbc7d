"""The storage contract: threads, their parent links, and their messages.

A runtime keeps everything durable here. Implementations: :class:`InMemoryStorage` (tests) and
:class:`SqliteStorage` (the embedded default; a file path or ``":memory:"``). Any other backend
implements :class:`Storage`, registers itself by URL scheme (see :mod:`pai.core._storage_config`)
and runs :class:`pai.core.testing.StorageConformance`, which checks this contract:

- ``create_thread`` fails with :class:`ThreadExistsError` if the id is taken;
- ``list_threads`` returns one scope's top-level threads, or one parent's children in that scope,
  in the order they were created;
- ``delete_thread`` removes the thread, every thread delegated from it at any depth, and all their
  messages, in one transaction, and returns the ids it removed (parent first); an unknown id returns
  ``[]``;
- ``append_messages`` is atomic: all of the messages are stored, in order, or none; appending to an
  unknown thread raises :class:`ThreadNotFoundError`;
- ``get_messages(thread_id, start=n)`` returns the thread's messages from index ``n`` on
  (0-based, in append order; ``()`` past the end or for an unknown thread), so a runtime can read
  only what is new; a negative ``start`` is a :class:`ValueError`;
- every Python ``str`` (lone surrogates included) in ids, scope keys, agent names and messages
  reads back exactly, and distinct strings stay distinct;
- all methods are safe to call concurrently: concurrent batches are each stored whole and
  contiguous, and nothing is lost;
- reads return what was written, in order; records are immutable values, and a message read is
  not changed by what its writer or another reader later does to theirs.

A failure of the backend itself (the database cannot be opened or has a newer schema, the storage
was closed, what it holds is corrupt) is a :class:`~pai.core.StorageError`, whose message names
the storage and what to do; the built-in stores raise nothing else for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol, runtime_checkable

from pai.core._messages import Message


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class ThreadRecord:
    """One stored thread.

    ``scope_key`` is the app scope (tenant, workspace) the thread belongs to; a thread is only
    reachable through that scope. ``parent_thread_id`` is set for threads delegated to a subagent.
    """

    id: str
    scope_key: str
    agent_name: str
    parent_thread_id: str | None = None
    created_at: datetime = field(default_factory=_now)


@runtime_checkable
class Storage(Protocol):
    """Where a runtime keeps threads and messages. All methods are safe to call concurrently."""

    async def create_thread(self, record: ThreadRecord) -> None:
        """Store a new thread. Raises :class:`ThreadExistsError` if ``record.id`` is taken."""
        ...

    async def get_thread(self, thread_id: str) -> ThreadRecord | None:
        """The thread with this id, or ``None``."""
        ...

    async def delete_thread(self, thread_id: str) -> Sequence[str]:
        """Delete the thread, its descendants and their messages; return the deleted ids."""
        ...

    async def list_threads(
        self, scope_key: str, *, parent_thread_id: str | None = None
    ) -> Sequence[ThreadRecord]:
        """Threads of a scope, oldest first: top-level ones, or the children of a parent."""
        ...

    async def append_messages(self, thread_id: str, messages: Sequence[Message]) -> None:
        """Append all of ``messages`` to the thread atomically."""
        ...

    async def get_messages(self, thread_id: str, *, start: int = 0) -> Sequence[Message]:
        """The thread's messages from index ``start`` on (0-based), in the order appended.

        ``start`` is a count of messages already read: ``start=len(first_read)`` returns only
        those appended since. Raises :class:`ValueError` if ``start`` is negative.
        """
        ...

    async def aclose(self) -> None:
        """Release connections. Stored data stays."""
        ...
