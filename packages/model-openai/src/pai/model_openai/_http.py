"""The HTTP client under the SDK, treating the model server as untrusted.

The ``openai`` SDK is given an ``httpx2`` client (the SDK's own defaults: connection limits,
proxies from the environment) that never follows a redirect, and two event hooks:

- on each request: ``Accept-Encoding: identity`` (a compressed body could expand far past the
  byte cap), and the answer's deadline, ``timeout`` seconds from now;
- on each response, before its body is read: a redirect (any 3xx) is a
  :class:`ModelRedirectError` naming both URLs, and the redirect's body is never read; a
  compressed body, or a successful answer that is an HTML page, is a
  :class:`~pai.core.ModelResponseError`; every other body is read through :class:`GuardedBody`,
  which bounds its bytes and its line length.

The deadline is kept by the connections themselves (:class:`DeadlineBackend`): every read and
write on the socket, headers and body alike, waits at most until the deadline, through the
timeout ``httpcore2`` already gives each of them, so bounding the whole answer costs no cancel
scope, timer or task of its own (an answer is dozens of small reads).

The SDK does not catch these errors (they are no ``httpx2`` errors), so they reach the model as
raised. Importing this module imports ``httpx2``: the model imports it when it builds a client.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterable
from contextvars import ContextVar
from typing import Any, Final

import httpcore2
import httpx2

from pai.core import ModelResponseError, ModelTimeoutError
from pai.model_openai._errors import ModelRedirectError, mask_url

__all__ = ["MAX_LINE_BYTES", "Answer", "DeadlineBackend", "GuardedBody", "ServerGuard"]

MAX_LINE_BYTES: Final = 4 * 1024 * 1024
"""The longest line of an event stream read (when ``max_answer_bytes`` is not smaller): a line
is one chunk of the answer, and no real chunk comes near it."""

_ANSWER: Final = "pai.answer"
_PENDING: ContextVar[Answer | None] = ContextVar("pai_model_openai_answer", default=None)
"""The answer whose request the current task sends (set by the request hook): its headers are
read in the task that sent it, before its connection knows the answer."""
_HTML: Final = ("text/html", "application/xhtml+xml")


class ServerGuard:
    """The event hooks of one model's HTTP client (see the module's docstring)."""

    __slots__ = ("max_bytes", "max_line", "model", "timeout")

    def __init__(self, model: str, timeout: float, max_bytes: int) -> None:
        self.model = model
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.max_line = min(max_bytes, MAX_LINE_BYTES)

    def client(self) -> httpx2.AsyncClient:
        """An ``httpx2`` client with the SDK's defaults that never follows a redirect."""
        import openai

        client = openai.DefaultAsyncHttpxClient(
            follow_redirects=False,
            event_hooks={"request": [self.on_request], "response": [self.on_response]},
        )
        transports: list[object] = [client._transport]  # pyright: ignore[reportPrivateUsage]
        transports.extend(client._mounts.values())  # pyright: ignore[reportPrivateUsage]
        for pool in _pools(transports):
            pool._network_backend = DeadlineBackend(pool._network_backend)
        return client

    async def on_request(self, request: httpx2.Request) -> None:
        request.headers["accept-encoding"] = "identity"
        answer = Answer(self, request.url, time.monotonic() + self.timeout)
        request.extensions[_ANSWER] = answer
        _PENDING.set(answer)

    async def on_response(self, response: httpx2.Response) -> None:
        status = response.status_code
        request = response.request
        if 300 <= status < 400:
            raise self._redirect(status, str(request.url), response.headers.get("location"))
        headers = response.headers
        encoding = headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("identity", ""):
            raise ModelResponseError(
                f"OpenAI model {self.model!r}: the server at {mask_url(str(request.url))} sent "
                f"a body compressed with {encoding[:40]!r} although asked for none "
                "(Accept-Encoding: identity); a compressed body could expand past "
                "max_answer_bytes, so it is not read",
                model=self.model,
                status_code=status,
            )
        media = headers.get("content-type", "").partition(";")[0].strip().lower()
        if 200 <= status < 300 and media in _HTML:
            raise ModelResponseError(
                f"OpenAI model {self.model!r}: the server at {mask_url(str(request.url))} "
                f"answered {media}, not an event stream; is base_url the /v1 root of an "
                "OpenAI-compatible API?",
                model=self.model,
                status_code=status,
            )
        answer = request.extensions.get(_ANSWER)
        if not isinstance(answer, Answer):  # a request this guard's hook did not see
            answer = Answer(self, request.url, time.monotonic() + self.timeout)
        body = response.stream
        if isinstance(body, httpx2.AsyncByteStream):  # always, on an async client
            stream = response.extensions.get("network_stream")
            connection = stream if isinstance(stream, _DeadlineStream) else None
            response.stream = GuardedBody(body, answer, connection)
            if connection is not None:  # the body's reads keep the answer's deadline
                connection.answer = answer

    def _redirect(self, status: int, url: str, location: str | None) -> ModelRedirectError:
        asked = mask_url(url)
        if location is None:
            where, target = "without a Location", "(none)"
        else:
            try:
                absolute = str(httpx2.URL(url).join(location))
            except (httpx2.InvalidURL, ValueError):
                absolute = location
            target = mask_url(absolute)
            same = _origin(absolute) == _origin(url)
            where = f"to {'the same server, ' if same else 'another origin, '}{target}"
        return ModelRedirectError(
            f"OpenAI model {self.model!r}: the server at {asked} answered HTTP {status}, "
            f"redirecting {where}; redirects are never followed (a model server could make "
            "this host fetch any URL, or send the conversation elsewhere). If the API has "
            "moved, set base_url to its new /v1 root",
            model=self.model,
            status_code=status,
            url=asked,
            location=target,
        )


