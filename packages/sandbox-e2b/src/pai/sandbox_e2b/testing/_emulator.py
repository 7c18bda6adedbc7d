"""The offline E2B emulator: E2B's control plane and envd on 127.0.0.1, for tests.

A TEST DOUBLE, NOT ISOLATION. Each sandbox is a temporary folder on this machine (its root),
and its processes are ordinary processes of the user running the emulator, in Linux namespaces
of the sandbox's own (user, mount, PID and, unless it may reach the internet, network; see
:mod:`._machine`) with the host's ``/usr``, ``/bin``, ``/lib*``, ``/etc`` and ``/opt`` bound
read-only (where the host lets them be), ``/dev`` bound as it is, and each process's address
space bounded to 512 MiB. That makes ``/workspace``, ``/tmp`` and the home folders the
sandbox's own and lets the sandbox's end kill everything it ran, but it protects the host from
nothing a hostile command could do: never point it at untrusted code.

Served on one port (``url``), used both as ``api_url`` and as ``sandbox_url``:

- control plane (:mod:`._api`, header ``X-API-KEY``): ``POST /v2/sandboxes``, ``GET
  /v2/sandboxes`` (metadata filter, state filter, ``limit``/``nextToken`` pagination with
  ``x-next-token``), ``GET /sandboxes/{id}``, ``POST /v2/sandboxes/{id}/connect`` (resumes a
  paused sandbox), ``POST /sandboxes/{id}/timeout``, ``POST /sandboxes/{id}/pause``,
  ``DELETE /sandboxes/{id}``;
- envd (:mod:`._envd`), multiplexed by the ``E2b-Sandbox-Id`` header (a sandbox that is gone
  answers 502 "... was not found", as E2B's proxy does): ``/process.Process`` (``Start``,
  ``SendInput``, ``CloseStdin``, ``SendSignal``, ``List``), ``/filesystem.Filesystem``
  (``Stat``, ``ListDir``, ``MakeDir``, ``Remove``, ``Move``), ``GET``/``POST /files`` and
  ``GET /health``;
- faults armed through :attr:`E2BEmulator.faults` (:mod:`._faults`) answer first.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import socket
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

from packaging.version import InvalidVersion, Version

from pai.sandbox_e2b._errors import E2BEmulatorUnavailableError
from pai.sandbox_e2b.testing._api import ControlPlane
from pai.sandbox_e2b.testing._asgi import (
    Receive,
    Scope,
    Send,
    json_object,
    query_of,
    read_body,
    send_error,
)
from pai.sandbox_e2b.testing._envd import FilesEndpoint, services
from pai.sandbox_e2b.testing._faults import ENVD_ROUTES, EmulatorFaults, route_of
from pai.sandbox_e2b.testing._machine import namespaces_problem, remove_tree, write_support
from pai.sandbox_e2b.testing._state import (
    EmulatedRequest,
    EmulatedSandbox,
    Emulation,
    Settings,
    now,
)

#: The envd version the emulator reports by default: the newest envd release in E2B's
#: sources (``packages/envd/pkg/version.go`` of ``e2b-dev/infra``).
DEFAULT_ENVD_VERSION = "0.6.13"

#: The longest lifetime E2B's Hobby plan allows (seconds); Pro allows 86,400.
HOBBY_MAX_TIMEOUT = 3600

_HOME_PREFIX = "pai-e2b-"


def _make_home() -> Path:
    """A folder for this emulator's sandboxes, named for this process (see :func:`_sweep`)."""
    return Path(tempfile.mkdtemp(prefix=f"{_HOME_PREFIX}{os.getpid()}-"))


def _sweep() -> None:
    """Delete the sandbox folders of emulators whose process died without stopping them."""
    for entry in Path(tempfile.gettempdir()).glob(f"{_HOME_PREFIX}*-*"):
        pid = entry.name[len(_HOME_PREFIX) :].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid() or not entry.is_dir():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            with contextlib.suppress(OSError):
                remove_tree(entry)
        except OSError:  # alive, someone else's
            continue


async def _faulted(
    emulation: Emulation,
    scope: Scope,
    route: str,
    sandbox_id: str | None,
    receive: Receive,
    send: Send,
) -> bool:
    """Apply the faults armed for this request: wait the delay, and answer instead of
    handling it when a failure is armed (then ``True``)."""
    delay, answer = emulation.faults.consume(route, sandbox_id)
    if delay:
        await asyncio.sleep(delay)
    if answer is None:
        return False
    # The body is read first: a client still sending it would see a broken connection, not
    # the answer.
    body = await read_body(receive)
    logged: dict[str, object] | None = None
    if route not in ENVD_ROUTES:
        with contextlib.suppress(ValueError):
            logged = json_object(body)
    emulation.record(
        EmulatedRequest(scope["method"], scope["path"], sandbox_id, query_of(scope), logged)
    )
    await send(
        {"type": "http.response.start", "status": answer.status, "headers": list(answer.headers)}
    )
    await send({"type": "http.response.body", "body": answer.body})
    return True


