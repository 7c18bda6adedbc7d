"""The one module that touches the ``docker`` SDK (untyped): narrow, typed, synchronous calls.

Everything here blocks; the provider runs each call in a worker thread (``anyio.to_thread``).
SDK errors are translated here: a container that is gone (404 "No such container", 409 "is not
running") becomes :class:`~pai.sandbox.SandboxVanishedError`, a missing path in an archive call
becomes :class:`PathMissing`, anything else :class:`~pai.sandbox.SandboxProviderError`.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import socket
import struct
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from pai.sandbox.provider import SandboxProviderError, SandboxVanishedError

_log = logging.getLogger("pai.sandbox_docker")

#: Go's ``os.FileMode`` bits in the archive stat header.
MODE_DIR = 1 << 31
MODE_SYMLINK = 1 << 27


class PathMissing(Exception):
    """A path given to an archive call does not exist in the container."""


class ImageMissing(Exception):
    """The image is not present locally and could not be pulled."""


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
    cap_drop: Sequence[str] = ("ALL",)
    security_opt: Sequence[str] = ("no-new-privileges",)
    init: bool = True


@dataclass
class ExecStream:
    """The attached socket of a running exec, so another thread can cut it off."""

    sock: Any = None
    aborted: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

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


def _shutdown(sock: Any) -> None:
    raw = getattr(sock, "_sock", sock)
    with contextlib.suppress(OSError):
        raw.shutdown(socket.SHUT_RDWR)


def _docker() -> Any:
    return importlib.import_module("docker")


def _explanation(error: BaseException) -> str:
    return str(getattr(error, "explanation", None) or error)


class Engine:
    """A lazily connected Docker client (``docker_host`` or the environment's, DOCKER_HOST)."""

    def __init__(self, docker_host: str | None = None) -> None:
        self.docker_host = docker_host
        self._client: Any = None
        self._lock = threading.Lock()
        self._docker = _docker()
        self._errors: Any = self._docker.errors

    # -- connection ---------------------------------------------------------------------------

    @property
    def api(self) -> Any:
        with self._lock:
            if self._client is None:
                try:
                    if self.docker_host:
                        self._client = self._docker.DockerClient(
                            base_url=self.docker_host, max_pool_size=64
                        )
                    else:
                        self._client = self._docker.from_env(max_pool_size=64)
                except self._errors.DockerException as error:
                    raise SandboxProviderError(
                        f"cannot connect to the Docker engine "
                        f"({self.docker_host or 'DOCKER_HOST or the default socket'}): {error}; "
                        "start Docker or set docker_host=..."
                    ) from error
            return self._client.api

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    # -- error translation --------------------------------------------------------------------

    def _gone(self, error: BaseException, container: str) -> bool:
        text = _explanation(error).lower()
        if isinstance(error, self._errors.NotFound) and "no such container" in text:
            return True
        status = getattr(error, "status_code", None)
        return status == 409 and ("is not running" in text or "is paused" in text)

    def _fail(self, error: BaseException, container: str, what: str) -> Exception:
        if self._gone(error, container):
            return SandboxVanishedError(f"the Docker container {container[:12]} is gone ({what})")
        return SandboxProviderError(f"Docker {what} failed: {_explanation(error)}")

    # -- containers ---------------------------------------------------------------------------

    def image_user(self, image: str) -> str | None:
        """The image's configured ``USER``, or ``None`` when it is absent (not pulled)."""
        try:
            attrs = cast("dict[str, Any]", self.api.inspect_image(image))
        except self._errors.ImageNotFound:
            return None
        except self._errors.APIError as error:
            raise SandboxProviderError(
                f"Docker image inspect failed: {_explanation(error)}"
            ) from error
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
                    raise ImageMissing(str(event["error"]))
                line = " ".join(str(event[k]) for k in ("id", "status", "progress") if event.get(k))
                if line and line != last:
                    _log.info("pull %s: %s", image, line)
                    last = line
        except self._errors.DockerException as error:
            raise ImageMissing(_explanation(error)) from error
        except OSError as error:
            raise ImageMissing(str(error)) from error

    def create_container(self, spec: ContainerSpec, *, pull: bool = True) -> str:
        """Create (not start) a container; replaces one with the same name. Returns its id."""
        api = self.api
        host_config = api.create_host_config(
            network_mode=spec.network,
            cap_drop=list(spec.cap_drop),
            security_opt=list(spec.security_opt),
            pids_limit=spec.pids_limit,
            mem_limit=spec.memory,
            nano_cpus=int(spec.cpus * 1e9) if spec.cpus else None,
            init=spec.init,
        )
        for attempt in range(3):
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
                return str(cast("dict[str, Any]", created)["Id"])
            except self._errors.ImageNotFound as error:
                if not pull or attempt > 0:
                    raise ImageMissing(_explanation(error)) from error
                self.pull(spec.image)
            except self._errors.APIError as error:
                if getattr(error, "status_code", None) == 409 and attempt < 2:
                    self.remove(spec.name)  # a name conflict: the old container for the key
                    continue
                raise SandboxProviderError(
                    f"Docker container create failed: {_explanation(error)}"
                ) from error
        raise SandboxProviderError(f"Docker container create failed for {spec.name}")

    def start(self, container: str) -> None:
        try:
            self.api.start(container)
        except self._errors.APIError as error:
            raise self._fail(error, container, "start") from error

    def remove(self, container: str) -> None:
        """Remove a container (by id or name) with force; a missing one is fine."""
        try:
            self.api.remove_container(container, force=True, v=True)
        except self._errors.NotFound:
            return
        except self._errors.APIError as error:
            text = _explanation(error).lower()
            if "already in progress" in text or "no such container" in text:
                return
            raise SandboxProviderError(
                f"Docker container remove failed: {_explanation(error)}"
            ) from error

    def list(self, labels: Sequence[str]) -> list[ContainerSummary]:
        """Every container (running or not) carrying all of ``labels`` (``k=v``)."""
        try:
            raw = self.api.containers(all=True, filters={"label": list(labels)})
        except self._errors.APIError as error:
            raise SandboxProviderError(
                f"Docker container list failed: {_explanation(error)}"
            ) from error
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
        try:
            return cast("dict[str, Any]", self.api.inspect_container(container))
        except self._errors.NotFound:
            return None
        except self._errors.APIError as error:
            raise SandboxProviderError(f"Docker inspect failed: {_explanation(error)}") from error

    # -- files --------------------------------------------------------------------------------

    def put_archive(self, container: str, path: str, data: bytes) -> None:
        try:
            self.api.put_archive(container, path, data)
        except self._errors.APIError as error:
            raise self._fail(error, container, "put_archive") from error

    def get_archive(self, container: str, path: str) -> tuple[dict[str, Any], bytes]:
        """The archive of ``path`` and its stat header; raises :class:`PathMissing`."""
        try:
            stream, stat = self.api.get_archive(container, path)
            data = b"".join(cast("Iterator[bytes]", stream))
        except self._errors.APIError as error:
            if self._gone(error, container):
                raise self._fail(error, container, "get_archive") from error
            if isinstance(error, self._errors.NotFound):
                raise PathMissing(path) from error
            raise self._fail(error, container, "get_archive") from error
        return cast("dict[str, Any]", stat), data

    # -- commands -----------------------------------------------------------------------------

    def exec_create(
        self, container: str, command: Sequence[str], env: Mapping[str, str] | None = None
    ) -> str:
        try:
            created = self.api.exec_create(
                container,
                list(command),
                stdout=True,
                stderr=True,
                stdin=False,
                tty=False,
                environment=dict(env) if env else None,
            )
        except self._errors.APIError as error:
            raise self._fail(error, container, "exec") from error
        return str(cast("dict[str, Any]", created)["Id"])

    def exec_exit_code(self, container: str, exec_id: str) -> int:
        try:
            info = cast("dict[str, Any]", self.api.exec_inspect(exec_id))
        except self._errors.APIError as error:
            raise self._fail(error, container, "exec inspect") from error
        code = info.get("ExitCode")
        return int(code) if code is not None else -1

    def exec_stream(
        self,
        container: str,
        exec_id: str,
        holder: ExecStream,
        on_frame: Callable[[int, bytes], None],
    ) -> None:
        """Start the exec and feed its output frames (stream 1/2, bytes) to ``on_frame`` until EOF
        (or until ``holder.abort()`` cuts the socket)."""
        try:
            sock = self.api.exec_start(exec_id, socket=True)
        except self._errors.APIError as error:
            raise self._fail(error, container, "exec start") from error
        holder.attach(sock)
        read: Callable[[Any, int], bytes] = self._docker.utils.socket.read
        try:
            while True:
                header = _read_exactly(read, sock, 8)
                if len(header) < 8:
                    return
                stream, size = struct.unpack(">BxxxL", header)
                while size > 0:
                    chunk = read(sock, min(size, 65536))
                    if not chunk:
                        return
                    size -= len(chunk)
                    on_frame(stream, chunk)
        except OSError:
            if holder.aborted:
                return
            raise
        finally:
            try:
                sock.close()
            finally:
                raw = getattr(sock, "_sock", None)
                if raw is not None:
                    raw.close()

    def exec_simple(
        self, container: str, command: Sequence[str], env: Mapping[str, str] | None = None
    ) -> tuple[int, bytes, bytes]:
        """Run a short command to completion: exit code, stdout, stderr."""
        exec_id = self.exec_create(container, command, env)
        out: list[bytes] = []
        err: list[bytes] = []

        def on_frame(stream: int, chunk: bytes) -> None:
            (err if stream == 2 else out).append(chunk)

        self.exec_stream(container, exec_id, ExecStream(), on_frame)
        return self.exec_exit_code(container, exec_id), b"".join(out), b"".join(err)


def _read_exactly(read: Callable[[Any, int], bytes], sock: Any, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = read(sock, n - len(data))
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
