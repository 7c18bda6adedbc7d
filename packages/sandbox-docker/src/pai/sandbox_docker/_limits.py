"""The provider's own thread limiters: no call ever takes a token of anyio's shared default one.

Every blocking engine call runs in a worker thread (``anyio.to_thread.run_sync``), and anyio's
default limiter (40 tokens) is shared by the whole process: hung calls of one sandbox holding it
would stall every other tenant's file operations, and the application's own threads. So the
provider passes its own :class:`anyio.CapacityLimiter` to every call: one per provider for
create/find/list/prune, one for destroy (never queued behind anything), and, per sandbox, one for
its commands (``max_concurrent_commands``), one for its file operations and one for the kills and
probes a command may need (so a timeout never waits behind the commands it has to end).

A limiter belongs to one event loop, and a provider may be used from several (one ``anyio.run``
after another, asyncio and trio); :class:`LoopLimiter` keeps one per running loop.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field

import anyio
import anyio.lowlevel


class LoopLimiter:
    """A :class:`anyio.CapacityLimiter` of ``tokens`` for whichever event loop asks."""

    __slots__ = ("_by_loop", "_lock", "tokens")

    def __init__(self, tokens: int) -> None:
        self.tokens: int = tokens
        self._by_loop: weakref.WeakKeyDictionary[object, anyio.CapacityLimiter] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()

    def get(self) -> anyio.CapacityLimiter:
        """The limiter of the running event loop (made on first use there)."""
        loop = anyio.lowlevel.current_token().native_token
        with self._lock:
            limiter = self._by_loop.get(loop)
            if limiter is None:
                limiter = self._by_loop[loop] = anyio.CapacityLimiter(self.tokens)
            return limiter


@dataclass(slots=True)
class InstanceLimits:
    """One sandbox's limiters (shared by every handle of its container in one provider), and how
    often the provider killed the container because a timeout kill inside it failed."""

    commands: LoopLimiter
    files: LoopLimiter
    aux: LoopLimiter = field(init=False)
    container_kills: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        # At most one kill or probe per running command, and one revive.
        self.aux = LoopLimiter(self.commands.tokens + 1)

    @classmethod
    def of(cls, max_concurrent_commands: int) -> InstanceLimits:
        return cls(LoopLimiter(max_concurrent_commands), LoopLimiter(max_concurrent_commands))
