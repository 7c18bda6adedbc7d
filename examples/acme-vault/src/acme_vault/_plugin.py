"""acme-vault as a PAI plugin: the module the ``pai`` entry point names.

``pyproject.toml`` declares::

    [project.entry-points.pai]
    acme-vault = "acme_vault._plugin"

PAI imports this module (and so the ``acme_vault`` package) when it first needs its plugins:
``pai plugins``, loading configuration. Keep that import light. Everything here is plain Python
and pydantic; a package wrapping a heavy service SDK imports the SDK only where it connects (here
:meth:`VaultClient.connection`), so merely installing the package costs nothing at start-up.
"""

from __future__ import annotations

from pai.core.ext import CapabilityRegistration, hookimpl

from acme_vault._binding import VaultOptions, vault_binding_from_settings
from acme_vault._vault import vault

INSTALL_HINT = "pip install acme-vault"
"""What PAI tells a user whose configuration names ``acme.vault`` without this package."""


@hookimpl
def pai_capabilities() -> list[CapabilityRegistration]:
    """Register ``acme.vault``: its token, binding factory and options model."""
    return [
        CapabilityRegistration(
            capability=vault,
            factory=vault_binding_from_settings,
            options=VaultOptions,
            description="Secrets kept in the Acme vault, per user, thread or scope.",
            install_hint=INSTALL_HINT,
        )
    ]
