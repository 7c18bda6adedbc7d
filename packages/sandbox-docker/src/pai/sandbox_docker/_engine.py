"""The one module that touches the ``docker`` SDK (untyped): narrow, typed, synchronous calls.

Everything here blocks; the provider runs each call in a worker thread (``anyio.to_thread``).
Every SDK error is translated here, so none escapes the provider: a container that is gone (404
"No such container") becomes :class:`~pai.sandbox.SandboxVanishedError`; one that exists but is
stopped or paused becomes :class:`ContainerStopped` / :class:`ContainerPaused` (the instance starts
or unpauses it: its files are kept); a missing path in an archive call becomes
:class:`PathMissing`; a name taken by another create :class:`NameConflict`; anything else
(including a broken connection) :class:`~pai.sandbox.SandboxProviderError`. Messages have the
engine's host paths (``/var/lib/docker/...``) removed: a sandbox user never learns them.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import logging
import re
import socket
import struct
import threading
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast
from urllib.parse import quote

from pai.sandbox import SandboxProviderError, SandboxVanishedError

_log = logging.getLogger("pai.sandbox_docker")

T = TypeVar("T")

#: Go's ``os.FileMode`` bits in the archive stat header.
MODE_DIR = 1 << 31
MODE_SYMLINK = 1 << 27


class PathMissing(Exception):
    """A path given to an archive call does not exist in the container."""


class PathNotADirectory(Exception):
    """A path given to an archive call goes through something that is not a folder."""


class LinkLoop(Exception):
    """A path given to an archive call has too many levels of symbolic links."""


class ImageMissing(Exception):
    """The image is not present locally and could not be pulled."""


class ContainerStopped(Exception):
    """The container exists but is not running (killed, stopped, or the engine restarted)."""


class ContainerPaused(Exception):
    """The container exists but is paused (``docker pause``)."""


class NameConflict(Exception):
    """Another container already has the name (a concurrent create won the race)."""


class TooLarge(Exception):
    """An archive read stopped early: the file is larger than the caller's limit."""

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size


class HelperTimeout(Exception):
    """A helper exec did not finish by its deadline (its stream was cut off)."""


class HelperFlood(Exception):
    """A helper exec wrote more than its caller's bound (its stream was cut off)."""

    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self.limit = limit


#: Connection pools the SDK keeps (one per URL); see :meth:`Engine._retrying`.
_NUM_POOLS = 128


def _pool_race(error: BaseException) -> bool:
    """The SDK closed a connection pool another thread was using (a transient failure)."""
    text = str(error)
    return (
        type(error).__name__ == "ClosedPoolError"
        or (isinstance(error, AttributeError) and "qsize" in text)
        or "pool is closed" in text.lower()
    )


# Raised by this module on purpose: never translated again.
_PASSED_THROUGH = (
    SandboxProviderError,
    SandboxVanishedError,
    PathMissing,
    PathNotADirectory,
    LinkLoop,
    ImageMissing,
    ContainerStopped,
    ContainerPaused,
    NameConflict,
    TooLarge,
    HelperTimeout,
    HelperFlood,
)

# Absolute host paths of the engine's state (/var/lib/docker/..., a custom data root, containerd
# and runc state): removed from every message, so a sandbox user never learns the host layout.
_HOST_PATH = re.compile(
    r"/(?:[\w.@+-]+/)*(?:docker|containerd|moby|runc|overlay2?|vfs|snapshots?|dockerd)"
    r"(?:/[^\s'\"(),;]*)?"
)


def scrub(text: str) -> str:
    """``text`` with the engine's host paths replaced by ``<engine path>``."""
    return _HOST_PATH.sub("<engine path>", text)


@dataclass(frozen=True, slots=True)
class ContainerSummary:
    """One container as the list call reports it."""

    id: str
    name: str
    labels: Mapping[str, str]
    state: str
    created: float
    image: str


