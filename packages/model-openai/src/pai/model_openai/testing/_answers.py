"""What the test server answers: scripted replies, in the order requests arrive."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from pydantic import JsonValue

from pai.core import Usage

_call_ids = itertools.count(1)


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """A request the test server received: its path, headers (lower-case names) and JSON body.

    Example::

        body = server.requests[0]
        assert body.tools[0]["function"]["parameters"]["required"] == ["path"]
    """

    method: str
    path: str
    headers: Mapping[str, str]
    body: Mapping[str, JsonValue]

    @property
    def model(self) -> str | None:
        """The ``model`` the client asked for."""
        value = self.body.get("model")
        return value if isinstance(value, str) else None

    @property
    def messages(self) -> list[Mapping[str, JsonValue]]:
        """The chat messages the client sent."""
        return _dicts(self.body.get("messages"))

    @property
    def tools(self) -> list[Mapping[str, JsonValue]]:
        """The tools the client offered (``[]`` when it offered none)."""
        return _dicts(self.body.get("tools"))

    @property
    def stream(self) -> bool:
        """Whether the client asked for a streamed (SSE) answer."""
        return self.body.get("stream") is True


def _dicts(value: JsonValue) -> list[Mapping[str, JsonValue]]:
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, dict)]


@dataclass(frozen=True, slots=True)
class TextAnswer:
    """A text answer; streamed, each of ``pieces`` is one chunk."""

    pieces: tuple[str, ...]
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = "stop"


@dataclass(frozen=True, slots=True)
class FunctionCall:
    """One tool call in a :class:`ToolCallsAnswer`; ``arguments`` as a ``str`` is sent verbatim
    (to script arguments that are not valid JSON)."""

    name: str
    arguments: Mapping[str, JsonValue] | str
    id: str

    @property
    def arguments_json(self) -> str:
        """The arguments as the server sends them."""
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments)


@dataclass(frozen=True, slots=True)
class ToolCallsAnswer:
    """An answer calling one or more tools (parallel calls when more than one), optionally after
    some text. Streamed, each call's arguments arrive in ``argument_pieces`` chunks."""

    calls: tuple[FunctionCall, ...]
    text: str | None = None
    usage: Usage = field(default_factory=Usage)
    argument_pieces: int = 2


@dataclass(frozen=True, slots=True)
class ErrorAnswer:
    """An HTTP error in OpenAI's error shape, with optional extra headers (``retry-after``)."""

    status: int
    message: str
    type: str = "server_error"
    code: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict[str, str])


@dataclass(frozen=True, slots=True)
class CutStream:
    """A stream that sends ``pieces`` and then drops the connection without finishing."""

    pieces: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class MalformedChunk:
    """A stream that sends ``pieces`` and then a chunk that is not JSON."""

    pieces: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class StreamError:
    """A stream that sends ``pieces`` and then an error event (``data: {"error": ...}``)."""

    pieces: tuple[str, ...]
    message: str
    type: str = "server_error"


@dataclass(frozen=True, slots=True)
class StalledStream:
    """A stream that sends ``pieces`` and then nothing more until the client goes away."""

    pieces: tuple[str, ...]


# -- a hostile model server ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RedirectAnswer:
    """An HTTP redirect (``status``, a 3xx) to ``location``, with ``body`` as its text."""

    status: int
    location: str
    body: str = "redirected"


@dataclass(frozen=True, slots=True)
class HtmlAnswer:
    """A web page (``text/html``) where an API answer should be."""

    status: int
    html: str


@dataclass(frozen=True, slots=True)
class EndlessStream:
    """A stream of ``piece`` chunks that never finishes: it stops when the client goes away,
    after ``max_bytes`` bytes, or after ``max_seconds`` seconds."""

    piece: str
    max_bytes: int
    max_seconds: float


@dataclass(frozen=True, slots=True)
class HugeLine:
    """A stream whose first chunk is one line of ``size`` bytes that never ends, sent as fast as
    the client reads; then the connection closes."""

    size: int
    max_seconds: float


