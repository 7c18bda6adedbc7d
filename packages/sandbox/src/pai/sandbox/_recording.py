"""A provider wrapper that records every call reaching the provider and its instances.

Packages built on the sandbox (skills copying files in, a tool batching its writes) promise a
number of round trips; :class:`RecordingProvider` lets their tests and benchmarks count them on a
real provider, below the facade.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pai.sandbox._provider import (
    OutputCallback,
    ProviderFeatures,
    SandboxInstance,
    SandboxProvider,
)
from pai.sandbox._types import DirEntry, FileWrite, InstanceInfo, RawCommandResult


@dataclass(frozen=True, slots=True)
class ProviderCall:
    """One call that reached the wrapped provider: ``operation`` is the method's name, ``key``
    the instance key it concerns (``None`` for ``list_instances`` and ``aclose``), ``arguments``
    what it was given after the key (for ``write_files``, the files)."""

    operation: str
    key: str | None
    arguments: tuple[Any, ...] = ()


@dataclass(eq=False)
class RecordingProvider:
    """Wraps ``inner`` and appends a :class:`ProviderCall` to ``calls`` for every call that reaches
    it or one of its instances, before passing the call on.

    Example::

        provider = RecordingProvider(create_in_memory_sandbox_provider())
        ...  # run the agent with sandbox_capability(provider=provider)
        writes = provider.calls_to("write_files")
        assert len(writes) == 1  # one round trip
        assert provider.files_written() == 100
    """

    inner: SandboxProvider
    calls: list[ProviderCall] = field(default_factory=list[ProviderCall], repr=False)

    def calls_to(self, operation: str) -> list[ProviderCall]:
        """The recorded calls of one operation (``"write_files"``, ``"run"``, ``"create"``...)."""
        return [call for call in self.calls if call.operation == operation]

    def files_written(self) -> int:
        """How many files every ``write_files`` call wrote, together."""
        return sum(len(call.arguments[0]) for call in self.calls_to("write_files"))

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def features(self) -> ProviderFeatures:
        return self.inner.features

    async def create(self, key: str) -> SandboxInstance:
        self.calls.append(ProviderCall("create", key))
        return RecordingInstance(await self.inner.create(key), self.calls)

    async def find(self, key: str) -> SandboxInstance | None:
        self.calls.append(ProviderCall("find", key))
        found = await self.inner.find(key)
        return None if found is None else RecordingInstance(found, self.calls)

    async def destroy(self, key: str) -> None:
        self.calls.append(ProviderCall("destroy", key))
        await self.inner.destroy(key)

    async def list_instances(self) -> Sequence[InstanceInfo]:
        self.calls.append(ProviderCall("list_instances", None))
        return await self.inner.list_instances()

    async def aclose(self) -> None:
        self.calls.append(ProviderCall("aclose", None))
        await self.inner.aclose()


class RecordingInstance:
    """An instance of a :class:`RecordingProvider`: records each call, then passes it on."""

    def __init__(self, inner: SandboxInstance, calls: list[ProviderCall]) -> None:
        self.inner = inner
        self._calls = calls

    @property
    def key(self) -> str:
        return self.inner.key

    @property
    def instance_id(self) -> str:
        return self.inner.instance_id

    def _record(self, operation: str, *arguments: Any) -> None:
        self._calls.append(ProviderCall(operation, self.inner.key, arguments))

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
        self._record("run", command)
        return await self.inner.run(
            command,
            cwd=cwd,
            env=env,
            stdin=stdin,
            timeout=timeout,
            output_limit=output_limit,
            on_stdout=on_stdout,
            on_stderr=on_stderr,
        )

    async def read_file(self, path: str, *, max_bytes: int) -> bytes:
        self._record("read_file", path)
        return await self.inner.read_file(path, max_bytes=max_bytes)

    async def write_files(self, files: Sequence[FileWrite]) -> None:
        self._record("write_files", tuple(files))
        await self.inner.write_files(files)

    async def list_dir(self, path: str) -> Sequence[DirEntry]:
        self._record("list_dir", path)
        return await self.inner.list_dir(path)

    async def remove(self, path: str, *, recursive: bool) -> None:
        self._record("remove", path)
        await self.inner.remove(path, recursive=recursive)

    async def make_dir(self, path: str, *, parents: bool) -> None:
        self._record("make_dir", path)
        await self.inner.make_dir(path, parents=parents)

    async def exists(self, path: str) -> bool:
        self._record("exists", path)
        return await self.inner.exists(path)

    def __repr__(self) -> str:
        return f"RecordingInstance({self.inner!r})"


__all__ = ["ProviderCall", "RecordingInstance", "RecordingProvider"]
