"""A PAI sandbox provider on E2B (the ``e2b`` SDK): one E2B sandbox per instance key.

Example::

    from pai.sandbox import sandbox_capability
    from pai.sandbox_e2b import E2BSandboxProvider

    capability = sandbox_capability(provider=E2BSandboxProvider(template="base"))

Offline tests run the real SDK against :class:`pai.sandbox_e2b.testing.E2BEmulator`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pai.core.ext import lazy_exports as _lazy_exports
from pai.sandbox_e2b._errors import E2BApiKeyMissingError as E2BApiKeyMissingError
from pai.sandbox_e2b._errors import E2BAuthenticationError as E2BAuthenticationError
from pai.sandbox_e2b._errors import E2BEmulatorUnavailableError as E2BEmulatorUnavailableError
from pai.sandbox_e2b._errors import E2BError as E2BError
from pai.sandbox_e2b._errors import E2BRateLimitError as E2BRateLimitError
from pai.sandbox_e2b._errors import E2BSandboxBusyError as E2BSandboxBusyError
from pai.sandbox_e2b._errors import E2BServiceBusyError as E2BServiceBusyError
from pai.sandbox_e2b._errors import E2BTemplateNotFoundError as E2BTemplateNotFoundError
from pai.sandbox_e2b._errors import E2BTimeoutLimitError as E2BTimeoutLimitError
from pai.sandbox_e2b._errors import E2BUnreachableError as E2BUnreachableError

# Names resolve on first use: plugin discovery imports this package (for its entry-point module,
# ``_plugin``), and must not pay for importing the e2b SDK until the provider is chosen.
if TYPE_CHECKING:
    from pai.sandbox_e2b._instance import E2BSandboxInstance as E2BSandboxInstance
    from pai.sandbox_e2b._options import E2BOptions as E2BOptions
    from pai.sandbox_e2b._provider import E2BSandboxProvider as E2BSandboxProvider
    from pai.sandbox_e2b._provider import key_hash as key_hash

_LAZY = {
    "E2BOptions": "pai.sandbox_e2b._options",
    "E2BSandboxInstance": "pai.sandbox_e2b._instance",
    "E2BSandboxProvider": "pai.sandbox_e2b._provider",
    "key_hash": "pai.sandbox_e2b._provider",
}

if not TYPE_CHECKING:  # type checkers see the imports above, and no catch-all attribute
    __getattr__, __dir__ = _lazy_exports(__name__, _LAZY)


__all__ = [
    "E2BApiKeyMissingError",
    "E2BAuthenticationError",
    "E2BEmulatorUnavailableError",
    "E2BError",
    "E2BOptions",
    "E2BRateLimitError",
    "E2BSandboxBusyError",
    "E2BSandboxInstance",
    "E2BSandboxProvider",
    "E2BServiceBusyError",
    "E2BTemplateNotFoundError",
    "E2BTimeoutLimitError",
    "E2BUnreachableError",
    "key_hash",
]
