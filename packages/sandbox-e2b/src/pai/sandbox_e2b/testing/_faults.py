"""Fault injection for the E2B emulator: E2B's failure modes, on demand, from a test.

A test arms a fault on a route (``faults.fail("sandboxes.create", 429)``); the next matching
requests are answered the way E2B's API, its sandbox proxy or envd answer that status, and the
request is not performed. ``faults.delay(...)`` holds requests before they are handled. Both
are thread-safe: tests arm them from their own thread while the emulator serves from its own.
"""

from __future__ import annotations

import difflib
import http
import json
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass

#: The control-plane routes (E2B's API) a fault can target.
CONTROL_PLANE_ROUTES = (
    "sandboxes.create",
    "sandboxes.list",
    "sandboxes.get",
    "sandboxes.connect",
    "sandboxes.timeout",
    "sandboxes.pause",
    "sandboxes.kill",
)

#: The routes of a sandbox's envd (reached through E2B's sandbox proxy) a fault can target:
#: every process RPC, every filesystem RPC, ``GET``/``POST /files`` and ``GET /health``.
ENVD_ROUTES = ("envd.process", "envd.filesystem", "envd.files", "envd.health")

ROUTES = CONTROL_PLANE_ROUTES + ENVD_ROUTES
"""Every route name :class:`EmulatorFaults` accepts."""

#: The port envd listens on inside a sandbox (the proxy names it in its 502 answer).
_ENVD_PORT = 49983

#: The concurrency limit of E2B's Hobby plan, named by the API's 429 on create.
_HOBBY_CONCURRENCY = 20

#: The connection limit the proxy's 429 names (E2B's is a per-deployment setting).
_PROXY_CONNECTION_LIMIT = 100


@dataclass(frozen=True, slots=True)
class FaultAnswer:
    """A response the emulator sends instead of performing a request."""

    status: int
    body: bytes
    headers: tuple[tuple[bytes, bytes], ...]


@dataclass(slots=True)
class _Rule:
    route: str
    sandbox_id: str | None
    left: int | None  # None: until cleared
    status: int = 0
    message: str | None = None
    seconds: float = 0.0

    def matches(self, route: str, sandbox_id: str | None) -> bool:
        return self.route == route and (self.sandbox_id is None or self.sandbox_id == sandbox_id)

    def spend(self) -> bool:
        """Use the rule once; whether it is now used up."""
        if self.left is None:
            return False
        self.left -= 1
        return self.left <= 0


