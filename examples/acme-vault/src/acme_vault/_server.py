"""The Acme Vault service, in process: a stand-in for a remote secrets service and its SDK.

A real capability package talks to its service through the service's SDK here. Everything above
this module (the facade, the client, the binding) is written as if it did: opening a connection
costs a round trip, connections can be lost, and vaults outlive every client (durable state).

Servers are reachable by URL, ``memory://<name>``, from a registry in this module, so a test and a
``pai.toml`` can name the same one.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import anyio.lowlevel

from acme_vault._errors import ConnectionLostError, SecretNotFoundError

SCHEME = "memory"
"""The only URL scheme this example serves: ``memory://<server name>``."""


def parse_url(url: str) -> str:
    """The server name in a ``memory://<name>`` URL; ``ValueError`` saying what to write otherwise."""
    parts = urlsplit(url)
    if parts.scheme != SCHEME or parts.path or parts.query or parts.fragment:
        raise ValueError(
            f"unsupported vault URL {url!r}: this example serves only in-process vaults, "
            f"{SCHEME}://<server name> (e.g. {SCHEME}:// or {SCHEME}://team-secrets)"
        )
    return parts.netloc


@dataclass(slots=True)
class _StoredVault:
    id: str
    secrets: dict[str, str] = field(default_factory=dict[str, str])


class VaultConnection:
    """One open connection to one vault of a :class:`VaultServer` (what an SDK would hand out)."""

    def __init__(self, server: VaultServer, key: str, vault_id: str) -> None:
        self._server = server
        self.key = key
        self.vault_id = vault_id
        self._lost: str | None = None

    @property
    def closed(self) -> bool:
        """Whether the connection is closed or was lost."""
        return self._lost is not None

    def _stored(self) -> _StoredVault:
        if self._lost is not None:
            raise ConnectionLostError(f"connection to vault {self.key!r} is gone: {self._lost}")
        return self._server.stored(self.key)

    async def get(self, name: str) -> str:
        """The secret ``name``; :class:`SecretNotFoundError` if there is none."""
        await anyio.lowlevel.checkpoint()  # a round trip
        stored = self._stored()
        try:
            return stored.secrets[name]
        except KeyError:
            raise SecretNotFoundError(name, sorted(stored.secrets)) from None

    async def put(self, name: str, value: str) -> None:
        """Store ``value`` as the secret ``name`` (replacing any previous value)."""
        await anyio.lowlevel.checkpoint()
        self._stored().secrets[name] = value

    async def names(self) -> list[str]:
        """The names of the secrets in this vault, sorted."""
        await anyio.lowlevel.checkpoint()
        return sorted(self._stored().secrets)

    async def close(self) -> None:
        """Close the connection (idempotent). The vault and its secrets stay on the server."""
        if self._lost is None:
            self._server.release(self, "closed by the client")

    def lose(self, reason: str) -> None:
        """Mark the connection lost (the server's side of a drop)."""
        self._lost = reason


class VaultServer:
    """An in-process vault service: vaults keyed by instance key, and connection counters.

    Get one with :func:`memory_server`. ``opened`` and ``closed`` count connections over the
    server's life; :attr:`open_connections` is how many are open now. Set ``reachable = False`` to
    simulate an outage, call :meth:`drop_connections` to simulate a restart.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.opened = 0
        self.closed = 0
        self.reachable = True
        self._vaults: dict[str, _StoredVault] = {}
        self._connections: list[VaultConnection] = []
        self._ids = itertools.count(1)

    @property
    def url(self) -> str:
        """Where clients reach this server: ``memory://<name>``."""
        return f"{SCHEME}://{self.name}"

    @property
    def open_connections(self) -> int:
        """How many connections are open now."""
        return len(self._connections)

    def vault_ids(self) -> dict[str, str]:
        """Every vault that exists now: instance key -> server-assigned vault id."""
        return {key: stored.id for key, stored in self._vaults.items()}

    def secrets(self, key: str) -> dict[str, str]:
        """A copy of one vault's secrets (empty if it does not exist), for inspection in tests."""
        stored = self._vaults.get(key)
        return dict(stored.secrets) if stored is not None else {}

    def stored(self, key: str) -> _StoredVault:
        """The vault behind a connection (the server's side of a call)."""
        stored = self._vaults.get(key)
        if stored is None:  # deleted under an open connection: the connection is dead
            raise ConnectionLostError(f"vault {key!r} no longer exists on {self.url}")
        return stored

    async def connect(self, key: str) -> VaultConnection:
        """Open a connection to the vault ``key``, creating the vault if it does not exist."""
        await anyio.lowlevel.checkpoint()  # a round trip: concurrent callers interleave here
        if not self.reachable:
            raise ConnectionLostError(f"vault server {self.url} is not reachable")
        stored = self._vaults.get(key)
        if stored is None:
            stored = self._vaults[key] = _StoredVault(
                id=f"{self.name or 'vault'}-{next(self._ids)}"
            )
        connection = VaultConnection(self, key, stored.id)
        self._connections.append(connection)
        self.opened += 1
        return connection

    async def delete_vault(self, key: str) -> bool:
        """Delete the vault ``key`` and its secrets (an admin call); whether it existed."""
        await anyio.lowlevel.checkpoint()
        for connection in [c for c in self._connections if c.key == key]:
            self.release(connection, "the vault was deleted")
        return self._vaults.pop(key, None) is not None

    def drop_connections(self) -> int:
        """Lose every open connection, as a restart would; how many were dropped."""
        dropped = list(self._connections)
        for connection in dropped:
            self.release(connection, "the server dropped it")
        return len(dropped)

    def release(self, connection: VaultConnection, reason: str) -> None:
        """End a connection (closed by the client, dropped, or its vault deleted)."""
        if connection in self._connections:
            self._connections.remove(connection)
            self.closed += 1
        connection.lose(reason)

    def __repr__(self) -> str:
        return (
            f"VaultServer(url={self.url!r}, vaults={len(self._vaults)}, "
            f"open_connections={self.open_connections})"
        )


_servers: dict[str, VaultServer] = {}
_fresh = itertools.count(1)


def memory_server(name: str | None = None) -> VaultServer:
    """The in-process server at ``memory://<name>``, started on first use.

    ``name=None`` starts a new server under a fresh name (one per test, say); pass its ``url`` to
    the binding or put it in configuration.

    Example::

        server = memory_server()
        binding = vault_capability(url=server.url, scope="user")
    """
    if name is None:
        name = f"server-{next(_fresh)}"
        while name in _servers:
            name = f"server-{next(_fresh)}"
    server = _servers.get(name)
    if server is None:
        server = _servers[name] = VaultServer(name)
    return server


def server_for_url(url: str) -> VaultServer:
    """The server a ``memory://<name>`` URL reaches (started on first use)."""
    return memory_server(parse_url(url))
