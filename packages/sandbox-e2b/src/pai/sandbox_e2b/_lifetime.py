"""How long an E2B sandbox lives: ``timeout`` after its last use, never past ``max_lifetime``.

E2B ends a sandbox ``timeout`` seconds after it was created or last given a timeout, however busy
it is. So that a sandbox in use does not end under its user, an operation that starts when half
of that time (or more) has passed since the last grant asks E2B for ``timeout`` seconds more, at
most once per half-interval, while the operation runs. No request is made when none is due.

The extension is a *connect* with the timeout, not ``set-timeout``: E2B's connect only ever
lengthens a running sandbox's life, where ``set-timeout`` also shortens it (another process using
the same sandbox with a longer ``timeout`` would lose time to ours).

Everything here is bookkeeping on the local monotonic clock, conservative by construction: the
time of a grant is taken when its request was sent, so E2B's end of life is never earlier than
the one estimated here.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable

#: The clock lifetimes are measured on (seconds; only differences matter).
clock: Callable[[], float] = time.monotonic


class SandboxLifetime:
    """One sandbox's life as this process sees it: its age, and when E2B will end it unless
    it is given more time.

    ``timeout`` is what each grant asks for; ``max_lifetime`` (seconds since the sandbox was
    created, ``None``: unbounded) caps every grant; ``age`` is how old the sandbox already is.
    Call :meth:`granted` after each create, connect or extension that passed a timeout.
    """

    def __init__(self, timeout: int, max_lifetime: int | None, *, age: float = 0.0) -> None:
        now = clock()
        self.timeout: int = timeout
        self.max_lifetime: int | None = max_lifetime
        self.born: float = now - max(age, 0.0)
        self.ends: float = now  # the estimated end of life; set by the first grant
        self.extension: asyncio.Task[None] | None = None
        """The extension in flight, if any (a second one is not started meanwhile)."""
        self.exhausted: bool = False
        """``max_lifetime`` leaves nothing more to grant: no extension is asked for again."""

    def grant(self) -> int | None:
        """The timeout to ask for in a create or connect made now: ``timeout``, or less when
        ``max_lifetime`` comes first; ``None`` when the sandbox is past ``max_lifetime``."""
        if self.max_lifetime is None:
            return self.timeout
        left = math.floor(self.born + self.max_lifetime - clock())
        if left < 1:
            return None
        return min(self.timeout, left)

    def granted(self, sent_at: float, seconds: int) -> None:
        """A request sent at ``sent_at`` (on :data:`clock`) gave the sandbox ``seconds``."""
        self.ends = max(self.ends, sent_at + seconds)

    def settled(self, _task: object = None) -> None:
        """The extension in flight ended (it was sent, failed or was cancelled)."""
        self.extension = None

    def due(self) -> int | None:
        """The timeout to extend the sandbox by now, or ``None`` when no extension is due: half
        of ``timeout`` or more has passed since the last grant and none is in flight."""
        if self.extension is not None or self.exhausted:
            return None
        now = clock()
        if self.ends - now > self.timeout / 2:
            return None
        seconds = self.grant()
        if seconds is None or now + seconds <= self.ends:
            # A connect never shortens: asking for less than is left would change nothing.
            self.exhausted = True
            return None
        return seconds

    def __repr__(self) -> str:
        now = clock()
        return (
            f"SandboxLifetime(timeout={self.timeout}, max_lifetime={self.max_lifetime}, "
            f"age={now - self.born:.0f}s, left={self.ends - now:.0f}s)"
        )


__all__ = ["SandboxLifetime", "clock"]
