"""E2B's control plane (its API), as far as the SDK uses it for sandboxes.

Written from E2B's API handlers (``e2b-dev/infra``, ``packages/api``): the same validation
(timeouts, templates), the same statuses and the same messages.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Mapping
from typing import Any, cast

from pai.sandbox_e2b.testing._asgi import (
    Receive,
    Send,
    json_object,
    read_body,
    send_empty,
    send_error,
    send_json,
)
from pai.sandbox_e2b.testing._state import EmulatedRequest, Emulation

#: The message E2B's API answers a missing or wrong ``X-API-KEY`` with.
INVALID_API_KEY = "Invalid API key, please visit https://e2b.dev/docs/api-key for more information."


def not_found(sandbox_id: str) -> str:
    return f"Sandbox \"{sandbox_id}\" doesn't exist or you don't have access to it"


class ControlPlane:
    """The control plane's routes (the caller has matched one of them)."""

    def __init__(self, emulation: Emulation) -> None:
        self.emulation = emulation

    async def __call__(
        self,
        route: str,
        sandbox_id: str | None,
        method: str,
        path: str,
        headers: Mapping[str, str],
        query: dict[str, list[str]],
        receive: Receive,
        send: Send,
    ) -> None:
        body = await read_body(receive)
        try:
            logged = json_object(body)
        except ValueError:
            logged = None
        self.emulation.record(EmulatedRequest(method, path, sandbox_id, query, logged))
        if headers.get("x-api-key") != self.emulation.settings.api_key:
            await send_error(send, 401, INVALID_API_KEY)
            return
        try:
            payload: object = json.loads(body) if body else {}
        except ValueError as error:
            await send_error(send, 400, f"Error when parsing request: {error}")
            return
        if not isinstance(payload, dict):
            await send_error(send, 400, "Error when parsing request: the body is not an object")
            return
        fields = cast("dict[str, Any]", payload)
        if route == "sandboxes.create":
            await self._create(fields, send)
        elif route == "sandboxes.list":
            await self._list(query, send)
        elif route == "sandboxes.get":
            await self._get(cast("str", sandbox_id), send)
        elif route == "sandboxes.connect":
            await self._connect(cast("str", sandbox_id), fields, send)
        elif route == "sandboxes.timeout":
            await self._timeout(cast("str", sandbox_id), fields, send)
        elif route == "sandboxes.pause":
            await self._pause(cast("str", sandbox_id), send)
        elif route == "sandboxes.kill":
            if self.emulation.remove(cast("str", sandbox_id)):
                await send_empty(send, 204)
            else:
                await send_error(send, 404, not_found(cast("str", sandbox_id)))

    def _timeout_problem(self, timeout: object, *, at_least_one: bool) -> str | None:
        """What E2B's API says of a requested ``timeout`` (``None``: it is fine)."""
        if isinstance(timeout, bool) or not isinstance(timeout, int):
            return f"Error when parsing request: timeout must be an integer, got {timeout!r}"
        if at_least_one and timeout <= 0:
            return "Timeout must be greater than 0"
        hours = self.emulation.settings.max_timeout // 3600
        if timeout > self.emulation.settings.max_timeout:
            return f"Timeout cannot be greater than {hours} hours"
        return None

    async def _create(self, payload: dict[str, Any], send: Send) -> None:
        settings = self.emulation.settings
        template = payload.get("templateID")
        if not isinstance(template, str) or not template:
            await send_error(send, 400, "Error when parsing request: templateID is required")
            return
        if template not in settings.templates:
            await send_error(send, 404, f"template '{template}' not found")
            return
        timeout = payload.get("timeout", settings.default_timeout)
        problem = self._timeout_problem(timeout, at_least_one=True)
        if problem is not None:
            await send_error(send, 400, problem)
            return
        metadata: object = payload.get("metadata") or {}
        env_vars: object = payload.get("envVars") or {}
        if not _strings(metadata) or not _strings(env_vars):
            await send_error(
                send, 400, "Error when parsing request: metadata and envVars map strings to strings"
            )
            return
        sandbox = self.emulation.create(
            template,
            cast("int", timeout),
            cast("dict[str, str]", metadata),
            cast("dict[str, str]", env_vars),
            payload.get("allow_internet_access"),
        )
        await send_json(send, 201, sandbox.created())

    async def _get(self, sandbox_id: str, send: Send) -> None:
        sandbox = self.emulation.get(sandbox_id, running=False)
        if sandbox is None:
            await send_error(send, 404, not_found(sandbox_id))
        else:
            await send_json(send, 200, {**sandbox.listed(), **sandbox.created()})

    async def _connect(self, sandbox_id: str, payload: dict[str, Any], send: Send) -> None:
        timeout = payload.get("timeout", 0)
        problem = self._timeout_problem(timeout, at_least_one=False)
        if problem is not None:
            await send_error(send, 400, problem)
            return
        seconds = cast("int", timeout)
        sandbox = self.emulation.get(sandbox_id, running=False)
        if sandbox is None:
            await send_error(send, 404, not_found(sandbox_id))
        elif sandbox.state == "paused":
            self.emulation.resume(sandbox, seconds)
            await send_json(send, 201, sandbox.created())
        else:
            self.emulation.extend(sandbox, seconds, allow_shorter=False)
            await send_json(send, 200, sandbox.created())

    async def _timeout(self, sandbox_id: str, payload: dict[str, Any], send: Send) -> None:
        timeout = payload.get("timeout")
        if isinstance(timeout, bool) or not isinstance(timeout, int):
            await send_error(
                send,
                400,
                f"Error when parsing request: timeout must be an integer, got {timeout!r}",
            )
            return
        sandbox = self.emulation.get(sandbox_id, running=True)
        if sandbox is None:  # a paused sandbox is a snapshot, not a sandbox, to this route
            await send_error(send, 404, not_found(sandbox_id))
            return
        self.emulation.extend(sandbox, max(0, timeout), allow_shorter=True)
        self.emulation.expire_due()
        await send_empty(send, 204)

    async def _pause(self, sandbox_id: str, send: Send) -> None:
        paused = self.emulation.pause(sandbox_id)
        if paused is None:
            await send_error(send, 404, not_found(sandbox_id))
        elif not paused:
            await send_error(
                send,
                409,
                f"Error pausing sandbox - sandbox '{sandbox_id}' is already paused",
            )
        else:
            await send_empty(send, 204)

    async def _list(self, query: dict[str, list[str]], send: Send) -> None:
        wanted: dict[str, str] = {}
        if query.get("metadata"):
            # The SDK quotes each key and value, then url-encodes the pairs into one parameter.
            wanted = {
                urllib.parse.unquote(k): urllib.parse.unquote(v)
                for k, v in urllib.parse.parse_qsl(query["metadata"][0], keep_blank_values=True)
            }
        states = set(",".join(query.get("state", [])).split(",")) - {""}
        try:
            limit = int((query.get("limit") or ["100"])[0])
            start = int((query.get("nextToken") or ["0"])[0] or 0)
        except ValueError:
            await send_error(
                send, 400, "Error when parsing request: limit and nextToken are numbers"
            )
            return
        self.emulation.expire_due()
        with self.emulation.lock:
            everything = sorted(self.emulation.sandboxes.values(), key=lambda s: s.created_seq)
        matching = [
            s
            for s in everything
            if all(s.metadata.get(k) == v for k, v in wanted.items())
            and (not states or s.state in states)
        ]
        page = matching[start : start + limit]
        extra: list[tuple[bytes, bytes]] = []
        if start + limit < len(matching):
            extra.append((b"x-next-token", str(start + limit).encode()))
        await send_json(send, 200, [s.listed() for s in page], extra)


def _strings(value: object) -> bool:
    if not isinstance(value, dict):
        return False
    mapping = cast("dict[object, object]", value)
    return all(isinstance(k, str) and isinstance(v, str) for k, v in mapping.items())
