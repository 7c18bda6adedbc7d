"""The Docker sandbox provider: one container per instance key, on a real Docker engine.

Hardened defaults (each can be loosened by an argument, see :class:`DockerSandboxProvider`):

- ``network="none"``: no network interface but loopback. Pass ``network="bridge"`` (or a network
  name) to give commands network access.
- all Linux capabilities dropped (``cap_drop=["ALL"]``) and ``no-new-privileges``: setuid binaries
  and file capabilities grant nothing. Not configurable here on purpose; build a different image
  or provider if a workload truly needs a capability.
- ``pids_limit=256`` (fork bombs stop there) and ``memory="512m"``; pass ``None`` to lift them.
- ``init=True``: Docker's init (tini) is PID 1 and reaps zombies.
- ``user="1000:1000"``: commands run unprivileged and cannot replace the image's programs;
  ``"root"`` opts back into root, ``None`` is the image's ``USER``. ``/workspace`` and written
  files are owned by that user.
- ``max_concurrent_commands=8`` commands of one sandbox at once (a host thread each), file helpers
  bounded by ``helper_timeout`` and their output, ``list_dir`` by ``list_limit`` entries.
"""

from __future__ import annotations

import io
import logging
import posixpath
import tarfile
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import anyio
import anyio.to_thread
from pydantic import ValidationError