@dataclass(frozen=True, slots=True)
class TrickleStream:
    """A complete, valid ``answer`` sent ``step`` bytes at a time, ``interval`` seconds apart
    (every read gets a byte in time; the whole answer takes long); stops when the client goes
    away."""

    answer: TextAnswer
    interval: float
    step: int


@dataclass(frozen=True, slots=True)
class BadUsage:
    """A text answer whose usage chunk says ``value`` for ``field`` (``"prompt_tokens"``,
    ``"completion_tokens"``, or ``"usage"`` for the whole usage object); sent whether or not the
    client asked for usage."""

    pieces: tuple[str, ...]
    field: str
    value: JsonValue


ScriptedAnswer: TypeAlias = (
    TextAnswer
    | ToolCallsAnswer
    | ErrorAnswer
    | CutStream
    | MalformedChunk
    | StreamError
    | StalledStream
    | RedirectAnswer
    | HtmlAnswer
    | EndlessStream
    | HugeLine
    | TrickleStream
    | BadUsage
)
"""One scripted reply of the test server."""

Answer: TypeAlias = ScriptedAnswer | Callable[[RecordedRequest], ScriptedAnswer]
"""A scripted reply, or a function choosing one from the request."""


def text_answer(
    *pieces: str,
    usage: Usage | None = None,
    finish_reason: Literal["stop", "length", "content_filter"] = "stop",
) -> TextAnswer:
    """Answer with text; a streamed request receives each piece as one chunk.

    Example::

        server.add(text_answer("Hel", "lo", usage=Usage(input_tokens=9, output_tokens=2)))
    """
    return TextAnswer(pieces=pieces or ("",), usage=usage or Usage(), finish_reason=finish_reason)


def function_call(
    name: str, arguments: Mapping[str, JsonValue] | str | None = None, *, id: str | None = None
) -> FunctionCall:
    """One tool call for :func:`tool_calls_answer` (an id is made up when not given); a ``str``
    as ``arguments`` is sent verbatim, valid JSON or not."""
    sent = arguments if isinstance(arguments, str) else dict(arguments or {})
    return FunctionCall(name=name, arguments=sent, id=id or f"call_{next(_call_ids)}")


def tool_calls_answer(
    *calls: FunctionCall,
    text: str | None = None,
    usage: Usage | None = None,
    argument_pieces: int = 2,
) -> ToolCallsAnswer:
    """Answer by calling tools (several calls are parallel calls in one answer).

    Example::

        server.add(tool_calls_answer(function_call("read", {"path": "/a"}),
                                     function_call("read", {"path": "/b"})))
    """
    if not calls:
        raise ValueError("tool_calls_answer needs at least one function_call(...)")
    return ToolCallsAnswer(
        calls=calls, text=text, usage=usage or Usage(), argument_pieces=max(1, argument_pieces)
    )


_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}


