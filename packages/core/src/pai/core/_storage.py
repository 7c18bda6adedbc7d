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

Run leases. Runs on one thread are serialized across every process sharing a storage by a
per-thread *run lease* carrying a fencing token (a :class:`RunLease`). Each of these calls is
atomic and safe concurrently, also across processes and across storage objects on the same data:

- ``acquire_run(thread_id, holder=..., ttl=...)`` takes the thread's lease when none is held, the
  held one was released, or it expired (``expires_at <= now``, by the storage's clock). It returns
  the new lease, whose ``token`` is greater than every token the storage issued before (a
  storage-wide counter: never reused, also after the thread is deleted and its id created again)
  and whose ``expires_at`` is now + ``ttl``; or ``None`` while another lease is live. A lease taken
  over after it *expired* without being released has ``interrupted`` set to the previous
  ``holder`` (that run was interrupted); otherwise ``interrupted`` is ``None``. An unknown thread
  is a :class:`ThreadNotFoundError`; ``ttl <= 0`` a :class:`ValueError`;
- ``acquire_run(thread_id, holder=..., ttl=..., reclaim=True)`` is for resuming a run under the
  same holder after its process died (a durable run resumed elsewhere, holder
  ``"durable:<run-id>"``): it also takes a *live*, unreleased lease whose ``holder`` is exactly
  ``holder``, at once, without waiting for it to expire. The new lease gets a new, greater token
  as usual, so the old one is no longer current (its appends and renewals raise
  :class:`~pai.core.RunLeaseLostError`, its release does nothing), and ``interrupted`` is
  ``None`` (the same holder resuming is not an interruption). A live lease of another holder
  still gives ``None``, and otherwise it acquires as without ``reclaim`` (an expired, unreleased
  lease of the same holder gives ``interrupted=holder``). Concurrent reclaims by one holder each
  get their own token, the later one's lease the current one;
- ``renew_run(lease, ttl=...)`` extends the lease to now + ``ttl`` when it is still the thread's
  current lease (same token, not released), even if it expired and nobody took it over; a lease
  taken over or released is a :class:`~pai.core.RunLeaseLostError`, a deleted thread a
  :class:`ThreadNotFoundError`;
- ``release_run(lease)`` marks the lease released when it is current, and otherwise (a stale
  lease, a deleted thread) does nothing; calling it again does nothing;
- ``append_messages(thread_id, messages, lease=lease)`` checks, in the same transaction as the
  insert, that ``lease`` is the thread's current lease (same token, not released; its expiry is
  not checked, as for renewal), and otherwise raises :class:`~pai.core.RunLeaseLostError` and
  stores nothing; an unknown or deleted thread is a :class:`ThreadNotFoundError` first. Without
  ``lease`` the append is not fenced;
- ``delete_thread`` also removes the deleted threads' leases, so their holders' renewals and
  appends then raise :class:`ThreadNotFoundError`.

A backend with tables keeps a ``run_leases`` table keyed by thread id (removed with the thread)
holding the token, the holder, the expiry and whether it was released, and takes tokens from a
storage-wide counter (a sequence, or a counter row incremented in the same transaction).
A backend whose calls can be cancelled half way (a network round trip) lets a cancelled
``acquire_run`` either take no lease or return the one it took (shield the round trip): a lease
taken but never returned keeps the thread busy for ``ttl`` and is then reported as interrupted.

