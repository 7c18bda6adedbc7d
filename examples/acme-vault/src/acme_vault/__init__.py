"""acme-vault: an example third-party PAI capability package (the template for writing one).

It declares ``acme.vault`` (a prefixed id, as third-party capabilities use), a lazy
:class:`Vault` facade that owns reconnect and retry, a binding factory
(:func:`vault_capability`) and a plugin that registers it, so ``[capabilities.acme.vault]`` in
``pai.toml`` binds it. The service behind it is an in-process stand-in, :class:`VaultServer`,
reachable at ``memory://<name>``.
"""

from acme_vault._binding import DEFAULT_SCOPE as DEFAULT_SCOPE
from acme_vault._binding import VaultOptions as VaultOptions
from acme_vault._binding import vault_binding_from_settings as vault_binding_from_settings
from acme_vault._binding import vault_capability as vault_capability
from acme_vault._errors import ConnectionLostError as ConnectionLostError
from acme_vault._errors import SecretNotFoundError as SecretNotFoundError
from acme_vault._errors import VaultClosedError as VaultClosedError
from acme_vault._errors import VaultError as VaultError
from acme_vault._errors import VaultUnavailableError as VaultUnavailableError
from acme_vault._server import VaultConnection as VaultConnection
from acme_vault._server import VaultServer as VaultServer
from acme_vault._server import memory_server as memory_server
from acme_vault._vault import Vault as Vault
from acme_vault._vault import VaultClient as VaultClient
from acme_vault._vault import vault as vault

__all__ = [
    "DEFAULT_SCOPE",
    "ConnectionLostError",
    "SecretNotFoundError",
    "Vault",
    "VaultClient",
    "VaultClosedError",
    "VaultConnection",
    "VaultError",
    "VaultOptions",
    "VaultServer",
    "VaultUnavailableError",
    "memory_server",
    "vault",
    "vault_binding_from_settings",
    "vault_capability",
]