def error_answer(
    status: int,
    message: str | None = None,
    *,
    retry_after: float | None = None,
    code: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> ErrorAnswer:
    """Answer with an HTTP error (``retry_after`` becomes a ``retry-after`` header, in seconds).

    Example::

        server.add(error_answer(429, retry_after=0.2), text_answer("ok"))
    """
    extra = dict(headers or {})
    if retry_after is not None:
        extra["retry-after"] = f"{retry_after:g}"
    return ErrorAnswer(
        status=status,
        message=message or f"scripted error {status}",
        type=_ERROR_TYPES.get(status, "server_error"),
        code=code,
        headers=extra,
    )


def cut_stream(*pieces: str) -> CutStream:
    """Stream ``pieces``, then drop the connection mid-answer."""
    return CutStream(pieces)


def malformed_chunk(*pieces: str) -> MalformedChunk:
    """Stream ``pieces``, then a chunk that is not JSON."""
    return MalformedChunk(pieces)


def stream_error(
    *pieces: str, message: str = "scripted error mid-stream", type: str = "server_error"
) -> StreamError:
    """Stream ``pieces``, then an error event carrying ``message`` and ``type``."""
    return StreamError(pieces, message, type)


def stalled_stream(*pieces: str) -> StalledStream:
    """Stream ``pieces``, then wait without sending anything until the client disconnects."""
    return StalledStream(pieces)


# -- a hostile model server: what no real server should do, done for real over HTTP -----------------


def redirect_answer(status: int = 307, location: str = "/v1/chat/completions") -> RedirectAnswer:
    """Answer with an HTTP redirect to ``location`` (``303`` makes a following client GET it,
    ``307``/``308`` re-POST the request body there). Point ``location`` at a second local server
    to check that a client never goes there.

    Example::

        with OpenAITestServer() as elsewhere:
            server.add(redirect_answer(307, elsewhere.base_url + "/chat/completions"))
            ...
            assert elsewhere.hits == []
    """
    if not 300 <= status < 400:
        raise ValueError(f"redirect_answer(status={status!r}): a redirect status is 3xx")
    return RedirectAnswer(status=status, location=location)


def html_answer(
    html: str = "<!doctype html><title>Welcome</title><p>This is a web page, not an API.</p>",
    *,
    status: int = 200,
) -> HtmlAnswer:
    """Answer with a web page, as a ``base_url`` pointing at a website (not its API) does."""
    return HtmlAnswer(status=status, html=html)


def endless_stream(
    piece: str = "la ", *, max_bytes: int = 1 << 30, max_seconds: float = 60.0
) -> EndlessStream:
    """Stream ``piece`` as text chunks without end, as fast as the client reads. The server
    stops when the client disconnects, after ``max_bytes`` bytes or ``max_seconds`` seconds."""
    return EndlessStream(piece=piece, max_bytes=max_bytes, max_seconds=max_seconds)


def huge_line(size: int = 64 << 20, *, max_seconds: float = 60.0) -> HugeLine:
    """Stream one event-stream line of ``size`` bytes that never ends (no newline), then close
    the connection (or stop after ``max_seconds`` seconds, or when the client disconnects)."""
    return HugeLine(size=size, max_seconds=max_seconds)


def trickle_stream(*pieces: str, interval: float = 0.05, step: int = 1) -> TrickleStream:
    """Stream a valid text answer of ``pieces``, ``step`` bytes every ``interval`` seconds: each
    read of the client gets bytes in time, while the whole answer takes minutes. The server stops
    when the client disconnects.

    Example::

        server.add(trickle_stream("slow", interval=0.05))   # ~700 bytes: ~35 s in all
    """
    if interval < 0 or step < 1:
        raise ValueError("trickle_stream needs interval >= 0 and step >= 1")
    return TrickleStream(answer=text_answer(*pieces), interval=interval, step=step)


def bad_usage(
    value: JsonValue,
    *pieces: str,
    field: Literal["prompt_tokens", "completion_tokens", "usage"] = "prompt_tokens",
) -> BadUsage:
    """A text answer whose usage lies: ``field`` of its usage chunk is ``value`` (``None``,
    ``-1``, ``1e300``, ``"12"``...); ``field="usage"`` makes ``value`` the whole usage object.

    Example::

        server.add(bad_usage(-1_000_000, "hi"))
    """
    return BadUsage(pieces=pieces or ("ok",), field=field, value=value)


def many_tool_calls(
    count: int, name: str = "noop", arguments: Mapping[str, JsonValue] | None = None
) -> ToolCallsAnswer:
    """An answer making ``count`` parallel calls of tool ``name`` (ids ``call_0``...), each
    with ``arguments`` (``{}`` when not given) in one chunk."""
    if count < 1:
        raise ValueError(f"many_tool_calls(count={count!r}) needs count >= 1")
    sent = dict(arguments or {})
    calls = tuple(FunctionCall(name=name, arguments=sent, id=f"call_{i}") for i in range(count))
    return ToolCallsAnswer(calls=calls, argument_pieces=1)
