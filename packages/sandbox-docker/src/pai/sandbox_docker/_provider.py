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

import base64
import hashlib
import io
import logging
import posixpath
import re
import tarfile
import time
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import anyio.to_thread
from anyio import from_thread

from pai.sandbox.provider import (
    DirEntry,
    EntryType,
    FileWrite,
    InstanceInfo,
    OutputCallback,
    ProviderFeatures,
    RawCommandResult,
    SandboxDirectoryNotEmptyError,
    SandboxFileExistsError,
    SandboxFileNotFoundError,
    SandboxInputError,
    SandboxInstance,
    SandboxIsADirectoryError,
    SandboxNotADirectoryError,
    SandboxProviderError,
    SandboxVanishedError,
)
from pai.sandbox_docker._engine import (
    MODE_DIR,
    MODE_SYMLINK,
    ContainerSpec,
    ContainerSummary,
    Engine,
    ExecStream,
    ImageMissing,
    PathMissing,
)

_log = logging.getLogger("pai.sandbox_docker")

LABEL_NAMESPACE = "pai.namespace"
LABEL_KEY = "pai.key"
LABEL_KEY_B64 = "pai.key-b64"
LABEL_KEY_HASH = "pai.key-sha256"
LABEL_CAPABILITY = "pai.capability"
LABEL_CREATED = "pai.created"
LABEL_VERSION = "pai.provider-version"
LABEL_UID = "pai.uid"
LABEL_GID = "pai.gid"

#: The environment variable marking every process a command starts (for the timeout kill).
RUN_MARKER = "PAI_RUN"

_KEEPALIVE = ("sleep", "2147483647")  # GNU and busybox sleep both accept this


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("pai-sandbox-docker")
    except Exception:  # pragma: no cover - not installed as a distribution
        return "0"


PROVIDER_VERSION = _version()


def _key_bytes(key: str) -> bytes:
    return key.encode("utf-8", "surrogatepass")


def key_hash(key: str) -> str:
    """The SHA-256 of the key (labels filter on it; the key itself is then compared exactly)."""
    return hashlib.sha256(_key_bytes(key)).hexdigest()


def container_name(namespace: str, key: str) -> str:
    """The container name for ``key``: bounded length whatever the key, unique per namespace."""
    readable = re.sub(r"[^a-zA-Z0-9_.-]", "-", namespace)[:40].strip("-.") or "ns"
    digest = hashlib.sha256(
        namespace.encode("utf-8", "surrogatepass") + b"\0" + _key_bytes(key)
    ).hexdigest()
    return f"pai-{readable}-{digest[:24]}"


def _label_key(labels: Mapping[str, str]) -> str | None:
    encoded = labels.get(LABEL_KEY_B64)
    if encoded is not None:
        try:
            return base64.b64decode(encoded).decode("utf-8", "surrogatepass")
        except ValueError:
            return None
    return labels.get(LABEL_KEY)


def _numeric_ids(user: str) -> tuple[int, int] | None:
    if user in ("", "root", "0", "0:0"):
        return (0, 0)
    uid, _, gid = user.partition(":")
    if uid.isdigit() and gid.isdigit():
        return int(uid), int(gid)
    return None


def _parse_created(labels: Mapping[str, str], fallback: float) -> datetime:
    text = labels.get(LABEL_CREATED)
    if text:
        try:
            parsed = datetime.fromisoformat(text)
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
        except ValueError:
            pass
    return datetime.fromtimestamp(fallback, UTC)


def _parse_docker_time(text: str) -> datetime | None:
    # Docker writes RFC 3339 with nanoseconds: 2024-05-01T12:00:00.123456789Z
    match = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)?", text)
    if not match or text.startswith("0001-"):
        return None
    frac = (match.group(2) or "")[:7]
    zone = match.group(3) or "Z"
    zone = "+00:00" if zone == "Z" else zone
    return datetime.fromisoformat(match.group(1) + frac + zone)


# -- shell snippets ---------------------------------------------------------------------------

# Runs the command with bash when the image has it, else sh; $1 command, $2 cwd, $3 stdin file.
_RUN = (
    'cd -- "$2" || exit 1\n'
    'if [ -n "$3" ]; then exec <"$3"; rm -f -- "$3"; else exec </dev/null; fi\n'
    'if command -v bash >/dev/null 2>&1; then exec bash -c "$1"; fi\n'
    'exec sh -c "$1"\n'
)

