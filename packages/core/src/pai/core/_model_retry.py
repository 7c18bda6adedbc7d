"""Retrying model calls that failed for a reason that may pass (rate limits, overload, resets)."""

from __future__ import annotations

import math
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

import anyio

from pai.core._errors import ModelConfigurationError, RetryableModelError
from pai.core._model import ModelEvent, aclose_if_closable

T = TypeVar("T")

__all__ = ["RetryAttempt", "RetryPolicy", "call_with_retries", "stream_with_retries"]


@dataclass(frozen=True, slots=True)
class RetryAttempt:
    """A retry about to happen: the attempt that failed (1 for the first), its error, the pause."""

    attempt: int
    error: RetryableModelError
    delay: float


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a model call is retried after a :class:`~pai.core.RetryableModelError`.

    At most ``max_attempts`` calls in all (1 means no retry). Before attempt *n + 1* it waits the
    server's ``retry_after`` when the error carries one (a ``retry_after`` longer than
    ``max_retry_after`` is not waited for: the error is raised), else an exponential backoff:
    ``initial_delay * multiplier ** (n - 1)``, at most ``max_delay``, less a random share of up to
    ``jitter`` of it so that many clients do not retry in step. Fatal errors are never retried.
    ``on_retry`` is called before each pause (for logs and tests).

    Example::

        policy = RetryPolicy(max_attempts=5, initial_delay=1.0, max_delay=30.0)
        response = await call_with_retries(lambda: model.request(request), policy)
    """

    max_attempts: int = 3
    initial_delay: float = 0.5
    multiplier: float = 2.0
    max_delay: float = 30.0
    jitter: float = 0.25
    max_retry_after: float = 60.0
    on_retry: Callable[[RetryAttempt], object] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        checks = {
            "max_attempts": (self.max_attempts, "an int >= 1", _whole(self.max_attempts)),
            "initial_delay": (
                self.initial_delay,
                "a number >= 0",
                _non_negative(self.initial_delay),
            ),
            "multiplier": (self.multiplier, "a number >= 1", _at_least_one(self.multiplier)),
            "max_delay": (self.max_delay, "a number >= 0", _non_negative(self.max_delay)),
            "jitter": (self.jitter, "a number from 0 to 1", _fraction(self.jitter)),
            "max_retry_after": (
                self.max_retry_after,
                "a number >= 0",
                _non_negative(self.max_retry_after),
            ),
        }
        for name, (value, wanted, ok) in checks.items():
            if not ok:
                raise ModelConfigurationError(
                    f"RetryPolicy({name}={value!r}) is invalid: {name} must be {wanted}"
                )

    def delay(
        self, attempt: int, error: RetryableModelError, *, rand: Callable[[], float] = random.random
    ) -> float | None:
        """Seconds to wait after failed attempt ``attempt`` (1-based), or ``None`` to give up."""
        if attempt >= self.max_attempts:
            return None
        if error.retry_after is not None:
            if error.retry_after > self.max_retry_after:
                return None
            return max(error.retry_after, 0.0)
        backoff = min(self.initial_delay * self.multiplier ** (attempt - 1), self.max_delay)
        return backoff * (1.0 - self.jitter * rand())


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _non_negative(value: float) -> bool:
    return _number(value) and value >= 0


def _at_least_one(value: float) -> bool:
    return _number(value) and value >= 1


def _fraction(value: float) -> bool:
    return _number(value) and 0 <= value <= 1


async def _pause(policy: RetryPolicy, attempt: int, error: RetryableModelError) -> bool:
    # A subclass may know that this failure never passes (a redirect is refused every time).
    if not error.retryable:
        return False
    delay = policy.delay(attempt, error)
    if delay is None:
        return False
    if policy.on_retry is not None:
        policy.on_retry(RetryAttempt(attempt=attempt, error=error, delay=delay))
    await anyio.sleep(delay)
    return True


async def call_with_retries(call: Callable[[], Awaitable[T]], policy: RetryPolicy) -> T:
    """Await ``call()``, calling it again after each retryable failure as ``policy`` says.

    The last error is raised when the attempts run out (or the server asks for a longer pause
    than ``policy.max_retry_after``); fatal errors and anything that is not a
    :class:`~pai.core.RetryableModelError` are raised at once.

    Example::

        response = await call_with_retries(
            lambda: collect_response(model.stream(request)), RetryPolicy(max_attempts=4)
        )
    """
    attempt = 1
    while True:
        try:
            return await call()
        except RetryableModelError as error:
            if not await _pause(policy, attempt, error):
                raise
        attempt += 1


async def stream_with_retries(
    open_stream: Callable[[], AsyncIterator[ModelEvent]], policy: RetryPolicy
) -> AsyncIterator[ModelEvent]:
    """Yield the events of ``open_stream()``, opening it again after a retryable failure that
    happens before its first event.

    Once an event has been yielded the caller has part of an answer, so a later failure is
    raised rather than retried (a retry would repeat what was already yielded).

    Example::

        async for event in stream_with_retries(lambda: model.stream(request), policy):
            ...
    """
    attempt = 1
    while True:
        stream = open_stream()
        yielded = False
        try:
            async for event in stream:
                yielded = True
                yield event
            return
        except RetryableModelError as error:
            if yielded or not await _pause(policy, attempt, error):
                raise
        finally:
            await aclose_if_closable(stream)
        attempt += 1
