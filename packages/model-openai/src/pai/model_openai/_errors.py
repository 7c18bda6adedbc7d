"""How the ``openai`` SDK's errors map onto the core's model error tree.

    openai SDK error                          pai.core error                   retried
    ─────────────────────────────────────     ──────────────────────────────   ───────
    RateLimitError (429)                      ModelRateLimitError              yes, after retry-after
      … with code "insufficient_quota"        FatalModelError                  no
    InternalServerError (5xx)                 ModelOverloadedError             yes
    ConflictError (409), other 408/409        ModelOverloadedError             yes
    a redirect (any 3xx, never followed)      ModelRedirectError               yes
                                              (a ModelConnectionError)
    APITimeoutError                           ModelTimeoutError                yes
    APIConnectionError (refused, reset, cut)  ModelConnectionError             yes
    BadRequestError (400), 422, other 4xx     ModelBadRequestError             no
    AuthenticationError (401), 403            ModelAuthenticationError         no
    NotFoundError (404)                       ModelNotFoundError               no
    an error event inside a stream            ModelOverloadedError             yes
      … of type "invalid_request_error"       ModelBadRequestError             no
    APIResponseValidationError, bad JSON      ModelResponseError               no

Text a server sends (an error message, a body) is clipped to :data:`MAX_SERVER_TEXT` characters
with a marker, and its control characters are escaped, before it goes into a message: an error
is stored in the thread and printed, and the server is not trusted. URLs in messages go through
:func:`mask_url` (no userinfo, no query values), and the request's API key is masked in any
text the server echoes back.

A connection error names the URL tried, an HTTP error the URL that answered; a 404 from a base
URL without a ``/v1`` path segment suggests adding it (the usual mistake with self-hosted
OpenAI-compatible servers).

``retry-after-ms`` and ``retry-after`` (seconds, or an HTTP date) become ``retry_after``. Every
mapped error keeps the SDK's error as ``__cause__``.
"""

from __future__ import annotations

import email.utils
import math
import re
import time
import urllib.parse
from collections.abc import Mapping
from typing import TYPE_CHECKING, cast

from pai.core import (
    FatalModelError,
    ModelAuthenticationError,
    ModelBadRequestError,
    ModelConnectionError,
    ModelError,
    ModelNotFoundError,
    ModelOverloadedError,
    ModelRateLimitError,
    ModelResponseError,
    ModelTimeoutError,
)

if TYPE_CHECKING:
    import openai

__all__ = [
    "MAX_SERVER_TEXT",
    "ModelRedirectError",
    "clip_server_text",
    "map_openai_error",
    "mask_url",
    "parse_retry_after",
]

MAX_SERVER_TEXT = 2000
"""How many characters of a server's own text (an error message) a model error keeps."""

# C0 controls but tab and newline, DEL and the C1 controls (ESC starts terminal sequences).
_CONTROLS = {
    code: f"\\x{code:02x}"
    for code in (*range(0x20), 0x7F, *range(0x80, 0xA0))
    if code not in (9, 10)
}


class ModelRedirectError(ModelConnectionError):
    """The model server answered with a redirect, which is never followed.

    ``url`` is the URL asked and ``location`` where the server pointed (both masked: no
    userinfo, no query values). Never retried: the server answers the same way again.
    """

    retryable = False

    def __init__(self, message: str, *, model: str, status_code: int, url: str, location: str):
        super().__init__(message, model=model, status_code=status_code)
        self.url = url
        self.location = location


def clip_server_text(text: str, limit: int = MAX_SERVER_TEXT) -> str:
    """``text`` from the server as a message may hold it: at most ``limit`` characters (then a
    marker saying how many more there were), control characters escaped.

    Example::

        clip_server_text("x" * 5000)  # 'xxx…x… [3000 more characters cut]'
    """
    if len(text) > limit:
        text = f"{text[:limit]}… [{len(text) - limit} more characters cut]"
    return text.translate(_CONTROLS)