# Kills every process whose environment carries the run's marker (so also what the command put in
# the background or in another session), repeating until none is left.
_KILL = r"""
m="$1"; i=0
while [ $i -lt 50 ]; do
  found=0
  for e in /proc/[0-9]*/environ; do
    p=${e#/proc/}; p=${p%/environ}
    [ "$p" = "$$" ] && continue
    if grep -qzxF "$m" "$e" 2>/dev/null; then kill -KILL "$p" 2>/dev/null; found=1; fi
  done
  [ $found = 0 ] && exit 0
  i=$((i+1))
done
exit 0
"""

# Exit codes of the file scripts.
_NOT_FOUND, _NOT_DIR, _IS_DIR, _EXISTS, _NOT_EMPTY = 10, 11, 12, 13, 14

# Every parent of $1 must be a folder: 10 when one is missing, 11 when one is not a folder.
_CHECK_PARENTS = r"""
chk() { c=; r=${1#/}; while :; do case $r in */*) ;; *) return 0;; esac
  c="$c/${r%%/*}"; r=${r#*/}
  if [ -d "$c" ]; then :; elif [ -e "$c" ] || [ -L "$c" ]; then exit 11; else exit 10; fi; done; }
"""

_LIST = (
    _CHECK_PARENTS
    + r"""
p=$1; chk "$p"
[ -e "$p" ] || [ -L "$p" ] || exit 10
[ -d "$p" ] || exit 11
b=${p%/}
set --
for f in "$b"/* "$b"/.[!.]* "$b"/..?*; do { [ -e "$f" ] || [ -L "$f" ]; } && set -- "$@" "$f"; done
[ $# -eq 0 ] && exit 0
exec stat -c '%F|%s|%n' -- "$@"
"""
)

_REMOVE = (
    _CHECK_PARENTS
    + r"""
p=$1; chk "$p"
[ -e "$p" ] || [ -L "$p" ] || exit 10
if [ -d "$p" ] && [ ! -L "$p" ]; then
  [ "$2" = 1 ] && exec rm -rf -- "$p"
  for f in "$p"/* "$p"/.[!.]* "$p"/..?*; do { [ -e "$f" ] || [ -L "$f" ]; } && exit 14; done
  exec rmdir -- "$p"
fi
exec rm -f -- "$p"
"""
)

_MAKE_DIR = (
    _CHECK_PARENTS
    + r"""
p=$1
if [ "$2" = 1 ]; then
  c=; r=${p#/}
  while [ -n "$r" ]; do
    part=${r%%/*}; case $r in */*) r=${r#*/};; *) r=;; esac
    c="$c/$part"
    [ -d "$c" ] && continue
    if [ -e "$c" ] || [ -L "$c" ]; then [ -n "$r" ] && exit 11; exit 13; fi
    mkdir -- "$c" 2>/dev/null || [ -d "$c" ] || mkdir -- "$c" || exit 1
  done
  exit 0
fi
chk "$p"
{ [ -e "$p" ] || [ -L "$p" ]; } && exit 13
exec mkdir -- "$p"
"""
)

_EXISTS_SCRIPT = '[ -e "$1" ] || [ -L "$1" ]'

_IDS = "id -u; id -g"

_STAT_LINE = re.compile(r"^([a-z ]+)\|(\d+)\|(.*)$", re.DOTALL)


def _entry_type(kind: str) -> EntryType:
    if kind.startswith("regular"):
        return "file"
    if kind == "directory":
        return "directory"
    if kind == "symbolic link":
        return "symlink"
    return "other"


