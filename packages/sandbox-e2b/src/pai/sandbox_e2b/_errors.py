"""Errors of pai-sandbox-e2b, under pai-sandbox's ``SandboxError``.

    PaiError
    └── SandboxError
        └── SandboxProviderError                (RuntimeError: the backend failed)
            └── E2BError                        (an E2B problem the message explains)
                ├── E2BApiKeyMissingError       (no API key: set E2B_API_KEY or api_key=...)
                ├── E2BAuthenticationError      (401: the API refused the key, envd its token)
                ├── E2BUnreachableError         (the API or a sandbox did not answer in time)
                ├── E2BRateLimitError           (429: the team's sandbox limit or request rate)
                ├── E2BServiceBusyError         (502/503: E2B cannot serve the request now)
                ├── E2BSandboxBusyError         (409: the sandbox is being killed or paused)
                ├── E2BTimeoutLimitError        (400: `timeout` beyond the plan's maximum)
                ├── E2BTemplateNotFoundError    (404/403: no such template for the team)
                └── E2BEmulatorUnavailableError (the offline emulator cannot run on this host)

Errors worth retrying (429, 502, 503, 409) are raised only after the retries (a few, with
jittered backoff) failed too; the others (400, 401, an unknown template) at once. No message
carries the API key.

A sandbox that is gone (expired, killed) is never one of these: the provider raises
pai-sandbox's ``SandboxVanishedError`` (after E2B's API confirmed it is gone) and the facade
re-creates it with its seed files.
"""

from __future__ import annotations

from pai.sandbox import SandboxProviderError


class E2BError(SandboxProviderError):
    """Something about E2B (its API, its key, the emulator) failed; the message says what."""


class E2BApiKeyMissingError(E2BError):
    """No E2B API key: neither ``api_key=...`` nor the ``E2B_API_KEY`` environment variable."""


class E2BAuthenticationError(E2BError):
    """E2B refused the credentials (HTTP 401): the API the API key, or a sandbox's envd its
    access token. Retrying cannot help; set ``E2B_API_KEY`` (or ``api_key=...``) to a valid
    key."""


class E2BUnreachableError(E2BError):
    """The E2B API, or a sandbox, did not answer at its URL within the connect/request timeout
    (or E2B's API says the sandbox runs while it keeps answering that it does not)."""


class E2BRateLimitError(E2BError):
    """E2B answered 429 after the retries: the team reached its limit of concurrent sandboxes,
    or sent requests too fast (the API's rate limit, a sandbox's connection limit)."""


class E2BServiceBusyError(E2BError):
    """E2B answered 502 or 503 after the retries: it cannot serve the request now (no capacity,
    a node or gateway down); nothing was changed, try again later."""


class E2BSandboxBusyError(E2BError):
    """E2B answered 409 after the retries: the sandbox is changing state (being killed, paused
    or snapshotted) and cannot be used until that is over."""


class E2BTimeoutLimitError(E2BError):
    """E2B refused the sandbox ``timeout`` (HTTP 400): beyond the plan's maximum (Hobby:
    3,600 s; Pro: 86,400 s) or not above 0. Lower ``timeout``."""


class E2BTemplateNotFoundError(E2BError):
    """E2B has no template of that name or id that the team may use (HTTP 404 or 403 on
    create). Check ``template``."""


class E2BEmulatorUnavailableError(E2BError):
    """The offline E2B emulator cannot run commands on this host (it needs Linux with user and
    mount namespaces, ``unshare`` and ``nsenter``)."""
