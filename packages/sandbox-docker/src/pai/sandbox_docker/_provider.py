"""The Docker sandbox provider: one container per instance key, on a real Docker engine.

Hardened defaults (each can be loosened by an argument, see :class:`DockerSandboxProvider`):

- ``network="none"``: no network interface but loopback. Pass ``network="bridge"`` (or a network
  name) to give commands network access.
- all Linux capabilities dropped (``cap_drop=["ALL"]``) and ``no-new-privileges``: setuid binaries
  and file capabilities grant nothing. Not configurable here on purpose; build a different image
  or provider if a workload truly needs a capability.
- ``pids_limit=256`` (fork bombs stop there) and ``memory="512m"``; pass ``None`` to lift them.
- ``init=True``: Docker's init (tini) is PID 1 and reaps zombies.
- ``user``: the user commands run as (``"1000:1000"``, a name from the image, or ``None`` for the
  image's ``USER``). ``/workspace`` and written files are owned by that user.
"""

from __future__ import annotations

import io
import logging
import posixpath
import tarfile
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import anyio.to_thread

from pai.sandbox.provider import (
    InstanceInfo,
    ProviderFeatures,
    SandboxInputError,
    SandboxInstance,
    SandboxProviderError,
    SandboxVanishedError,
)
from pai.sandbox_docker._engine import ContainerSpec, ContainerSummary, Engine, ImageMissing
from pai.sandbox_docker._instance import DockerSandboxInstance, dir_entry
from pai.sandbox_docker._labels import (
    LABEL_GID,
    LABEL_KEY_HASH,
    LABEL_NAMESPACE,
    LABEL_UID,
    container_labels,
    container_name,
    key_hash,
    label_key,
    numeric_ids,
    parse_created,
    parse_docker_time,
)
from pai.sandbox_docker._scripts import IDS_SCRIPT, KEEPALIVE

_log = logging.getLogger("pai.sandbox_docker")


