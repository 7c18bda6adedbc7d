"""The provider protocol: what every sandbox backend implements.

A provider owns the *deployment* side (create, find, destroy, list instances by key); each
instance it returns owns the *runtime* side (commands and files). The :class:`~pai.sandbox.Sandbox`
facade builds everything else on top once: path checks, decoding, reconnect after an instance
vanished, seed files, results. Run :mod:`pai.sandbox.testing`'s conformance suite against your
provider's real backend.

The contract every provider and instance keeps is written out in the public module
:mod:`pai.sandbox.provider`, where provider authors read it.

A provider may also have ``async def probe(self) -> None`` (:class:`ProbingSandboxProvider`):
a quick check, creating nothing, that its backend can be used as configured, raising
:class:`~pai.sandbox.SandboxUnavailableError` that says what is wrong and how to fix it.
:func:`probe_provider` runs it where there is one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, cast, runtime_checkable

from pai.sandbox._types import DirEntry, FileWrite, InstanceInfo, RawCommandResult

OutputCallback = Callable[[bytes], None]


@dataclass(frozen=True, slots=True)
class ProviderFeatures:
    """What a backend can do; the conformance suite skips (with this reason) what it cannot.

    ``cross_process``: instances live outside this process and ``find`` works from a fresh
    provider object in another process. ``durable``: instances survive ``aclose()`` of the
    provider (and of the runtime), so durable runs keep their command receipts in them (without
    it, a durable run's commands are refused unless ``durable_commands="at-least-once"``).
    ``processes``: commands run as OS processes, so a timeout is
    checked by looking for survivors.
    """

    cross_process: bool
    durable: bool
    processes: bool


@runtime_checkable
class SandboxInstance(Protocol):
    """One live sandbox: the per-instance operations the facade needs."""

    @property
    def key(self) -> str:
        """The instance key this instance was created for."""
        ...

    @property
    def instance_id(self) -> str:
        """The backend's id of this incarnation (a re-created instance gets a new one)."""
        ...

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
        """Run ``command`` in a shell; see the module contract."""
        ...

    async def read_file(self, path: str, *, max_bytes: int) -> bytes:
        """The file's bytes; over ``max_bytes`` (checked before the transfer) raises
        :class:`~pai.sandbox.SandboxFileTooLargeError`."""
        ...

    async def write_files(self, files: Sequence[FileWrite]) -> None:
        """Write every file, in order, creating parent folders."""
        ...

    async def list_dir(self, path: str) -> Sequence[DirEntry]:
        """The folder's entries, sorted by name."""
        ...

    async def remove(self, path: str, *, recursive: bool) -> None:
        """Remove a file, or a folder (non-empty ones only with ``recursive``)."""
        ...

    async def make_dir(self, path: str, *, parents: bool) -> None:
        """Make a folder; with ``parents``, also its parents, and accept an existing folder."""
        ...

    async def exists(self, path: str) -> bool:
        """Whether anything exists at ``path``."""
        ...


@runtime_checkable
class SandboxProvider(Protocol):
    """A sandbox backend: creates, finds and destroys instances by key."""

    @property
    def name(self) -> str:
        """The provider's registered name (``"inmemory"``, ``"docker"``, ...)."""
        ...

    @property
    def features(self) -> ProviderFeatures:
        """What this backend supports."""
        ...

    async def create(self, key: str) -> SandboxInstance:
        """A new, empty instance for ``key`` (replacing any existing one)."""
        ...

    async def find(self, key: str) -> SandboxInstance | None:
        """The live instance for ``key``, or ``None``."""
        ...

    async def destroy(self, key: str) -> None:
        """Remove the instance for ``key``; a missing key is not an error."""
        ...

    async def list_instances(self) -> Sequence[InstanceInfo]:
        """Every instance this provider owns."""
        ...

    async def aclose(self) -> None:
        """Release local resources; never destroys instances."""
        ...


@runtime_checkable
class ProbingSandboxProvider(SandboxProvider, Protocol):
    """A provider with the optional ``probe()``: a check that its backend can be used.

    ``probe()`` returns when the backend answers and is set up as configured, and raises
    :class:`~pai.sandbox.SandboxUnavailableError` (or another
    :class:`~pai.sandbox.SandboxError`) whose message says what is wrong and what to do: which
    engine, socket or URL was tried (passwords masked), which image or template is missing and
    the command that gets it. It creates no instance, changes nothing, and is quick (one or two
    requests): ``pai demo`` runs it before its first step, ``pai config --check --probe`` runs
    it for the configured provider. A provider with nothing to check may leave it out.
    """

    async def probe(self) -> None:
        """Check the backend can be used; raise ``SandboxUnavailableError`` saying why not."""
        ...


async def probe_provider(provider: SandboxProvider) -> bool:
    """Run ``provider.probe()`` when the provider has one; ``False`` when it has none.

    A :class:`~pai.sandbox.SandboxError` from the probe passes through (its message is the
    diagnosis); anything else it raises is a bug in the provider, reported as a
    :class:`~pai.sandbox.SandboxUnavailableError` naming the provider.

    Example::

        try:
            await probe_provider(provider)
        except SandboxError as error:
            raise SystemExit(f"the sandbox cannot be used: {error}")
    """
    from pai.sandbox._errors import SandboxError, SandboxUnavailableError

    probe = getattr(provider, "probe", None)
    if probe is None:
        return False
    if not callable(probe):
        raise SandboxUnavailableError(
            f"sandbox provider {provider.name!r} has a probe attribute that is not a method "
            f"({probe!r}); that is a bug in the provider"
        )
    try:
        await cast("Callable[[], Awaitable[object]]", probe)()
    except SandboxError:
        raise
    except Exception as error:
        raise SandboxUnavailableError(
            f"the probe of sandbox provider {provider.name!r} failed unexpectedly "
            f"({type(error).__name__}: {error}); that is a bug in the provider"
        ) from error
    return True
