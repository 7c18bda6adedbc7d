"""The one module that talks to E2B: the ``e2b`` SDK, envd's services and their HTTP clients.

Nothing else in the package imports ``e2b``, ``connectrpc``, ``protobuf`` or ``httpx``; what the
other modules need of them comes from here:

- the control plane (E2B's API): :func:`create_sandbox`, :func:`connect_sandbox`,
  :func:`sandbox_info`, :func:`list_sandboxes`, :func:`kill_sandbox` and :func:`run_command`,
  which :mod:`pai.sandbox_e2b._provider` calls to make, find, list and kill sandboxes;
- one sandbox's envd (its own agent): :class:`Envd`, through which
  :mod:`pai.sandbox_e2b._instance` runs commands (envd's process service, spoken to directly
  with the SDK's connect-rpc client, transport and codec, so output arrives as the bytes the
  command wrote), lists folders (envd's filesystem service, directly too) and moves files (the
  SDK's filesystem calls);
- the SDK's exceptions and types (re-exported), which :mod:`pai.sandbox_e2b._failures` tells
  apart and the provider and instance catch;
- the SDK's exit grace (:data:`SDK_EXIT_GRACE_SECONDS`, see :func:`register_exit_grace`).

What these calls mean for the provider (retries, lifetimes, errors naming the fix) is decided by
the provider and the instance, not here. The offline emulator (:mod:`pai.sandbox_e2b.testing`) is
the other end of these calls and imports envd's message definitions itself.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import posixpath
import time
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import Any, cast

import httpx
from connectrpc.code import Code
from connectrpc.errors import ConnectError
from e2b import (
    AsyncSandbox,
    AsyncSandboxPaginator,
    AuthenticationException,
    CommandExitException,
    EntryInfo,
    FileNotFoundException,
    FileType,
    InvalidArgumentException,
    NotFoundException,
    RateLimitException,
    SandboxException,
    SandboxInfo,
    SandboxNotFoundException,
    SandboxNotRunningException,
    SandboxQuery,
    SandboxUnreachableException,
    TimeoutException,
)
from e2b.api.client_async import get_envd_api
from e2b.connection_config import KEEPALIVE_PING_HEADER, KEEPALIVE_PING_INTERVAL_SEC
from e2b.envd.api import acheck_sandbox_health
from e2b.envd.client_async import as_stream, create_rpc_client, first_event
from e2b.envd.filesystem import filesystem_connect, filesystem_pb
from e2b.envd.process import process_connect, process_pb
from e2b.envd.rpc import ahandle_rpc_exception_with_health
from e2b.envd.utils import authentication_header, timeout_to_ms
from e2b.exceptions import GuestUnresponsiveException, ServiceBusyException
from httpx import HTTPError, TransportError
from packaging.version import Version
from protobuf import Oneof

from pai.sandbox import DirEntry, EntryType, SandboxProviderError

# -- the SDK's exit ----------------------------------------------------------------------------

#: How long the interpreter waits at exit for the SDK's I/O threads (see ``_settle_sdk_threads``).
SDK_EXIT_GRACE_SECONDS = 0.05


def _settle_sdk_threads() -> None:
    """Give the SDK's HTTP I/O threads a moment before the interpreter finalizes.

    The ``e2b`` SDK does its HTTP through ``pyqwest``, whose Rust I/O threads hand each result to
    the event loop from outside Python. One of them can still be inside that hand-over (having
    released the GIL to wake the loop) when the program's last ``await`` returns; if the
    interpreter has started finalizing by the time it takes the GIL back, CPython ends that thread
    and the process aborts with SIGABRT after a successful run. Sleeping here, in an ``atexit``
    hook (before finalization begins), releases the GIL so such a thread finishes first.
    """
    time.sleep(SDK_EXIT_GRACE_SECONDS)


@functools.cache
def register_exit_grace() -> None:
    """Register ``_settle_sdk_threads`` once per process, when a provider is first built."""
    atexit.register(_settle_sdk_threads)


def on_this_machine(url: str) -> bool:
    """Whether ``url`` (an API or sandbox URL, as the SDK's HTTP library reads it) names this
    machine."""
    host = (httpx.URL(url).host or "").lower()
    return host in ("localhost", "::1") or host.startswith("127.")


# -- the control plane (E2B's API) -------------------------------------------------------------
# ``options`` are the SDK's connection options: api_key, api_url, request_timeout, and domain and
# sandbox_url when set.


async def create_sandbox(
    *,
    template: str,
    timeout: int,
    metadata: dict[str, str],
    envs: dict[str, str] | None,
    allow_internet_access: bool,
    options: dict[str, Any],
) -> AsyncSandbox:
    """A new sandbox of ``template``, living ``timeout`` seconds."""
    return await AsyncSandbox.create(
        template=template,
        timeout=timeout,
        metadata=metadata,
        envs=envs,
        allow_internet_access=allow_internet_access,
        **options,
    )


async def connect_sandbox(
    sandbox_id: str, *, timeout: int, options: dict[str, Any]
) -> AsyncSandbox:
    """Connect to a sandbox by id, giving it ``timeout`` seconds (resumes a paused one)."""
    return await AsyncSandbox.connect(sandbox_id, timeout=timeout, **options)


async def sandbox_info(sandbox_id: str, *, options: dict[str, Any]) -> SandboxInfo:
    """What E2B's API says of the sandbox (its ``state`` among the rest)."""
    return await AsyncSandbox.get_info(sandbox_id, **options)


async def kill_sandbox(sandbox_id: str, *, options: dict[str, Any]) -> None:
    """Kill the sandbox."""
    await AsyncSandbox.kill(sandbox_id, **options)


def list_sandboxes(
    metadata: dict[str, str], *, limit: int, options: dict[str, Any]
) -> AsyncSandboxPaginator:
    """The SDK's paginator over the sandboxes whose metadata has ``metadata``: ``has_next``,
    ``next_token``, and ``next_items()`` for the next page."""
    return AsyncSandbox.list(query=SandboxQuery(metadata=metadata), limit=limit, **options)


async def run_command(
    sandbox: AsyncSandbox,
    command: str,
    *,
    user: str,
    timeout: float,
    envs: dict[str, str] | None = None,
) -> None:
    """Run ``command`` through the SDK's own command call (its login shell), as ``user``;
    a non-zero exit raises ``CommandExitException``."""
    await sandbox.commands.run(command, envs=envs, user=user, timeout=timeout)


# -- one sandbox's envd -------------------------------------------------------------------------

#: envd's "not found" for a folder listing, as the SDK's own listing reports it.
_LIST_ERRORS: dict[Code, Callable[[str], Exception]] = {Code.NOT_FOUND: FileNotFoundException}


def listed_type(entry: Any) -> EntryType:
    """The type of one of envd's raw ``EntryInfo`` messages (see
    :func:`pai.sandbox_e2b._instance._is_link`)."""
    if (
        entry.is_symlink
        or entry.has_field("symlink_target")
        or entry.type == filesystem_pb.FileType.SYMLINK
    ):
        return "symlink"
    if entry.type == filesystem_pb.FileType.DIRECTORY:
        return "directory"
    if entry.type == filesystem_pb.FileType.FILE:
        return "file"
    return "other"


def event_payload(response: Any) -> tuple[str, Any] | None:
    """The kind (``"start"``, ``"data"``, ``"end"``, ...) and value of one event of envd's
    process stream, or ``None``."""
    event = getattr(response, "event", None)
    inner = getattr(event, "event", None) if event is not None else None
    return oneof(inner)


def oneof(value: object) -> tuple[str, object] | None:
    """The field chosen in a protobuf ``oneof`` and its value, or ``None``."""
    if isinstance(value, Oneof):
        chosen = cast("Oneof[str, object]", value)
        return str(chosen.field), chosen.value
    return None


def start_pid(response: Any) -> int:
    """The pid in envd's first event of a process stream (its ``start``)."""
    payload = event_payload(response)
    if payload is None or payload[0] != "start":
        raise SandboxProviderError(f"envd did not start the command: {response!r}")
    return int(getattr(payload[1], "pid", 0))


class Envd:
    """One sandbox's envd: its process and filesystem services, spoken to directly with the SDK's
    connect-rpc client, transport and codec, and the SDK's filesystem calls, as ``user``."""

    def __init__(self, sandbox: AsyncSandbox, user: str) -> None:
        self._sandbox = sandbox
        self._user = user
        config = sandbox.connection_config
        # Commands go through envd's process service directly (the SDK's connect-rpc client,
        # transport and codec), so output arrives as the bytes the command wrote.
        self._rpc: Any = create_rpc_client(
            process_connect.ProcessClient, sandbox.envd_api_url, config
        )
        # Folders are listed through envd's filesystem service directly too: the SDK's list
        # drops entries whose type it does not know, and envd up to 0.6.13 gives a dangling
        # link no type.
        self._fs_rpc: Any = create_rpc_client(
            filesystem_connect.FilesystemClient, sandbox.envd_api_url, config
        )
        self._health_api = get_envd_api(config, sandbox.envd_api_url, retry_connect=False)
        # With a user named, the header does not depend on the envd version.
        self._auth: dict[str, str] = authentication_header(Version("0.4.0"), user)
        self._root_auth: dict[str, str] = authentication_header(Version("0.4.0"), "root")

    # -- processes ----------------------------------------------------------------------------

    async def start(
        self,
        cmd: str,
        args: Sequence[str],
        envs: Mapping[str, str],
        *,
        stdin: bool,
        timeout: float | None,
        request_timeout: float,
    ) -> tuple[Any, AsyncGenerator[Any, Any]]:
        """Start ``cmd args`` as the user (envd's deadline ``timeout``), kept alive by pings;
        its first event (waited for up to ``request_timeout``) and the stream of the rest. A
        failure to start is the SDK's exception for it (see :meth:`rpc_error`)."""
        request = process_pb.StartRequest(
            process=process_pb.ProcessConfig(cmd=cmd, envs=dict(envs), args=list(args)),
            stdin=stdin,
        )
        stream = as_stream(
            self._rpc.start(
                request,
                headers={**self._auth, KEEPALIVE_PING_HEADER: str(KEEPALIVE_PING_INTERVAL_SEC)},
                timeout_ms=timeout_to_ms(timeout),
            )
        )
        try:
            first = await first_event(stream, request_timeout)
        except Exception as error:
            with contextlib.suppress(Exception):
                await stream.aclose()
            raise await self.rpc_error(error) from error
        return first, stream

    def start_as_root(
        self, cmd: str, args: Sequence[str], envs: Mapping[str, str], *, timeout: float
    ) -> AsyncGenerator[Any, Any]:
        """Start ``cmd args`` as root (envd's deadline ``timeout``); the stream of its events."""
        request = process_pb.StartRequest(
            process=process_pb.ProcessConfig(cmd=cmd, args=list(args), envs=dict(envs))
        )
        return as_stream(
            self._rpc.start(request, headers=self._root_auth, timeout_ms=timeout_to_ms(timeout))
        )

    async def rpc_error(self, error: BaseException) -> BaseException:
        """The SDK's exception for a failed envd call (the sandbox's health asked when that
        tells a gone sandbox from an unreachable one)."""
        if not isinstance(error, Exception):
            return error
        return cast(
            "BaseException", await ahandle_rpc_exception_with_health(error, self._check_health)
        )

    async def _check_health(self) -> bool | None:
        return await acheck_sandbox_health(self._health_api)

    def _selector(self, pid: int) -> Any:
        return process_pb.ProcessSelector(selector=Oneof("pid", pid))

    async def send_stdin(self, pid: int, data: bytes, *, timeout: float) -> None:
        """Send ``data`` to the process's stdin."""
        await self._rpc.send_input(
            process_pb.SendInputRequest(
                process=self._selector(pid),
                input=process_pb.ProcessInput(input=Oneof("stdin", data)),
            ),
            timeout_ms=timeout_to_ms(timeout),
        )

    async def close_stdin(self, pid: int, *, timeout: float) -> None:
        """Close the process's stdin (it reads end-of-file)."""
        await self._rpc.close_stdin(
            process_pb.CloseStdinRequest(process=self._selector(pid)),
            timeout_ms=timeout_to_ms(timeout),
        )

    async def kill(self, pid: int, *, timeout: float) -> None:
        """envd's SIGKILL of the process (its children, if any, are re-parented)."""
        await self._rpc.send_signal(
            process_pb.SendSignalRequest(
                process=self._selector(pid), signal=process_pb.Signal.SIGKILL
            ),
            timeout_ms=timeout_to_ms(timeout),
        )

    # -- files --------------------------------------------------------------------------------

    async def list_dir(self, path: str, *, timeout: float) -> list[DirEntry]:
        """Every entry of the folder, as envd sends it (an entry of no known type included)."""
        try:
            response = await self._fs_rpc.list_dir(
                filesystem_pb.ListDirRequest(path=path, depth=1),
                timeout_ms=timeout_to_ms(timeout),
                headers=self._auth,
            )
        except Exception as error:
            raise cast(
                "Exception",
                await ahandle_rpc_exception_with_health(error, self._check_health, _LIST_ERRORS),
            ) from error
        entries: list[DirEntry] = []
        for entry in response.entries:
            kind = listed_type(entry)
            size = 0 if kind == "directory" else int(entry.size)
            entries.append(DirEntry(entry.name, posixpath.join(path, entry.name), kind, size))
        return entries

    async def get_info(self, path: str) -> EntryInfo:
        """The entry at ``path`` itself (a link is not followed); ``NotFoundException`` when
        nothing is there."""
        return await self._sandbox.files.get_info(path, user=self._user)

    async def read(self, path: str):  # the SDK's AsyncFileStreamReader
        """The file's content as an async iterator of chunks (an async context manager)."""
        return await self._sandbox.files.read(path, format="stream", user=self._user)

    async def write_files(self, entries: list[Any]) -> None:
        """Write the files (``{"path": ..., "data": ...}``) in one multipart request."""
        await self._sandbox.files.write_files(entries, user=self._user)

    async def remove(self, path: str) -> None:
        """Remove a file, link or folder (always recursive)."""
        await self._sandbox.files.remove(path, user=self._user)

    async def make_dir(self, path: str) -> None:
        """Make a folder (and its parents)."""
        await self._sandbox.files.make_dir(path, user=self._user)

    async def run(self, command: str, *, timeout: float) -> None:
        """Run ``command`` through the SDK's own command call, as the user."""
        await run_command(self._sandbox, command, user=self._user, timeout=timeout)


__all__ = [
    "SDK_EXIT_GRACE_SECONDS",
    "AsyncSandbox",
    "AuthenticationException",
    "CommandExitException",
    "ConnectError",
    "EntryInfo",
    "Envd",
    "FileType",
    "GuestUnresponsiveException",
    "HTTPError",
    "InvalidArgumentException",
    "NotFoundException",
    "RateLimitException",
    "SandboxException",
    "SandboxNotFoundException",
    "SandboxNotRunningException",
    "SandboxUnreachableException",
    "ServiceBusyException",
    "TimeoutException",
    "TransportError",
    "connect_sandbox",
    "create_sandbox",
    "event_payload",
    "kill_sandbox",
    "list_sandboxes",
    "listed_type",
    "on_this_machine",
    "oneof",
    "register_exit_grace",
    "run_command",
    "sandbox_info",
    "start_pid",
]
