"""Hands a streamed run's events from the tasks producing them to the one task reading them."""

from __future__ import annotations

from collections import deque
from typing import Generic, TypeVar

import anyio

T = TypeVar("T")


class EventRelay(Generic[T]):
    """A rendezvous between producers (the run, and the tasks of its parallel tool calls) and
    one reader: no buffer, ``put`` returns once the reader has taken the item.

    So the reader sees each event before its producer goes on (reads and parses the model's next
    chunk, say), and a slow reader slows the run down instead of events piling up in memory.
    Leaner than a zero-buffer memory object stream on the path to a run's first token: the reader
    parks on one event and is woken with the item waiting, and the producer parks until it is
    taken; there is no extra checkpoint on either side.
    """

    __slots__ = ("_ended", "_pending", "_wake")

    def __init__(self) -> None:
        self._pending: deque[tuple[T, anyio.Event]] = deque()
        self._wake: anyio.Event | None = None
        self._ended = False

    async def put(self, item: T) -> None:
        """Hand ``item`` to the reader; return once it has taken it. Cancelled before that,
        the item is withdrawn."""
        entry = (item, anyio.Event())
        self._pending.append(entry)
        if self._wake is not None:
            self._wake.set()
        try:
            await entry[1].wait()
        except BaseException:
            if not entry[1].is_set():  # by identity: items need not compare
                for index, waiting in enumerate(self._pending):
                    if waiting is entry:
                        del self._pending[index]
                        break
            raise

    def end(self) -> None:
        """No more items: the reader's next :meth:`get` past those waiting raises
        ``StopAsyncIteration``."""
        self._ended = True
        if self._wake is not None:
            self._wake.set()

    async def get(self) -> T:
        """The next item (its producer resumes); ``StopAsyncIteration`` once ended."""
        while not self._pending:
            if self._ended:
                raise StopAsyncIteration
            self._wake = anyio.Event()
            await self._wake.wait()
        item, taken = self._pending.popleft()
        taken.set()
        return item

    def __aiter__(self) -> EventRelay[T]:
        """The reader's side: ``async for item in relay`` gets each item until the end."""
        return self

    __anext__ = get


__all__ = ["EventRelay"]