Blobs. A backend may also keep *blobs with a thread* by implementing :class:`BlobStore`
(optional: ``isinstance(storage, BlobStore)`` tells; a runtime works without it). A blob is
``bytes`` under a key in one thread, for data too large for a message or for the records of a
durability engine (a step's output):

- ``put_blob(thread_id, key, data)`` stores ``data`` under ``key``, replacing what was there; an
  unknown thread is a :class:`ThreadNotFoundError`. ``get_blob`` returns the bytes, or ``None``
  when the key or the thread is absent;
- ``delete_blobs(thread_id, prefix)`` deletes the thread's blobs whose key starts with
  ``prefix`` (``""``: all of them) and returns how many; keys are arbitrary text, so ``%`` and
  ``_`` in a prefix are plain characters;
- a key is a non-empty ``str`` of at most :data:`MAX_BLOB_KEY_LENGTH` characters and a blob at
  most :data:`MAX_BLOB_BYTES` bytes (a :class:`ValueError` otherwise, before anything is stored);
  keys are compared exactly, as every ``str`` is, lone surrogates included;
- ``delete_thread`` removes the blobs of every thread it deletes; blobs are not messages
  (``get_messages`` never returns them), and every object over the same data sees them.

A backend with tables keeps a ``blobs`` table keyed by ``(thread_id, key)``, removed with the
thread, and deletes a prefix by a key range (``key >= prefix AND key < the next prefix``).

A failure of the backend itself (the database cannot be opened or has a newer schema, the storage
was closed, what it holds is corrupt) is a :class:`~pai.core.StorageError`, whose message names
the storage and what to do; the built-in stores raise nothing else for it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final, Protocol, runtime_checkable

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


@dataclass(frozen=True, slots=True)
class RunLease:
    """The right to run in one thread, held by one run until it is released or expires.

    ``token`` is a fencing token: unique across the whole storage and greater than every token
    issued before it, so a stale holder's writes can be told apart and refused. ``holder`` says
    who holds it (the runtime uses ``"host:pid:run-id"``). ``expires_at`` is in UTC, by the
    storage's clock. ``interrupted`` is set by :meth:`Storage.acquire_run` when it took over a
    lease that expired without being released: the previous holder's ``holder`` (its run was
    interrupted); ``None`` otherwise.
    """

    thread_id: str
    token: int
    holder: str
    expires_at: datetime
    interrupted: str | None = None


def check_ttl(ttl: float, where: str) -> float:
    """``ttl`` as a float, when it is a finite number of seconds > 0; a :class:`ValueError`
    naming ``where`` otherwise."""
    number = isinstance(ttl, int | float) and not isinstance(ttl, bool)  # pyright: ignore[reportUnnecessaryIsInstance]
    if not number or not math.isfinite(ttl) or ttl <= 0:
        raise ValueError(
            f"{where}(ttl={ttl!r}): a run lease lasts a finite number of seconds > 0, e.g. ttl=30"
        )
    return float(ttl)


def run_lease_lost_message(lease: RunLease) -> str:
    """The text of the :class:`~pai.core.RunLeaseLostError` a built-in store raises for a lease
    that is no longer its thread's current one."""
    return (
        f"the run lease {lease.token} of {lease.holder!r} on thread {lease.thread_id!r} is no "
        "longer the thread's current lease (it was released, or taken over after it expired); "
        "nothing was written with it. Acquire the thread's lease again before writing"
    )


MAX_BLOB_BYTES: Final = 64 * 1024 * 1024
"""The largest blob a :class:`BlobStore` keeps: 64 MiB."""

MAX_BLOB_KEY_LENGTH: Final = 512
"""The longest key of a blob, in characters."""


def check_blob_key(key: str, where: str) -> str:
    """``key`` when it is a blob key (a non-empty ``str`` of at most
    :data:`MAX_BLOB_KEY_LENGTH` characters); a :class:`ValueError` (a :class:`TypeError` for
    another type) naming ``where`` otherwise."""
    if not isinstance(key, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"{where}(key={key!r}): a blob key is a str, e.g. 'step/3/output'")
    if not key or len(key) > MAX_BLOB_KEY_LENGTH:
        raise ValueError(
            f"{where}(key of {len(key)} characters): a blob key is a non-empty str of at most "
            f"{MAX_BLOB_KEY_LENGTH} characters (MAX_BLOB_KEY_LENGTH)"
        )
    return key


def check_blob_data(data: bytes, where: str) -> bytes:
    """``data`` as ``bytes`` when it is at most :data:`MAX_BLOB_BYTES` long; a
    :class:`ValueError` (a :class:`TypeError` when it is not ``bytes``) naming ``where``
    otherwise."""
    if not isinstance(data, bytes):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(
            f"{where}(data of type {type(data).__name__}): a blob is bytes; pass bytes(data)"
        )
    if len(data) > MAX_BLOB_BYTES:
        raise ValueError(
            f"{where}(data of {len(data)} bytes): a blob holds at most {MAX_BLOB_BYTES} bytes "
            "(64 MiB, MAX_BLOB_BYTES); split it over several keys, or keep it elsewhere and "
            "store a reference"
        )
    return data if type(data) is bytes else bytes(data)


def check_blob_prefix(prefix: str, where: str) -> str:
    """``prefix`` when it is a ``str`` (``""`` matches every key); a :class:`TypeError`
    naming ``where`` otherwise."""
    if not isinstance(prefix, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"{where}(prefix={prefix!r}): a key prefix is a str ('' for every key)")
    return prefix


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

    async def append_messages(
        self, thread_id: str, messages: Sequence[Message], *, lease: RunLease | None = None
    ) -> None:
        """Append all of ``messages`` to the thread atomically; with ``lease``, only while it is
        the thread's current run lease (else :class:`~pai.core.RunLeaseLostError`, nothing
        stored)."""
        ...

    async def get_messages(self, thread_id: str, *, start: int = 0) -> Sequence[Message]:
        """The thread's messages from index ``start`` on (0-based), in the order appended.

        ``start`` is a count of messages already read: ``start=len(first_read)`` returns only
        those appended since. Raises :class:`ValueError` if ``start`` is negative.
        """
        ...

    async def acquire_run(
        self, thread_id: str, *, holder: str, ttl: float, reclaim: bool = False
    ) -> RunLease | None:
        """Take the thread's run lease for ``ttl`` seconds, or ``None`` while another is live.

        With ``reclaim=True``, a live lease whose ``holder`` is exactly ``holder`` is taken over
        too, with a new token (the old lease is fenced, ``interrupted`` is ``None``): for
        resuming a run under the same holder after its process died.
        """
        ...

    async def renew_run(self, lease: RunLease, *, ttl: float) -> RunLease:
        """Extend the current ``lease`` to now + ``ttl``; :class:`~pai.core.RunLeaseLostError`
        when it is no longer current."""
        ...

    async def release_run(self, lease: RunLease) -> None:
        """Release ``lease`` if it is current; otherwise do nothing."""
        ...

    async def aclose(self) -> None:
        """Release connections. Stored data stays."""
        ...


@runtime_checkable
class BlobStore(Protocol):
    """Blobs kept with a thread: an optional part of a :class:`Storage` (``isinstance(storage,
    BlobStore)`` tells whether a storage has it).

    A blob is up to :data:`MAX_BLOB_BYTES` of ``bytes`` under a key (a non-empty ``str`` of at
    most :data:`MAX_BLOB_KEY_LENGTH` characters) in one thread, deleted with the thread. It is
    for data kept beside a thread rather than in it, such as a durable run's large step outputs.

    Example::

        if isinstance(storage, BlobStore):
            await storage.put_blob("t1", "run-1/step-3", data)
            assert await storage.get_blob("t1", "run-1/step-3") == data
            await storage.delete_blobs("t1", "run-1/")  # every blob of run-1
    """

    async def put_blob(self, thread_id: str, key: str, data: bytes) -> None:
        """Store ``data`` under ``key`` in the thread, replacing what was there.

        Raises :class:`ThreadNotFoundError` if the thread does not exist, and
        :class:`ValueError` for an empty key, one over :data:`MAX_BLOB_KEY_LENGTH` characters,
        or ``data`` over :data:`MAX_BLOB_BYTES` bytes.
        """
        ...

    async def get_blob(self, thread_id: str, key: str) -> bytes | None:
        """The bytes stored under ``key`` in the thread; ``None`` when there are none (or the
        thread does not exist)."""
        ...

    async def delete_blobs(self, thread_id: str, prefix: str) -> int:
        """Delete the thread's blobs whose key starts with ``prefix`` (``""``: all of them);
        return how many were deleted (0 for an unknown thread)."""
        ...