class DockerSandboxProvider:
    """Sandboxes in Docker containers, one per instance key, rediscoverable by labels.

    Every container runs ``image`` with ``sleep`` as its main process under Docker's init, and
    carries the labels ``pai.namespace``, ``pai.key`` (the exact key), ``pai.capability``
    (``sandbox``), ``pai.created`` (ISO UTC) and ``pai.provider-version``; a fresh provider in
    another process finds it again by key. Containers outlive :meth:`aclose` (durable state);
    :meth:`destroy`, :meth:`prune` and ``pai sandbox prune`` remove them.

    Hardened defaults, and how to loosen each:

    - ``network="none"``: only loopback. ``network="bridge"`` (or any Docker network name)
      gives commands network access.
    - all capabilities dropped and ``no-new-privileges`` (always on).
    - ``pids_limit=256``, ``memory="512m"``; ``None`` lifts the limit. ``cpus`` (e.g. ``1.5``)
      limits CPU time; ``None`` (the default) does not.
    - ``init=True`` (tini as PID 1 reaps zombies; always on).
    - ``user``: who commands run as (``"1000:1000"``, a user of the image, or ``None`` for the
      image's ``USER``).

    ``idle_ttl`` (seconds): containers of this namespace unused for longer are removed, best
    effort, whenever :meth:`create` runs (see :meth:`prune`). ``docker_host`` (e.g.
    ``"unix:///var/run/docker.sock"``, ``"tcp://host:2376"``) defaults to the environment's
    (``DOCKER_HOST``, then the local socket).

    Example::

        provider = DockerSandboxProvider(image="python:3.12-slim", memory="1g")
    """

    def __init__(
        self,
        image: str,
        *,
        workdir: str = "/workspace",
        user: str | None = None,
        env: Mapping[str, str] | None = None,
        cpus: float | None = None,
        memory: str | int | None = "512m",
        pids_limit: int | None = 256,
        network: str = "none",
        labels: Mapping[str, str] | None = None,
        namespace: str = "pai",
        idle_ttl: float | None = None,
        docker_host: str | None = None,
    ) -> None:
        if not image:
            raise SandboxInputError(
                "DockerSandboxProvider needs an image, e.g. image='python:3.12'"
            )
        if not workdir.startswith("/"):
            raise SandboxInputError(f"workdir must be an absolute path, got {workdir!r}")
        if not namespace:
            raise SandboxInputError("namespace must not be empty")
        self.image = image
        self.workdir: str = posixpath.normpath(workdir)
        self.user = user
        self.env: dict[str, str] = dict(env or {})
        self.cpus = cpus
        self.memory = memory
        self.pids_limit = pids_limit
        self.network = network
        self.labels: dict[str, str] = dict(labels or {})
        self.namespace = namespace
        self.idle_ttl = idle_ttl
        self.docker_host = docker_host
        self.engine: Engine = Engine(docker_host)
        self._features = ProviderFeatures(cross_process=True, durable=True, processes=True)
        self._ids: tuple[int, int] | None = numeric_ids(user) if user is not None else None
        self._image_checked = False
        self._last_used: dict[str, float] = {}
        self._last_prune = 0.0

    @property
    def name(self) -> str:
        return "docker"

    @property
    def features(self) -> ProviderFeatures:
        return self._features

    def __repr__(self) -> str:
        return f"DockerSandboxProvider(image={self.image!r}, namespace={self.namespace!r})"

    def touch(self, container_id: str) -> None:
        """Record that this process used the container now (for the idle TTL)."""
        self._last_used[container_id] = time.time()

    def container_name(self, key: str) -> str:
        """The name of the container for ``key`` in this provider's namespace."""
        return container_name(self.namespace, key)

    # -- create -------------------------------------------------------------------------------

    def _missing_image(self, detail: object) -> SandboxProviderError:
        return SandboxProviderError(
            f"image {self.image!r} is not present and could not be pulled: {detail}; pull it "
            f"(docker pull {self.image}) or set image=... to an image this Docker engine has"
        )

    def _resolve_ids_sync(self) -> tuple[int, int] | None:
        """The uid/gid owning the workspace, when known without a running container."""
        if self.user is not None or self._image_checked:
            return self._ids  # a non-numeric user is resolved inside the container
        image_user = self.engine.image_user(self.image)
        if image_user is None:  # not present: pull now, so the error is the clear one
            try:
                self.engine.pull(self.image)
            except ImageMissing as error:
                raise self._missing_image(error) from None
            image_user = self.engine.image_user(self.image)
            if image_user is None:
                raise self._missing_image("the pull left no image")
        self._image_checked = True
        self._ids = numeric_ids(image_user)
        return self._ids

    def _create_sync(self, key: str) -> tuple[str, tuple[int, int] | None]:
        ids = self._resolve_ids_sync()
        labels = container_labels(self.namespace, key, self.labels)
        if ids is not None:
            labels[LABEL_UID], labels[LABEL_GID] = str(ids[0]), str(ids[1])
        spec = ContainerSpec(
            name=self.container_name(key),
            image=self.image,
            command=KEEPALIVE,
            user=self.user,
            env=self.env,
            workdir=self.workdir,
            labels=labels,
            network=self.network,
            cpus=self.cpus,
            memory=self.memory,
            pids_limit=self.pids_limit,
        )
        for old in self._matching_sync(key):
            self.engine.remove(old.id)
        self.engine.remove(spec.name)
        try:
            container_id = self.engine.create_container(spec)
        except ImageMissing as error:
            raise self._missing_image(error) from None
        try:
            if ids is not None and ids != (0, 0):
                self._make_workspace_sync(container_id, ids)
            self.engine.start(container_id)
            if ids is None:
                code, out, err = self.engine.exec_simple(container_id, ["sh", "-c", IDS_SCRIPT])
                parts = out.split()
                if code != 0 or len(parts) != 2:
                    raise SandboxProviderError(
                        f"could not tell the container user's uid/gid: {err.decode(errors='replace')}"
                    )
                ids = (int(parts[0]), int(parts[1]))
                if ids != (0, 0):
                    self._make_workspace_sync(container_id, ids)
        except BaseException:
            self.engine.remove(container_id)
            raise
        self.touch(container_id)
        return container_id, ids

    def _make_workspace_sync(self, container_id: str, ids: tuple[int, int]) -> None:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as archive:
            archive.addfile(dir_entry(self.workdir.lstrip("/"), 0o755, *ids))
        self.engine.put_archive(container_id, "/", buffer.getvalue())

    async def create(self, key: str) -> SandboxInstance:
        await self.prune_idle()
        container_id, ids = await anyio.to_thread.run_sync(self._create_sync, key)
        return DockerSandboxInstance(self, key, container_id, ids)

    # -- find / destroy / list ----------------------------------------------------------------

    def _matching_sync(self, key: str) -> list[ContainerSummary]:
        found = self.engine.list(
            [f"{LABEL_NAMESPACE}={self.namespace}", f"{LABEL_KEY_HASH}={key_hash(key)}"]
        )
        return [
            c
            for c in found
            if c.labels.get(LABEL_NAMESPACE) == self.namespace and label_key(c.labels) == key
        ]

    def _find_sync(self, key: str) -> DockerSandboxInstance | None:
        matches = sorted(self._matching_sync(key), key=lambda c: c.created, reverse=True)
        for container in matches:
            if container.state == "running":
                return self._instance(key, container)
            if container.state == "exited":  # e.g. after the engine restarted: bring it back
                try:
                    self.engine.start(container.id)
                except (SandboxVanishedError, SandboxProviderError):
                    continue
                return self._instance(key, container)
        return None

    def _instance(self, key: str, container: ContainerSummary) -> DockerSandboxInstance:
        ids: tuple[int, int] | None = None
        uid, gid = container.labels.get(LABEL_UID), container.labels.get(LABEL_GID)
        if uid is not None and gid is not None and uid.isdigit() and gid.isdigit():
            ids = (int(uid), int(gid))
        self.touch(container.id)
        return DockerSandboxInstance(self, key, container.id, ids)

    async def find(self, key: str) -> SandboxInstance | None:
        return await anyio.to_thread.run_sync(self._find_sync, key)

    def _destroy_sync(self, key: str) -> None:
        for container in self._matching_sync(key):
            self.engine.remove(container.id)
            self._last_used.pop(container.id, None)
        self.engine.remove(self.container_name(key))

    async def destroy(self, key: str) -> None:
        await anyio.to_thread.run_sync(self._destroy_sync, key)

    def _list_sync(self) -> list[InstanceInfo]:
        infos: list[InstanceInfo] = []
        for container in self.engine.list([f"{LABEL_NAMESPACE}={self.namespace}"]):
            key = label_key(container.labels)
            if key is None or container.labels.get(LABEL_NAMESPACE) != self.namespace:
                continue
            infos.append(
                InstanceInfo(
                    key=key,
                    instance_id=container.id,
                    created_at=parse_created(container.labels, container.created),
                    provider=self.name,
                    details={
                        "name": container.name,
                        "state": container.state,
                        "image": container.image,
                        "namespace": self.namespace,
                    },
                )
            )
        return sorted(infos, key=lambda info: info.created_at)

    async def list_instances(self) -> Sequence[InstanceInfo]:
        return await anyio.to_thread.run_sync(self._list_sync)

    # -- idle TTL -----------------------------------------------------------------------------

    def _prune_sync(self, older_than: timedelta) -> list[str]:
        cutoff = datetime.now(UTC) - older_than
        removed: list[str] = []
        for container in self.engine.list([f"{LABEL_NAMESPACE}={self.namespace}"]):
            key = label_key(container.labels)
            if key is None:
                continue
            last = parse_created(container.labels, container.created)
            if last >= cutoff:
                continue
            attrs = self.engine.inspect(container.id)
            if attrs is None:
                continue
            if attrs.get("ExecIDs"):
                continue  # a command is running: not idle
            state: dict[str, Any] = attrs.get("State") or {}
            started = parse_docker_time(str(state.get("StartedAt") or ""))
            if started is not None and started > last:
                last = started
            used = self._last_used.get(container.id)
            if used is not None:
                last = max(last, datetime.fromtimestamp(used, UTC))
            if last < cutoff:
                self.engine.remove(container.id)
                self._last_used.pop(container.id, None)
                removed.append(key)
        return removed

    async def prune(self, older_than: timedelta) -> list[str]:
        """Remove this namespace's containers idle for longer than ``older_than``; their keys.

        Idle means: created (``pai.created``), last started (``State.StartedAt``) and last used by
        this provider object all lie before the cutoff, and no command is running in it.
        """
        return await anyio.to_thread.run_sync(self._prune_sync, older_than)

    async def prune_idle(self) -> list[str]:
        """Apply ``idle_ttl`` (at most once a minute; failures are logged, never raised)."""
        if self.idle_ttl is None or time.monotonic() - self._last_prune < 60:
            return []
        self._last_prune = time.monotonic()
        try:
            removed = await self.prune(timedelta(seconds=self.idle_ttl))
        except Exception as error:
            _log.warning("pruning idle Docker sandboxes failed: %s", error)
            return []
        if removed:
            _log.info(
                "removed %d idle Docker sandbox(es) of namespace %s", len(removed), self.namespace
            )
        return removed

    async def aclose(self) -> None:
        """Close the Docker client; the containers stay (use :meth:`destroy` to remove one)."""
        await anyio.to_thread.run_sync(self.engine.close)
