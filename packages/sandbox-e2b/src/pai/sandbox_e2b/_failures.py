"""E2B's failures, told apart: which are worth retrying, and the error each becomes.

The SDK raises its own exceptions (``RateLimitException``, ``ServiceBusyException``, a
``SandboxException`` carrying the HTTP status, ...; imported from :mod:`pai.sandbox_e2b._sdk`). Nothing of those leaves the provider: each
becomes an :class:`~pai.sandbox_e2b.E2BError` subclass whose message names the cause and the fix.

Retries. On the control plane the SDK itself retries 429, 502, 503 and 504 (three times, with its
backoff, honouring ``Retry-After``); the provider adds retries only for 409 (a sandbox changing
state), which the SDK does not retry. envd's calls are not retried by the SDK: the provider
retries the answers that prove the request was not carried out (the sandbox proxy's 429
"too many connections", 409 "still transitioning", 502 "port is not open", and 503), never an
ambiguous failure (a connection lost mid-request may have run the command). Retries are bounded:
a few attempts, jittered exponential backoff, and at most a quarter of ``request_timeout`` of
waiting in all.
"""

from __future__ import annotations

import random
import re
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from pai.sandbox_e2b._errors import (
    E2BAuthenticationError,
    E2BError,
    E2BRateLimitError,
    E2BSandboxBusyError,
    E2BServiceBusyError,
    E2BTemplateNotFoundError,
    E2BTimeoutLimitError,
)
from pai.sandbox_e2b._sdk import (
    AuthenticationException,
    GuestUnresponsiveException,
    RateLimitException,
    SandboxException,
    SandboxUnreachableException,
    ServiceBusyException,
)

T = TypeVar("T")

#: Attempts of one call, the first included.
ATTEMPTS = 4
_BACKOFF_FIRST = 0.2  # seconds before the first retry, doubled for each next one
_BACKOFF_LONGEST = 2.0
_MAX_WAIT_SHARE = 0.25  # of request_timeout: the longest total wait between attempts

_HOURS = re.compile(r"greater than (\d+) hours?")


def status_of(error: BaseException) -> int | None:
    """The HTTP status an SDK exception carries (``None`` for a transport failure)."""
    if isinstance(error, ServiceBusyException):
        return 503
    if isinstance(error, SandboxException) and error.status_code is not None:
        return error.status_code
    return None


def backoff(attempt: int) -> float:
    """Seconds to wait before retry number ``attempt`` (0 for the first): jittered between
    half and all of the exponential step, so that many clients do not retry in step."""
    step = min(_BACKOFF_FIRST * 2**attempt, _BACKOFF_LONGEST)
    return step * random.uniform(0.5, 1.0)


async def retrying(
    call: Callable[[], Awaitable[T]],
    retryable: Callable[[Exception], bool],
    *,
    request_timeout: float,
) -> T:
    """``call()``, attempted again (at most :data:`ATTEMPTS` times in all) while it fails with
    an error ``retryable`` accepts and the waits stay within a quarter of ``request_timeout``;
    the last failure is raised as it is."""
    waited = 0.0
    for attempt in range(ATTEMPTS):
        try:
            return await call()
        except Exception as error:
            if attempt == ATTEMPTS - 1 or not retryable(error):
                raise
            delay = backoff(attempt)
            if waited + delay > request_timeout * _MAX_WAIT_SHARE:
                raise
            waited += delay
            await anyio.sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


# -- the control plane (E2B's API) -----------------------------------------------------------


def api_retryable(error: Exception) -> bool:
    """A control-plane failure the provider retries: 409, the sandbox changing state (the SDK
    retries 429, 502, 503 and 504 itself)."""
    return status_of(error) == 409 and not isinstance(error, GuestUnresponsiveException)


