"""Retries: bounded, backing off with jitter, honouring a server's retry-after, never for fatal
failures, and never after a stream has handed out part of an answer."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from pai.core import (
    ModelBadRequestError,
    ModelConfigurationError,
    ModelConnectionError,
    ModelOverloadedError,
    ModelRateLimitError,
    ModelRequest,
    RetryPolicy,
    UserError,
    UserMessage,
)
from pai.core.ext import (
    ModelEvent,
    ResponseFinished,
    RetryAttempt,
    TextDelta,
    call_with_retries,
    stream_with_retries,
)
from pai.core.testing import ScriptedModel, chunks, text

REQUEST = ModelRequest(instructions="", messages=[UserMessage(content="hi")], tools=[], step=1)


def no_wait(**changes: Any) -> tuple[RetryPolicy, list[RetryAttempt]]:
    """A policy that does not pause (unless a test asks), and the retries it announced."""
    seen: list[RetryAttempt] = []
    options: dict[str, Any] = {"initial_delay": 0.0, "on_retry": seen.append, **changes}
    return RetryPolicy(**options), seen


async def _drain(stream: AsyncIterator[ModelEvent], into: list[ModelEvent]) -> None:
    async for event in stream:
        into.append(event)


# -- the policy -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("max_attempts", 0),
        ("max_attempts", 2.5),
        ("max_attempts", True),
        ("initial_delay", -1.0),
        ("multiplier", 0.5),
        ("max_delay", float("nan")),
        ("jitter", 1.5),
        ("max_retry_after", -0.1),
    ],
)
def test_an_invalid_policy_option_is_a_configuration_error_naming_it(
    option: str, value: object
) -> None:
    with pytest.raises(ModelConfigurationError, match=rf"RetryPolicy\({option}=") as caught:
        RetryPolicy(**{option: value})  # type: ignore[arg-type]
    assert isinstance(caught.value, UserError)


def test_the_server_retry_after_is_the_pause_exactly() -> None:
    policy = RetryPolicy(max_attempts=3)
    assert policy.delay(1, ModelRateLimitError("x", retry_after=7.5), rand=lambda: 1.0) == 7.5


def test_a_retry_after_longer_than_the_policy_allows_gives_up() -> None:
    policy = RetryPolicy(max_attempts=3, max_retry_after=10.0)
    assert policy.delay(1, ModelRateLimitError("x", retry_after=11.0)) is None


def test_backoff_grows_exponentially_up_to_the_maximum() -> None:
    policy = RetryPolicy(max_attempts=10, initial_delay=1.0, multiplier=2.0, max_delay=5.0)
    error = ModelOverloadedError("x")
    delays = [policy.delay(n, error, rand=lambda: 0.0) for n in range(1, 6)]
    assert delays == [1.0, 2.0, 4.0, 5.0, 5.0]


def test_jitter_takes_at_most_its_share_off_the_backoff() -> None:
    policy = RetryPolicy(initial_delay=4.0, jitter=0.25)
    error = ModelOverloadedError("x")
    assert policy.delay(1, error, rand=lambda: 0.0) == 4.0
    assert policy.delay(1, error, rand=lambda: 1.0) == 3.0


def test_no_pause_is_given_once_the_attempts_are_used_up() -> None:
    policy = RetryPolicy(max_attempts=2)
    assert policy.delay(2, ModelOverloadedError("x")) is None


# -- call_with_retries ------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_rate_limited_call_is_retried_after_the_servers_retry_after() -> None:
    model = ScriptedModel([ModelRateLimitError("slow down", retry_after=0.01), text("ok")])
    policy, seen = no_wait()
    assert await call_with_retries(lambda: model.request(REQUEST), policy) == text("ok")
    assert [(r.attempt, r.delay, type(r.error)) for r in seen] == [(1, 0.01, ModelRateLimitError)]


@pytest.mark.anyio
async def test_the_last_error_is_raised_when_the_attempts_run_out() -> None:
    model = ScriptedModel([ModelOverloadedError(f"down {n}") for n in range(1, 4)])
    policy, seen = no_wait(max_attempts=3)
    with pytest.raises(ModelOverloadedError, match="down 3"):
        await call_with_retries(lambda: model.request(REQUEST), policy)
    assert len(model.requests) == 3
    assert [r.attempt for r in seen] == [1, 2]


@pytest.mark.anyio
async def test_a_fatal_error_is_raised_at_once() -> None:
    model = ScriptedModel([ModelBadRequestError("bad"), text("never")])
    policy, seen = no_wait()
    with pytest.raises(ModelBadRequestError):
        await call_with_retries(lambda: model.request(REQUEST), policy)
    assert (len(model.requests), seen) == (1, [])


@pytest.mark.anyio
async def test_an_error_that_is_not_a_model_error_is_not_retried() -> None:
    model = ScriptedModel([KeyError("bug"), text("never")])
    policy, _ = no_wait()
    with pytest.raises(KeyError):
        await call_with_retries(lambda: model.request(REQUEST), policy)
    assert len(model.requests) == 1


@pytest.mark.anyio
async def test_one_attempt_means_no_retry() -> None:
    model = ScriptedModel([ModelConnectionError("reset"), text("never")])
    policy, _ = no_wait(max_attempts=1)
    with pytest.raises(ModelConnectionError):
        await call_with_retries(lambda: model.request(REQUEST), policy)
    assert len(model.requests) == 1


# -- stream_with_retries ----------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_stream_failing_before_its_first_event_is_opened_again() -> None:
    model = ScriptedModel([ModelConnectionError("refused"), chunks("fine")])
    policy, seen = no_wait()
    got: list[ModelEvent] = [
        event async for event in stream_with_retries(lambda: model.stream(REQUEST), policy)
    ]
    assert got == [TextDelta("fine"), ResponseFinished("stop")]
    assert len(seen) == 1


@pytest.mark.anyio
async def test_a_stream_failing_after_an_event_is_raised_not_retried() -> None:
    model = ScriptedModel([chunks("Hel", cut=ModelConnectionError("reset")), chunks("again")])
    policy, seen = no_wait()
    got: list[ModelEvent] = []
    with pytest.raises(ModelConnectionError, match="reset"):
        await _drain(stream_with_retries(lambda: model.stream(REQUEST), policy), got)
    assert got == [TextDelta("Hel")]
    assert (len(model.requests), seen) == (1, [])
