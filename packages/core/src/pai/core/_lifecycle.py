"""Process-local bookkeeping of a runtime: work in flight per thread, and known thread roots."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal, TypeAlias, TypeVar

import anyio

T = TypeVar("T")

RuntimeErrorSource: TypeAlias = Literal["capability", "tool", "model", "command", "runtime"]


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
class _ActiveOperation:
    cancel_scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    done: anyio.Event = field(default_factory=anyio.Event)


class ActiveWork:
    """Operations running in each thread, so deleting a thread can cancel them and wait."""

    def __init__(self) -> None:
        self._by_thread: dict[str, set[_ActiveOperation]] = {}

    async def run(
        self,
        thread_id: str,
        fn: Callable[[], Awaitable[T]],
        deleted: Callable[[], Exception],
    ) -> T:
        """Run ``fn`` as work of ``thread_id``.

        If the thread is deleted meanwhile, the work is cancelled and ``deleted()`` is raised
        instead of whatever the work then returned or raised (chained as its cause).
        """
        operation = _ActiveOperation()
        operations = self._by_thread.setdefault(thread_id, set())
        operations.add(operation)
        results: list[T] = []
        try:
            with operation.cancel_scope:
                results.append(await fn())
        except Exception as error:
            if operation.cancel_scope.cancel_called:
                raise deleted() from error
            raise
        finally:
            operations.discard(operation)
            if not operations and self._by_thread.get(thread_id) is operations:
                del self._by_thread[thread_id]
            operation.done.set()
        if operation.cancel_scope.cancel_called:
            raise deleted()
        return results[0]

    def count(self, thread_id: str) -> int:
        """How many operations run in ``thread_id`` now."""
        return len(self._by_thread.get(thread_id, ()))

    async def cancel_and_settle(self, thread_ids: Iterable[str], window: float) -> bool:
        """Cancel the threads' work and wait up to ``window`` seconds; True if all of it ended."""
        operations = [op for tid in thread_ids for op in self._by_thread.get(tid, ())]
        for operation in operations:
            operation.cancel_scope.cancel()
        with anyio.move_on_after(window):
            for operation in operations:
                await operation.done.wait()
            return True
        return False


class RootCache:
    """Known ``thread id -> root thread id`` links. Parent links never change, so an entry stays
    true until the thread is deleted. Bounded, least recently used out first."""

    def __init__(self, max_size: int = 10_000) -> None:
        self._roots: OrderedDict[str, str] = OrderedDict()
        self._max_size = max_size

    def get(self, thread_id: str) -> str | None:
        root = self._roots.get(thread_id)
        if root is not None:
            self._roots.move_to_end(thread_id)
        return root

    def put(self, thread_id: str, root_id: str) -> None:
        self._roots[thread_id] = root_id
        self._roots.move_to_end(thread_id)
        while len(self._roots) > self._max_size:
            self._roots.popitem(last=False)

    def forget(self, thread_ids: Iterable[str]) -> None:
        for thread_id in thread_ids:
            self._roots.pop(thread_id, None)
