"""The session manager: one instance per key, provisioned lazily, exactly once."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

import anyio

from pai.sandbox._errors import SandboxClosedError
from pai.sandbox._paths import check_seed
from pai.sandbox._provider import SandboxInstance, SandboxProvider
from pai.sandbox._types import SeedFile


class SandboxSessionManager:
    """Maps instance keys to live sandbox instances of one provider.

    The first use of a key finds its instance (also one made by another process, where the provider
    supports that) or creates it and writes the seed files; concurrent first uses of one key share
    that single provisioning. Make one with :func:`create_sandbox_session_manager`.

    A provider that cannot find the instance of an owner (a thread) older than this manager
    cannot tell whether it never made one or lost it (an in-memory instance gone with the process
    that held it, a container removed while idle): the manager then counts the new instance as a
    re-creation (see :meth:`resume`), so that nobody is shown an empty sandbox as the old one.
    """

    def __init__(self, provider: SandboxProvider, *, seed: Iterable[SeedFile] = ()) -> None:
        self.provider = provider
        self.seed: tuple[SeedFile, ...] = check_seed(seed)
        self.started_at: datetime = datetime.now(UTC)
        """When this manager was made: an owner created before it may have had an instance."""
        self._instances: dict[str, SandboxInstance] = {}
        self._recreated: dict[str, SandboxInstance] = {}
        self._locks: dict[str, anyio.Lock] = {}
        self._closed = False

    def handle(self, key: str, *, owner_created_at: datetime | None = None) -> SandboxHandle:
        """A handle on the instance for ``key``. Cheap: nothing is provisioned until it is used.

        ``owner_created_at`` is when the key's owner (the thread of the operation) was created;
        ``None`` for a key with no such owner (see :meth:`resume`).
        """
        return SandboxHandle(self, key, owner_created_at)

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxClosedError(
                f"the sandbox session manager of provider {self.provider.name!r} is closed; "
                "sandboxes cannot be used after the runtime (or manager) was closed"
            )

    def _lock(self, key: str) -> anyio.Lock:
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = anyio.Lock()
        return lock

    async def instance(self, key: str) -> SandboxInstance:
        """The live instance for ``key``: cached, found, or created with the seed files."""
        instance, _ = await self.resume(key)
        return instance

    async def resume(
        self, key: str, *, owner_created_at: datetime | None = None
    ) -> tuple[SandboxInstance, bool]:
        """The live instance for ``key`` (as :meth:`instance`), and whether it replaced one that
        may have been lost.

        That is so when the provider found no instance for ``key`` although its owner was
        created (``owner_created_at``) before this manager: the earlier instance, if the owner
        had one, is gone with its files, and the new one holds the seed files only. Callers
        that waited for that provisioning are told so too; later ones are not.
        """
        self._check_open()
        cached = self._instances.get(key)
        if cached is not None:
            return cached, False
        async with self._lock(key):
            self._check_open()  # the manager may have closed while this waited for the lock
            cached = self._instances.get(key)
            if cached is not None:
                return cached, self._recreated.get(key) is cached
            found = await self.provider.find(key)
            if found is not None:
                self._instances[key] = found
                return found, False
            instance = await self._create(key)
            self._instances[key] = instance
            lost = owner_created_at is not None and _utc(owner_created_at) < self.started_at
            if lost:
                self._recreated[key] = instance
            return instance, lost

    async def replace(self, key: str, stale: SandboxInstance | None = None) -> SandboxInstance:
        """A fresh instance for ``key`` with the seed files, replacing ``stale`` (or any).

        When several callers notice one vanished instance at once, the first replaces it and the
        others get that replacement.
        """
        self._check_open()
        async with self._lock(key):
            self._check_open()
            current = self._instances.get(key)
            if stale is not None and current is not None and current is not stale:
                return current
            self._instances.pop(key, None)
            self._recreated.pop(key, None)
            await self.provider.destroy(key)
            instance = await self._create(key)
            self._instances[key] = instance
            return instance

    async def _create(self, key: str) -> SandboxInstance:
        instance = await self.provider.create(key)
        if self.seed:
            await instance.write_files([seed.to_write() for seed in self.seed])
        return instance

    def is_provisioned(self, key: str) -> bool:
        """Whether this manager holds a live instance for ``key`` (no I/O)."""
        return key in self._instances

    async def dispose(self, key: str) -> None:
        """Destroy the instance for ``key`` (if any) and forget it."""
        self._check_open()
        lock = self._lock(key)
        async with lock:
            self._instances.pop(key, None)
            self._recreated.pop(key, None)
            await self.provider.destroy(key)
        # Forget the lock only if no caller queued on it (release hands it to the next waiter):
        # a newcomer would otherwise get a second lock and provision the key a second time.
        if not lock.locked() and self._locks.get(key) is lock:
            del self._locks[key]

    async def aclose(self) -> None:
        """Forget every instance and close the provider's local resources; instances stay."""
        if self._closed:
            return
        self._closed = True
        self._instances.clear()
        self._recreated.clear()
        self._locks.clear()
        await self.provider.aclose()


class SandboxHandle:
    """The instance of one key in one session manager."""

    __slots__ = ("key", "manager", "owner_created_at")

    key: str
    manager: SandboxSessionManager
    owner_created_at: datetime | None

    def __init__(
        self,
        manager: SandboxSessionManager,
        key: str,
        owner_created_at: datetime | None = None,
    ) -> None:
        self.manager = manager
        self.key = key
        self.owner_created_at = owner_created_at

    async def instance(self) -> SandboxInstance:
        """The live instance (provisioned on first use)."""
        instance, _ = await self.resume()
        return instance

    async def resume(self) -> tuple[SandboxInstance, bool]:
        """The live instance, and whether it replaced one that may have been lost (see
        :meth:`SandboxSessionManager.resume`)."""
        return await self.manager.resume(self.key, owner_created_at=self.owner_created_at)

    async def replace(self, stale: SandboxInstance | None = None) -> SandboxInstance:
        """Re-create the instance with its seed files (see :meth:`SandboxSessionManager.replace`)."""
        return await self.manager.replace(self.key, stale)

    async def dispose(self) -> None:
        """Destroy the instance."""
        await self.manager.dispose(self.key)

    def __repr__(self) -> str:
        return f"SandboxHandle({self.key!r}, provider={self.manager.provider.name!r})"


def _utc(moment: datetime) -> datetime:
    # A stored time without a zone is taken as UTC, as the runtime stores them.
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def create_sandbox_session_manager(
    *, provider: SandboxProvider, seed: Iterable[SeedFile] = ()
) -> SandboxSessionManager:
    """A session manager over ``provider``; ``seed`` files go into every new instance.

    Example::

        sessions = create_sandbox_session_manager(provider=create_in_memory_sandbox_provider())
        sandbox = create_sandbox(sessions.handle("t"))
        assert (await sandbox.run_command("echo hi")).stdout == "hi\\n"
    """
    return SandboxSessionManager(provider, seed=seed)