class EmulatorFaults:
    """The faults armed on an :class:`~pai.sandbox_e2b.testing.E2BEmulator` (its ``faults``).

    Rules are used in the order they were armed; each request uses at most one failure and one
    delay (the delay first). Route names are those of :data:`ROUTES`: ``"sandboxes.create"``,
    ``"sandboxes.list"``, ``"sandboxes.get"``, ``"sandboxes.connect"``,
    ``"sandboxes.timeout"``, ``"sandboxes.pause"``, ``"sandboxes.kill"`` (E2B's API),
    ``"envd.process"``, ``"envd.filesystem"``, ``"envd.files"`` and ``"envd.health"`` (a
    sandbox's envd, behind E2B's proxy).

    Example::

        emulator.faults.fail("sandboxes.create", 429, times=4)  # the SDK retries 429 3 times
        emulator.faults.fail("envd.process", 502, sandbox_id=sandbox.sandbox_id)
        emulator.faults.delay("envd.files", 2.0, times=None)    # every upload and download
        emulator.faults.clear()
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failures: list[_Rule] = []
        self._delays: list[_Rule] = []

    def fail(
        self,
        route: str,
        status: int,
        *,
        times: int | None = 1,
        message: str | None = None,
        sandbox_id: str | None = None,
    ) -> None:
        """Answer the next ``times`` requests to ``route`` (only those for ``sandbox_id`` when
        given; ``times=None``: every one until :meth:`clear`) with HTTP ``status`` and the body
        E2B sends for it; the request is not performed.

        Bodies: the API's JSON ``{"code", "message"}`` (429 on create and connect names the
        plan's concurrency limit; 429 elsewhere is the rate limiter's, with ``Retry-After:
        1``); on envd routes the sandbox proxy's JSON answers (429 too many connections, 409
        still transitioning, 502 port not open) and envd's ``{"code", "message"}`` for other
        statuses. ``message`` replaces the message (e.g. ``"The sandbox was not found"`` makes
        a 502 mean the sandbox is gone, as :meth:`E2BEmulator.answer_not_found` does).

        Raises :class:`ValueError` for an unknown route, a status that is not an HTTP error
        (400 to 599) or a ``times`` below 1.
        """
        _check_route(route)
        _check_sandbox_id(sandbox_id)
        _check_status(status)
        left = _check_times(times)
        _check_message(message)
        with self._lock:
            self._failures.append(_Rule(route, sandbox_id, left, status=status, message=message))

    def delay(
        self,
        route: str,
        seconds: float,
        *,
        times: int | None = 1,
        sandbox_id: str | None = None,
    ) -> None:
        """Hold the next ``times`` requests to ``route`` (only those for ``sandbox_id`` when
        given; ``times=None``: every one until :meth:`clear`) for ``seconds`` before handling
        them, as a slow network or a busy node would.

        Raises :class:`ValueError` for an unknown route, a negative or non-finite ``seconds``
        or a ``times`` below 1.
        """
        _check_route(route)
        _check_sandbox_id(sandbox_id)
        _check_seconds(seconds)
        left = _check_times(times)
        with self._lock:
            self._delays.append(_Rule(route, sandbox_id, left, seconds=float(seconds)))

    def clear(self) -> None:
        """Disarm every fault and delay."""
        with self._lock:
            self._failures.clear()
            self._delays.clear()

    def consume(self, route: str, sandbox_id: str | None) -> tuple[float, FaultAnswer | None]:
        """What the emulator does with each request: the seconds to wait first, and the answer
        to send instead of performing it (``None``: perform it). Each rule used is counted."""
        with self._lock:
            delay = _take(self._delays, route, sandbox_id)
            failure = _take(self._failures, route, sandbox_id)
        answer = _answer(failure, sandbox_id) if failure is not None else None
        return (delay.seconds if delay is not None else 0.0), answer

    def __repr__(self) -> str:
        with self._lock:
            return f"EmulatorFaults(failures={len(self._failures)}, delays={len(self._delays)})"


def _take(rules: list[_Rule], route: str, sandbox_id: str | None) -> _Rule | None:
    for index, rule in enumerate(rules):
        if rule.matches(route, sandbox_id):
            if rule.spend():
                del rules[index]
            return rule
    return None


def _check_route(route: object) -> None:
    if route in ROUTES:
        return
    close = difflib.get_close_matches(str(route), ROUTES, n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ValueError(f"unknown route {route!r}{hint} (routes: {', '.join(ROUTES)})")


def _check_status(status: object) -> None:
    if isinstance(status, bool) or not isinstance(status, int) or not 400 <= status <= 599:
        raise ValueError(
            f"status must be an HTTP error status (400 to 599), got {status!r}; a fault "
            "answers instead of the emulator, so a success status has no meaning here"
        )


def _check_message(message: object) -> None:
    if message is not None and not isinstance(message, str):
        raise ValueError(f"message must be a string or None, got {message!r}")


def _check_seconds(seconds: object) -> None:
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, int | float)
        or not math.isfinite(seconds)
        or seconds < 0
    ):
        raise ValueError(f"seconds must be a finite number, 0 or more, got {seconds!r}")


def _check_sandbox_id(sandbox_id: object) -> None:
    if sandbox_id is not None and not isinstance(sandbox_id, str):
        raise ValueError(f"sandbox_id must be a sandbox id (a string) or None, got {sandbox_id!r}")


def _check_times(times: object) -> int | None:
    if times is None:
        return None
    if isinstance(times, bool) or not isinstance(times, int) or times < 1:
        raise ValueError(f"times must be a whole number, 1 or more (or None), got {times!r}")
    return times


# -- the answers -------------------------------------------------------------------------------


def _answer(rule: _Rule, sandbox_id: str | None) -> FaultAnswer:
    """What E2B answers on ``rule.route`` with ``rule.status``."""
    if rule.route in ENVD_ROUTES:
        return _envd_answer(rule.status, rule.message, sandbox_id or "")
    return _api_answer(rule.route, rule.status, rule.message, sandbox_id)


def _json_answer(
    status: int, payload: dict[str, object], extra: Sequence[tuple[bytes, bytes]] = ()
) -> FaultAnswer:
    body = json.dumps(payload).encode()
    return FaultAnswer(
        status,
        body,
        (
            (b"content-type", b"application/json; charset=utf-8"),
            (b"content-length", str(len(body)).encode()),
            *extra,
        ),
    )


def _reason(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return f"HTTP {status}"


def _api_answer(
    route: str, status: int, message: str | None, sandbox_id: str | None
) -> FaultAnswer:
    """The API's error body (``{"code", "message"}``) with the message E2B's API sends."""
    extra: list[tuple[bytes, bytes]] = []
    named = f'"{sandbox_id}"' if sandbox_id else "the sandbox"
    if status == 401:
        default = "Invalid API key, please visit https://e2b.dev/docs/api-key for more information."
    elif status == 404 and sandbox_id:
        default = f"Sandbox {named} doesn't exist or you don't have access to it"
    elif status == 409 and route == "sandboxes.pause":
        default = f"Sandbox '{sandbox_id}' cannot be paused while in 'killing' state"
    elif status == 409 and sandbox_id:
        default = f"Sandbox {named} is being killed"
    elif status == 429 and route in ("sandboxes.create", "sandboxes.connect"):
        default = (
            "you have reached the maximum number of concurrent E2B sandboxes "
            f"({_HOBBY_CONCURRENCY}). If you need more, please visit "
            "'https://e2b.dev/docs/billing'"
        )
    elif status == 429:
        default = "Rate limit exceeded"
        extra.append((b"retry-after", b"1"))
    elif status == 503:
        default = "Service is unavailable"
    else:
        default = _reason(status)
    return _json_answer(status, {"code": status, "message": message or default}, extra)


#: What E2B's sandbox proxy answers itself, by status: its default message and its extra fields.
_PROXY_ANSWERS: dict[int, tuple[str, dict[str, object]]] = {
    429: (
        "The sandbox has too many concurrent incoming connections "
        f"(limit: {_PROXY_CONNECTION_LIMIT})",
        {"connectionLimit": _PROXY_CONNECTION_LIMIT},
    ),
    409: ("The sandbox is still transitioning. Try again in a moment.", {}),
    502: ("The sandbox is running but port is not open", {"port": _ENVD_PORT}),
}


def _envd_answer(status: int, message: str | None, sandbox_id: str) -> FaultAnswer:
    """The sandbox proxy's answers for the statuses it sends; envd's ``{"code", "message"}``
    for the others."""
    proxy = _PROXY_ANSWERS.get(status)
    if proxy is None:
        return _json_answer(status, {"code": status, "message": message or _reason(status)})
    default, extra = proxy
    body = {"sandboxId": sandbox_id, "message": message or default, "code": status, **extra}
    return _json_answer(status, body)


def route_of(method: str, path: str) -> tuple[str, str | None] | None:
    """The route name of a request and the sandbox id its path names (control plane only;
    envd's comes from a header), or ``None`` for a path no route covers."""
    if path.startswith("/process.Process/"):
        return "envd.process", None
    if path.startswith("/filesystem.Filesystem/"):
        return "envd.filesystem", None
    if path == "/files":
        return "envd.files", None
    if path == "/health":
        return "envd.health", None
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["v2"]:
        parts = parts[1:]
    if parts[:1] != ["sandboxes"]:
        return None
    if len(parts) == 1:
        if method == "POST":
            return "sandboxes.create", None
        if method == "GET":
            return "sandboxes.list", None
        return None
    sandbox_id = parts[1]
    if len(parts) == 2:
        if method == "GET":
            return "sandboxes.get", sandbox_id
        if method == "DELETE":
            return "sandboxes.kill", sandbox_id
        return None
    if len(parts) == 3 and method == "POST":
        action = {
            "connect": "sandboxes.connect",
            "timeout": "sandboxes.timeout",
            "pause": "sandboxes.pause",
        }.get(parts[2])
        if action is not None:
            return action, sandbox_id
    return None
