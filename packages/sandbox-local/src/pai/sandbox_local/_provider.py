"""The local sandbox provider: lifecycle of instances kept as state folders on this machine.

Each instance is a folder ``<state_dir>/<namespace>/<sha256(key)[:32]>`` holding ``meta.json``
(the exact key, the incarnation's id, when it was made), ``workspace/`` (the sandbox's
``/workspace``), ``etc/`` (the generated ``passwd``, ``group``, ``hosts`` and ``hostname``) and,
while its processes run, the supervisor's socket. Another process finds the instance by key
from the folder alone (as Docker finds a container by its labels); the processes are started
again on first use, so a restart of the host process loses no file.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import math
import os
import shutil
import stat
import threading
import time
import uuid
from collections.abc import Generator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import cast

import anyio
import anyio.abc
import anyio.to_thread
from pydantic import ValidationError

from pai.sandbox import (
    InstanceInfo,
    SandboxInputError,
    SandboxProviderError,
    SandboxUnavailableError,
    SandboxVanishedError,
)
from pai.sandbox.provider import ProviderFeatures, SandboxInstance
from pai.sandbox_local._bwrap import (
    SANDBOX_PATH,
    Answer,
    Layout,
    Supervisor,
    connect,
    find_bwrap,
    listening,
    probe,
    send,
    shutdown,
    start_supervisor,
    startup_failure,
)
from pai.sandbox_local._cgroups import Group, place
from pai.sandbox_local._instance import LocalSandboxInstance
from pai.sandbox_local._options import LocalOptions, size_bytes
from pai.sandbox_local._quota import DiskMonitor, DiskWatch

START_DEADLINE = 20.0
"""Seconds a new instance's supervisor may take to answer its first ping."""

_USERS = {"user": (1000, 1000), "root": (0, 0)}
_ABSENT_KEPT = 10_000
_USED_EVERY = 60.0


def default_state_dir() -> Path:
    """``$XDG_DATA_HOME/pai/sandbox-local``, else ``~/.local/share/pai/sandbox-local``."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(Path.home(), ".local", "share")
    return Path(base) / "pai" / "sandbox-local"


def key_digest(key: str) -> str:
    """The folder name of ``key``'s instance: never the key itself (keys are arbitrary text)."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]


