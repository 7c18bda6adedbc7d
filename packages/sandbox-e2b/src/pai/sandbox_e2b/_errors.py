"""Errors of pai-sandbox-e2b, under pai-sandbox's ``SandboxError``.

    PaiError
    └── SandboxError
        └── SandboxProviderError                (RuntimeError: the backend failed)
            └── E2BError                        (an E2B problem the message explains)
                ├── E2BApiKeyMissingError       (no API key: set E2B_API_KEY or api_key=...)
                ├── E2BUnreachableError         (the E2B API did not answer at its URL)
                └── E2BEmulatorUnavailableError (the offline emulator cannot run on this host)

A sandbox that is gone (expired, killed, "was not found") is never one of these: the provider
raises pai-sandbox's ``SandboxVanishedError`` and the facade re-creates it with its seed files.
"""

from __future__ import annotations

from pai.sandbox.provider import SandboxProviderError


class E2BError(SandboxProviderError):
    """Something about E2B (its API, its key, the emulator) failed; the message says what."""


class E2BApiKeyMissingError(E2BError):
    """No E2B API key: neither ``api_key=...`` nor the ``E2B_API_KEY`` environment variable."""


class E2BUnreachableError(E2BError):
    """The E2B API did not answer at its URL within the connect/request timeout."""


class E2BEmulatorUnavailableError(E2BError):
    """The offline E2B emulator cannot run commands on this host (it needs Linux with user and
    mount namespaces, ``unshare`` and ``chroot``)."""