def api_error(
    error: Exception, *, what: str, api_url: str, timeout: int, template: str | None = None
) -> E2BError:
    """The :class:`E2BError` for a failed control-plane call (``what``: "creating a sandbox",
    ...); ``template`` is given for a create, whose 404 means an unknown template."""
    status = status_of(error)
    text = str(error)
    if isinstance(error, AuthenticationException):
        return E2BAuthenticationError(
            f"the E2B API at {api_url} refused the API key ({what}): {text}; set E2B_API_KEY "
            "(or api_key=...) to a valid key (https://e2b.dev/dashboard?tab=keys)"
        )
    if isinstance(error, RateLimitException) or status == 429:
        if "concurrent" in text:
            return E2BRateLimitError(
                f"E2B refused {what}: your team has as many sandboxes running as its plan allows "
                f"({text}); destroy the ones you no longer need (`pai sandbox prune`, or the E2B "
                "dashboard) or raise the limit (https://e2b.dev/docs/billing)"
            )
        return E2BRateLimitError(
            f"E2B's API rate limit refused {what}, retries included ({text}); make fewer "
            "requests at once, or try again in a moment"
        )
    if status in (502, 503, 504):
        return E2BServiceBusyError(
            f"E2B could not serve {what} (HTTP {status}, retries included: {text}); nothing was "
            "changed: try again in a moment (https://status.e2b.dev)"
        )
    if isinstance(error, GuestUnresponsiveException):
        return E2BError(f"E2B refused {what}: {text}")
    if status == 409:
        return E2BSandboxBusyError(
            f"E2B refused {what}: the sandbox is changing state ({text}), retries included; "
            "try again once that is over"
        )
    if status == 400 and "timeout" in text.lower():
        return _timeout_error(text, what=what, timeout=timeout)
    if status == 400 and "max instance length" in text.lower():
        return E2BTimeoutLimitError(
            f"E2B refused {what}: the sandbox has lived as long as your plan allows ({text}; "
            "Hobby: 1 hour, Pro: 24 hours); it ends at its timeout and is then re-created"
        )
    if template is not None and status in (403, 404):
        return E2BTemplateNotFoundError(
            f"E2B refused {what} from template {template!r} ({text}): set `template` to the "
            "name or id of a template your team can use (`e2b template list`), e.g. 'base'"
        )
    return E2BError(f"E2B refused {what} ({type(error).__name__}: {text})")


def _timeout_error(text: str, *, what: str, timeout: int) -> E2BTimeoutLimitError:
    hours = _HOURS.search(text)
    if hours is not None:
        most = int(hours.group(1)) * 3600
        return E2BTimeoutLimitError(
            f"E2B refused {what} with timeout={timeout} s ({text}): your plan allows at most "
            f"{most:,} s (Hobby: 3,600; Pro: 86,400): lower `timeout`"
        )
    return E2BTimeoutLimitError(
        f"E2B refused {what} with timeout={timeout} s ({text}): `timeout` must be above 0 and "
        "within your plan's maximum (Hobby: 3,600; Pro: 86,400): change `timeout`"
    )


# -- envd (a sandbox's own agent, behind E2B's sandbox proxy) --------------------------------


def _transitioning(error: Exception) -> bool:
    # The proxy's 409; over connect-rpc it arrives as ALREADY_EXISTS, a code envd also uses for
    # an existing path, so the proxy's words tell them apart.
    return isinstance(error, SandboxException) and (
        "still transitioning" in str(error) or str(error).startswith("409:")
    )


def _busy(error: Exception) -> bool:
    text = str(error)
    return (
        isinstance(error, SandboxUnreachableException) and text.startswith("Service Unavailable")
    ) or (
        isinstance(error, SandboxException)
        and not isinstance(error, SandboxUnreachableException)
        and text.startswith("503:")
    )


def _port_closed(error: Exception) -> bool:
    return isinstance(error, SandboxUnreachableException) and "port is not open" in str(error)


def envd_retryable(error: Exception) -> bool:
    """An envd failure that proves the request was not carried out, so retrying is safe even
    for a command: the proxy's 429, 409, 502 "port is not open", and 503."""
    return (
        isinstance(error, RateLimitException)
        or _transitioning(error)
        or _port_closed(error)
        or _busy(error)
    )


def envd_error(error: Exception, *, sandbox_id: str) -> E2BError | None:
    """The :class:`E2BError` for a failed envd call, or ``None`` when the caller handles the
    SDK's exception itself (a missing file, a bad argument, a sandbox gone, ...)."""
    if isinstance(error, RateLimitException):
        return E2BRateLimitError(
            f"E2B's sandbox proxy refused a request to sandbox {sandbox_id}, retries included "
            f"({error}); run fewer operations on one sandbox at once"
        )
    if _transitioning(error):
        return E2BSandboxBusyError(
            f"sandbox {sandbox_id} is changing state (E2B's proxy: {error}), retries included; "
            "try again once that is over"
        )
    if _busy(error):
        return E2BServiceBusyError(
            f"E2B could not serve a request to sandbox {sandbox_id} ({error}), retries "
            "included; nothing was changed: try again in a moment (https://status.e2b.dev)"
        )
    if isinstance(error, AuthenticationException):
        return E2BAuthenticationError(
            f"the envd of sandbox {sandbox_id} refused the access token E2B's API gave for it "
            f"({error}); connect to the sandbox again (find it anew), or report it to E2B"
        )
    return None


__all__ = [
    "ATTEMPTS",
    "api_error",
    "api_retryable",
    "backoff",
    "envd_error",
    "envd_retryable",
    "retrying",
    "status_of",
]