def mask_url(url: str) -> str:
    """``url`` fit for a message: user and password, query values and fragment masked.

    Example::

        mask_url("https://user:pw@example.com/v1?key=abc")  # 'https://***@example.com/v1?key=***'
    """
    try:
        parts = urllib.parse.urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            netloc = "***@" + netloc.rpartition("@")[2]
        query = "&".join(
            f"{name}=***" if sep else name
            for name, sep, _ in (item.partition("=") for item in parts.query.split("&") if item)
        )
        fragment = "***" if parts.fragment else ""
        masked = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, fragment))
    except ValueError:
        return "<an unreadable URL>"
    return clip_server_text(masked, 500)


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds the server asked to wait: ``retry-after-ms``, else ``retry-after`` (seconds or an
    HTTP date); ``None`` when neither is there or readable. Header names are case-insensitive."""
    lowered = {key.lower(): value for key, value in headers.items()}
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        raw = lowered.get(name)
        if raw is None:
            continue
        try:
            seconds = float(raw) / divisor
        except ValueError:
            seconds = _http_date_delay(raw, now)
        if seconds is not None and math.isfinite(seconds) and seconds >= 0:
            return seconds
    return None


def _http_date_delay(raw: str, now: float | None) -> float | None:
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - (time.time() if now is None else now), 0.0)


def map_openai_error(
    error: openai.OpenAIError | ValueError, model: str, *, api_key: str | None = None
) -> ModelError:
    """The core :class:`~pai.core.ModelError` for an error the ``openai`` SDK raised;
    ``api_key``, the key the request sent, is masked should the server quote it back."""
    import openai

    def where(message: str) -> str:
        return f"OpenAI model {model!r}: {message}"

    if isinstance(error, openai.APITimeoutError):
        return ModelTimeoutError(
            where(
                f"no answer{_from(error)} within the timeout; raise OpenAIModel(timeout=...) if "
                "it is slow"
            ),
            model=model,
        )
    if isinstance(error, openai.APIConnectionError):
        url = _request_url(error)
        parts = [mask_url(url)] if url else []
        if error.__cause__ is not None:
            parts.append(clip_server_text(str(error.__cause__)))
        cause = f" ({': '.join(parts)})" if parts else ""
        return ModelConnectionError(
            where(
                f"the connection failed{cause}; check the base URL (base_url, or "
                "OPENAI_BASE_URL) and that the server there is running"
            ),
            model=model,
        )
    if isinstance(error, openai.APIStatusError):
        return _from_status(error, model, api_key)
    if isinstance(error, openai.APIResponseValidationError):
        return ModelResponseError(
            where(f"the answer did not match the API: {clip_server_text(str(error))}"), model=model
        )
    if isinstance(error, openai.APIError):
        # An error event inside a stream: the server failed mid-answer, unless it says the
        # request itself was wrong.
        message = clip_server_text(error.message)
        if _body_type(error.body) == "invalid_request_error":
            return ModelBadRequestError(
                where(f"the server refused the request mid-answer: {message}"), model=model
            )
        return ModelOverloadedError(
            where(f"the server reported an error mid-answer: {message}"), model=model
        )
    return ModelResponseError(
        where(f"the answer could not be read: {clip_server_text(str(error))}"), model=model
    )


def _from_status(error: openai.APIStatusError, model: str, api_key: str | None) -> ModelError:
    status = error.status_code
    detail = clip_server_text(_without_key(_detail(error), error, api_key))
    headers = dict(error.response.headers.items())
    retry_after = parse_retry_after(headers)
    url = _request_url(error)
    at = f"; from {mask_url(url)}" if url else ""

    def say(message: str) -> str:
        return f"OpenAI model {model!r}: {message} (HTTP {status}: {detail}{at})"

    code = _code(error)
    if status == 429 and code == "insufficient_quota":
        return FatalModelError(
            say("the account is out of quota; add credit or use another key"),
            model=model,
            status_code=status,
        )
    if status == 429:
        return ModelRateLimitError(
            say("rate limited"), model=model, status_code=status, retry_after=retry_after
        )
    if status >= 500 or status in (408, 409):
        return ModelOverloadedError(
            say("the server failed or is overloaded"),
            model=model,
            status_code=status,
            retry_after=retry_after,
        )
    if status in (401, 403):
        return ModelAuthenticationError(
            say("the API key was refused; check OPENAI_API_KEY (or api_key / api_key_env)"),
            model=model,
            status_code=status,
        )
    if status == 404:
        return ModelNotFoundError(
            say(_not_found_advice(model, url)),
            model=model,
            status_code=status,
        )
    return ModelBadRequestError(
        say("the server refused the request"), model=model, status_code=status
    )


_ENDPOINT = "/chat/completions"
_VERSION_SEGMENT = re.compile(r"v\d+[a-z0-9]*")


def _request_url(error: openai.APIError) -> str | None:
    """The URL the failed request went to (the SDK keeps its HTTP request), if known."""
    url = getattr(getattr(error, "request", None), "url", None)
    return str(url) if url is not None else None


def _from(error: openai.APIError) -> str:
    """`` from URL`` (masked) for a message, or ``""`` when the URL is not known."""
    url = _request_url(error)
    return f" from {mask_url(url)}" if url else ""


def _base_url_of(url: str) -> str:
    """The base URL a request URL was made from: without the endpoint, query and fragment."""
    parts = urllib.parse.urlsplit(url)
    path = parts.path.removesuffix(_ENDPOINT).rstrip("/")
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def _not_found_advice(model: str, url: str | None) -> str:
    """What a 404 means: the model is not served there, or the base URL misses ``/v1``."""
    if url is None:
        return "no such model or endpoint; check the model name and the base URL"
    try:
        base = _base_url_of(url)
        segments = urllib.parse.urlsplit(base).path.split("/")
    except ValueError:
        return "no such model or endpoint; check the model name and the base URL"
    if not any(_VERSION_SEGMENT.fullmatch(segment) for segment in segments):
        return (
            f"no such endpoint; the base URL {mask_url(base)} has no /v1, under which "
            f"OpenAI-compatible servers serve the API: try base_url = {mask_url(base + '/v1')!r} "
            "(or OPENAI_BASE_URL)"
        )
    return f"no such model or endpoint; check that the server serves a model named {model!r}"


def _without_key(text: str, error: openai.APIStatusError, api_key: str | None) -> str:
    """``text`` with the request's API key masked, should the server echo it back: the key the
    model sent, else the one on the request's headers (not every SDK release keeps it there)."""
    keys: list[str] = [api_key] if api_key else []
    request = getattr(error, "request", None)
    headers = getattr(request, "headers", None)
    value = headers.get("authorization") if headers is not None else None
    if isinstance(value, str):
        keys.append(value.removeprefix("Bearer ").strip())
    for key in keys:
        if len(key) >= 8:
            text = text.replace(key, "***")
    return text


def _detail(error: openai.APIStatusError) -> str:
    body = error.body
    if isinstance(body, Mapping):
        outer = cast("Mapping[str, object]", body)
        inner = outer.get("error", outer)
        if isinstance(inner, Mapping):
            message = cast("Mapping[str, object]", inner).get("message")
            if isinstance(message, str):
                return message
    return error.message


def _body_type(body: object) -> str | None:
    if isinstance(body, Mapping):
        kind = cast("Mapping[str, object]", body).get("type")
        if isinstance(kind, str):
            return kind
    return None


def _code(error: openai.APIStatusError) -> str | None:
    code: object = error.code
    return code if isinstance(code, str) else None
