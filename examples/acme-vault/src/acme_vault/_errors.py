"""Every error acme-vault raises, under one root.

    VaultError
    ├── ConnectionLostError      (a connection dropped; the facade reconnects and retries)
    ├── VaultUnavailableError    (the service did not answer within the retries)
    ├── VaultClosedError         (the client was closed: the runtime shut down)
    └── SecretNotFoundError      (LookupError: no secret of that name in this vault)

Operation bodies see only the last three: the facade handles lost connections itself.
"""

from __future__ import annotations


class VaultError(Exception):
    """Root of every error acme-vault raises."""


class ConnectionLostError(VaultError):
    """A connection to the vault service dropped (restart, network). Reconnecting may succeed."""


class VaultUnavailableError(VaultError):
    """The vault service could not be reached, even after reconnecting and retrying."""


class VaultClosedError(VaultError):
    """The client was closed (the runtime shut down); no new connections are opened."""


class SecretNotFoundError(VaultError, LookupError):
    """No secret of that name in this vault."""

    def __init__(self, name: str, known: list[str]) -> None:
        listing = ", ".join(repr(n) for n in known) or "none"
        super().__init__(
            f"no secret named {name!r} in this vault; its secrets are: {listing}. "
            "Store it first with put()"
        )
        self.name = name