def _app(emulation: Emulation) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    process_app, filesystem_app = services(emulation)
    control_plane = ControlPlane(emulation)
    files = FilesEndpoint(emulation)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # uvicorn runs it with lifespan="off"
            return
        method: str = scope["method"]
        path: str = scope["path"]
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        routed = route_of(method, path)
        if routed is None:
            await send_error(send, 404, f"{method} {path} is not emulated")
            return
        route, sandbox_id = routed
        if route in ENVD_ROUTES:
            sandbox_id = headers.get("e2b-sandbox-id", "")
        if await _faulted(emulation, scope, route, sandbox_id, receive, send):
            return
        if route not in ENVD_ROUTES:
            query = query_of(scope)
            await control_plane(route, sandbox_id, method, path, headers, query, receive, send)
            return
        sandbox_id = sandbox_id or ""
        query = query_of(scope)
        emulation.record(EmulatedRequest(method, path, sandbox_id, query, None))
        sandbox = emulation.get(sandbox_id, running=True)
        if sandbox is None or emulation.take_not_found(sandbox_id):
            # What E2B's proxy answers for a sandbox that is gone (not a Connect error).
            await send_error(send, 502, f"The sandbox {sandbox_id} was not found")
            return
        if route == "envd.process":
            await process_app(scope, receive, send)
        elif route == "envd.filesystem":
            await filesystem_app(scope, receive, send)
        elif route == "envd.health":  # envd answers it without a token
            await files(sandbox, method, path, headers, query, receive, send)
        elif headers.get("x-access-token") != sandbox.access_token:
            await send_error(send, 401, "invalid or missing X-Access-Token")
        else:
            await files(sandbox, method, path, headers, query, receive, send)

    return app


# -- the server ------------------------------------------------------------------------------------


