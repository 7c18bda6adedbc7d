"""``OpenAIModel``: the core's streaming model protocol on the Chat Completions API."""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import AsyncIterator, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, cast

import anyio
from pydantic import JsonValue

from pai.core import (
    AssistantMessage,
    ModelConfigurationError,
    ModelError,
    ModelRequest,
    ModelResponse,
    ModelResponseError,
    RetryPolicy,
    Usage,
)
from pai.core.ext import (
    ModelEvent,
    UsageReported,
    call_with_retries,
    collect_response,
    stream_with_retries,
)
from pai.model_openai._chat import (
    DEFAULT_MAX_ANSWER_BYTES,
    DEFAULT_MAX_ANSWER_CHARS,
    DEFAULT_MAX_TOOL_CALLS,
    ChunkReader,
    chat_messages,
    chat_tools,
)
from pai.model_openai._errors import clip_server_text, map_openai_error

if TYPE_CHECKING:
    from openai import AsyncOpenAI, AsyncStream
    from openai.types.chat import ChatCompletionChunk

__all__ = ["OpenAIModel"]

API_KEY_ENV = "OPENAI_API_KEY"
BASE_URL_ENV = "OPENAI_BASE_URL"


class OpenAIModel:
    """A model on the OpenAI Chat Completions API, through the official ``openai`` SDK.

    Works with OpenAI and with any OpenAI-compatible server (vLLM, Ollama, llama.cpp's server,
    LM Studio, gateways) through ``base_url``. Every call streams (with
    ``stream_options={"include_usage": True}``); :meth:`request` collects the stream.

    - ``api_key``: the key; else the variable named by ``api_key_env``; else ``OPENAI_API_KEY``.
      No key at all is a :class:`~pai.core.ModelConfigurationError` naming the variable.
    - ``base_url``: else ``OPENAI_BASE_URL``, else OpenAI's API (as the SDK decides).
    - ``timeout``: seconds for the whole answer, from sending the request to its last byte,
      however the server paces its bytes; ``connect_timeout`` for connecting.
    - ``max_answer_bytes``, ``max_answer_chars``, ``max_tool_calls``: caps on one answer's
      bytes (lines of its event stream at most 4 MiB), its characters of text and tool-call
      arguments, and its tool calls; past one, the answer is a
      :class:`~pai.core.ModelResponseError` naming the option.
    - Redirects are never followed: a 3xx is a :class:`ModelRedirectError` (a
      :class:`~pai.core.ModelConnectionError`) naming both URLs.
    - ``retry``: the :class:`~pai.core.RetryPolicy` for retryable failures (the SDK's own
      retries are off); ``max_retries=n`` is a shortcut for ``RetryPolicy(max_attempts=n + 1)``.
    - ``temperature``, ``max_tokens``, ``parallel_tool_calls``, ``extra_body``: sent with every
      request when set.

    Errors are the core's :class:`~pai.core.ModelError` tree (see ``pai.model_openai._errors``
    for the mapping). Runs on asyncio and on trio.

    Example::

        model = OpenAIModel("gpt-4.1-mini")                      # OPENAI_API_KEY
        local = OpenAIModel("qwen2.5:7b", base_url="http://127.0.0.1:11434/v1", api_key="ollama")
        agent = define_agent(name="coder", model=model, instructions="...")
    """

    def __init__(
        self,
        name: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str | None = None,
        timeout: float = 120.0,
        connect_timeout: float = 10.0,
        max_retries: int | None = None,
        retry: RetryPolicy | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        parallel_tool_calls: bool | None = None,
        extra_body: Mapping[str, JsonValue] | None = None,
        default_headers: Mapping[str, str] | None = None,
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
        max_answer_chars: int = DEFAULT_MAX_ANSWER_CHARS,
        max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS,
    ) -> None:
        if not isinstance(name, str) or not name.strip():  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ModelConfigurationError(
                f"OpenAIModel(name={name!r}): the model name must be a non-empty str, "
                "e.g. 'gpt-4.1-mini'"
            )
        for option, value in (("timeout", timeout), ("connect_timeout", connect_timeout)):
            if not _positive(value):
                raise ModelConfigurationError(
                    f"OpenAIModel({option}={value!r}): {option} must be a number of seconds > 0"
                )
        for option, limit in (
            ("max_answer_bytes", max_answer_bytes),
            ("max_answer_chars", max_answer_chars),
            ("max_tool_calls", max_tool_calls),
        ):
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:  # pyright: ignore[reportUnnecessaryIsInstance]
                raise ModelConfigurationError(
                    f"OpenAIModel({option}={limit!r}): {option} must be an int >= 1"
                )
        if max_retries is not None and retry is not None:
            raise ModelConfigurationError(
                "OpenAIModel: pass either max_retries or retry, not both "
                "(max_retries=n is RetryPolicy(max_attempts=n + 1))"
            )
        if max_retries is not None:
            if not isinstance(max_retries, int) or max_retries < 0:  # pyright: ignore[reportUnnecessaryIsInstance]
                raise ModelConfigurationError(
                    f"OpenAIModel(max_retries={max_retries!r}): max_retries must be an int >= 0"
                )
            retry = RetryPolicy(max_attempts=max_retries + 1)
        self.name = name
        self.retry: RetryPolicy = retry if retry is not None else RetryPolicy()
        self._api_key = _resolve_api_key(name, api_key, api_key_env)
        self._base_url = base_url
        self._timeout = (float(timeout), float(connect_timeout))
        self._default_headers = dict(default_headers or {})
        self._temperature = temperature
        self._max_tokens = max_tokens
        self._parallel_tool_calls = parallel_tool_calls
        self._extra_body = dict(extra_body or {})
        self._max_answer_bytes = max_answer_bytes
        self._max_answer_chars = max_answer_chars
        self._max_tool_calls = max_tool_calls
        self._client_entry: tuple[object, AsyncOpenAI] | None = None
        self._usage = Usage()
        import openai  # the SDK is imported when a model is built, never by the plugin

        del openai

    def __repr__(self) -> str:
        where = f", base_url={self._base_url!r}" if self._base_url else ""
        return f"OpenAIModel({self.name!r}{where})"

    @property
    def base_url(self) -> str:
        """The API root requests go to (``base_url``, else ``OPENAI_BASE_URL``, else OpenAI)."""
        if self._base_url:
            return self._base_url
        return os.environ.get(BASE_URL_ENV) or "https://api.openai.com/v1"

    @property
    def usage(self) -> Usage:
        """Tokens used by every answer this model object has given so far."""
        return self._usage

    # -- the model protocol -------------------------------------------------------------------

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream the answer to ``request`` as :data:`~pai.core.ext.ModelEvent` values.

        A failure before the first event is retried as :attr:`retry` says; once events have
        been yielded a failure is raised (the caller already holds part of the answer).
        """
        return stream_with_retries(lambda: self._stream_once(request), self.retry)

    async def respond(self, request: ModelRequest) -> ModelResponse:
        """The whole answer to ``request`` with its usage and finish reason; a failure at any
        point of the stream is retried as :attr:`retry` says."""
        return await call_with_retries(lambda: _collect(self._stream_once(request)), self.retry)

    async def request(self, request: ModelRequest) -> AssistantMessage:
        """The whole answer to ``request`` as the message a thread saves."""
        return (await self.respond(request)).message

    async def aclose(self) -> None:
        """Close the HTTP connections this model holds (it can still be used afterwards)."""
        entry, self._client_entry = self._client_entry, None
        if entry is not None and entry[0] is _current_loop():
            await entry[1].close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- one attempt --------------------------------------------------------------------------

    async def _open(self, request: ModelRequest) -> AsyncStream[ChatCompletionChunk]:
        import openai

        tools = chat_tools(request)
        parallel = self._parallel_tool_calls
        return await self._client().chat.completions.create(
            model=self.name,
            messages=cast("Any", chat_messages(request)),
            stream=True,
            stream_options={"include_usage": True},
            tools=cast("Any", tools) if tools else openai.omit,
            parallel_tool_calls=parallel if tools and parallel is not None else openai.omit,
            temperature=self._temperature if self._temperature is not None else openai.omit,
            max_tokens=self._max_tokens if self._max_tokens is not None else openai.omit,
            extra_body=cast("Any", self._extra_body) or None,
        )

    def _client(self) -> AsyncOpenAI:
        # An HTTP connection pool belongs to one event loop: a model used from another loop
        # (another test, another anyio.run) gets a client of its own.
        loop = _current_loop()
        entry = self._client_entry
        if entry is None or entry[0] is not loop:
            import openai

            from pai.model_openai._http import ServerGuard

            guard = ServerGuard(self.name, self._timeout[0], self._max_answer_bytes)
            client = openai.AsyncOpenAI(
                api_key=self._api_key,
                base_url=self._base_url,
                timeout=openai.Timeout(self._timeout[0], connect=self._timeout[1]),
                max_retries=0,
                default_headers=self._default_headers or None,
                http_client=guard.client(),
            )
            entry = self._client_entry = (loop, client)
        return entry[1]

    async def _stream_once(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        import openai

        reader = ChunkReader(self.name, self._max_answer_chars, self._max_tool_calls)
        # The whole answer, headers and body, is read within the deadline its HTTP request
        # carries: every read and write of its connection waits at most until then (see _http).
        try:
            stream = await self._open(request)
        except ModelError:
            raise
        except (openai.OpenAIError, ValueError) as error:
            raise map_openai_error(error, self.name, api_key=self._api_key) from error
        try:
            async for chunk in stream:
                for event in reader.feed(chunk):
                    yield event
            for event in reader.end():
                if isinstance(event, UsageReported):
                    self._usage = self._usage + event.usage
                yield event
        except ModelError:
            raise
        except (openai.OpenAIError, ValueError) as error:
            raise map_openai_error(error, self.name, api_key=self._api_key) from error
        except RecursionError as error:  # JSON nested deeper than the parser goes
            raise ModelResponseError(
                f"OpenAI model {self.name!r}: a chunk of the answer is JSON nested too deeply "
                f"to read ({clip_server_text(str(error), 200)})",
                model=self.name,
            ) from error
        finally:
            # Closing releases the connection; it must happen even when the caller was cancelled.
            with anyio.CancelScope(shield=True):
                await stream.close()


async def _collect(stream: AsyncIterator[ModelEvent]) -> ModelResponse:
    try:
        return await collect_response(stream)
    finally:
        aclose: Any = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()


def _current_loop() -> object:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        import trio

        return trio.lowlevel.current_trio_token()


def _positive(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


def _resolve_api_key(name: str, api_key: str | None, api_key_env: str | None) -> str:
    if api_key is not None and api_key_env is not None:
        raise ModelConfigurationError(
            f"OpenAIModel({name!r}): pass either api_key or api_key_env, not both"
        )
    if api_key is not None:
        if not api_key:
            raise ModelConfigurationError(
                f"OpenAIModel({name!r}, api_key=''): the API key is empty; pass the key, or a "
                "placeholder such as 'unused' for a local server that needs none"
            )
        return api_key
    if api_key_env is not None:
        from pai.model_openai._plugin import check_api_key_env

        try:
            check_api_key_env(api_key_env)
        except ValueError as error:
            raise ModelConfigurationError(
                f"OpenAIModel({name!r}, api_key_env=...): {error}"
            ) from None
    variable = api_key_env if api_key_env is not None else API_KEY_ENV
    value = os.environ.get(variable)
    if value:
        return value
    state = "is empty" if value is not None else "is not set"
    other = (
        ""
        if api_key_env is not None
        else ", or name another variable with OpenAIModel(api_key_env=...)"
    )
    raise ModelConfigurationError(
        f"no API key for OpenAI model {name!r}: the environment variable {variable} {state}. "
        f"Set {variable}, pass OpenAIModel(api_key=...){other}. A local server that needs no "
        "key still needs a placeholder, e.g. api_key='unused'"
    )
