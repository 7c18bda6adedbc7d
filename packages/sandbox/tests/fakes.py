"""A test double of a sandbox provider, for pai-sandbox's own tests.

:class:`FakeProvider` implements :class:`~pai.sandbox.provider.SandboxProvider` without any backend:

- instances keep their files in a nested ``dict`` (folders are dicts, files are :class:`FakeFile`),
  so read / write / list / remove / make_dir / exists behave like a small real file system and
  raise the matching ``Sandbox*Error``;
- ``run`` executes nothing: it records its arguments (:class:`RecordedRun`) and answers from a
  queue of scripted :class:`Reply` values (an empty result by default). It returns exactly what is
  scripted, uncapped, so a test can also play a provider that ignores ``output_limit``;
- every provider and instance call is appended to :attr:`FakeProvider.log`, and
  ``creates`` / ``finds`` / ``destroys`` list the keys of those calls;
- :meth:`FakeProvider.vanish` makes an instance disappear behind the session manager's back
  (as expiry would): its methods then raise :class:`~pai.sandbox.SandboxVanishedError`;
- :attr:`FakeProvider.gate`, when set to an unset ``anyio.Event``, holds every ``create``
  open until the event is set, so single-flight tests can make creations overlap for real;
  :attr:`~FakeProvider.destroy_gate` does the same for ``destroy``, and
  :meth:`~FakeProvider.wait_for_creates` / :meth:`~FakeProvider.wait_for_destroys`
  wait (without sleeping) until that many calls have started;
- :attr:`FakeProvider.born_vanished` makes every new instance vanish at once, for a backend
  that keeps losing its instances;
- ``read_file`` records each ``max_bytes`` in :attr:`FakeProvider.read_limits` and raises
  :class:`~pai.sandbox.SandboxFileTooLargeError` over it, unless
  :attr:`FakeProvider.ignores_read_limit` plays a lax provider that returns the whole file.

It is not a sandbox and is not exported; the real providers live in their own packages.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import anyio
import anyio.lowlevel

from pai.sandbox import (
    DirEntry,
    InstanceInfo,
    SandboxDirectoryNotEmptyError,
    SandboxFileExistsError,
    SandboxFileNotFoundError,
    SandboxFileTooLargeError,
    SandboxIsADirectoryError,
    SandboxNotADirectoryError,
    SandboxVanishedError,
)
from pai.sandbox.provider import FileWrite, OutputCallback, ProviderFeatures, RawCommandResult

_ids = itertools.count(1)


@dataclass
class FakeFile:
    content: bytes
    mode: int = 0o644


Folder = dict[str, "Folder | FakeFile"]


@dataclass(frozen=True)
class RecordedRun:
    """The arguments one ``run`` call received."""

    instance_id: str
    command: str
    cwd: str
    env: dict[str, str]
    stdin: bytes | None
    timeout: float | None
    output_limit: int


@dataclass(frozen=True)
class Reply:
    """A scripted answer to one ``run``: each stream is one chunk or a sequence of chunks, fed to
    the callbacks in order and joined into the result."""

    stdout: bytes | Sequence[bytes] = b""
    stderr: bytes | Sequence[bytes] = b""
    exit_code: int = 0
    timed_out: bool = False
    truncated: bool = False


def _chunks(stream: bytes | Sequence[bytes]) -> list[bytes]:
    return [stream] if isinstance(stream, bytes) else list(stream)


def _parts(path: str) -> list[str]:
    assert path.startswith("/"), f"the facade must pass absolute paths, got {path!r}"
    return [part for part in path.split("/") if part]


class FakeInstance:
    """One dict-backed instance of :class:`FakeProvider` (a test double)."""

    def __init__(self, provider: FakeProvider, key: str) -> None:
        self._provider = provider
        self._key = key
        self._instance_id = f"fake-{next(_ids)}"
        self.created_at = datetime.now(UTC)
        self.root: Folder = {"workspace": {}}
        self.vanished = False

    @property
    def key(self) -> str:
        return self._key

    @property
    def instance_id(self) -> str:
        return self._instance_id

    def __repr__(self) -> str:
        return f"FakeInstance({self._key!r}, {self._instance_id!r})"

    # -- helpers ------------------------------------------------------------------------------

    async def _enter(self, op: str, *args: object) -> None:
        self._provider.log.append((op, self._instance_id, *args))
        await anyio.lowlevel.checkpoint()
        if self.vanished:
            raise SandboxVanishedError(
                f"fake instance {self._instance_id} for {self._key!r} is gone"
            )

    def _lookup(self, path: str) -> Folder | FakeFile | None:
        node: Folder | FakeFile = self.root
        for part in _parts(path):
            if isinstance(node, FakeFile):
                raise SandboxNotADirectoryError(path)
            child = node.get(part)
            if child is None:
                return None
            node = child
        return node

    def _parent(self, path: str, *, make: bool) -> tuple[Folder, str]:
        *parents, name = _parts(path)
        folder = self.root
        walked = ""
        for part in parents:
            walked += "/" + part
            child = folder.get(part)
            if child is None:
                if not make:
                    raise SandboxFileNotFoundError(walked)
                child = folder[part] = {}
            if isinstance(child, FakeFile):
                raise SandboxNotADirectoryError(walked)
            folder = child
        return folder, name

    def file(self, path: str) -> FakeFile | None:
        """The file at ``path`` (no logging, no vanish check): for assertions."""
        node = self._lookup(path)
        return node if isinstance(node, FakeFile) else None

    # -- the SandboxInstance protocol ---------------------------------------------------------

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
        await self._enter("run", command)
        self._provider.runs.append(
            RecordedRun(self._instance_id, command, cwd, dict(env), stdin, timeout, output_limit)
        )
        reply = self._provider.replies.popleft() if self._provider.replies else Reply()
        out, err = _chunks(reply.stdout), _chunks(reply.stderr)
        for chunks, callback in ((out, on_stdout), (err, on_stderr)):
            if callback is not None:
                for chunk in chunks:
                    callback(chunk)
        return RawCommandResult(
            stdout=b"".join(out),
            stderr=b"".join(err),
            exit_code=reply.exit_code,
            timed_out=reply.timed_out,
            truncated=reply.truncated,
        )

    async def read_file(self, path: str, *, max_bytes: int) -> bytes:
        await self._enter("read_file", path)
        self._provider.read_limits.append(max_bytes)
        node = self._lookup(path)
        if node is None:
            raise SandboxFileNotFoundError(path)
        if not isinstance(node, FakeFile):
            raise SandboxIsADirectoryError(path)
        if len(node.content) > max_bytes and not self._provider.ignores_read_limit:
            raise SandboxFileTooLargeError(path, size=len(node.content), limit=max_bytes)
        return node.content

    async def write_files(self, files: Sequence[FileWrite]) -> None:
        await self._enter("write_files", tuple(f.path for f in files))
        for write in files:
            folder, name = self._parent(write.path, make=True)
            if isinstance(folder.get(name), dict):
                raise SandboxIsADirectoryError(write.path)
            folder[name] = FakeFile(bytes(write.content), write.mode)

    async def list_dir(self, path: str) -> Sequence[DirEntry]:
        await self._enter("list_dir", path)
        node = self._lookup(path)
        if node is None:
            raise SandboxFileNotFoundError(path)
        if isinstance(node, FakeFile):
            raise SandboxNotADirectoryError(path)
        base = path.rstrip("/")
        return [
            DirEntry(
                name,
                f"{base}/{name}",
                "file" if isinstance(child, FakeFile) else "directory",
                len(child.content) if isinstance(child, FakeFile) else 0,
            )
            for name, child in sorted(node.items())
        ]

    async def remove(self, path: str, *, recursive: bool) -> None:
        await self._enter("remove", path, recursive)
        folder, name = self._parent(path, make=False)
        node = folder.get(name)
        if node is None:
            raise SandboxFileNotFoundError(path)
        if isinstance(node, dict) and node and not recursive:
            raise SandboxDirectoryNotEmptyError(path)
        del folder[name]

    async def make_dir(self, path: str, *, parents: bool) -> None:
        await self._enter("make_dir", path, parents)
        folder, name = self._parent(path, make=parents)
        existing = folder.get(name)
        if existing is not None:
            if parents and isinstance(existing, dict):
                return
            raise SandboxFileExistsError(path)
        folder[name] = {}

    async def exists(self, path: str) -> bool:
        await self._enter("exists", path)
        try:
            return self._lookup(path) is not None
        except SandboxNotADirectoryError:
            return False


@dataclass(eq=False)
class FakeProvider:
    """A :class:`~pai.sandbox.provider.SandboxProvider` test double; see the module docstring."""

    gate: anyio.Event | None = None
    destroy_gate: anyio.Event | None = None
    born_vanished: bool = False
    log: list[tuple[object, ...]] = field(default_factory=list[tuple[object, ...]])
    creates: list[str] = field(default_factory=list[str])
    finds: list[str] = field(default_factory=list[str])
    destroys: list[str] = field(default_factory=list[str])
    aclose_calls: int = 0
    runs: list[RecordedRun] = field(default_factory=list[RecordedRun])
    read_limits: list[int] = field(default_factory=list[int])
    ignores_read_limit: bool = False
    replies: deque[Reply] = field(default_factory=deque[Reply])
    creating_now: int = 0
    most_creating_at_once: int = 0
    live: dict[str, FakeInstance] = field(default_factory=dict[str, FakeInstance])
    _waiters: list[tuple[list[str], int, anyio.Event]] = field(
        default_factory=list[tuple[list[str], int, anyio.Event]]
    )

    @property
    def name(self) -> str:
        return "recording"

    @property
    def features(self) -> ProviderFeatures:
        return ProviderFeatures(cross_process=False, durable=True, processes=False)

    # -- test controls ------------------------------------------------------------------------

    def reply(self, *replies: Reply) -> None:
        """Queue scripted answers for the next ``run`` calls (on any instance)."""
        self.replies.extend(replies)

    def vanish(self, key: str) -> FakeInstance:
        """Make the live instance for ``key`` disappear without a ``destroy`` call."""
        instance = self.live.pop(key)
        instance.vanished = True
        return instance

    async def wait_for_creates(self, count: int) -> None:
        """Return once ``create`` has been entered ``count`` times in total."""
        await self._wait_for(self.creates, count)

    async def wait_for_destroys(self, count: int) -> None:
        """Return once ``destroy`` has been entered ``count`` times in total."""
        await self._wait_for(self.destroys, count)

    async def _wait_for(self, calls: list[str], count: int) -> None:
        if len(calls) < count:
            event = anyio.Event()
            self._waiters.append((calls, count, event))
            await event.wait()

    def _record(self, calls: list[str], op: str, key: str) -> None:
        self.log.append((op, key))
        calls.append(key)
        for waited, count, event in self._waiters:
            if waited is calls and len(calls) >= count:
                event.set()

    # -- the SandboxProvider protocol ---------------------------------------------------------

    async def create(self, key: str) -> FakeInstance:
        self._record(self.creates, "create", key)
        self.creating_now += 1
        self.most_creating_at_once = max(self.most_creating_at_once, self.creating_now)
        try:
            if self.gate is not None:
                await self.gate.wait()
            else:
                await anyio.lowlevel.checkpoint()
        finally:
            self.creating_now -= 1
        old = self.live.pop(key, None)
        if old is not None:
            old.vanished = True  # create replaces an existing instance for the key
        instance = self.live[key] = FakeInstance(self, key)
        instance.vanished = self.born_vanished
        return instance

    async def find(self, key: str) -> FakeInstance | None:
        self._record(self.finds, "find", key)
        await anyio.lowlevel.checkpoint()
        return self.live.get(key)

    async def destroy(self, key: str) -> None:
        self._record(self.destroys, "destroy", key)
        if self.destroy_gate is not None:
            await self.destroy_gate.wait()
        else:
            await anyio.lowlevel.checkpoint()
        instance = self.live.pop(key, None)
        if instance is not None:
            instance.vanished = True

    async def list_instances(self) -> Sequence[InstanceInfo]:
        self.log.append(("list_instances",))
        return [
            InstanceInfo(key, instance.instance_id, instance.created_at, self.name)
            for key, instance in self.live.items()
        ]

    async def aclose(self) -> None:
        self.log.append(("aclose",))
        self.aclose_calls += 1