def _finish_tasks(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what still runs on the server's loop (streams of commands a stop cut off, pipe
    drains) and let it finish, as ``asyncio.run`` does, so nothing is left to complain that
    its loop closed under it."""
    pending = asyncio.all_tasks(loop)
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    loop.run_until_complete(loop.shutdown_asyncgens())


class E2BEmulator:
    """An E2B control plane and envd on 127.0.0.1, on a free port, for tests. A TEST DOUBLE, NOT
    ISOLATION: see the module documentation and the package README.

    Use it as a context manager (``with`` or ``async with``); it serves from a background thread
    with its own event loop, so the code under test can use it from any event loop or none.
    :attr:`env` holds the ``E2B_*`` variables that point the ``e2b`` SDK (and the ``e2b``
    provider) at it.

    Example::

        with E2BEmulator() as emulator:
            provider = E2BSandboxProvider(
                api_key=emulator.api_key, api_url=emulator.url, sandbox_url=emulator.url
            )

    The recovery paths of a provider are exercised with :meth:`expire`, :meth:`pause` and
    :meth:`remove`, and E2B's failures with :attr:`faults`; :meth:`sandboxes` shows what
    exists and :meth:`requests` what was asked.

    It is as strict as E2B where it can be: a ``timeout`` of 0 or less, or beyond
    ``max_timeout``, is refused as E2B's API refuses it; a template not in ``templates`` is
    not found; a lifetime never passes ``max_timeout`` from the sandbox's start; envd's answers
    (their statuses, messages and entry fields) are those of ``envd_version``.

    Args:
        api_key: the only key it accepts (a random ``e2b_emulator_...`` one by default).
        default_timeout: the lifetime (seconds) of a sandbox created without a ``timeout``
            (E2B's API uses 15; the SDK always sends one).
        max_timeout: the plan's longest lifetime (seconds, whole hours): 3,600 by default, the
            Hobby plan's; 86,400 is the Pro plan's.
        templates: the template names (or ids) that exist; any other is not found.
        envd_version: the envd version sandboxes report (the SDK picks features by it), by
            default ``0.6.13``, the newest release in E2B's sources. Up to 0.6.13 envd marks
            no entry with ``is_symlink`` (a link's ``type`` is its target's); a newer version
            makes the emulator send it, as the SDK's protocol describes.
    """

    def __init__(
        self,
        *,
        api_key: str | None = None,
        default_timeout: int = 15,
        max_timeout: int = HOBBY_MAX_TIMEOUT,
        templates: Iterable[str] = ("base",),
        envd_version: str = DEFAULT_ENVD_VERSION,
    ) -> None:
        self.api_key: str = api_key or "e2b_emulator_" + secrets.token_hex(12)
        """The only API key the emulator accepts."""
        self.faults: EmulatorFaults = EmulatorFaults()
        """The faults to inject (see :class:`~pai.sandbox_e2b.testing.EmulatorFaults`)."""
        settings = Settings(
            api_key=self.api_key,
            default_timeout=_whole_seconds("default_timeout", default_timeout),
            max_timeout=_max_timeout(max_timeout),
            templates=_templates(templates),
            envd_version=_envd_version(envd_version),
        )
        if settings.default_timeout > settings.max_timeout:
            raise ValueError(
                f"default_timeout ({settings.default_timeout}) is beyond max_timeout "
                f"({settings.max_timeout}); E2B would refuse every sandbox made with it"
            )
        self._emulation = Emulation(settings, self.faults)
        self._thread: threading.Thread | None = None
        self._server: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._port = 0

    @property
    def envd_version(self) -> str:
        """The envd version every sandbox reports."""
        return self._emulation.settings.envd_version

    @property
    def max_timeout(self) -> int:
        """The longest lifetime (seconds) the emulated plan allows."""
        return self._emulation.settings.max_timeout

    # -- lifecycle --

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``: both the API URL and the sandbox (envd) URL."""
        if not self._port:
            raise RuntimeError("the E2B emulator is not running; use it in a `with` block")
        return f"http://127.0.0.1:{self._port}"

    @property
    def env(self) -> dict[str, str]:
        """``E2B_API_KEY``, ``E2B_API_URL`` and ``E2B_SANDBOX_URL`` for this emulator."""
        return {"E2B_API_KEY": self.api_key, "E2B_API_URL": self.url, "E2B_SANDBOX_URL": self.url}

    def start(self) -> E2BEmulator:
        """Serve (idempotent); returns ``self``. Raises
        :class:`~pai.sandbox_e2b.E2BEmulatorUnavailableError` where commands cannot run."""
        if self._thread is not None:
            return self
        problem = namespaces_problem()
        if problem is not None:
            raise E2BEmulatorUnavailableError(
                f"the E2B emulator cannot run commands here: {problem}. It runs on Linux hosts "
                "that allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1"
                "; on Ubuntu 24.04 also kernel.apparmor_restrict_unprivileged_userns=0)"
            )
        try:
            import uvicorn
        except ImportError:
            raise E2BEmulatorUnavailableError(
                "the E2B emulator needs uvicorn: pip install 'pai-sandbox-e2b[testing]'"
            ) from None

        _sweep()
        self._emulation.home = _make_home()
        write_support(self._emulation.support)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self._port = sock.getsockname()[1]
        config = uvicorn.Config(
            _app(self._emulation),
            log_level="warning",
            http="h11",
            lifespan="off",
            access_log=False,
            timeout_keep_alive=30,
            # A client that stopped reading a stream must not keep the emulator from stopping.
            timeout_graceful_shutdown=3,
        )
        server = uvicorn.Server(config)
        self._server = server
        started = threading.Event()

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)

            async def main() -> None:
                expiry = asyncio.create_task(self._expire_loop())
                started.set()
                try:
                    await server.serve(sockets=[sock])
                finally:
                    expiry.cancel()

            try:
                loop.run_until_complete(main())
            finally:
                try:
                    _finish_tasks(loop)
                finally:
                    loop.close()

        self._thread = threading.Thread(target=serve, name="pai-e2b-emulator", daemon=True)
        self._thread.start()
        started.wait(10)
        deadline = time.monotonic() + 10
        while not server.started and time.monotonic() < deadline and self._thread.is_alive():
            time.sleep(0.005)
        if not server.started:
            self.stop()
            raise E2BEmulatorUnavailableError("the E2B emulator's server did not start")
        return self

    async def _expire_loop(self) -> None:
        while True:
            await asyncio.sleep(0.1)
            await asyncio.to_thread(self._emulation.expire_due)

    def stop(self) -> None:
        """Kill every sandbox's processes, stop serving and delete the sandboxes' files."""
        self._emulation.kill_everything()  # their streams end, so serving stops promptly
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(15)
        self._emulation.shutdown()
        self._thread = None
        self._server = None
        self._port = 0

    def __enter__(self) -> E2BEmulator:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    async def __aenter__(self) -> E2BEmulator:
        import anyio.to_thread

        return await anyio.to_thread.run_sync(self.start)

    async def __aexit__(self, *exc_info: object) -> None:
        import anyio.to_thread

        await anyio.to_thread.run_sync(self.stop)

    # -- controls --

    def sandboxes(self) -> list[EmulatedSandbox]:
        """Every sandbox the emulator holds (running and paused), oldest first."""
        self._emulation.expire_due()
        with self._emulation.lock:
            held = sorted(self._emulation.sandboxes.values(), key=lambda s: s.created_seq)
        return [
            EmulatedSandbox(
                s.sandbox_id,
                s.template,
                dict(s.metadata),
                s.state,
                s.end_at,
                s.root,
                s.allow_internet_access,
            )
            for s in held
        ]

    def find(self, **metadata: str) -> list[EmulatedSandbox]:
        """The sandboxes whose metadata has every given key and value."""
        return [
            s for s in self.sandboxes() if all(s.metadata.get(k) == v for k, v in metadata.items())
        ]

    def expire(self, sandbox_id: str) -> None:
        """End the sandbox's lifetime now, as its timeout would: its processes are killed and
        its files deleted; E2B then answers "not found" for it. Unlike a fault
        (:attr:`faults`), this changes the sandbox itself, not the answers to some requests."""
        with self._emulation.lock:
            sandbox = self._emulation.sandboxes.get(sandbox_id)
        if sandbox is None:
            raise KeyError(f"no sandbox {sandbox_id!r} in the emulator")
        sandbox.end_at = now() - timedelta(seconds=1)
        self._emulation.expire_due()

    def pause(self, sandbox_id: str) -> None:
        """Pause the sandbox (its running commands end, its files stay); envd then answers
        "not found" until a connect resumes it. Unlike a fault (:attr:`faults`), this changes
        the sandbox itself, not the answers to some requests."""
        if self._emulation.pause(sandbox_id) is None:
            raise KeyError(f"no sandbox {sandbox_id!r} in the emulator")

    def remove(self, sandbox_id: str) -> None:
        """Kill the sandbox as ``DELETE /sandboxes/{id}`` would, behind the back of whoever
        uses it (a sandbox vanishing): the API then answers 404 and envd "not found". Unlike a
        fault (:attr:`faults`), the sandbox is really gone."""
        if not self._emulation.remove(sandbox_id):
            raise KeyError(f"no sandbox {sandbox_id!r} in the emulator")

    def answer_not_found(self, sandbox_id: str, times: int = 1) -> None:
        """Make envd's next ``times`` requests for this (live) sandbox answer 502 "... was not
        found", as E2B's proxy intermittently does; the sandbox itself stays as it is. It is a
        fault on every envd route at once; ``faults.fail(route, 502, message="The sandbox
        was not found", sandbox_id=...)`` does the same for one route."""
        if times < 1:
            raise ValueError(f"times must be at least 1, got {times!r}")
        with self._emulation.lock:
            if sandbox_id not in self._emulation.sandboxes:
                raise KeyError(f"no sandbox {sandbox_id!r} in the emulator")
            self._emulation.not_found[sandbox_id] = times

    def requests(self, sandbox_id: str | None = None) -> list[EmulatedRequest]:
        """The requests received so far (the last 10,000), oldest first; only those for
        ``sandbox_id`` when it is given."""
        with self._emulation.lock:
            held = list(self._emulation.requests)
        return [r for r in held if sandbox_id is None or r.sandbox_id == sandbox_id]

    def set_timeout(self, sandbox_id: str, seconds: float) -> None:
        """Set the sandbox's remaining lifetime."""
        with self._emulation.lock:
            sandbox = self._emulation.sandboxes.get(sandbox_id)
        if sandbox is None:
            raise KeyError(f"no sandbox {sandbox_id!r} in the emulator")
        sandbox.end_at = now() + timedelta(seconds=seconds)

    def __repr__(self) -> str:
        where = self.url if self._port else "stopped"
        return f"E2BEmulator({where})"


def _whole_seconds(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a whole number of seconds, 1 or more, got {value!r}")
    return value


def _max_timeout(value: object) -> int:
    seconds = _whole_seconds("max_timeout", value)
    if seconds % 3600:
        raise ValueError(
            f"max_timeout must be whole hours in seconds (3600 for Hobby, 86400 for Pro), as "
            f"E2B's plans are, got {value!r}"
        )
    return seconds


def _templates(value: Iterable[object]) -> tuple[str, ...]:
    if isinstance(value, str):
        raise ValueError(f"templates must be a collection of names, got the string {value!r}")
    names = tuple(value)
    if not names or not all(isinstance(name, str) and name for name in names):
        raise ValueError(f"templates must hold at least one non-empty name, got {names!r}")
    return cast("tuple[str, ...]", names)


def _envd_version(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"envd_version must be a version string such as '0.6.13', got {value!r}")
    try:
        Version(value)
    except InvalidVersion:
        raise ValueError(
            f"envd_version must be a version string such as '0.6.13', got {value!r}"
        ) from None
    return value