def _origin(url: str) -> tuple[str, str, int | None]:
    try:
        parsed = httpx2.URL(url)
    except (httpx2.InvalidURL, ValueError):
        return ("", url, None)
    return (parsed.scheme, parsed.host, parsed.port)


class Answer:
    """One answer being read: its deadline, and the errors that name it."""

    __slots__ = ("deadline", "guard", "url")

    def __init__(self, guard: ServerGuard, url: httpx2.URL, deadline: float) -> None:
        self.guard = guard
        self.url = url  # made a string only for an error: that costs microseconds
        self.deadline = deadline

    def late(self) -> ModelTimeoutError:
        guard = self.guard
        return ModelTimeoutError(
            f"OpenAI model {guard.model!r}: the answer from {mask_url(str(self.url))} did not end "
            f"within timeout={guard.timeout:g} s (the timeout bounds the whole answer, however "
            "the server paces its bytes); raise OpenAIModel(timeout=...) if the model is slow",
            model=guard.model,
        )

    def too_big(self, option: str, limit: int, what: str) -> ModelResponseError:
        guard = self.guard
        return ModelResponseError(
            f"OpenAI model {guard.model!r}: {what} from {mask_url(str(self.url))} passed {limit} "
            f"bytes, the {option} limit; the rest was not read. Raise OpenAIModel({option}=...) "
            "if a real answer is that large",
            model=guard.model,
        )


class GuardedBody(httpx2.AsyncByteStream):
    """A response body of at most ``max_bytes`` bytes in all and lines of at most ``max_line``
    bytes; past either, the read stops with a model error. (Its deadline is kept by its
    connection's reads: see :class:`DeadlineBackend`.)"""

    __slots__ = ("_answer", "_connection", "_inner", "_line", "_total")

    def __init__(
        self,
        inner: httpx2.AsyncByteStream,
        answer: Answer,
        connection: _DeadlineStream | None = None,
    ) -> None:
        self._inner = inner
        self._answer = answer
        self._connection = connection
        self._total = 0
        self._line = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._connection is None:  # not an httpcore2 HTTP/1.1 connection: check between reads
            answer = self._answer
            async for chunk in self._inner:
                if answer.deadline <= time.monotonic():
                    raise answer.late()
                self._count(chunk)
                yield chunk
            return
        async for chunk in self._inner:
            self._count(chunk)
            yield chunk

    def _count(self, chunk: bytes) -> None:
        """Add ``chunk`` to the body's bytes and its current line; past a cap, the answer ends."""
        guard = self._answer.guard
        size = len(chunk)
        self._total += size
        if self._total > guard.max_bytes:
            raise self._answer.too_big("max_answer_bytes", guard.max_bytes, "the answer")
        end = max(chunk.rfind(b"\n"), chunk.rfind(b"\r"))
        self._line = self._line + size if end < 0 else size - end - 1
        if self._line > guard.max_line:
            raise self._answer.too_big(
                "max_answer_bytes",
                guard.max_line,
                f"one line of the event stream (lines are capped at "
                f"min(max_answer_bytes, {MAX_LINE_BYTES}))",
            )

    async def aclose(self) -> None:
        connection = self._connection
        if connection is not None and connection.answer is self._answer:
            connection.answer = None  # the connection may serve another answer next
        await self._inner.aclose()


