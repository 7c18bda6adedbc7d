"""An OpenAI-compatible Chat Completions server on 127.0.0.1 that replays scripted answers.

It runs uvicorn in a background thread with its own event loop, so one server serves sync and
async tests, on asyncio or trio alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, MutableMapping
from functools import partial
from types import TracebackType
from typing import Any, Self, cast

import anyio
import anyio.lowlevel
import anyio.to_thread
from pydantic import JsonValue

from pai.core import Usage
from pai.model_openai.testing._answers import (
    Answer,
    BadUsage,
    CutStream,
    EndlessStream,
    ErrorAnswer,
    HtmlAnswer,
    HugeLine,
    MalformedChunk,
    RecordedRequest,
    RedirectAnswer,
    ScriptedAnswer,
    StalledStream,
    StreamError,
    TextAnswer,
    ToolCallsAnswer,
    TrickleStream,
)

__all__ = ["OpenAITestServer"]

_Scope = MutableMapping[str, Any]
_Message = MutableMapping[str, Any]
_Receive = Callable[[], Awaitable[_Message]]
_Send = Callable[[_Message], Awaitable[None]]

_CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")
_START_TIMEOUT = 10.0


@functools.cache
def _server_class() -> Any:
    import uvicorn

    class _PromptServer(uvicorn.Server):
        """uvicorn, stopping as soon as asked instead of at its next 0.1 s tick."""

        _wake: asyncio.Event | None = None
        _loop: asyncio.AbstractEventLoop | None = None

        async def main_loop(self) -> None:
            await self.on_tick(0)  # sets the default headers once
            self._wake = asyncio.Event()
            self._loop = asyncio.get_running_loop()
            if not self.should_exit:
                await self._wake.wait()

        def request_exit(self) -> None:
            self.should_exit = True
            loop, wake = self._loop, self._wake
            if loop is not None and wake is not None:
                with contextlib.suppress(RuntimeError):  # the loop already ended
                    loop.call_soon_threadsafe(wake.set)

    return _PromptServer


class _ScriptedCut(Exception):
    """Raised inside the server to drop a connection mid-answer (a scripted cut stream)."""


class OpenAITestServer:
    """A local OpenAI-compatible server (``POST /v1/chat/completions``) that answers from a script.

    Each request takes the next scripted answer (see :func:`text_answer`,
    :func:`tool_calls_answer`, :func:`error_answer`, :func:`cut_stream`,
    :func:`malformed_chunk`, :func:`stalled_stream`); a request with ``"stream": true`` gets
    server-sent events, with a usage chunk when it asks for
    ``stream_options={"include_usage": true}``. Every request is recorded in :attr:`requests`.
    A request past the end of the script is answered with HTTP 400 and a message saying so.

    It listens on a free port of 127.0.0.1 and only there. Use it as a context manager, sync or
    async (``with`` / ``async with``), or through the ``openai_server`` pytest fixture.

    Example::

        with OpenAITestServer([text_answer("Hel", "lo")]) as server:
            model = OpenAIModel("test-model", base_url=server.base_url, api_key="test")
            ...
            assert server.requests[0].messages[-1]["content"] == "hi"
    """

    def __init__(self, answers: Iterable[Answer] = ()) -> None:
        self._lock = threading.Lock()
        self._answers: list[Answer] = list(answers)
        self._served = 0
        self._requests: list[RecordedRequest] = []
        self._hits: list[tuple[str, str]] = []
        self._open_streams = 0
        self._started_streams = 0
        self._streams_changed = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self._server: Any = None
        self._started = threading.Event()
        self._startup_error: BaseException | None = None
        self._port = 0

    # -- the script ---------------------------------------------------------------------------

    def add(self, *answers: Answer) -> None:
        """Append answers to the script."""
        with self._lock:
            self._answers.extend(answers)

    @property
    def remaining(self) -> int:
        """How many scripted answers have not been served yet."""
        with self._lock:
            return len(self._answers) - self._served

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every chat request received so far, in order."""
        with self._lock:
            return list(self._requests)

    @property
    def hits(self) -> list[tuple[str, str]]:
        """``(method, path)`` of every HTTP request received, on any path, chat or not (a
        redirect target checks it stayed empty)."""
        with self._lock:
            return list(self._hits)

    @property
    def base_url(self) -> str:
        """The URL to give a client as ``base_url`` (``http://127.0.0.1:PORT/v1``)."""
        if not self._port:
            raise RuntimeError("the test server is not running; use it as a context manager")
        return f"http://127.0.0.1:{self._port}/v1"

    @property
    def open_streams(self) -> int:
        """How many streamed answers are being sent right now."""
        with self._lock:
            return self._open_streams

    def wait_for_streams_started(self, count: int = 1, timeout: float = 5.0) -> bool:
        """Block until ``count`` streamed answers have begun since the server started (the
        moment a client is mid-stream); ``False`` when ``timeout`` seconds pass first."""
        deadline = time.monotonic() + timeout
        with self._streams_changed:
            while self._started_streams < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._streams_changed.wait(left)
            return True

    async def streams_started(self, count: int = 1, timeout: float = 5.0) -> bool:
        """:meth:`wait_for_streams_started` for async code (waits in a worker thread)."""
        return await anyio.to_thread.run_sync(self.wait_for_streams_started, count, timeout)

    def wait_for_streams_closed(self, timeout: float = 5.0) -> bool:
        """Block until no streamed answer is open (a client that went away counts as closed);
        ``False`` when ``timeout`` seconds pass first."""
        deadline = time.monotonic() + timeout
        with self._streams_changed:
            while self._open_streams:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._streams_changed.wait(left)
            return True

    async def streams_closed(self, timeout: float = 5.0) -> bool:
        """:meth:`wait_for_streams_closed` for async code (waits in a worker thread)."""
        return await anyio.to_thread.run_sync(self.wait_for_streams_closed, timeout)

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        """Start serving in a background thread; returns once the server accepts requests."""
        if self._thread is not None:
            raise RuntimeError("this test server is already running")
        import uvicorn

        self._started.clear()
        self._startup_error = None
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Accepted connections inherit this: small SSE writes go out at once instead of waiting
        # for the client's delayed ACK (~40 ms a request otherwise).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        self._port = sock.getsockname()[1]
        config = uvicorn.Config(
            self._app,
            interface="asgi3",
            lifespan="on",
            log_level=logging.CRITICAL,
            access_log=False,
            timeout_graceful_shutdown=2,
        )
        server = _server_class()(config)
        self._server = server

        def run() -> None:
            try:
                asyncio.run(server.serve(sockets=[sock]))
            except BaseException as error:  # reported to start(), which raises it
                self._startup_error = error
                self._started.set()
            finally:
                sock.close()

        self._thread = threading.Thread(target=run, name="openai-test-server", daemon=True)
        self._thread.start()
        if not self._started.wait(_START_TIMEOUT) or self._startup_error is not None:
            self.stop()
            raise RuntimeError(
                f"the OpenAI test server did not start within {_START_TIMEOUT} s"
            ) from self._startup_error

    def stop(self) -> None:
        """Stop serving and wait for the background thread to end."""
        thread, self._thread = self._thread, None
        if self._server is not None:
            self._server.request_exit()
        if thread is not None:
            thread.join(timeout=10)
        self._port = 0

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        await anyio.to_thread.run_sync(self.start)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await anyio.to_thread.run_sync(self.stop)

    # -- the ASGI application (runs on the server's own event loop) ----------------------------

    async def _app(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        method, path = scope["method"], scope["path"]
        with self._lock:
            self._hits.append((method, path))
        body = await _read_body(receive)
        if method != "POST" or path not in _CHAT_PATHS:
            await _send_json(send, 404, _error_body(f"no route {method} {path}", "not_found"))
            return
        try:
            parsed: JsonValue = json.loads(body or b"null")
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            await _send_json(send, 400, _error_body("the body is not a JSON object", "bad_json"))
            return
        headers = {
            key.decode("latin-1").lower(): value.decode("latin-1")
            for key, value in scope["headers"]
        }
        recorded = RecordedRequest(method=method, path=path, headers=headers, body=parsed)
        answer = self._next_answer(recorded)
        if isinstance(answer, str):  # the script could not answer: say why, without a retry
            await _send_json(send, 400, _error_body(answer, "script_error"))
            return
        if isinstance(answer, ErrorAnswer):
            await _send_json(
                send,
                answer.status,
                _error_body(answer.message, answer.type, answer.code),
                answer.headers,
            )
            return
        if isinstance(answer, RedirectAnswer):
            body = answer.body.encode()
            headers = {"location": answer.location}
            await _send_raw(send, answer.status, body, headers, b"text/plain; charset=utf-8")
            return
        if isinstance(answer, HtmlAnswer):
            body = answer.html.encode()
            await _send_raw(send, answer.status, body, {}, b"text/html; charset=utf-8")
            return
        model = recorded.model or "test-model"
        if recorded.stream:
            usage_asked = _include_usage(recorded)
            await self._stream(send, receive, answer, model, usage_asked)
        else:
            await self._whole(send, receive, answer, model)

    async def _lifespan(self, receive: _Receive, send: _Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
                self._started.set()
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return

    def _next_answer(self, recorded: RecordedRequest) -> ScriptedAnswer | str:
        """The answer for ``recorded``, or why there is none."""
        with self._lock:
            self._requests.append(recorded)
            number, length = len(self._requests), len(self._answers)
            if self._served >= length:
                return (
                    f"the OpenAI test server's script is exhausted: request #{number} arrived "
                    f"and all {length} scripted answer(s) were served; add answers with "
                    "server.add(...)"
                )
            answer = self._answers[self._served]
            self._served += 1
        if not callable(answer):  # a scripted answer; else a function of the request
            return answer
        try:
            return answer(recorded)
        except Exception as error:
            return (
                f"the OpenAI test server's answer function for request #{number} raised "
                f"{type(error).__name__}: {error}"
            )

    async def _whole(
        self, send: _Send, receive: _Receive, answer: ScriptedAnswer, model: str
    ) -> None:
        if isinstance(answer, CutStream):
            raise _ScriptedCut("scripted: connection dropped before the answer")
        if isinstance(answer, MalformedChunk):
            await _send_raw(send, 200, b'{"id": "chatcmpl-test", "choices": [', {})
            return
        if isinstance(answer, StreamError):
            body = _error_body(answer.message, answer.type)
            await _send_json(send, 500, body)
            return
        if isinstance(answer, StalledStream):
            await _wait_for_disconnect(receive)
            return
        if isinstance(answer, EndlessStream | HugeLine | TrickleStream):
            await _send_start(send, 200, b"application/json")
            await _until_disconnect(
                receive, partial(self._hostile_body, send, answer, model, False)
            )
            return
        if isinstance(answer, BadUsage):
            usage = _bad_usage(answer)
            message = {"role": "assistant", "content": "".join(answer.pieces)}
            choice: dict[str, JsonValue] = {"index": 0, "message": message, "finish_reason": "stop"}
            body = {"id": "chatcmpl-test", "object": "chat.completion", "created": 0}
            await _send_json(
                send, 200, {**body, "model": model, "choices": [choice], "usage": usage}
            )
            return
        assert not isinstance(answer, ErrorAnswer | RedirectAnswer | HtmlAnswer)
        message: dict[str, JsonValue] = {"role": "assistant", "content": None}
        if isinstance(answer, TextAnswer):
            message["content"] = "".join(answer.pieces)
            finish, usage = answer.finish_reason, answer.usage
        else:
            message["content"] = answer.text
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments_json},
                }
                for call in answer.calls
            ]
            finish, usage = "tool_calls", answer.usage
        await _send_json(
            send,
            200,
            {
                "id": "chatcmpl-test",
                "object": "chat.completion",
                "created": 0,
                "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": _usage(usage),
            },
        )

    async def _stream(
        self,
        send: _Send,
        receive: _Receive,
        answer: ScriptedAnswer,
        model: str,
        usage_asked: bool,
    ) -> None:
        with self._streams_changed:
            self._open_streams += 1
            self._started_streams += 1
            self._streams_changed.notify_all()
        try:
            await _send_start(send, 200, b"text/event-stream")
            if isinstance(answer, EndlessStream | HugeLine | TrickleStream):
                await _until_disconnect(
                    receive, partial(self._hostile_body, send, answer, model, usage_asked)
                )
                return
            for chunk in _chunks(answer, model, usage_asked):
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            if isinstance(answer, CutStream):
                raise _ScriptedCut("scripted: connection dropped mid-stream")
            if isinstance(answer, StalledStream):
                await _wait_for_disconnect(receive)
                return
            if isinstance(answer, MalformedChunk):
                bad = b'data: {"id": "chatcmpl-test", "choices": [{"delta": \n\n'
                await send({"type": "http.response.body", "body": bad, "more_body": True})
            if isinstance(answer, StreamError):
                error = {"error": {"message": answer.message, "type": answer.type, "code": None}}
                event = b"data: " + json.dumps(error).encode() + b"\n\n"
                await send({"type": "http.response.body", "body": event, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            with self._streams_changed:
                self._open_streams -= 1
                self._streams_changed.notify_all()

    async def _hostile_body(
        self,
        send: _Send,
        answer: EndlessStream | HugeLine | TrickleStream,
        model: str,
        usage_asked: bool,
        gone: anyio.Event,
    ) -> None:
        """Send the body of a hostile answer, then end it; bounded by the answer's limits, and
        stopped before its next write once the client has gone (``gone``)."""

        async def body(data: bytes) -> None:
            if gone.is_set():  # uvicorn drops writes to a lost connection without waiting
                raise _ClientGone
            await send({"type": "http.response.body", "body": data, "more_body": True})

        if isinstance(answer, EndlessStream):
            await body(_event(model, {"role": "assistant", "content": ""}))
            event = _event(model, {"content": answer.piece})
            sent = 0
            with anyio.move_on_after(answer.max_seconds):
                while sent < answer.max_bytes:
                    await body(event)
                    sent += len(event)
                    # A write to a closed connection does not wait: let the watcher see it.
                    await anyio.lowlevel.checkpoint()
        elif isinstance(answer, HugeLine):
            head = b'data: {"id": "chatcmpl-test", "choices": [{"delta": {"content": "'
            await body(head)
            piece = b"x" * 65536
            left = answer.size - len(head)
            with anyio.move_on_after(answer.max_seconds):
                while left > 0:
                    await body(piece[:left])
                    left -= len(piece)
                    await anyio.lowlevel.checkpoint()
        else:
            data = b"".join(_chunks(answer.answer, model, usage_asked))
            for start in range(0, len(data), answer.step):
                await body(data[start : start + answer.step])
                await anyio.sleep(answer.interval)
        await send({"type": "http.response.body", "body": b"", "more_body": False})


class _ClientGone(Exception):
    """The client of a hostile answer disconnected: its writer stops."""


async def _until_disconnect(
    receive: _Receive, work: Callable[[anyio.Event], Awaitable[None]]
) -> None:
    """Await ``work(gone)``, giving up as soon as the client disconnects: the watcher sets
    ``gone`` (which ``work`` checks before each write) and cancels it."""
    gone = anyio.Event()
    async with anyio.create_task_group() as tg:

        async def watch() -> None:
            await _wait_for_disconnect(receive)
            gone.set()
            tg.cancel_scope.cancel()

        tg.start_soon(watch)
        # OSError: the client went away while a write was under way
        with contextlib.suppress(OSError, _ClientGone):
            await work(gone)
        tg.cancel_scope.cancel()


def _bad_usage(answer: BadUsage) -> JsonValue:
    if answer.field == "usage":
        return answer.value
    usage: dict[str, JsonValue] = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    usage[answer.field] = answer.value
    return usage


def _include_usage(recorded: RecordedRequest) -> bool:
    options = recorded.body.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True


def _usage(usage: Usage) -> dict[str, JsonValue]:
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
    }


def _event(model: str, delta: dict[str, JsonValue], finish: str | None = None) -> bytes:
    chunk: dict[str, JsonValue] = {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def _split(text: str, pieces: int) -> list[str]:
    size = max(1, -(-len(text) // pieces))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _chunks(answer: ScriptedAnswer, model: str, usage_asked: bool) -> Iterator[bytes]:
    """The SSE chunks of ``answer``; failures yield only the chunks before their failure."""
    yield _event(model, {"role": "assistant", "content": ""})
    if isinstance(answer, BadUsage):
        for piece in answer.pieces:
            yield _event(model, {"content": piece})
        yield _event(model, {}, "stop")
        chunk: dict[str, JsonValue] = {
            "id": "chatcmpl-test",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [],
            "usage": _bad_usage(answer),
        }
        yield b"data: " + json.dumps(chunk).encode() + b"\n\n"
        yield b"data: [DONE]\n\n"
        return
    if isinstance(answer, TextAnswer | CutStream | MalformedChunk | StreamError | StalledStream):
        for piece in answer.pieces:
            yield _event(model, {"content": piece})
        if not isinstance(answer, TextAnswer):
            return
        finish, usage = answer.finish_reason, answer.usage
    else:
        assert isinstance(answer, ToolCallsAnswer)
        if answer.text:
            yield _event(model, {"content": answer.text})
        for index, call in enumerate(answer.calls):
            yield _event(
                model,
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": ""},
                        }
                    ]
                },
            )
            for piece in _split(call.arguments_json, answer.argument_pieces):
                yield _event(
                    model,
                    {"tool_calls": [{"index": index, "function": {"arguments": piece}}]},
                )
        finish, usage = "tool_calls", answer.usage
    yield _event(model, {}, finish)
    if usage_asked:
        chunk = {
            "id": "chatcmpl-test",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [],
            "usage": _usage(usage),
        }
        yield b"data: " + json.dumps(chunk).encode() + b"\n\n"
    yield b"data: [DONE]\n\n"


def _error_body(message: str, type_: str, code: str | None = None) -> dict[str, JsonValue]:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


async def _read_body(receive: _Receive) -> bytes:
    parts: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        parts.append(cast(bytes, message.get("body", b"")))
        if not message.get("more_body", False):
            break
    return b"".join(parts)


async def _wait_for_disconnect(receive: _Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _send_json(
    send: _Send,
    status: int,
    body: dict[str, JsonValue],
    headers: Mapping[str, str] | None = None,
) -> None:
    await _send_raw(send, status, json.dumps(body).encode(), headers or {})


async def _send_start(send: _Send, status: int, content_type: bytes) -> None:
    headers = [(b"content-type", content_type), (b"cache-control", b"no-cache")]
    await send({"type": "http.response.start", "status": status, "headers": headers})


async def _send_raw(
    send: _Send,
    status: int,
    body: bytes,
    headers: Mapping[str, str],
    content_type: bytes = b"application/json",
) -> None:
    raw = [(b"content-type", content_type)]
    raw.extend((k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items())
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body, "more_body": False})
