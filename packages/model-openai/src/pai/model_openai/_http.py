"""The HTTP client under the SDK, treating the model server as untrusted.

The ``openai`` SDK is given an ``httpx2`` client (the SDK's own defaults: connection limits,
proxies from the environment) that never follows a redirect, and two event hooks:

- on each request: ``Accept-Encoding: identity`` (a compressed body could expand far past the
  byte cap), and the answer's deadline, ``timeout`` seconds from now;
- on each response, before its body is read: a redirect (any 3xx) is a
  :class:`ModelRedirectError` naming both URLs, and the redirect's body is never read; a
  compressed body, or a successful answer that is an HTML page, is a
  :class:`~pai.core.ModelResponseError`; every other body is read through :class:`GuardedBody`,
  which bounds its bytes, its line length and the time until its last byte.

The SDK does not catch these errors (they are no ``httpx2`` errors), so they reach the model as
raised. Importing this module imports ``httpx2``: the model imports it when it builds a client.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Final

import anyio
import httpx2

from pai.core import ModelResponseError, ModelTimeoutError
from pai.model_openai._errors import ModelRedirectError, mask_url

__all__ = ["MAX_LINE_BYTES", "GuardedBody", "ServerGuard"]

MAX_LINE_BYTES: Final = 4 * 1024 * 1024
"""The longest line of an event stream read (when ``max_answer_bytes`` is not smaller): a line
is one chunk of the answer, and no real chunk comes near it."""

_DEADLINE: Final = "pai.deadline"
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

        return openai.DefaultAsyncHttpxClient(
            follow_redirects=False,
            event_hooks={"request": [self.on_request], "response": [self.on_response]},
        )

    async def on_request(self, request: httpx2.Request) -> None:
        request.headers["accept-encoding"] = "identity"
        request.extensions[_DEADLINE] = time.monotonic() + self.timeout

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
        deadline: float = request.extensions.get(_DEADLINE, time.monotonic() + self.timeout)
        body = response.stream
        if isinstance(body, httpx2.AsyncByteStream):  # always, on an async client
            response.stream = GuardedBody(body, self, deadline, request.url)

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


class _Deadline:
    """Where one body's read stands against its deadline (asyncio)."""

    __slots__ = ("cancelled", "passed", "reading")

    def __init__(self) -> None:
        self.reading = False  # awaiting the next chunk
        self.passed = False  # the deadline has passed
        self.cancelled = False  # the timer cancelled the task


def _origin(url: str) -> tuple[str, str, int | None]:
    try:
        parsed = httpx2.URL(url)
    except (httpx2.InvalidURL, ValueError):
        return ("", url, None)
    return (parsed.scheme, parsed.host, parsed.port)


class GuardedBody(httpx2.AsyncByteStream):
    """A response body read within a deadline, at most ``max_bytes`` bytes in all and lines of
    at most ``max_line`` bytes; past any of them the read stops with a model error."""

    __slots__ = ("_deadline", "_guard", "_inner", "_line", "_total", "_url")

    def __init__(
        self, inner: httpx2.AsyncByteStream, guard: ServerGuard, deadline: float, url: httpx2.URL
    ) -> None:
        self._inner = inner
        self._guard = guard
        self._deadline = deadline
        self._url = url  # made a string only for an error: that costs microseconds
        self._total = 0
        self._line = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        chunks = self._inner.__aiter__()
        try:
            task = asyncio.current_task()
        except RuntimeError:  # no asyncio loop running: trio (anyio's only other backend)
            task = None
        reads = self._read_on_trio(chunks) if task is None else self._read_on_asyncio(chunks, task)
        try:
            async for chunk in reads:
                yield chunk
        finally:
            aclose = getattr(chunks, "aclose", None)
            with anyio.CancelScope(shield=True):
                await reads.aclose()  # now, not when collected: its timer goes with it
                if aclose is not None:
                    await aclose()

    async def _read_on_asyncio(
        self, chunks: AsyncIterator[bytes], task: asyncio.Task[object]
    ) -> AsyncGenerator[bytes]:
        # One timer for the whole body, not a cancel scope a read: an answer is dozens of small
        # reads, and a scope costs about 12 us to enter and leave (bench_models' runtime step
        # went from 1.06x to 1.10-1.15x of the raw SDK with one a read). When the deadline
        # passes during a read, the timer cancels the task, as asyncio.timeout does; when it
        # passes between reads, the next read is refused.
        loop = asyncio.get_running_loop()
        baseline = task.cancelling()
        state = _Deadline()

        def expire() -> None:
            state.passed = True
            if state.reading:
                state.cancelled = True
                task.cancel()

        timer = loop.call_later(max(0.0, self._deadline - time.monotonic()), expire)
        try:
            while True:
                if state.passed:
                    raise self._late()
                state.reading = True
                try:
                    chunk = await chunks.__anext__()
                except StopAsyncIteration:
                    return
                except asyncio.CancelledError:
                    if state.cancelled and task.uncancel() <= baseline:
                        raise self._late() from None
                    raise
                finally:
                    state.reading = False
                self._count(chunk)
                yield chunk
        finally:
            timer.cancel()

    async def _read_on_trio(self, chunks: AsyncIterator[bytes]) -> AsyncGenerator[bytes]:
        import trio

        # trio's own scope: a fraction of the cost of anyio's wrapper around it.
        deadline = trio.current_time() + (self._deadline - time.monotonic())
        while True:
            chunk = b""
            try:
                with trio.move_on_at(deadline) as scope:
                    chunk = await chunks.__anext__()
            except StopAsyncIteration:
                return
            if scope.cancelled_caught:
                raise self._late()
            self._count(chunk)
            yield chunk

    def _count(self, chunk: bytes) -> None:
        """Add ``chunk`` to the body's bytes and its current line; past a cap, the answer ends."""
        guard = self._guard
        size = len(chunk)
        self._total += size
        if self._total > guard.max_bytes:
            raise self._too_big("max_answer_bytes", guard.max_bytes, "the answer")
        end = max(chunk.rfind(b"\n"), chunk.rfind(b"\r"))
        self._line = self._line + size if end < 0 else size - end - 1
        if self._line > guard.max_line:
            raise self._too_big(
                "max_answer_bytes",
                guard.max_line,
                f"one line of the event stream (lines are capped at "
                f"min(max_answer_bytes, {MAX_LINE_BYTES}))",
            )

    async def aclose(self) -> None:
        await self._inner.aclose()

    def _late(self) -> ModelTimeoutError:
        guard = self._guard
        return ModelTimeoutError(
            f"OpenAI model {guard.model!r}: the answer from {mask_url(str(self._url))} did not end "
            f"within timeout={guard.timeout:g} s (the timeout bounds the whole answer, however "
            "the server paces its bytes); raise OpenAIModel(timeout=...) if the model is slow",
            model=guard.model,
        )

    def _too_big(self, option: str, limit: int, what: str) -> ModelResponseError:
        guard = self._guard
        return ModelResponseError(
            f"OpenAI model {guard.model!r}: {what} from {mask_url(str(self._url))} passed {limit} "
            f"bytes, the {option} limit; the rest was not read. Raise OpenAIModel({option}=...) "
            "if a real answer is that large",
            model=guard.model,
        )