def _dir_entry(name: str, mode: int, uid: int, gid: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    info.mode = mode
    info.uid, info.gid = uid, gid
    info.mtime = int(time.time())
    return info


class DockerSandboxInstance:
    """One sandbox: a running container (keyed by labels), used through exec and archive calls."""

    def __init__(
        self,
        provider: DockerSandboxProvider,
        key: str,
        container_id: str,
        ids: tuple[int, int] | None,
    ) -> None:
        self._provider = provider
        self._engine = provider.engine
        self._key = key
        self._id = container_id
        self._ids = ids

    @property
    def key(self) -> str:
        return self._key

    @property
    def instance_id(self) -> str:
        return self._id

    def __repr__(self) -> str:
        return f"DockerSandboxInstance(key={self._key!r}, container={self._id[:12]!r})"

    # -- helpers ------------------------------------------------------------------------------

    async def _sh(self, script: str, *args: str) -> tuple[int, bytes, bytes]:
        self._provider.touch(self._id)
        return await anyio.to_thread.run_sync(
            self._engine.exec_simple, self._id, ["sh", "-c", script, "pai", *args]
        )

    def _ids_sync(self) -> tuple[int, int]:
        if self._ids is None:
            code, out, err = self._engine.exec_simple(self._id, ["sh", "-c", _IDS])
            parts = out.split()
            if code != 0 or len(parts) != 2:
                raise SandboxProviderError(
                    f"could not tell the container user's uid/gid: {err.decode(errors='replace')}"
                )
            self._ids = (int(parts[0]), int(parts[1]))
        return self._ids

    @staticmethod
    def _failed(path: str, code: int, err: bytes, what: str) -> Exception:
        if code == _NOT_FOUND:
            return SandboxFileNotFoundError(path)
        if code == _NOT_DIR:
            return SandboxNotADirectoryError(path)
        if code == _IS_DIR:
            return SandboxIsADirectoryError(path)
        if code == _EXISTS:
            return SandboxFileExistsError(path)
        if code == _NOT_EMPTY:
            return SandboxDirectoryNotEmptyError(path)
        detail = err.decode(errors="replace").strip()
        return SandboxProviderError(f"{what} of {path!r} failed (exit {code}): {detail}")

    # -- commands -----------------------------------------------------------------------------

    async def run(
        self,
        command: str,
        *,
        cwd: str,
        env: Mapping[str, str],
        stdin: bytes | None,
        timeout: float | None,
        output_limit: int,
        on_stdout: OutputCallback | None = None,
        on_stderr: OutputCallback | None = None,
    ) -> RawCommandResult:
        if timeout is not None and timeout <= 0:
            raise SandboxInputError(f"timeout must be positive seconds or None, got {timeout!r}")
        self._provider.touch(self._id)
        marker = uuid.uuid4().hex
        holder = ExecStream()
        kept: dict[int, list[bytes]] = {1: [], 2: []}
        sizes = {1: 0, 2: 0}
        truncated = False
        callbacks = {1: on_stdout, 2: on_stderr}

        def on_frame(stream: int, chunk: bytes) -> None:
            nonlocal truncated
            if stream not in kept:
                return
            room = output_limit - sizes[stream]
            if room <= 0:
                truncated = True  # keep draining, keep nothing
                return
            if len(chunk) > room:
                chunk = chunk[:room]
                truncated = True
            kept[stream].append(chunk)
            sizes[stream] += len(chunk)
            callback = callbacks[stream]
            if callback is not None:
                from_thread.run_sync(callback, chunk)

        def work() -> int:
            stdin_path = ""
            if stdin is not None:
                stdin_path = f"/tmp/pai-stdin-{marker}"
                uid, gid = self._ids_sync()
                buffer = io.BytesIO()
                with tarfile.open(fileobj=buffer, mode="w") as archive:
                    info = tarfile.TarInfo(stdin_path.lstrip("/"))
                    info.size, info.mode, info.uid, info.gid = len(stdin), 0o600, uid, gid
                    info.mtime = int(time.time())
                    archive.addfile(info, io.BytesIO(stdin))
                self._engine.put_archive(self._id, "/", buffer.getvalue())
            exec_id = self._engine.exec_create(
                self._id,
                ["sh", "-c", _RUN, "pai", command, cwd, stdin_path],
                {**env, RUN_MARKER: marker},
            )
            self._engine.exec_stream(self._id, exec_id, holder, on_frame)
            return self._engine.exec_exit_code(self._id, exec_id)

        codes: list[int] = []
        done = anyio.Event()

        errors: list[Exception] = []

        async def worker() -> None:
            try:
                codes.append(await anyio.to_thread.run_sync(work, limiter=anyio.CapacityLimiter(1)))
            except Exception as error:  # re-raised below, outside the task group
                errors.append(error)
            finally:
                done.set()

        timed_out = False
        async with anyio.create_task_group() as group:
            group.start_soon(worker)
            try:
                with anyio.move_on_after(timeout):
                    await done.wait()
                if not done.is_set():
                    timed_out = True
                    with anyio.CancelScope(shield=True):
                        await self._stop(marker, holder, done)
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await self._stop(marker, holder, done)
                raise
        if errors:
            if not isinstance(errors[0], SandboxVanishedError):
                with anyio.CancelScope(shield=True):
                    await self._stop(marker, holder, done)  # e.g. a callback raised mid-stream
            raise errors[0]
        exit_code = codes[0] if codes else -1
        if timed_out and exit_code in (0, -1):
            exit_code = 137
        return RawCommandResult(
            stdout=b"".join(kept[1]),
            stderr=b"".join(kept[2]),
            exit_code=exit_code,
            timed_out=timed_out,
            truncated=truncated,
        )

    async def _stop(self, marker: str, holder: ExecStream, done: anyio.Event) -> None:
        """Kill everything the run started, inside the container; then cut the stream loose."""
        if not done.is_set():
            try:
                await anyio.to_thread.run_sync(
                    self._engine.exec_simple,
                    self._id,
                    ["sh", "-c", _KILL, "pai-kill", f"{RUN_MARKER}={marker}"],
                )
            except (SandboxVanishedError, SandboxProviderError) as error:
                _log.debug("killing a timed-out command failed: %s", error)
        with anyio.move_on_after(5):
            await done.wait()
        if not done.is_set():
            holder.abort()  # something escaped with our output pipe; stop reading it

    # -- files --------------------------------------------------------------------------------

    async def read_file(self, path: str) -> bytes:
        self._provider.touch(self._id)
        return await anyio.to_thread.run_sync(self._read_sync, path)

    def _read_sync(self, path: str) -> bytes:
        current = path
        for _ in range(16):  # follow symlinks a bounded number of times
            try:
                stat, data = self._engine.get_archive(self._id, current)
            except PathMissing:
                raise SandboxFileNotFoundError(path) from None
            except SandboxProviderError as error:
                if "not a directory" in str(error).lower():
                    raise SandboxNotADirectoryError(path) from None
                raise
            mode = int(stat.get("mode", 0))
            if mode & MODE_DIR:
                raise SandboxIsADirectoryError(path)
            if mode & MODE_SYMLINK:
                target = str(stat.get("linkTarget") or "")
                if not target:
                    raise SandboxFileNotFoundError(path, "a dangling symbolic link")
                current = posixpath.normpath(posixpath.join(posixpath.dirname(current), target))
                continue
            with tarfile.open(fileobj=io.BytesIO(data), mode="r") as archive:
                for member in archive:
                    if member.isfile():
                        extracted = archive.extractfile(member)
                        if extracted is not None:
                            return extracted.read()
            raise SandboxProviderError(f"{path!r} is not a regular file in the sandbox")
        raise SandboxFileNotFoundError(path, "too many levels of symbolic links")

    async def write_files(self, files: Sequence[FileWrite]) -> None:
        if not files:
            return
        self._provider.touch(self._id)
        await anyio.to_thread.run_sync(self._write_sync, list(files))

    def _write_sync(self, files: list[FileWrite]) -> None:
        uid, gid = self._ids_sync()
        workdir = self._provider.workdir.rstrip("/")
        now = int(time.time())
        buffer = io.BytesIO()
        added: set[str] = set()
        with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
            for file in files:
                # Parents inside the workspace become folder entries owned by the sandbox user
                # (the engine would make missing ones root-owned); folders outside it are left
                # to the engine, so /tmp and the like keep their owner and mode.
                parent = posixpath.dirname(file.path)
                chain: list[str] = []
                while parent.startswith(workdir + "/") and parent not in added:
                    chain.append(parent)
                    parent = posixpath.dirname(parent)
                for folder in reversed(chain):
                    added.add(folder)
                    archive.addfile(_dir_entry(folder.lstrip("/"), 0o755, uid, gid))
                info = tarfile.TarInfo(file.path.lstrip("/"))
                info.size = len(file.content)
                info.mode = file.mode & 0o7777
                info.uid, info.gid = uid, gid
                info.mtime = now
                archive.addfile(info, io.BytesIO(file.content))
        self._engine.put_archive(self._id, "/", buffer.getvalue())

    async def list_dir(self, path: str) -> Sequence[DirEntry]:
        code, out, err = await self._sh(_LIST, path)
        if code != 0:
            raise self._failed(path, code, err, "list_dir")
        base = path.rstrip("/")
        prefix = base + "/"
        text = out.decode("utf-8", "surrogateescape")
        if text.endswith("\n"):
            text = text[:-1]
        parsed: list[list[Any]] = []
        for line in text.split("\n") if text else []:
            match = _STAT_LINE.match(line)
            if match and match.group(3).startswith(prefix):
                parsed.append([match.group(1), int(match.group(2)), match.group(3)])
            elif parsed:  # a name with a newline in it
                parsed[-1][2] += "\n" + line
        entries: list[DirEntry] = []
        for kind, size, full in parsed:
            name = str(full)[len(prefix) :]
            entry_type = _entry_type(str(kind))
            entries.append(
                DirEntry(
                    name,
                    posixpath.join(path, name),
                    entry_type,
                    0 if entry_type == "directory" else int(size),
                )
            )
        return sorted(entries, key=lambda entry: entry.name)

    async def remove(self, path: str, *, recursive: bool) -> None:
        if path == "/":
            raise SandboxInputError("refusing to remove '/', the sandbox's root folder")
        code, _, err = await self._sh(_REMOVE, path, "1" if recursive else "0")
        if code != 0:
            raise self._failed(path, code, err, "remove")

    async def make_dir(self, path: str, *, parents: bool) -> None:
        code, _, err = await self._sh(_MAKE_DIR, path, "1" if parents else "0")
        if code != 0:
            raise self._failed(path, code, err, "make_dir")

    async def exists(self, path: str) -> bool:
        code, _, err = await self._sh(_EXISTS_SCRIPT, path)
        if code not in (0, 1):
            raise self._failed(path, code, err, "exists")
        return code == 0


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
        self._ids: tuple[int, int] | None = _numeric_ids(user) if user is not None else None
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
        self._ids = _numeric_ids(image_user)
        return self._ids

    def _labels(self, key: str) -> dict[str, str]:
        try:
            _key_bytes(key).decode("utf-8")
            readable = key
        except UnicodeDecodeError:
            readable = key.encode("utf-8", "backslashreplace").decode()
        labels = {
            **self.labels,
            LABEL_NAMESPACE: self.namespace,
            LABEL_KEY: readable,
            LABEL_KEY_B64: base64.b64encode(_key_bytes(key)).decode(),
            LABEL_KEY_HASH: key_hash(key),
            LABEL_CAPABILITY: "sandbox",
            LABEL_CREATED: datetime.now(UTC).isoformat(),
            LABEL_VERSION: PROVIDER_VERSION,
        }
        return labels

    def _create_sync(self, key: str) -> tuple[str, tuple[int, int] | None]:
        ids = self._resolve_ids_sync()
        labels = self._labels(key)
        if ids is not None:
            labels[LABEL_UID], labels[LABEL_GID] = str(ids[0]), str(ids[1])
        spec = ContainerSpec(
            name=self.container_name(key),
            image=self.image,
            command=_KEEPALIVE,
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
                code, out, err = self.engine.exec_simple(container_id, ["sh", "-c", _IDS])
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
            archive.addfile(_dir_entry(self.workdir.lstrip("/"), 0o755, *ids))
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
            if c.labels.get(LABEL_NAMESPACE) == self.namespace and _label_key(c.labels) == key
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
            key = _label_key(container.labels)
            if key is None or container.labels.get(LABEL_NAMESPACE) != self.namespace:
                continue
            infos.append(
                InstanceInfo(
                    key=key,
                    instance_id=container.id,
                    created_at=_parse_created(container.labels, container.created),
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
            key = _label_key(container.labels)
            if key is None:
                continue
            last = _parse_created(container.labels, container.created)
            if last >= cutoff:
                continue
            attrs = self.engine.inspect(container.id)
            if attrs is None:
                continue
            if attrs.get("ExecIDs"):
                continue  # a command is running: not idle
            state: dict[str, Any] = attrs.get("State") or {}
            started = _parse_docker_time(str(state.get("StartedAt") or ""))
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
