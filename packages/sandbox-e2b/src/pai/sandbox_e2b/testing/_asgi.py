"""The few ASGI helpers the emulator's HTTP answers share."""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import Any, cast

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


async def read_body(receive: Receive) -> bytes:
    """The whole request body."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    return b"".join(chunks)


def json_object(body: bytes) -> dict[str, object] | None:
    """The body as a JSON object (a copy for the request log), or ``None``; raises
    :class:`ValueError` for a body that is not JSON."""
    if not body:
        return None
    loaded: object = json.loads(body)
    return cast("dict[str, object]", loaded) if isinstance(loaded, dict) else None


async def send_json(
    send: Send, status: int, payload: object, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = json.dumps(payload).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                *(extra or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def send_error(send: Send, status: int, message: str) -> None:
    """An error in the shape E2B's API and envd use: ``{"code", "message"}``."""
    await send_json(send, status, {"code": status, "message": message})


async def send_empty(send: Send, status: int) -> None:
    await send({"type": "http.response.start", "status": status, "headers": []})
    await send({"type": "http.response.body", "body": b""})


def query_of(scope: Scope) -> dict[str, list[str]]:
    """The query string's parameters (percent-decoded, as UTF-8)."""
    raw: bytes = scope.get("query_string", b"")
    return urllib.parse.parse_qs(raw.decode("latin-1"), keep_blank_values=True)