from pai.core.ext import did_you_mean
from pai.sandbox import (
    InstanceInfo,
    SandboxInputError,
    SandboxProviderError,
    SandboxUnavailableError,
    SandboxVanishedError,
)
from pai.sandbox.provider import ProviderFeatures, SandboxInstance
from pai.sandbox_docker._engine import (
    ContainerSpec,
    ContainerSummary,
    Engine,
    ImageMissing,
    NameConflict,
)
from pai.sandbox_docker._instance import DockerSandboxInstance, archive_entry, query_ids
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
from pai.sandbox_docker._limits import InstanceLimits, LoopLimiter
from pai.sandbox_docker._options import DEFAULT_USER, DockerOptions
from pai.sandbox_docker._scripts import KEEPALIVE

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
    - ``user="1000:1000"``: who commands run as (``"root"`` opts back into root, ``None`` is
      the image's ``USER``); the workspace is made and owned through the engine.
    - ``max_concurrent_commands=8``: commands of one sandbox running at once, each holding one
      host thread; more wait for a slot, their timeout counting.
    - ``list_limit=10_000``: entries ``list_dir`` returns at most.
    - ``helper_timeout=30``: seconds a file operation's helper in the sandbox may take; with an
      output bound, so a sandbox that replaced its ``/bin/sh`` cannot hang or flood the host.
    - ``runtime``: the engine's OCI runtime; ``"runsc"`` runs commands under gVisor's user-space
      kernel (registered with ``--file-access=shared``, see the README). ``None``: the default.
    - ``disk`` (e.g. ``"2g"``): a size limit of the writable layer, where the storage driver has
      quotas (overlay2 on xfs with pquota, btrfs, zfs); elsewhere the first create says so.

    Every argument is checked here: a bad one raises :class:`~pai.sandbox.SandboxInputError`
    naming the option (``memory="lots"``).

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
        user: str | None = DEFAULT_USER,
        env: Mapping[str, str] | None = None,
        cpus: float | None = None,
        memory: str | int | None = "512m",
        pids_limit: int | None = 256,
        network: str = "none",
        labels: Mapping[str, str] | None = None,
        namespace: str = "pai",
        idle_ttl: float | None = None,
        docker_host: str | None = None,
        runtime: str | None = None,
        disk: str | None = None,
        max_concurrent_commands: int = 8,
        list_limit: int = 10_000,
        helper_timeout: float = 30.0,
    ) -> None:
        options = _checked_options(
            image=image,
            workdir=workdir,
            user=user,
            env=env,
            cpus=cpus,
            memory=memory,
            pids_limit=pids_limit,
            network=network,
            labels=labels,
            namespace=namespace,
            idle_ttl=idle_ttl,
            docker_host=docker_host,
            runtime=runtime,
            disk=disk,
            max_concurrent_commands=max_concurrent_commands,
            list_limit=list_limit,
            helper_timeout=helper_timeout,
        )
        self.image: str = options.image
        self.workdir: str = posixpath.normpath(options.workdir)
        self.user: str | None = options.user
        self.env: dict[str, str] = options.env
        self.cpus: float | None = options.cpus
        self.memory: str | int | None = options.memory
        self.pids_limit: int | None = options.pids_limit
        self.network: str = options.network
        self.labels: dict[str, str] = options.labels
        self.namespace: str = options.namespace
        self.idle_ttl: float | None = options.idle_ttl
        self.docker_host: str | None = options.docker_host
        self.runtime: str | None = options.runtime
        self.disk: str | None = options.disk
        self.max_concurrent_commands: int = options.max_concurrent_commands
        self.list_limit: int = options.list_limit
        self.helper_timeout: float = options.helper_timeout
        self.engine: Engine = Engine(options.docker_host)
        # Own thread limiters (see _limits): never anyio's shared default one.
        self._limiter = LoopLimiter(_PROVIDER_THREADS)
        self._destroy_limiter = LoopLimiter(_PROVIDER_THREADS)
        self._instance_limits: dict[str, InstanceLimits] = {}
        self._features = ProviderFeatures(cross_process=True, durable=True, processes=True)
        self._ids: tuple[int, int] | None = numeric_ids(user) if user is not None else None
        self._image_checked = False
        self._runtime_checked = False
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

    def limits(self, container_id: str) -> InstanceLimits:
        """The thread limiters of the sandbox in ``container_id`` (one set per container)."""
        limits = self._instance_limits.get(container_id)
        if limits is None:
            limits = self._instance_limits.setdefault(
                container_id, InstanceLimits.of(self.max_concurrent_commands)
            )
        return limits

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
        if self._image_checked:
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
        if self.user is None:
            self._ids = numeric_ids(image_user)
        return self._ids

    def _check_runtime_sync(self) -> None:
        """A ``runtime`` the engine does not have is one clear error, before any container."""
        if self.runtime is None or self._runtime_checked:
            return
        runtimes = sorted(cast("dict[str, object]", self.engine.info().get("Runtimes") or {}))
        if self.runtime not in runtimes:
            hint = did_you_mean(self.runtime, runtimes)
            raise SandboxProviderError(
                f"runtime {self.runtime!r} (option runtime) is not registered in this Docker "
                f"engine, which has {runtimes}; {hint}install it and register it under "
                '"runtimes" in the engine\'s daemon.json (for gVisor: apt-get install runsc, '
                "then runsc install), or remove the runtime option"
            )
        self._runtime_checked = True

    def _storage_error(self, error: SandboxProviderError) -> SandboxProviderError:
        text = str(error).lower()
        if self.disk is None or not ("quota" in text or "storage" in text):
            return error
        driver = str(self.engine.info().get("Driver") or "unknown")
        return SandboxProviderError(
            f"the disk limit (option disk={self.disk!r}) is not supported by this Docker "
            f"engine's storage driver {driver!r}: {error}. Per-container size limits need "
            "overlay2 on an xfs backing filesystem mounted with pquota (or btrfs, zfs); remove "
            "the disk option to run without one"
        )

    def _spec(self, key: str, ids: tuple[int, int] | None) -> ContainerSpec:
        labels = container_labels(self.namespace, key, self.labels)
        if ids is not None:
            labels[LABEL_UID], labels[LABEL_GID] = str(ids[0]), str(ids[1])
        return ContainerSpec(
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
            runtime=self.runtime,
            disk=self.disk,
        )

    def _create_sync(self, key: str) -> tuple[str, tuple[int, int] | None]:
        self._check_runtime_sync()
        ids = self._resolve_ids_sync()
        spec = self._spec(key, ids)
        for old in self._matching_sync(key):
            if old.state != "created":  # "created": a concurrent create is setting it up
                self.engine.remove(old.id)
        deadline = time.monotonic() + _ADOPT_SECONDS
        while time.monotonic() < deadline:
            try:
                container_id = self.engine.create_container(spec)
            except ImageMissing as error:
                raise self._missing_image(error) from None
            except SandboxProviderError as error:
                raise self._storage_error(error) from None
            except NameConflict:
                adopted = self._adopt_sync(key, spec.name, deadline)
                if adopted is not None:
                    return adopted
                # The name is reserved by a create the engine has not finished registering, or
                # was freed just now: try again shortly.
                time.sleep(0.05)
                continue
            return self._set_up_sync(container_id, ids)
        raise SandboxProviderError(
            f"could not create the Docker container {spec.name} for key {key!r}: its name "
            "stayed taken by a container that never became usable; remove it "
            f"(docker rm -f {spec.name}) and try again"
        )

    def _set_up_sync(
        self, container_id: str, ids: tuple[int, int] | None
    ) -> tuple[str, tuple[int, int] | None]:
        try:
            if ids is not None and ids != (0, 0):
                self._make_workspace_sync(container_id, ids)
            self.engine.start(container_id)
            if ids is None:
                ids = query_ids(self.engine, container_id)
                if ids != (0, 0):
                    self._make_workspace_sync(container_id, ids)
        except BaseException:
            self.engine.remove(container_id)
            raise
        self.touch(container_id)
        return container_id, ids

    def _adopt_sync(
        self, key: str, name: str, deadline: float
    ) -> tuple[str, tuple[int, int] | None] | None:
        """The container a concurrent create (maybe in another process) made for ``key``.

        Two first uses of one key at once both end up with the same container: the one whose
        create the engine accepted first wins the name, the other waits here until the winner's
        container runs. ``None`` when the name was freed (or held by something that is not this
        key's sandbox, which is removed), or not visible yet: create again.
        """
        while True:
            attrs = self.engine.inspect(name)
            if attrs is None:
                return None
            config: dict[str, Any] = attrs.get("Config") or {}
            labels = cast("dict[str, str]", config.get("Labels") or {})
            container_id = str(attrs.get("Id") or name)
            if labels.get(LABEL_NAMESPACE) != self.namespace or label_key(labels) != key:
                self.engine.remove(container_id)  # same name, not this key's sandbox
                return None
            state: dict[str, Any] = attrs.get("State") or {}
            status = str(state.get("Status") or "")
            if status == "paused":
                self.engine.unpause(container_id)
                return container_id, ids_of(labels)
            if status == "running":
                self.touch(container_id)
                return container_id, ids_of(labels)
            if status in ("exited", "dead") or time.monotonic() > deadline:
                # The winner failed (or died while being set up): replace it.
                self.engine.remove(container_id)
                return None
            time.sleep(0.05)  # "created" or "removing": the other side is still at work

    def _make_workspace_sync(self, container_id: str, ids: tuple[int, int]) -> None:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as archive:
            archive.addfile(archive_entry(self.workdir, 0o755, ids))
        self.engine.put_archive(container_id, "/", buffer.getvalue())

    async def create(self, key: str) -> SandboxInstance:
        await self.prune_idle()
        container_id, ids = await anyio.to_thread.run_sync(
            self._create_sync, key, limiter=self._limiter.get()
        )
        return DockerSandboxInstance(self, key, container_id, ids, oom_kills=0)

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
            if container.state in ("exited", "paused"):
                # Stopped (killed, or the engine restarted) or paused: bring it back with its
                # files rather than let a create replace it.
                try:
                    if container.state == "paused":
                        self.engine.unpause(container.id)
                    else:
                        self.engine.start(container.id)
                except (SandboxVanishedError, SandboxProviderError) as error:
                    _log.warning(
                        "could not bring back the Docker sandbox %s (%s): %s",
                        container.name,
                        container.state,
                        error,
                    )
                    continue
                return self._instance(key, container)
        return None

    def _instance(self, key: str, container: ContainerSummary) -> DockerSandboxInstance:
        self.touch(container.id)
        return DockerSandboxInstance(self, key, container.id, ids_of(container.labels))

    async def find(self, key: str) -> SandboxInstance | None:
        return await anyio.to_thread.run_sync(self._find_sync, key, limiter=self._limiter.get())

    def _destroy_sync(self, key: str) -> None:
        for container in self._matching_sync(key):
            self.engine.remove(container.id)
            self._forget(container.id)
        self.engine.remove(self.container_name(key))

    def _forget(self, container_id: str) -> None:
        self._last_used.pop(container_id, None)
        self._instance_limits.pop(container_id, None)

    async def destroy(self, key: str) -> None:
        # Its own limiter: never queued behind creates, or behind anything a sandbox does.
        await anyio.to_thread.run_sync(self._destroy_sync, key, limiter=self._destroy_limiter.get())

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
        return await anyio.to_thread.run_sync(self._list_sync, limiter=self._limiter.get())

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
                self._forget(container.id)
                removed.append(key)
        return removed

    async def prune(self, older_than: timedelta) -> list[str]:
        """Remove this namespace's containers idle for longer than ``older_than``; their keys.

        Idle means: created (``pai.created``), last started (``State.StartedAt``) and last used by
        this provider object all lie before the cutoff, and no command is running in it.
        """
        return await anyio.to_thread.run_sync(
            self._prune_sync, older_than, limiter=self._limiter.get()
        )

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

    # -- probe --------------------------------------------------------------------------------

    def _probe_sync(self) -> None:
        try:
            self.engine.ping()
        except SandboxProviderError as error:
            raise SandboxUnavailableError(str(error)) from None
        where = self.engine.address()
        try:
            present = self.engine.image_user(self.image) is not None
        except SandboxProviderError as error:
            raise SandboxUnavailableError(f"{error} (the Docker engine at {where})") from None
        if not present:
            raise SandboxUnavailableError(
                f"image {self.image!r} (option image) is not present in the Docker engine at "
                f"{where}; pull it (docker pull {self.image}) or build it "
                f"(docker build -t {self.image} .), or set image to one the engine has "
                "(docker image ls)"
            )
        try:
            self._check_runtime_sync()
        except SandboxProviderError as error:
            raise SandboxUnavailableError(str(error)) from None

    async def probe(self) -> None:
        """Check the engine answers, the image is present and the runtime registered.

        Creates nothing and pulls nothing. Raises
        :class:`~pai.sandbox.SandboxUnavailableError` naming the socket or ``DOCKER_HOST`` tried
        (password masked) and the fix: start Docker, ``docker pull IMAGE``, register the runtime.
        """
        await anyio.to_thread.run_sync(self._probe_sync, limiter=self._limiter.get())

    async def aclose(self) -> None:
        """Close the Docker client; the containers stay (use :meth:`destroy` to remove one)."""
        await anyio.to_thread.run_sync(self.engine.close, limiter=self._destroy_limiter.get())