class LocalSandboxProvider:
    """Sandboxes on this machine: bubblewrap namespaces around the host's own programs.

    Every command runs in fresh user, mount, PID, IPC and UTS namespaces (and a network
    namespace with loopback only, unless ``network=True``), sees the host's program folders
    read-only, its own ``/workspace`` (kept on the host under ``state_dir``), a private ``/tmp``
    and ``/proc``, and nothing else of the host. One supervisor process per instance starts each
    command, so a command costs a fork, not a new sandbox.

    Example::

        from pai.sandbox import sandbox_capability
        from pai.sandbox_local import LocalSandboxProvider

        capability = sandbox_capability(provider=LocalSandboxProvider(memory="1g"))
    """

    def __init__(
        self,
        *,
        state_dir: str | os.PathLike[str] | None = None,
        namespace: str = "pai",
        network: bool = False,
        user: str = "user",
        memory: str | int | None = "512m",
        processes: int | None = 512,
        file_size: str | int | None = "1g",
        disk: str | int | None = "2g",
        tmp_size: str | int = "256m",
        env: Mapping[str, str] | None = None,
        idle_ttl: float | None = None,
        keep_alive: float | None = 300.0,
        bwrap: str | None = None,
    ) -> None:
        options = _checked_options(
            state_dir=None if state_dir is None else os.fspath(state_dir),
            namespace=namespace,
            network=network,
            user=user,
            memory=memory,
            processes=processes,
            file_size=file_size,
            disk=disk,
            tmp_size=tmp_size,
            env=dict(env or {}),
            idle_ttl=idle_ttl,
            keep_alive=keep_alive,
            bwrap=bwrap,
        )
        self.options: LocalOptions = options
        """The checked options this provider was made with."""
        self.root: Path = (
            Path(options.state_dir) if options.state_dir else default_state_dir()
        ) / options.namespace
        """This provider's folder of instances: ``<state_dir>/<namespace>``."""
        self._bwrap_explicit = options.bwrap
        self._bwrap: str | None = None
        self._uid, self._gid = _USERS[options.user]
        self._limits = {
            name: value
            for name, value in (
                ("memory", None if options.memory is None else size_bytes(options.memory)),
                ("processes", options.processes),
                ("file_size", None if options.file_size is None else size_bytes(options.file_size)),
            )
            if value is not None
        }
        self._disk_limit = None if options.disk is None else size_bytes(options.disk)
        self._disk_watches: dict[str, DiskWatch] = {}
        self._disk_monitor = DiskMonitor()
        self._env = {
            "PATH": SANDBOX_PATH,
            "HOME": "/workspace",  # for root too: the rest of the file system is read-only
            "USER": options.user,
            "LOGNAME": options.user,
            "LANG": "C.UTF-8",
            **options.env,
        }
        self._cgroups = place() if options.processes or options.memory else None
        self._supervisors: dict[str, Supervisor] = {}
        self._used_marks: dict[str, float] = {}
        self._absent: dict[str, datetime] = {}
        """When ``find`` last found no instance, by key: ``create`` adopts one made since."""
        self._lock = threading.Lock()
        self._closed = False

    @property
    def name(self) -> str:
        return "local"

    @property
    def limits_in_effect(self) -> dict[str, str]:
        """How each limit holds on this machine: ``{"processes": ..., "memory": ...}``.

        With a control group per sandbox (cgroup v2 delegated to this process, or v1 as root)
        the limits count all of a sandbox's processes together; otherwise they are resource
        limits of each process (``RLIMIT_NPROC`` counts the host user's processes, and the
        kernel does not apply it to root: as root without control groups a sandbox's process
        count is not bounded).
        """
        options = self.options
        group = self._cgroups
        processes = (
            "none"
            if options.processes is None
            else f"{options.processes} processes for the sandbox ({group.describe()} pids.max)"
            if group is not None
            else "none: the host user is root, whom RLIMIT_NPROC does not bound, and no "
            "control group can be made here"
            if os.geteuid() == 0
            else f"{options.processes} processes of the host user (RLIMIT_NPROC)"
        )
        memory = (
            "none"
            if options.memory is None
            else f"{options.memory} for the sandbox ({group.describe()}), and per process "
            "(RLIMIT_DATA)"
            if group is not None and "memory" in group.parents
            else f"{options.memory} per process (RLIMIT_DATA)"
        )
        return {"processes": processes, "memory": memory}

    @property
    def features(self) -> ProviderFeatures:
        return ProviderFeatures(cross_process=True, durable=True, processes=True)

    def __repr__(self) -> str:
        return f"LocalSandboxProvider(root={str(self.root)!r})"

    # -- state folders -------------------------------------------------------------------------

    def _folder(self, key: str) -> Path:
        return self.root / key_digest(key)

    def _meta(self, folder: Path) -> dict[str, str] | None:
        try:
            data = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict):
            return None
        meta = cast("dict[str, object]", data)
        fields = {name: meta.get(name) for name in ("key", "instance_id", "created_at")}
        if not all(isinstance(value, str) for value in fields.values()):
            return None
        return {name: str(value) for name, value in fields.items()}

    def _layout(self, key: str, folder: Path, instance_id: str) -> Layout:
        return Layout(
            workspace=folder / "workspace",
            etc=folder / "etc",
            socket=folder / _socket_name(instance_id),
            hostname=f"pai-{key_digest(key)[:12]}",
            uid=self._uid,
            gid=self._gid,
            network=self.options.network,
            limits=self._limits,
            keep_alive=self.options.keep_alive,
            tmp_size=size_bytes(self.options.tmp_size),
            cgroup=None
            if self._cgroups is None
            else Group(self._cgroups, f"pai-local-{self.options.namespace}-{key_digest(key)}"),
        )

    def _create_sync(self, key: str) -> LocalSandboxInstance:
        """A new instance for ``key``, replacing an older one; but when another process made
        one for ``key`` after this provider last found none (two first uses of a key at once:
        both found none, both create), that one is the instance for both."""
        started = self._absent.pop(key, None) or datetime.now(UTC)
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        locks = self.root / ".locks"
        locks.mkdir(exist_ok=True, mode=0o700)
        with _flock(locks / key_digest(key)):
            meta = self._meta(self._folder(key))
            if (
                meta is not None
                and meta["key"] == key
                and datetime.fromisoformat(meta["created_at"]) >= started
            ):
                return self._instance(key, meta["instance_id"])
            return self._make_sync(key)

    def _make_sync(self, key: str) -> LocalSandboxInstance:
        folder = self._folder(key)
        self._destroy_sync(key)
        staging = self.root / f".new-{uuid.uuid4().hex}"
        staging.mkdir(mode=0o700)
        instance_id = uuid.uuid4().hex
        (staging / "workspace").mkdir(mode=0o755)
        etc = staging / "etc"
        etc.mkdir(mode=0o755)
        hostname = f"pai-{key_digest(key)[:12]}"
        (etc / "passwd").write_text(
            "root:x:0:0:root:/workspace:/bin/sh\n"
            "user:x:1000:1000:user:/workspace:/bin/sh\n"
            "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
        )
        (etc / "group").write_text("root:x:0:\nuser:x:1000:\nnogroup:x:65534:\n")
        (etc / "hosts").write_text(f"127.0.0.1\tlocalhost\n127.0.1.1\t{hostname}\n::1\tlocalhost\n")
        (etc / "hostname").write_text(f"{hostname}\n")
        meta = {
            "key": key,
            "instance_id": instance_id,
            "created_at": datetime.now(UTC).isoformat(),
        }
        (staging / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
        staging.rename(folder)  # under the key's lock: nothing else makes this folder now
        return self._instance(key, instance_id)

    def _instance(self, key: str, instance_id: str) -> LocalSandboxInstance:
        folder = self._folder(key)

        async def connect_() -> anyio.abc.SocketStream:
            return await self._connect(key, folder, instance_id)

        def restart() -> None:
            self._stop(folder)

        return LocalSandboxInstance(
            key, instance_id, connect_, restart, self._env, self._disk_watch(key, folder)
        )

    def _disk_watch(self, key: str, folder: Path) -> DiskWatch | None:
        """The one watch over ``folder``'s workspace in this process (``None``: no limit)."""
        if self._disk_limit is None:
            return None
        with self._lock:
            watch = self._disk_watches.get(str(folder))
            if watch is None:
                if len(self._disk_watches) >= _ABSENT_KEPT:
                    self._disk_watches.clear()  # bounded; a new watch just measures afresh
                watch = DiskWatch(
                    folder / "workspace",
                    self._disk_limit,
                    key,
                    lambda: self._stop(folder),
                    self._disk_monitor,
                )
                self._disk_watches[str(folder)] = watch
            return watch

    # -- the supervisor ------------------------------------------------------------------------

    async def _connect(self, key: str, folder: Path, instance_id: str) -> anyio.abc.SocketStream:
        # The socket is named after the incarnation: one re-created by another process listens
        # elsewhere, so a connection here always reaches this incarnation's supervisor.
        socket_path = folder / _socket_name(instance_id)
        self._mark_used(folder)
        stream = await connect(socket_path)
        if stream is not None:
            return stream
        meta = self._meta(folder)
        if meta is None or meta["instance_id"] != instance_id:
            raise SandboxVanishedError(f"the local sandbox {key!r} no longer exists")
        supervisor = self._start(key, folder, instance_id)
        await self._await_ready(supervisor)
        stream = await connect(socket_path)
        if stream is None:
            raise SandboxProviderError(
                f"the local sandbox {key!r} was started but its supervisor does not listen"
            )
        return stream

    def _mark_used(self, folder: Path) -> None:
        """Touch the instance's ``used`` file (at most once a minute, or twice per ``idle_ttl``):
        ``idle_ttl`` counts from it, in every process, whatever the commands did to the files."""
        now = time.monotonic()
        key = str(folder)
        ttl = self.options.idle_ttl
        every = _USED_EVERY if ttl is None else min(_USED_EVERY, ttl / 2)
        if now - self._used_marks.get(key, -math.inf) < every:
            return
        if len(self._used_marks) >= _ABSENT_KEPT:
            self._used_marks.clear()
        self._used_marks[key] = now
        with contextlib.suppress(OSError):
            (folder / "used").touch()

    def _start(self, key: str, folder: Path, instance_id: str) -> Supervisor | None:
        """Start the instance's supervisor unless another task or process just did (``None``:
        another process's supervisor listens)."""
        if self._closed:
            raise SandboxProviderError("the local sandbox provider was closed (aclose())")
        if self._bwrap is None:
            self._bwrap = find_bwrap(self._bwrap_explicit)
        with self._lock, _flock(folder / ".lock"):
            current = self._supervisors.get(str(folder))
            socket_path = folder / _socket_name(instance_id)
            if current is not None and current.alive and listening(socket_path):
                return current
            if current is None and listening(socket_path):
                return None
            if current is not None:
                current.kill()
            supervisor = start_supervisor(self._bwrap, self._layout(key, folder, instance_id))
            self._supervisors[str(folder)] = supervisor
            return supervisor

    async def _await_ready(self, supervisor: Supervisor | None) -> None:
        if supervisor is None:
            return
        with anyio.move_on_after(START_DEADLINE):
            while True:
                failure = startup_failure(supervisor)
                if failure is not None:
                    raise failure
                stream = await connect(supervisor.socket_path)
                if stream is None:
                    await anyio.sleep(0.005)
                    continue
                async with stream:
                    await send(stream, ["ping"])
                    with anyio.move_on_after(0.5):
                        document, _ = await Answer(stream, max_payload=0).frame()
                        if document[0] == "pong":
                            return
                failure = startup_failure(supervisor)
                if failure is not None:
                    raise failure
        supervisor.kill()
        raise SandboxUnavailableError(
            f"the local sandbox's supervisor did not answer within {START_DEADLINE:g} s of starting"
        )

    def _stop(self, folder: Path) -> None:
        """End the instance's processes (files are kept): ours by killing ``bwrap``, another
        process's by asking its supervisor to shut down."""
        with self._lock:
            supervisor = self._supervisors.pop(str(folder), None)
        if supervisor is not None and supervisor.alive:
            supervisor.kill()
            # Ours, so the socket is ours too. Another process's is left to it: a supervisor
            # it started meanwhile listens there, and unlinking it would leave that one deaf.
            for socket_path in folder.glob("sock-*"):
                with contextlib.suppress(FileNotFoundError):
                    socket_path.unlink()
            return
        if supervisor is not None:
            supervisor.kill()  # reaped; its group is left alone (see Supervisor.kill)
        for socket_path in folder.glob("sock-*"):
            shutdown(socket_path)

    # -- the protocol --------------------------------------------------------------------------

    async def create(self, key: str) -> SandboxInstance:
        if self.options.idle_ttl is not None:
            await self.prune_idle()
        # File and process work off the event loop: other sandboxes' tasks go on meanwhile.
        return await anyio.to_thread.run_sync(self._create_sync, key)

    async def find(self, key: str) -> SandboxInstance | None:
        meta = self._meta(self._folder(key))
        if meta is None or meta["key"] != key:
            if len(self._absent) >= _ABSENT_KEPT:
                self._absent.clear()  # bounded: an entry only matters to the create that follows
            self._absent[key] = datetime.now(UTC)
            return None
        return self._instance(key, meta["instance_id"])

    def _destroy_sync(self, key: str) -> None:
        folder = self._folder(key)
        if not folder.exists():
            return
        self._stop(folder)
        if self._cgroups is not None:  # the instance is gone: so is its group, whoever made it
            Group(self._cgroups, f"pai-local-{self.options.namespace}-{key_digest(key)}").remove()
        with self._lock:
            self._disk_watches.pop(str(folder), None)
        graveyard = self.root / f".gone-{uuid.uuid4().hex}"
        try:
            folder.rename(graveyard)
        except FileNotFoundError:
            return
        _remove_tree(graveyard)

    async def destroy(self, key: str) -> None:
        await anyio.to_thread.run_sync(self._destroy_sync, key)

    async def list_instances(self) -> Sequence[InstanceInfo]:
        infos: list[InstanceInfo] = []
        if not self.root.is_dir():
            return infos
        for folder in sorted(self.root.iterdir()):
            if folder.name.startswith("."):
                continue
            meta = self._meta(folder)
            if meta is None:
                continue
            infos.append(
                InstanceInfo(
                    key=meta["key"],
                    instance_id=meta["instance_id"],
                    created_at=datetime.fromisoformat(meta["created_at"]),
                    provider="local",
                    details={"state": str(folder)},
                )
            )
        return infos

    async def prune(self, older_than: timedelta) -> list[str]:
        """Destroy every instance created more than ``older_than`` ago; their keys."""
        cutoff = datetime.now(UTC) - older_than
        removed: list[str] = []
        for info in await self.list_instances():
            if info.created_at < cutoff:
                await anyio.to_thread.run_sync(self._destroy_sync, info.key)
                removed.append(info.key)
        return removed

    async def prune_idle(self) -> list[str]:
        """Destroy every instance unused for ``idle_ttl`` seconds; their keys."""
        ttl = self.options.idle_ttl
        if ttl is None:
            return []
        removed: list[str] = []
        now = time.time()
        for info in await self.list_instances():
            folder = self._folder(info.key)
            used = max(_mtime(folder / "used"), _mtime(folder / "meta.json"))
            if now - used <= ttl:
                continue
            if any(listening(path) for path in folder.glob("sock-*")):
                continue  # its processes run (here or in another process): in use
            await anyio.to_thread.run_sync(self._destroy_sync, info.key)
            removed.append(info.key)
        return removed

    async def probe(self) -> None:
        """Check that bwrap is there and that this kernel lets it make a sandbox."""
        bwrap = find_bwrap(self._bwrap_explicit)
        await anyio.to_thread.run_sync(probe, bwrap)

    async def aclose(self) -> None:
        """End the processes this provider started; every instance's files stay."""
        self._closed = True
        self._disk_monitor.close()
        with self._lock:
            supervisors, self._supervisors = list(self._supervisors.values()), {}

        def kill_all() -> None:
            for supervisor in supervisors:
                supervisor.kill()

        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(kill_all)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _socket_name(instance_id: str) -> str:
    """The supervisor's socket in the instance's folder, named after its incarnation."""
    return f"sock-{instance_id[:16]}"


@contextlib.contextmanager
def _flock(path: Path) -> Generator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _remove_tree(path: Path) -> None:
    """Remove ``path`` and everything under it, also folders a command made read-only."""

    def make_writable(function: object, failed: str, _info: object) -> None:
        parent = os.path.dirname(failed)
        with contextlib.suppress(OSError):
            os.chmod(parent, stat.S_IRWXU)
        with contextlib.suppress(OSError):
            if os.path.isdir(failed) and not os.path.islink(failed):
                os.chmod(failed, stat.S_IRWXU)
                shutil.rmtree(failed, ignore_errors=True)
            else:
                os.unlink(failed)

    shutil.rmtree(path, onerror=make_writable)


def _checked_options(**values: object) -> LocalOptions:
    try:
        return LocalOptions.model_validate(values)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in item['loc'])}: {item['msg']}"
            for item in error.errors()
        )
        raise SandboxInputError(f"invalid local sandbox options: {problems}") from None


__all__ = ["LocalSandboxProvider", "default_state_dir", "key_digest"]
