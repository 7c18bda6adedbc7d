"""``create_asgi_app``: a Starlette app that serves a ``create_pai(...)`` app.

Every route authenticates first; every error is JSON (``{"error": {"code", "message"}}``) with
no traceback and no host path. A thread of another scope (or agent) is a 404, exactly as an
unknown one.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
import re
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Mapping,
    Sequence,
)
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

import anyio
import pydantic_core
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from pai.core import (
    AdminClient,
    CommandInputError,
    Pai,
    PaiError,
    ThreadExistsError,
    ThreadHandle,
    ThreadNotFoundError,
    UnknownAgentError,
    UnknownCommandError,
)
from pai.core.ext import (
    RunChannel,
    RunInfo,
    ThreadRecord,
    did_you_mean,
    encode_message,
    run_channel_for,
)
from pai.http._agui import AGUI
from pai.http._aisdk import AI_SDK
from pai.http._errors import BadRequestError, HttpError
from pai.http._files import Attachments
from pai.http._limits import HttpLimits
from pai.http._openapi import openapi_document
from pai.http._runs import LiveRuns, safe_text
from pai.http._wire import WireProtocol

_PROTOCOLS: dict[str, WireProtocol] = {AGUI.name: AGUI, AI_SDK.name: AI_SDK}

_log = logging.getLogger("pai.http")

Authenticate = Callable[[Request], object | Awaitable[object]]
"""``authenticate(request) -> identity``: the app's own auth (a bearer token, a session cookie,
a header a proxy sets). Raise :class:`~pai.http.Unauthenticated` (401) or
:class:`~pai.http.Forbidden` (403) to refuse; any other exception is a 500."""

_THREAD_ID = re.compile(r"[\x21-\x7e]{1,200}")


def create_asgi_app(
    pai_app: Pai,
    *,
    authenticate: Authenticate,
    limits: HttpLimits | None = None,
    cors_origins: Sequence[str] = (),
    commands: Mapping[str, Collection[str]] | None = None,
    attachments: Attachments | None = None,
    chat_page: bool = False,
    realtime: RunChannel | None = None,
) -> Starlette:
    """An ASGI app (Starlette) serving ``pai_app``: the AG-UI and AI SDK streams, the thread
        routes, health checks and ``/openapi.json``.

        ``authenticate`` gives each request's identity (what ``pai_app.runtime(agent).admin(...)``
        takes). ``commands`` opts agents' commands in, by agent id (commands run server-side, so
        none is exposed unless named). ``cors_origins`` lists the origins a browser may call from
        (none by default). ``attachments`` keeps files sent with messages and stages them into the
        thread's sandbox (files are refused without it). ``chat_page=True`` serves the chat page at
        ``/`` (``pai serve`` does by default). ``realtime`` is the channel runs' events travel
    through: by default the storage's own when it carries them between processes (PostgreSQL),
    else one of this process (:func:`~pai.core.ext.run_channel_for`); with several workers or
    processes, resuming and cancelling reach a run in any of them only through a shared channel.

        Example::

            app = create_asgi_app(pai, authenticate=lambda request: verify(request.headers))
            # uvicorn module:app
    """
    if not isinstance(pai_app, Pai):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"create_asgi_app() takes a create_pai(...) app, got {pai_app!r}")
    if not callable(authenticate):
        raise TypeError(
            "create_asgi_app(authenticate=...) must be a function taking the request and "
            f"returning the caller's identity, got {authenticate!r}"
        )
    if isinstance(cors_origins, str) or "*" in cors_origins:
        raise ValueError(
            "create_asgi_app(cors_origins=...) must list explicit origins, e.g. "
            f"['https://app.example.com']; got {cors_origins!r}"
        )
    exposed: dict[str, frozenset[str]] = {}
    for agent, names in (commands or {}).items():
        if agent not in pai_app.agent_ids:
            raise ValueError(
                f"create_asgi_app(commands=...) names agent {agent!r}, which the app does not "
                f"have; {did_you_mean(agent, pai_app.agent_ids)}its agents: "
                f"{list(pai_app.agent_ids)}"
            )
        exposed[agent] = frozenset(names)
    limits = limits or HttpLimits()
    owns_channel = realtime is None
    if realtime is None:
        realtime = run_channel_for(
            pai_app.storage,
            retain_finished=limits.retain_finished,
            max_kept_runs=limits.max_kept_runs,
        )
    elif not isinstance(realtime, RunChannel):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(
            f"create_asgi_app(realtime=...) must be a RunChannel (pai.core), got {realtime!r}"
        )
    server = _Server(pai_app, authenticate, limits, exposed, attachments, realtime)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncGenerator[None]:
        async with anyio.create_task_group() as group:
            server.runs.bind(group)
            try:
                yield
            finally:
                server.runs.bind(None)
                group.cancel_scope.cancel()
        if owns_channel:
            with anyio.CancelScope(shield=True):
                await realtime.aclose()

    middleware: list[Middleware] = []
    if cors_origins:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(cors_origins),
                allow_methods=["GET", "POST", "DELETE"],
                allow_headers=["authorization", "content-type", "last-event-id"],
                expose_headers=["x-vercel-ai-ui-message-stream", "x-pai-run-id"],
            )
        )
    routes = server.routes()
    if chat_page:
        from pai.http._page import page_routes

        routes.extend(page_routes())
    return Starlette(
        routes=routes,
        middleware=middleware,
        lifespan=lifespan,
        exception_handlers={HttpError: _http_error, Exception: _internal_error},
    )


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HttpError)
    return _error_response(exc)


async def _internal_error(request: Request, exc: Exception) -> Response:
    _log.exception("%s %s failed", request.method, request.url.path, exc_info=exc)
    return JSONResponse(
        {
            "error": {
                "code": "internal_error",
                "message": "internal error; the server's log has the details",
            }
        },
        status_code=500,
    )


def _error_response(error: HttpError) -> JSONResponse:
    return JSONResponse(
        {"error": {"code": error.code, "message": error.message}},
        status_code=error.status,
        headers=error.headers,
    )


def _not_found(thread_id: str) -> HttpError:
    return HttpError(404, "thread_not_found", f"no thread {thread_id[:200]!r} of yours")


@dataclass(frozen=True, slots=True)
class _Found:
    """A caller's thread: its agent, its record, and the caller's admin client of that agent."""

    agent: str
    record: ThreadRecord
    admin: AdminClient

    @property
    def handle(self) -> ThreadHandle:
        return self.admin.thread(self.record.id)


class _Server:
    def __init__(
        self,
        pai_app: Pai,
        authenticate: Authenticate,
        limits: HttpLimits,
        commands: Mapping[str, frozenset[str]],
        attachments: Attachments | None,
        channel: RunChannel,
    ) -> None:
        self.pai = pai_app
        self.authenticate = authenticate
        self.limits = limits
        self.commands = commands
        self.attachments = attachments
        self.runs = LiveRuns(limits, channel)

    def routes(self) -> list[Route]:
        return [
            Route("/healthz", self.healthz, methods=["GET"]),
            Route("/readyz", self.readyz, methods=["GET"]),
            Route("/openapi.json", self.openapi, methods=["GET"]),
            Route("/agents", self.agents, methods=["GET"]),
            Route("/agents/{agent}/ag-ui", self.run_agui, methods=["POST"]),
            Route("/agents/{agent}/chat", self.run_chat, methods=["POST"]),
            Route("/agents/{agent}/chat/{thread_id}/stream", self.resume_chat, methods=["GET"]),
            Route("/threads", self.list_threads, methods=["GET"]),
            Route("/threads/{thread_id}", self.get_thread, methods=["GET"]),
            Route("/threads/{thread_id}", self.delete_thread, methods=["DELETE"]),
            Route("/threads/{thread_id}/messages", self.messages, methods=["GET"]),
            Route("/threads/{thread_id}/commands/{name}", self.run_command, methods=["POST"]),
            Route("/threads/{thread_id}/runs/{run_id}/events", self.run_events, methods=["GET"]),
            Route("/threads/{thread_id}/runs/{run_id}/cancel", self.cancel_run, methods=["POST"]),
        ]

    # -- identity, agents, threads -------------------------------------------------------------

    async def identity(self, request: Request) -> object:
        try:
            identity = self.authenticate(request)
            if inspect.isawaitable(identity):
                identity = await identity
        except HttpError:
            raise
        except Exception:
            _log.exception("authenticate() failed on %s %s", request.method, request.url.path)
            raise HttpError(
                500, "internal_error", "authentication failed with an internal error"
            ) from None
        return identity

    def agent(self, request: Request) -> str:
        agent = str(request.path_params["agent"])
        if agent not in self.pai.agent_ids:
            raise HttpError(
                404,
                "agent_not_found",
                f"no agent {agent[:100]!r}; {did_you_mean(agent, self.pai.agent_ids)}"
                f"the agents: {list(self.pai.agent_ids)}",
            )
        return agent

    async def find_thread(self, identity: object, thread_id: str) -> _Found | None:
        """The caller's top-level thread ``thread_id``; ``None`` when no thread has that id; a 404
        when one has and it is not the caller's (another scope's, another app's agent, or
        delegated): the same answer as an unknown id.

        One storage read, to learn the thread's agent; the runtime checks again on every
        operation through the handle."""
        if not _THREAD_ID.fullmatch(thread_id):
            raise _not_found(thread_id)
        record = await self.pai.storage.get_thread(thread_id)
        if record is None:
            return None
        if record.agent_name not in self.pai.agent_ids or record.parent_thread_id is not None:
            raise _not_found(thread_id)
        admin = self.pai.runtime(record.agent_name).admin(identity=identity)
        if admin.scope_key != record.scope_key:  # the rule the runtime applies (Threads.get)
            raise _not_found(thread_id)
        return _Found(record.agent_name, record, admin)

    async def caller_thread(self, identity: object, thread_id: str) -> _Found:
        """The caller's top-level thread ``thread_id``; a 404 when there is none."""
        found = await self.find_thread(identity, thread_id)
        if found is None:
            raise _not_found(thread_id)
        return found

    async def body(self, request: Request) -> bytes:
        limit = self.limits.max_body_bytes
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise _too_large(limit)
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise _too_large(limit)
            chunks.append(chunk)
        return b"".join(chunks)

    # -- health and documents ------------------------------------------------------------------

    async def healthz(self, request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(self, request: Request) -> Response:
        try:
            with anyio.fail_after(5):
                await self.pai.storage.get_thread("pai-http-readiness-probe")
        except Exception as error:
            _log.warning("readiness: the storage did not answer: %r", error)
            return JSONResponse(
                {
                    "status": "unavailable",
                    "error": {
                        "code": "storage_unavailable",
                        "message": "the storage did not answer",
                    },
                },
                status_code=503,
            )
        return JSONResponse({"status": "ready", "agents": list(self.pai.agent_ids)})

    async def openapi(self, request: Request) -> Response:
        return JSONResponse(openapi_document(self.pai.agent_ids))

    async def agents(self, request: Request) -> Response:
        await self.identity(request)
        return JSONResponse(
            {
                "agents": [
                    {"id": agent, "commands": sorted(self.commands.get(agent, ()))}
                    for agent in self.pai.agent_ids
                ]
            }
        )

    # -- runs ----------------------------------------------------------------------------------

    async def run_agui(self, request: Request) -> Response:
        return await self.start_run(request, AGUI)

    async def run_chat(self, request: Request) -> Response:
        return await self.start_run(request, AI_SDK)

    async def start_run(self, request: Request, protocol: WireProtocol) -> Response:
        identity = await self.identity(request)
        agent = self.agent(request)
        run_request = protocol.parse(
            await self.body(request),
            max_message_chars=self.limits.max_message_chars,
            max_attachment_bytes=self.limits.max_attachment_bytes,
        )
        thread_id = run_request.thread_id
        if not _THREAD_ID.fullmatch(thread_id):
            raise BadRequestError(
                "the thread id must be 1 to 200 printable ASCII characters without spaces",
                status=422,
                code="invalid_thread_id",
            )
        admin = self.pai.runtime(agent).admin(identity=identity)
        await self.ensure_thread(admin, agent, identity, thread_id)
        text = run_request.text
        if run_request.attachments:
            if self.attachments is None:
                raise HttpError(
                    415,
                    "attachments_not_accepted",
                    "this server does not accept attached files (create_asgi_app(attachments=...))",
                )
            text += await self.attachments.receive(
                scope_key=admin.scope_key, thread_id=thread_id, files=run_request.attachments
            )
        run = await self.runs.start(
            admin=admin, agent=agent, request=run_request, text=text, protocol=protocol
        )
        return self.sse(run, after=0)

    async def ensure_thread(
        self, admin: AdminClient, agent: str, identity: object, thread_id: str
    ) -> None:
        """Create the thread a run names, in the caller's scope, unless it exists already."""
        found = await self.find_thread(identity, thread_id)
        if found is not None:
            if found.agent != agent:
                raise _not_found(thread_id)
            return
        try:
            await admin.create_thread(thread_id=thread_id)
        except ThreadExistsError:
            # Made meanwhile by another request: whoever's it is, run through the checks again.
            found = await self.caller_thread(identity, thread_id)
            if found.agent != agent:
                raise _not_found(thread_id) from None

    def sse(self, run: RunInfo, *, after: int) -> StreamingResponse:
        keepalive = self.limits.keepalive

        async def stream() -> AsyncIterator[bytes]:
            async with aclosing(self.runs.frames(run, after=after, keepalive=keepalive)) as frames:
                async for got in frames:
                    if got is None:
                        yield b": keepalive\n\n"
                    else:
                        yield f"id: {got[0]}\ndata: {got[1]}\n\n".encode()

        headers = {
            "cache-control": "no-cache",
            "x-accel-buffering": "no",
            "x-pai-run-id": run.run_id,
            **_PROTOCOLS[run.protocol].headers,
        }
        return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)

    async def resume_chat(self, request: Request) -> Response:
        identity = await self.identity(request)
        agent = self.agent(request)
        thread_id = str(request.path_params["thread_id"])
        found = await self.caller_thread(identity, thread_id)
        if found.agent != agent:
            raise _not_found(thread_id)
        run = await self.runs.live(thread_id, scope_key=found.admin.scope_key)
        if run is None or run.protocol != AI_SDK.name:
            return Response(status_code=204)
        return self.sse(run, after=_last_event_id(request))

    async def run_events(self, request: Request) -> Response:
        run = await self.caller_run(request)
        return self.sse(run, after=_last_event_id(request))

    async def cancel_run(self, request: Request) -> Response:
        run = await self.caller_run(request)
        await self.runs.cancel(run, "the run was cancelled on request")
        return JSONResponse({"run_id": run.run_id, "finished": run.finished}, status_code=202)

    async def caller_run(self, request: Request) -> RunInfo:
        identity = await self.identity(request)
        thread_id = str(request.path_params["thread_id"])
        found = await self.caller_thread(identity, thread_id)
        run = await self.runs.get(
            str(request.path_params["run_id"]), thread_id=thread_id, scope_key=found.admin.scope_key
        )
        if run is None:
            raise HttpError(
                404,
                "run_not_found",
                "no such run of this thread in this server (finished runs are kept "
                f"{self.limits.retain_finished:g} s)",
            )
        return run

    # -- threads -------------------------------------------------------------------------------

    async def list_threads(self, request: Request) -> Response:
        identity = await self.identity(request)
        # One listing per scope key (one in all, unless the app's runtimes derive different
        # scope keys), holding the threads of every agent of it.
        admins = {
            admin.scope_key: admin
            for admin in (self.pai.runtime(a).admin(identity=identity) for a in self.pai.agent_ids)
        }
        threads = [
            await self.describe(record, scope_key)
            for scope_key, admin in admins.items()
            for record in await admin.list_threads()
            if record.agent_name in self.pai.agent_ids
        ]
        threads.sort(key=lambda t: (t["created_at"], t["id"]))
        return JSONResponse({"threads": threads})

    async def describe(self, record: ThreadRecord, scope_key: str) -> dict[str, Any]:
        live = await self.runs.live(record.id, scope_key=scope_key)
        return {
            "id": record.id,
            "agent": record.agent_name,
            "created_at": record.created_at.isoformat(),
            "live_run_id": live.run_id if live is not None else None,
        }

    async def get_thread(self, request: Request) -> Response:
        identity = await self.identity(request)
        found = await self.caller_thread(identity, str(request.path_params["thread_id"]))
        return JSONResponse(await self.describe(found.record, found.admin.scope_key))

    async def messages(self, request: Request) -> Response:
        identity = await self.identity(request)
        thread_id = str(request.path_params["thread_id"])
        handle = (await self.caller_thread(identity, thread_id)).handle
        encoded = [encode_message(message) for message in await handle.messages()]
        body = (
            b'{"messages":['
            + b",".join(item.encode() if isinstance(item, str) else item for item in encoded)
            + b"]}"
        )
        return Response(body, media_type="application/json")

    async def delete_thread(self, request: Request) -> Response:
        identity = await self.identity(request)
        thread_id = str(request.path_params["thread_id"])
        handle = (await self.caller_thread(identity, thread_id)).handle
        # Shielded: a client that disconnects mid-delete does not leave instances behind.
        with anyio.CancelScope(shield=True):
            await handle.delete()
        return Response(status_code=204)

    async def run_command(self, request: Request) -> Response:
        identity = await self.identity(request)
        thread_id = str(request.path_params["thread_id"])
        name = str(request.path_params["name"])
        found = await self.caller_thread(identity, thread_id)
        agent = found.agent
        allowed = self.commands.get(agent, frozenset())
        if name not in allowed:
            raise HttpError(
                404,
                "command_not_found",
                f"agent {agent!r} exposes no command {name[:100]!r} over HTTP; "
                f"{did_you_mean(name, allowed)}exposed: {sorted(allowed)}",
            )
        raw = await self.body(request)
        try:
            payload: object = json.loads(raw) if raw.strip() else {}
        except ValueError:
            raise BadRequestError(
                "the body is not JSON", status=422, code="invalid_input"
            ) from None
        try:
            result = await found.handle.run_command(name, payload)
        except (CommandInputError, UnknownCommandError) as error:
            raise BadRequestError(safe_text(error), status=422, code="invalid_input") from None
        except (ThreadNotFoundError, UnknownAgentError):
            raise _not_found(thread_id) from None
        except PaiError as error:
            raise HttpError(500, "command_failed", safe_text(error)) from None
        return JSONResponse({"result": pydantic_core.to_jsonable_python(result)})


def _too_large(limit: int) -> HttpError:
    return HttpError(
        413,
        "body_too_large",
        f"the request body is larger than {limit:,} bytes (HttpLimits.max_body_bytes)",
    )


def _last_event_id(request: Request) -> int:
    raw = request.headers.get("last-event-id") or request.query_params.get("last_event_id") or "0"
    if not raw.isdigit() or len(raw) > 12:
        raise BadRequestError(
            f"Last-Event-ID must be the id of an event this server sent (a number), got {raw[:40]!r}",
            code="invalid_last_event_id",
        )
    return int(raw)


__all__ = ["Authenticate", "create_asgi_app"]