#: Threads a provider's own calls (create, find, list, prune) use at most, and destroy's apart.
_PROVIDER_THREADS = 16

#: How long a create waits for a concurrent create's container of the same key to run.
_ADOPT_SECONDS = 30.0


def ids_of(labels: Mapping[str, str]) -> tuple[int, int] | None:
    """The sandbox user's uid/gid from a container's labels, when they were known at create."""
    uid, gid = labels.get(LABEL_UID), labels.get(LABEL_GID)
    if uid is not None and gid is not None and uid.isdigit() and gid.isdigit():
        return int(uid), int(gid)
    return None


def _checked_options(**values: object) -> DockerOptions:
    """The constructor's arguments checked by the same model as ``[capabilities.sandbox.docker]``:
    a bad value is one :class:`~pai.sandbox.SandboxInputError` naming every offending option."""
    values["env"] = dict(cast("Mapping[str, str]", values["env"] or {}))
    values["labels"] = dict(cast("Mapping[str, str]", values["labels"] or {}))
    try:
        return DockerOptions.model_validate(values)
    except ValidationError as error:
        problems = "; ".join(
            f"option {'.'.join(str(part) for part in item['loc']) or '?'}: "
            f"{str(item['msg']).removeprefix('Value error, ')}"
            for item in error.errors()
        )
        raise SandboxInputError(f"DockerSandboxProvider: {problems}") from None
