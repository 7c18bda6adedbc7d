"""Errors only this provider raises, under the ``pai.sandbox`` tree (:class:`SandboxProviderError`).

A sandbox runs its commands as a user that may replace the programs the provider's file helpers
use (``/bin/sh``, ``stat``, ``rm``, ...): such a helper is cut off at its deadline or its output
bound, and the operation raises one of these instead of hanging or flooding the host.
"""

from __future__ import annotations

from pai.sandbox import SandboxProviderError


class SandboxHelperTimeoutError(SandboxProviderError):
    """A file operation's helper inside the sandbox did not finish within ``helper_timeout``."""

    def __init__(self, what: str, path: str, key: str, seconds: float) -> None:
        super().__init__(
            f"{what} of {path!r} in the Docker sandbox {key!r} did not finish within {seconds:g} s "
            "(option helper_timeout): a command may have replaced the sandbox's own programs "
            "(/bin/sh, stat, rm, ...), or the sandbox is overloaded; reset() or destroy the "
            "sandbox, or raise helper_timeout"
        )
        self.path = path
        self.seconds = seconds


class SandboxHelperOutputError(SandboxProviderError):
    """A file operation's helper inside the sandbox wrote more than it ever legitimately does."""

    def __init__(self, what: str, path: str, key: str, limit: int) -> None:
        super().__init__(
            f"{what} of {path!r} in the Docker sandbox {key!r} was cut off: its helper wrote more "
            f"than {limit} bytes, which it never does unless a command replaced the sandbox's own "
            "programs (/bin/sh, stat, ...); reset() or destroy the sandbox"
        )
        self.path = path
        self.limit = limit


class SandboxDirectoryTooLargeError(SandboxProviderError):
    """``list_dir`` of a folder with more entries than the provider's ``list_limit``."""

    def __init__(self, path: str, limit: int) -> None:
        super().__init__(
            f"folder {path!r} in the Docker sandbox has more than {limit} entries (option "
            "list_limit); list part of it with a command (ls | head -n 100, find -maxdepth 1 "
            "-name 'a*') or raise list_limit"
        )
        self.path = path
        self.limit = limit