@dataclass(frozen=True, slots=True)
class ContainerSpec:
    """What :meth:`Engine.create_container` creates."""

    name: str
    image: str
    command: Sequence[str]
    user: str | None
    env: Mapping[str, str]
    workdir: str
    labels: Mapping[str, str]
    network: str
    cpus: float | None
    memory: str | int | None
    pids_limit: int | None
    runtime: str | None = None
    disk: str | None = None
    cap_drop: Sequence[str] = ("ALL",)
    security_opt: Sequence[str] = ("no-new-privileges",)
    init: bool = True


@dataclass
class ExecStream:
    """The attached socket of a running exec, so another thread can cut it off; and whether the
    exec ever started (a command still waiting for a thread can be given up instead)."""

    sock: Any = None
    aborted: bool = False
    state: str = "queued"  # "started" once its thread runs, "abandoned" if given up first
    exec_id: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def begin(self) -> bool:
        """Called by the thread about to run the exec: ``False`` when it was given up."""
        with self.lock:
            if self.state == "abandoned":
                return False
            self.state = "started"
            return True

    def abandon(self) -> bool:
        """Give up an exec whose thread has not begun: ``True`` when it never will."""
        with self.lock:
            if self.state == "queued":
                self.state = "abandoned"
                return True
            return False

    def attach(self, sock: Any) -> None:
        with self.lock:
            self.sock = sock
            if self.aborted:
                _shutdown(sock)

    def abort(self) -> None:
        with self.lock:
            self.aborted = True
            if self.sock is not None:
                _shutdown(self.sock)


def _socket_of(stream: Any) -> Any:
    """The OS socket under what an exec is read from (a buffered reader, a SocketIO, a socket)."""
    inner: object = stream
    if isinstance(stream, io.BufferedReader):
        inner = cast("object", stream.raw)  # pyright: ignore[reportUnknownMemberType]
    return getattr(inner, "_sock", inner)


def _shutdown(sock: Any) -> None:
    with contextlib.suppress(OSError, AttributeError):
        _socket_of(sock).shutdown(socket.SHUT_RDWR)


def _docker() -> Any:
    return importlib.import_module("docker")


def _explanation(error: BaseException) -> str:
    return scrub(str(getattr(error, "explanation", None) or error))


def _response_message(response: Any) -> str:
    """The engine's error message in a raw HTTP response (host paths removed)."""
    try:
        message = str(cast("dict[str, Any]", response.json()).get("message") or "")
    except Exception:
        message = str(response.reason or "")
    return scrub(message)


def _container_state(
    status: int | None, message: str, container: str, what: str
) -> Exception | None:
    """The error for an engine answer saying the container is gone, paused or stopped."""
    lowered = message.lower()
    if status == 404 and "no such container" in lowered:
        return SandboxVanishedError(f"the Docker container {container[:12]} is gone ({what})")
    if status == 409 and "is paused" in lowered:
        return ContainerPaused(container)
    if status == 409 and ("not running" in lowered or "restarting" in lowered):
        return ContainerStopped(container)
    return None


DEFAULT_SOCKET = "unix:///var/run/docker.sock"
"""Where the Docker SDK connects without ``docker_host`` or ``DOCKER_HOST``."""

_USERINFO_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^/@:\s]*):[^/@\s]*@")


def masked_address(address: str) -> str:
    """``address`` with the password of its user info replaced: ``tcp://me:***@host:2376``."""
    return _USERINFO_PASSWORD.sub(lambda m: f"{m['head']}:***@", address)


def _unreachable_reason(detail: str) -> str:
    """A short reason for a failed connection, from the SDK's wordy message."""
    lowered = detail.lower()
    if "filenotfounderror" in lowered or "no such file" in lowered:
        return "no socket there"
    if "permission denied" in lowered or "permissionerror" in lowered:
        return "permission denied on the socket (add your user to the docker group, or use sudo)"
    if "connection refused" in lowered or "connectionrefused" in lowered:
        return "connection refused: nothing listens there"
    if "timed out" in lowered or "timeout" in lowered:
        return "the connection timed out"
    return masked_address(detail)