class DeadlineBackend(httpcore2.AsyncNetworkBackend):
    """``httpcore2``'s network backend, whose connections read and write within the deadline of
    the answer they carry: each read or write gets the smaller of its own timeout and the time
    left, and the deadline passing is the answer's :class:`~pai.core.ModelTimeoutError`."""

    __slots__ = ("_inner",)

    def __init__(self, inner: httpcore2.AsyncNetworkBackend) -> None:
        self._inner = inner

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        answer = _PENDING.get()  # connecting counts against the answer that needs it
        left = None if answer is None else answer.deadline - time.monotonic()
        if answer is None or left is None or (timeout is not None and timeout < left):
            stream = await self._inner.connect_tcp(
                host,
                port,
                timeout=timeout,
                local_address=local_address,
                socket_options=socket_options,
            )
            return _DeadlineStream(stream)
        if left <= 0:
            raise answer.late()
        try:
            stream = await self._inner.connect_tcp(
                host, port, timeout=left, local_address=local_address, socket_options=socket_options
            )
        except httpcore2.ConnectTimeout:
            raise answer.late() from None
        return _DeadlineStream(stream)

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore2.AsyncNetworkStream:
        stream = await self._inner.connect_unix_socket(
            path, timeout=timeout, socket_options=socket_options
        )
        return _DeadlineStream(stream)

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _DeadlineStream(httpcore2.AsyncNetworkStream):
    """A connection of :class:`DeadlineBackend`: ``answer`` is the answer whose body it carries
    (set when its headers arrived), else the answer the current task is sending."""

    __slots__ = ("_inner", "answer")

    def __init__(self, inner: httpcore2.AsyncNetworkStream) -> None:
        self._inner = inner
        self.answer: Answer | None = None

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        answer = self.answer or _PENDING.get()
        if answer is None:
            return await self._inner.read(max_bytes, timeout)
        left = answer.deadline - time.monotonic()
        if left <= 0:
            raise answer.late()
        if timeout is not None and timeout < left:
            return await self._inner.read(max_bytes, timeout)
        try:
            return await self._inner.read(max_bytes, left)
        except httpcore2.ReadTimeout:
            raise answer.late() from None

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        answer = self.answer or _PENDING.get()
        if answer is None:
            return await self._inner.write(buffer, timeout)
        left = answer.deadline - time.monotonic()
        if left <= 0:
            raise answer.late()
        if timeout is not None and timeout < left:
            return await self._inner.write(buffer, timeout)
        try:
            return await self._inner.write(buffer, left)
        except httpcore2.WriteTimeout:
            raise answer.late() from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore2.AsyncNetworkStream:
        stream = await self._inner.start_tls(ssl_context, server_hostname, timeout)
        return _DeadlineStream(stream)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


def _pools(transports: Iterable[object]) -> list[Any]:
    """The ``httpcore2`` connection pools under ``transports`` (the client's own, and one per
    proxy); a transport without one is an error, since its answers would have no deadline."""
    pools: list[Any] = []
    for transport in transports:
        if transport is None:
            continue
        pool = getattr(transport, "_pool", None)
        if pool is None or not hasattr(pool, "_network_backend"):
            raise RuntimeError(
                f"pai-model-openai: the HTTP transport {type(transport).__name__} has no "
                "httpcore2 connection pool to bound answers with; this httpx2 release is not "
                "supported (pin the version pai-model-openai was tested with)"
            )
        pools.append(pool)
    return pools
