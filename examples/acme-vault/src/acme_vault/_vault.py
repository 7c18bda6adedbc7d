"""The ``acme.vault`` token, the :class:`Vault` facade operations use, and the client behind it.

The facade is designed for operation bodies: it is lazy (nothing is opened until the first call)
and it owns reconnect and retry, once, so every tool and command that uses it inherits them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import TypeVar

import anyio
from pai.core import Capability, define_capability

from acme_vault._errors import ConnectionLostError, VaultClosedError, VaultUnavailableError
from acme_vault._server import VaultConnection, VaultServer, server_for_url

T = TypeVar("T")

DEFAULT_RETRIES = 2
"""How many times the facade reconnects and retries a call whose connection was lost."""

DEFAULT_RETRY_DELAY = 0.05
"""Seconds before the first retry; each further retry waits twice as long."""


class VaultClient:
    """Connections to one vault service: at most one per vault key, opened on first use.

    The binding owns one client; :meth:`vault` hands out facades. Concurrent first uses of one key
    open one connection (single flight). :meth:`aclose` closes every connection (local resources)
    and never deletes a vault (durable state); :meth:`dispose` deletes one vault.

    Outside a runtime (tool tests, scripts) use it directly::

        async with VaultClient("memory://") as client:
            await client.vault("alice").put("api-token", "s3cret")
    """

    def __init__(
        self,
        url: str,
        *,
        retries: int = DEFAULT_RETRIES,
        retry_delay: float = DEFAULT_RETRY_DELAY,
    ) -> None:
        self.url = url
        self.retries = retries
        self.retry_delay = retry_delay
        self._server: VaultServer | None = None
        self._connections: dict[str, VaultConnection] = {}
        self._locks: dict[str, anyio.Lock] = {}
        self._closed = False

    @property
    def server(self) -> VaultServer:
        """The service this client talks to (resolved on first use, not at construction)."""
        if self._server is None:
            self._server = server_for_url(self.url)
        return self._server

    @property
    def closed(self) -> bool:
        """Whether :meth:`aclose` was called."""
        return self._closed

    def vault(self, key: str) -> Vault:
        """The facade for one vault. Cheap: nothing is opened until it is used."""
        return Vault(self, key)

    async def connection(self, key: str) -> VaultConnection:
        """The open connection to vault ``key``, opening it (once, under concurrency) if needed."""
        self._check_open()
        connection = self._connections.get(key)
        if connection is not None and not connection.closed:
            return connection
        lock = self._locks.setdefault(key, anyio.Lock())
        async with lock:
            self._check_open()
            connection = self._connections.get(key)
            if connection is not None and not connection.closed:
                return connection  # another task opened it while this one waited
            connection = await self.server.connect(key)
            if self._closed:  # closed while connecting: do not leak the connection
                await connection.close()
                self._check_open()
            self._connections[key] = connection
            return connection

    def forget(self, key: str, connection: VaultConnection) -> None:
        """Drop a lost connection so the next call reconnects."""
        if self._connections.get(key) is connection:
            del self._connections[key]

    async def dispose(self, key: str) -> None:
        """Delete vault ``key`` and its secrets. Harmless for a key that was never used."""
        lock = self._locks.setdefault(key, anyio.Lock())
        async with lock:  # not while a first use of this key is still connecting
            connection = self._connections.pop(key, None)
            if connection is not None:
                await connection.close()
            await self.server.delete_vault(key)
        if self._locks.get(key) is lock and not lock.locked():
            del self._locks[key]

    async def aclose(self) -> None:
        """Close every connection; the vaults and their secrets stay on the service."""
        self._closed = True
        connections = list(self._connections.values())
        self._connections.clear()
        self._locks.clear()
        for connection in connections:
            await connection.close()

    async def __aenter__(self) -> VaultClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def _check_open(self) -> None:
        if self._closed:
            raise VaultClosedError(
                f"the vault client for {self.url} is closed (its runtime shut down); "
                "make a new client or binding to reach the vault again"
            )

    def __repr__(self) -> str:
        return f"VaultClient(url={self.url!r}, open={len(self._connections)})"


class Vault:
    """The secrets of one vault, as operation bodies see them.

    Which vault is the binding's scope's business (one per user, per thread, per tenant...): the
    facade only knows its instance key. It is lazy: the connection opens on the first call. When a
    connection is lost (service restart, network), the call reconnects and retries, up to the
    client's ``retries``, before raising :class:`VaultUnavailableError`.
    """

    __slots__ = ("_client", "_key")

    def __init__(self, client: VaultClient, key: str) -> None:
        self._client = client
        self._key = key

    @property
    def key(self) -> str:
        """The instance key this facade's vault is stored under."""
        return self._key

    async def get(self, name: str) -> str:
        """The secret ``name``; :class:`SecretNotFoundError` (a ``LookupError``) if absent."""
        return await self._call(lambda connection: connection.get(name))

    async def put(self, name: str, value: str) -> None:
        """Store ``value`` as the secret ``name``, replacing any previous value."""
        await self._call(lambda connection: connection.put(name, value))

    async def names(self) -> list[str]:
        """The names of the secrets in this vault, sorted."""
        return await self._call(lambda connection: connection.names())

    async def vault_id(self) -> str:
        """The service's id for this vault (opening it if needed): a new id after re-creation."""
        return await self._call(_vault_id)

    async def _call(self, operation: Callable[[VaultConnection], Awaitable[T]]) -> T:
        client = self._client
        attempts = client.retries + 1
        delay = client.retry_delay
        for attempt in range(1, attempts + 1):
            connection: VaultConnection | None = None
            try:
                connection = await client.connection(self._key)
                return await operation(connection)
            except ConnectionLostError as error:
                if connection is not None:
                    client.forget(self._key, connection)
                if attempt == attempts:
                    raise VaultUnavailableError(
                        f"vault service {client.url} did not answer after {attempts} attempt(s): "
                        f"{error}"
                    ) from error
            await anyio.sleep(delay)
            delay *= 2
        raise AssertionError("unreachable")  # pragma: no cover

    def __repr__(self) -> str:
        return f"Vault(key={self._key!r}, url={self._client.url!r})"


async def _vault_id(connection: VaultConnection) -> str:
    return connection.vault_id


vault: Capability[Vault] = define_capability(
    Vault, id="acme.vault", description="Secrets kept in the Acme vault, per user, thread or scope."
)
"""The ``acme.vault`` token: declare ``capabilities={"vault": vault}`` on a tool or command."""