class Engine:
    """A lazily connected Docker client (``docker_host`` or the environment's, DOCKER_HOST)."""

    def __init__(self, docker_host: str | None = None) -> None:
        self.docker_host = docker_host
        self._client: Any = None
        self._lock = threading.Lock()
        self._docker = _docker()
        self._errors: Any = self._docker.errors
        self._info: dict[str, Any] | None = None

    # -- connection ---------------------------------------------------------------------------

    @property
    def api(self) -> Any:
        with self._lock:
            if self._client is None:
                try:
                    # The SDK keeps one connection pool per URL (exec ids make many) and closes
                    # the least recently used beyond num_pools, even while a thread uses it.
                    if self.docker_host:
                        self._client = self._docker.DockerClient(
                            base_url=self.docker_host, max_pool_size=64, num_pools=_NUM_POOLS
                        )
                    else:
                        self._client = self._docker.DockerClient(
                            max_pool_size=64,
                            num_pools=_NUM_POOLS,
                            **self._docker.utils.kwargs_from_env(),
                        )
                except Exception as error:  # DockerException, but also URL and socket errors
                    raise SandboxProviderError(
                        f"cannot connect to the Docker engine at {self.address()}: "
                        f"{_unreachable_reason(_explanation(error))}; start Docker, or point "
                        "DOCKER_HOST (or docker_host in [capabilities.sandbox.docker]) at a "
                        "running engine"
                    ) from None
            return self._client.api

    def address(self) -> str:
        """Where this client connects, and what said so, password masked:
        ``unix:///var/run/docker.sock (the default socket)``."""
        import os

        if self.docker_host:
            return f"{masked_address(self.docker_host)} (option docker_host)"
        from_env = os.environ.get("DOCKER_HOST")
        if from_env:
            return f"{masked_address(from_env)} (DOCKER_HOST)"
        return f"{DEFAULT_SOCKET} (the default socket; DOCKER_HOST is not set)"

    def ping(self) -> None:
        """Return when the engine answers; raise ``SandboxProviderError`` naming the address."""
        api = self.api  # connecting asks the engine for its API version already
        try:
            answered = self._retrying(api.ping)
        except Exception as error:
            raise SandboxProviderError(
                f"the Docker engine at {self.address()} does not answer: "
                f"{_unreachable_reason(_explanation(error))}; start Docker, or point DOCKER_HOST "
                "(or docker_host in [capabilities.sandbox.docker]) at a running engine"
            ) from None
        if answered is not True:
            raise SandboxProviderError(
                f"the Docker engine at {self.address()} answered its ping with {answered!r}, "
                "not OK; is that a Docker engine?"
            )

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()

    # -- error translation --------------------------------------------------------------------

    def _status(self, error: BaseException) -> int | None:
        return getattr(error, "status_code", None)

    def _translate(self, error: BaseException, container: str, what: str) -> Exception:
        """The exception to raise for an SDK error of ``what`` on ``container``."""
        state = _container_state(self._status(error), _explanation(error), container, what)
        if state is not None:
            return state
        if isinstance(error, self._errors.APIError):
            return SandboxProviderError(f"Docker {what} failed: {_explanation(error)}")
        return SandboxProviderError(
            f"Docker {what} failed: the engine could not be reached or broke off "
            f"({type(error).__name__}: {_explanation(error)}); check that it is running"
        )

    @contextlib.contextmanager
    def _calling(self, what: str, container: str = "") -> Generator[None]:
        """Translate any error of the SDK call inside (never lets a raw one through)."""
        try:
            yield
        except _PASSED_THROUGH:
            raise
        except Exception as error:
            raise self._translate(error, container, what) from None

    def _retrying(self, call: Callable[[], T]) -> T:
        """``call()``, again (twice at most) when it failed on the SDK's pool race; only for
        calls that change nothing or are harmless to repeat."""
        for _ in range(2):
            try:
                return call()
            except Exception as error:
                if not _pool_race(error):
                    raise
        return call()

    def info(self) -> dict[str, Any]:
        """The engine's ``docker info`` (cached): storage driver, runtimes, ..."""
        if self._info is None:
            with self._calling("info"):
                self._info = cast("dict[str, Any]", self._retrying(lambda: self.api.info()))
        return self._info

    # -- containers ---------------------------------------------------------------------------

    def image_user(self, image: str) -> str | None:
        """The image's configured ``USER``, or ``None`` when it is absent (not pulled)."""
        try:
            with self._calling("image inspect"):
                try:
                    attrs = cast("dict[str, Any]", self.api.inspect_image(image))
                except self._errors.ImageNotFound:
                    return None
        except SandboxProviderError as error:
            if "invalid reference format" in str(error).lower():
                raise SandboxProviderError(
                    f"image {image!r} is not a valid Docker image name; write it as "
                    "name[:tag], e.g. image='python:3.12-slim'"
                ) from None
            raise
        config = cast("dict[str, Any]", attrs.get("Config") or {})
        return str(config.get("User") or "")

    def pull(self, image: str) -> None:
        """Pull ``image``, logging progress at INFO; raises :class:`ImageMissing`."""
        repository, tag = _split_image(image)
        _log.info("pulling Docker image %s", image)
        try:
            last = ""
            for event in self.api.pull(repository, tag=tag or None, stream=True, decode=True):
                event = cast("dict[str, Any]", event)
                if "error" in event:
                    raise ImageMissing(scrub(str(event["error"])))
                line = " ".join(str(event[k]) for k in ("id", "status", "progress") if event.get(k))
                if line and line != last:
                    _log.info("pull %s: %s", image, line)
                    last = line
        except ImageMissing:
            raise
        except SandboxProviderError as error:
            raise ImageMissing(str(error)) from None
        except Exception as error:
            raise ImageMissing(_explanation(error)) from None

    def create_container(self, spec: ContainerSpec, *, pull: bool = True) -> str:
        """Create (not start) a container. Returns its id.

        Raises :class:`NameConflict` when a container of that name exists (the caller decides
        whether it is the winner of a concurrent create or a stale one), :class:`ImageMissing`.
        """
        with self._calling("container create"):
            api = self.api
            host_config = api.create_host_config(
                network_mode=spec.network,
                cap_drop=list(spec.cap_drop),
                security_opt=list(spec.security_opt),
                pids_limit=spec.pids_limit,
                mem_limit=spec.memory,
                nano_cpus=int(spec.cpus * 1e9) if spec.cpus else None,
                init=spec.init,
                runtime=spec.runtime,
                storage_opt={"size": spec.disk} if spec.disk else None,
            )
        for attempt in range(2):
            try:
                with self._calling("container create"):
                    try:
                        created = api.create_container(
                            spec.image,
                            command=list(spec.command),
                            user=spec.user or "",
                            environment=dict(spec.env),
                            working_dir=spec.workdir,
                            labels=dict(spec.labels),
                            name=spec.name,
                            host_config=host_config,
                            detach=True,
                        )
                    except self._errors.ImageNotFound as error:
                        if not pull or attempt > 0:
                            raise ImageMissing(_explanation(error)) from None
                        self.pull(spec.image)
                        continue
                    except self._errors.APIError as error:
                        if self._status(error) == 409:
                            raise NameConflict(spec.name) from None
                        raise
                    return str(cast("dict[str, Any]", created)["Id"])
            except ImageMissing:
                raise
        raise SandboxProviderError(f"Docker container create failed for {spec.name}")

    def start(self, container: str) -> None:
        with self._calling("start", container):
            self.api.start(container)

    def unpause(self, container: str) -> None:
        with self._calling("unpause", container):
            try:
                self.api.unpause(container)
            except self._errors.APIError as error:
                if "is not paused" in _explanation(error).lower():
                    return  # someone else unpaused it first
                raise

    def remove(self, container: str) -> None:
        """Remove a container (by id or name) with force; a missing one is fine."""
        with self._calling("container remove", container):
            try:
                self.api.remove_container(container, force=True, v=True)
            except self._errors.NotFound:
                return
            except self._errors.APIError as error:
                text = _explanation(error).lower()
                if "already in progress" in text or "no such container" in text:
                    return
                raise

    def list(self, labels: Sequence[str]) -> list[ContainerSummary]:
        """Every container (running or not) carrying all of ``labels`` (``k=v``)."""
        with self._calling("container list"):
            raw = self._retrying(
                lambda: self.api.containers(all=True, filters={"label": list(labels)})
            )
        found: list[ContainerSummary] = []
        for item in cast("list[dict[str, Any]]", raw):
            names = cast("list[str]", item.get("Names") or [""])
            found.append(
                ContainerSummary(
                    id=str(item["Id"]),
                    name=names[0].lstrip("/"),
                    labels=cast("dict[str, str]", item.get("Labels") or {}),
                    state=str(item.get("State") or ""),
                    created=float(item.get("Created") or 0),
                    image=str(item.get("Image") or ""),
                )
            )
        return found

    def inspect(self, container: str) -> dict[str, Any] | None:
        """The container's attributes, or ``None`` when there is no such container."""
        with self._calling("inspect", container):
            try:
                return cast(
                    "dict[str, Any]", self._retrying(lambda: self.api.inspect_container(container))
                )
            except self._errors.NotFound:
                return None

    # -- files --------------------------------------------------------------------------------

    def put_archive(self, container: str, path: str, data: bytes) -> None:
        with self._calling("put_archive", container):
            self.api.put_archive(container, path, data)

    def read_archive(
        self, container: str, path: str, max_bytes: int
    ) -> tuple[dict[str, Any], bytes]:
        """The archive of ``path`` and its stat header, reading at most what ``max_bytes`` needs.

        The stat header arrives before the body: a regular file larger than ``max_bytes`` raises
        :class:`TooLarge` and the connection is closed before any of its content is read (the
        engine stops). A body that grows past the limit while streaming raises it too. Symbolic
        links and folders come back as their stat (the body is not read). Raises
        :class:`PathMissing` for a missing path.
        """
        with self._calling("get_archive", container):
            api = self.api
            url = f"{api.base_url}/v{api.api_version}/containers/{quote(container)}/archive"
            response = api.get(
                url,
                params={"path": path},
                stream=True,
                headers={"Accept-Encoding": "identity"},
                timeout=api.timeout,
            )
            with contextlib.closing(response):
                if response.status_code >= 400:
                    self._archive_error(response, container, path)
                encoded = response.headers.get("x-docker-container-path-stat")
                stat = cast(
                    "dict[str, Any]",
                    self._docker.utils.decode_json_header(encoded) if encoded else {},
                )
                mode = int(stat.get("mode", 0))
                if mode & (MODE_DIR | MODE_SYMLINK):
                    return stat, b""
                size = int(stat.get("size", 0))
                if size > max_bytes:
                    raise TooLarge(size)
                # Room for the tar headers (PAX records included) and the padding and trailer.
                room = max_bytes + 64 * 1024
                chunks: list[bytes] = []
                total = 0
                for chunk in response.iter_content(chunk_size=256 * 1024):
                    total += len(chunk)
                    if total > room:
                        raise TooLarge(max(size, total - 64 * 1024))
                    chunks.append(cast("bytes", chunk))
                return stat, b"".join(chunks)

    def _archive_error(self, response: Any, container: str, path: str) -> None:
        message = _response_message(response)
        lowered = message.lower()
        if response.status_code == 404 and "no such container" in lowered:
            raise SandboxVanishedError(f"the Docker container {container[:12]} is gone (read)")
        if response.status_code == 404:
            raise PathMissing(path)
        if "not a directory" in lowered:
            raise PathNotADirectory(path)
        if "too many links" in lowered:
            raise LinkLoop(path)
        raise SandboxProviderError(f"Docker get_archive failed ({response.status_code}): {message}")

    # -- commands -----------------------------------------------------------------------------

    def exec_create(
        self, container: str, command: Sequence[str], env: Mapping[str, str] | None = None
    ) -> str:
        with self._calling("exec", container):
            created = self._retrying(
                lambda: self.api.exec_create(
                    container,
                    list(command),
                    stdout=True,
                    stderr=True,
                    stdin=False,
                    tty=False,
                    environment=dict(env) if env else None,
                )
            )
        return str(cast("dict[str, Any]", created)["Id"])

    def exec_exit_code(self, container: str, exec_id: str) -> int:
        with self._calling("exec inspect", container):
            info = cast("dict[str, Any]", self._retrying(lambda: self.api.exec_inspect(exec_id)))
        code = info.get("ExitCode")
        return int(code) if code is not None else -1

    def exec_stream(
        self,
        container: str,
        exec_id: str,
        holder: ExecStream,
        on_frame: Callable[[int, bytes], None],
        *,
        deadline: float | None = None,
        max_bytes: int | None = None,
    ) -> None:
        """Start the exec and feed its output frames (stream 1/2, bytes) to ``on_frame`` until EOF
        (or until ``holder.abort()`` cuts the socket).

        With ``deadline`` (a ``time.monotonic()`` value), every read waits at most until then and
        :class:`HelperTimeout` is raised when it passes; with ``max_bytes``, output (both streams)
        beyond it raises :class:`HelperFlood`. Either way the connection is closed at once: the
        host never waits or holds more than its caller allowed, whatever runs in the container.
        """
        sock, read, response = self._exec_start(
            container, exec_id, None if deadline is None else max(0.05, deadline - _now())
        )
        holder.attach(sock)
        raw = _socket_of(sock)
        total = 0

        def bounded_read(n: int) -> bytes:
            if deadline is not None:
                left = deadline - _now()
                if left <= 0:
                    raise HelperTimeout()
                with contextlib.suppress(OSError, AttributeError):
                    raw.settimeout(left)
            try:
                return read(sock, n)
            except TimeoutError:
                if deadline is not None:
                    raise HelperTimeout() from None
                raise

        try:
            while True:
                header = _read_exactly(bounded_read, 8)
                if len(header) < 8:
                    return
                stream, size = struct.unpack(">BxxxL", header)
                while size > 0:
                    chunk = bounded_read(min(size, 65536))
                    if not chunk:
                        return
                    size -= len(chunk)
                    total += len(chunk)
                    if max_bytes is not None and total > max_bytes:
                        raise HelperFlood(max_bytes)
                    on_frame(stream, chunk)
        except OSError as error:
            if holder.aborted:
                return
            raise SandboxProviderError(
                f"the output stream of a command broke off ({type(error).__name__}: {error})"
            ) from None
        finally:
            try:
                sock.close()
            finally:
                if raw is not sock:
                    with contextlib.suppress(OSError, AttributeError):
                        raw.close()
                if response is not None:
                    with contextlib.suppress(Exception):
                        response.close()

    def _exec_start(
        self, container: str, exec_id: str, timeout: float | None = None
    ) -> tuple[Any, Callable[[Any, int], bytes], Any]:
        """Start an exec attached: the object to read frames from, how to read it, the response.

        The SDK's ``exec_start(socket=True)`` hands back the raw socket under the HTTP response's
        buffered reader, so output bytes that arrived together with the response headers (a
        short command's whole output, often) sit in that buffer and are lost. Over unix and TCP
        sockets the upgrade is made here and the frames are read through the buffered reader.
        """
        api = self.api
        base = str(api.base_url)
        if base.startswith(("http+docker://ssh", "http+docker://localnpipe")):
            with self._calling("exec start", container):
                sock = api.exec_start(exec_id, socket=True)
            return sock, self._docker.utils.socket.read, None
        with self._calling("exec start", container):
            response = api.post(
                f"{base}/v{api.api_version}/exec/{quote(exec_id)}/start",
                data=b'{"Detach": false, "Tty": false}',
                headers={
                    "Content-Type": "application/json",
                    "Connection": "Upgrade",
                    "Upgrade": "tcp",
                },
                stream=True,
                timeout=timeout,
            )
        if response.status_code >= 400:
            with contextlib.closing(response):
                self._start_error(response, container)
        reader = getattr(getattr(response.raw, "_fp", None), "fp", None)
        if not isinstance(reader, io.BufferedReader):
            response.close()
            raise SandboxProviderError(
                "Docker exec start failed: the engine connection is not a stream this provider "
                f"can read ({type(reader).__name__}); use a unix:// or tcp:// docker_host"
            )
        return cast("Any", reader), _read_buffered, response

    def _start_error(self, response: Any, container: str) -> None:
        message = _response_message(response)
        state = _container_state(response.status_code, message, container, "exec")
        if state is not None:
            raise state
        raise SandboxProviderError(f"Docker exec start failed ({response.status_code}): {message}")

    def exec_simple(
        self,
        container: str,
        command: Sequence[str],
        env: Mapping[str, str] | None = None,
        *,
        deadline: float,
        max_bytes: int,
    ) -> tuple[int, bytes, bytes]:
        """Run a short helper to completion: exit code, stdout, stderr.

        Bounded whatever the container runs in its place: :class:`HelperTimeout` once
        ``deadline`` (``time.monotonic()``) passes, :class:`HelperFlood` past ``max_bytes`` of
        output. (The helper itself may go on running inside the container; only the host stops
        waiting for it.)
        """
        exec_id = self.exec_create(container, command, env)
        out: list[bytes] = []
        err: list[bytes] = []

        def on_frame(stream: int, chunk: bytes) -> None:
            (err if stream == 2 else out).append(chunk)

        self.exec_stream(
            container, exec_id, ExecStream(), on_frame, deadline=deadline, max_bytes=max_bytes
        )
        return self.exec_exit_code(container, exec_id), b"".join(out), b"".join(err)

    def exec_running(self, container: str, exec_id: str) -> bool:
        """Whether the exec's process is still running (the engine's view, not the sandbox's)."""
        with self._calling("exec inspect", container):
            info = cast("dict[str, Any]", self._retrying(lambda: self.api.exec_inspect(exec_id)))
        return bool(info.get("Running"))

    def kill(self, container: str) -> None:
        """SIGKILL the container's init: every process in it dies at once (the container stops,
        its files stay). A container already stopped or gone is fine."""
        with self._calling("kill", container):
            try:
                self.api.kill(container)
            except self._errors.APIError as error:
                if self._status(error) in (404, 409):
                    return
                raise

    def stat_path(self, container: str, path: str) -> dict[str, Any]:
        """The stat header of ``path`` (the link itself for a symbolic link), from the Engine
        API's archive ``HEAD``: nothing runs in the container. Raises :class:`PathMissing`,
        :class:`PathNotADirectory` or :class:`LinkLoop` as :meth:`read_archive` does."""
        with self._calling("archive stat", container):
            api = self.api
            url = f"{api.base_url}/v{api.api_version}/containers/{quote(container)}/archive"
            response = self._retrying(
                lambda: api.head(url, params={"path": path}, timeout=api.timeout)
            )
            with contextlib.closing(response):
                status = int(response.status_code)
                encoded = response.headers.get("x-docker-container-path-stat")
            if status == 200 and encoded:
                return cast("dict[str, Any]", self._docker.utils.decode_json_header(encoded))
        if status == 404:
            if self.inspect(container) is None:
                raise SandboxVanishedError(f"the Docker container {container[:12]} is gone (stat)")
            raise PathMissing(path)
        # A HEAD answer has no body to say why: ask again with a GET, whose error says it.
        try:
            return self.read_archive(container, path, 0)[0]
        except TooLarge:
            raise SandboxProviderError(
                f"Docker archive stat of {path!r} failed ({status}), though it can be read"
            ) from None


def _now() -> float:
    return time.monotonic()


def _read_buffered(reader: Any, n: int) -> bytes:
    """Up to ``n`` bytes from a buffered reader (what it holds first), ``b""`` at the end."""
    return cast("io.BufferedReader", reader).read1(n)


def _read_exactly(read: Callable[[int], bytes], n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = read(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


def _split_image(image: str) -> tuple[str, str]:
    if "@" in image:
        return image, ""
    last = image.rsplit("/", 1)[-1]
    if ":" in last:
        repository, tag = image.rsplit(":", 1)
        return repository, tag
    return image, "latest"
