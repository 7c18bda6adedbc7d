"""Threads and deletion: finding and creating a caller's threads, deleting them (cancel the work,
let it settle, dispose the instances they own), closing bindings, reporting absorbed failures.

Deleting a thread here cancels this process's work in it; a run another process (or runtime) is
executing in it learns of the deletion when its run lease next renews (see
:mod:`pai.core._leases`) and is cancelled there. The thread-scoped instances are disposed here by
key, whichever process created them: providers find their instances by key.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Mapping, Sequence
from typing import TypeVar

import anyio

from pai.core._admin import Caller
from pai.core._agent import Agent
from pai.core._awaitables import resolve
from pai.core._binding import CapabilityBinding, DisposeInput
from pai.core._errors import RuntimeClosedError, ThreadDeletedError, ThreadNotFoundError
from pai.core._leases import RunLeases
from pai.core._lifecycle import (
    ActiveWork,
    HistoryCache,
    OnRuntimeError,
    RootCache,
    RuntimeErrorEvent,
)
from pai.core._messages import Message
from pai.core._scope import instance_key
from pai.core._storage import Storage, ThreadRecord

T = TypeVar("T")
_log = logging.getLogger("pai.core")


class Threads:
    """The threads of one runtime's agents in one storage, and their lifecycle in this process.

    Holds what the process knows about them: work in flight (:class:`ActiveWork`), known roots
    (:class:`RootCache`) and decoded histories (:class:`HistoryCache`); deletion keeps all three
    right.
    """

    def __init__(
        self,
        *,
        agent: Agent,
        agents: Mapping[str, Agent],
        storage: Storage,
        bindings: Mapping[str, CapabilityBinding[object]],
        on_runtime_error: OnRuntimeError | None,
        settlement_window: float,
        run_lease_ttl: float = 30.0,
        busy_thread_wait: float = 60.0,
    ) -> None:
        self.agent_name = agent.name
        self.storage = storage
        self.agents = agents
        self.work = ActiveWork()
        self.roots = RootCache()
        self.history = HistoryCache()
        self.closed = False
        self.settlement_window = settlement_window
        self._bindings = bindings
        self._on_runtime_error = on_runtime_error
        self.leases = RunLeases(
            storage, self.work, ttl=run_lease_ttl, wait=busy_thread_wait, report=self.report
        )

    def check_open(self) -> None:
        if self.closed:
            raise RuntimeClosedError(
                f"the runtime of agent {self.agent_name!r} is closed; create a new runtime"
            )

    async def get(self, caller: Caller, thread_id: str) -> ThreadRecord:
        """The caller's thread ``thread_id``; :class:`ThreadNotFoundError` if it is not theirs."""
        self.check_open()
        thread = await self.storage.get_thread(thread_id)
        # A thread of another scope, or of another app agent sharing the storage, is not ours.
        if (
            thread is None
            or thread.scope_key != caller.scope_key
            or thread.agent_name not in self.agents
        ):
            raise ThreadNotFoundError(thread_id, caller.scope_key)
        return thread

    async def create(
        self,
        caller: Caller,
        *,
        agent_name: str,
        thread_id: str | None,
        parent: ThreadRecord | None,
    ) -> ThreadRecord:
        """Store a new thread of ``agent_name`` (top-level, or delegated from ``parent``)."""
        self.check_open()
        record = ThreadRecord(
            id=thread_id if thread_id is not None else uuid.uuid4().hex,
            scope_key=caller.scope_key,
            agent_name=agent_name,
            parent_thread_id=parent.id if parent is not None else None,
        )
        await self.storage.create_thread(record)
        if parent is not None:
            root = self.roots.get(parent)
            if root is not None:
                self.roots.put(record, root)
        return record

    async def messages(self, caller: Caller, thread_id: str) -> Sequence[Message]:
        await self.get(caller, thread_id)
        return await self.storage.get_messages(thread_id)

    async def children(self, caller: Caller, thread_id: str) -> Sequence[ThreadRecord]:
        await self.get(caller, thread_id)
        return await self.storage.list_threads(caller.scope_key, parent_thread_id=thread_id)

    async def list_threads(self, caller: Caller) -> Sequence[ThreadRecord]:
        self.check_open()
        return await self.storage.list_threads(caller.scope_key)

    async def delete(self, caller: Caller, thread_id: str) -> None:
        """Delete the thread and its delegated threads, cancel their work, dispose instances."""
        thread = await self.get(caller, thread_id)
        # Once the storage delete starts, the deletion runs to its end, disposal included, even
        # if the caller is cancelled meanwhile (a dropped request) or is the thread's own work:
        # the instances would leak otherwise. A cancelled caller sees its cancellation when
        # delete() returns, at most settlement_window plus the disposals later.
        with anyio.CancelScope(shield=True):
            deleted = list(await self.storage.delete_thread(thread_id))
            self.roots.forget(deleted)
            self.history.forget(deleted)
            await self._retire(caller, thread, deleted)

    def tracked(self, thread_id: str, work: Awaitable[T]) -> Awaitable[T]:
        """``work`` (a coroutine not started yet) run as work of ``thread_id``, to await:
        deleting the thread cancels it."""
        return self.work.run(thread_id, work, _thread_deleted)

    async def _retire(self, caller: Caller, thread: ThreadRecord, deleted: list[str]) -> None:
        """Cancel the deleted threads' work, let it settle, and dispose the instances they own."""
        thread_id = thread.id
        settled = await self.work.cancel_and_settle(deleted, self.settlement_window)
        if not settled:
            _log.warning(
                "work in thread %r did not stop within the %.1fs settlement window; disposing "
                "its capabilities anyway",
                thread_id,
                self.settlement_window,
            )
        disposals: list[tuple[str, CapabilityBinding[object], DisposeInput]] = []
        for cap_id, binding in self._bindings.items():
            if not binding.has_dispose:
                continue
            if binding.scope == "thread":
                for tid in deleted:
                    key = instance_key(cap_id, "thread", (caller.scope_key, tid))
                    disposals.append(
                        (cap_id, binding, DisposeInput("thread-deleted", key, tid, cap_id))
                    )
            elif binding.scope == "rootThread" and thread.parent_thread_id is None:
                key = instance_key(cap_id, "rootThread", (caller.scope_key, thread_id))
                disposals.append(
                    (cap_id, binding, DisposeInput("thread-deleted", key, thread_id, cap_id))
                )
        async with anyio.create_task_group() as tg:
            for cap_id, binding, dispose_input in disposals:
                tg.start_soon(self._dispose, cap_id, binding, dispose_input)

    async def _dispose(
        self, cap_id: str, binding: CapabilityBinding[object], dispose_input: DisposeInput
    ) -> None:
        try:
            await binding.dispose(dispose_input)
        except Exception as error:
            await self.report(
                RuntimeErrorEvent(
                    source="capability",
                    error=error,
                    message=f"dispose of capability {cap_id!r} for thread "
                    f"{dispose_input.thread_id!r} failed: {error!r}",
                    capability_id=cap_id,
                    thread_id=dispose_input.thread_id,
                    key=dispose_input.key,
                )
            )

    async def close(self, *, owns_storage: bool) -> None:
        """Close every binding (failures reported), then the storage if the runtime owns it."""
        if self.closed:
            return
        self.closed = True
        await self.leases.aclose()
        async with anyio.create_task_group() as tg:
            for cap_id, binding in self._bindings.items():
                tg.start_soon(self._close_binding, cap_id, binding)
        if owns_storage:
            await self.storage.aclose()

    async def _close_binding(self, cap_id: str, binding: CapabilityBinding[object]) -> None:
        try:
            await binding.close()
        except Exception as error:
            await self.report(
                RuntimeErrorEvent(
                    source="capability",
                    error=error,
                    message=f"close of capability {cap_id!r} failed: {error!r}",
                    capability_id=cap_id,
                )
            )

    async def report(self, event: RuntimeErrorEvent) -> None:
        """Hand a failure the runtime absorbed to ``on_runtime_error`` (or log it)."""
        if self._on_runtime_error is None:
            _log.error("%s", event.message, exc_info=event.error)
            return
        try:
            await resolve(self._on_runtime_error(event))
        except Exception:
            _log.exception("on_runtime_error raised while handling: %s", event.message)


def _thread_deleted(thread_id: str) -> ThreadDeletedError:
    return ThreadDeletedError(
        f"thread {thread_id!r} was deleted while this operation ran; its work was cancelled. "
        "Await deletion before reusing the thread id."
    )


__all__ = ["Threads"]
