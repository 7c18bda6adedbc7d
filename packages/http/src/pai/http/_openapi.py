"""The OpenAPI 3.1 document served at ``/openapi.json``: every route, its parameters and the
shapes of its answers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

_ERROR: dict[str, Any] = {
    "description": "An error: what was wrong, and what to do",
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "properties": {
                    "error": {
                        "type": "object",
                        "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
                        "required": ["code", "message"],
                    }
                },
            }
        }
    },
}
_SSE: dict[str, Any] = {
    "description": "A stream of server-sent events",
    "content": {"text/event-stream": {}},
}
_JSON: dict[str, Any] = {"description": "OK", "content": {"application/json": {}}}


def _path(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}


_LAST_EVENT_ID: dict[str, Any] = {
    "name": "Last-Event-ID",
    "in": "header",
    "required": False,
    "schema": {"type": "string"},
    "description": "The id of the last event received: the stream resumes after it",
}


def _op(
    summary: str, ok: dict[str, Any], *params: dict[str, Any], body: str | None = None
) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "summary": summary,
        "parameters": list(params),
        "responses": {"200": ok, "401": _ERROR, "403": _ERROR, "404": _ERROR},
    }
    if body is not None:
        operation["requestBody"] = {
            "required": True,
            "description": body,
            "content": {"application/json": {"schema": {"type": "object"}}},
        }
        operation["responses"].update({"409": _ERROR, "413": _ERROR, "422": _ERROR, "429": _ERROR})
    return operation


def openapi_document(agents: Sequence[str]) -> dict[str, Any]:
    """The document, with the app's agent ids as the values ``{agent}`` takes."""
    agent = {**_path("agent"), "schema": {"type": "string", "enum": list(agents)}}
    thread = _path("thread_id")
    run = _path("run_id")
    return {
        "openapi": "3.1.0",
        "info": {"title": "PAI app", "version": "1"},
        "paths": {
            "/healthz": {"get": {"summary": "The process answers", "responses": {"200": _JSON}}},
            "/readyz": {
                "get": {
                    "summary": "The storage answers: ready to serve",
                    "responses": {"200": _JSON, "503": _ERROR},
                }
            },
            "/openapi.json": {"get": {"summary": "This document", "responses": {"200": _JSON}}},
            "/agents": {"get": _op("The app's agents and the commands each exposes", _JSON)},
            "/agents/{agent}/ag-ui": {
                "post": _op(
                    "Run the agent: AG-UI RunAgentInput in, AG-UI events out",
                    _SSE,
                    agent,
                    body="An AG-UI RunAgentInput; threadId is the thread",
                )
            },
            "/agents/{agent}/chat": {
                "post": _op(
                    "Run the agent: the AI SDK UI message stream (useChat)",
                    _SSE,
                    agent,
                    body="useChat's body: {id, messages, trigger}; id is the thread",
                )
            },
            "/agents/{agent}/chat/{thread_id}/stream": {
                "get": _op(
                    "Resume the thread's live /chat run (204 when none)",
                    _SSE,
                    agent,
                    thread,
                    _LAST_EVENT_ID,
                )
            },
            "/threads": {"get": _op("The caller's threads", _JSON)},
            "/threads/{thread_id}": {
                "get": _op("One thread, with its live run if any", _JSON, thread),
                "delete": _op(
                    "Delete the thread, cancel its work, dispose its instances",
                    {"description": "Deleted"},
                    thread,
                ),
            },
            "/threads/{thread_id}/messages": {
                "get": _op("The thread's stored messages", _JSON, thread)
            },
            "/threads/{thread_id}/commands/{name}": {
                "post": _op(
                    "Run a command the app exposes",
                    _JSON,
                    thread,
                    _path("name"),
                    body="The command's input",
                )
            },
            "/threads/{thread_id}/runs/{run_id}/events": {
                "get": _op(
                    "A run's events, from Last-Event-ID on", _SSE, thread, run, _LAST_EVENT_ID
                )
            },
            "/threads/{thread_id}/runs/{run_id}/cancel": {
                "post": _op("Cancel the run (steps it completed stay)", _JSON, thread, run)
            },
        },
    }


__all__ = ["openapi_document"]
