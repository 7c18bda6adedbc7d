"""Errors only this provider raises, under the ``pai.sandbox`` tree."""

from __future__ import annotations

import errno

from pai.sandbox import SandboxError, SandboxProviderError


class SupervisorUnresponsiveError(SandboxProviderError):
    """The supervisor inside a local sandbox did not answer in time; the sandbox was restarted."""

    def __init__(self, what: str, key: str, seconds: float) -> None:
        super().__init__(
            f"{what} in the local sandbox {key!r} got no answer within {seconds:g} s: a command "
            "may have stopped or killed the sandbox's supervisor. Its processes were ended and "
            "the next operation starts them again (the files in /workspace are kept)"
        )
        self.seconds = seconds


class DiskLimitError(SandboxError, OSError):
    """Files that would take a local sandbox's ``/workspace`` over its disk limit (option
    ``disk``); an ``OSError`` with ``errno.ENOSPC``, as a full file system gives."""

    def __init__(self, message: str) -> None:
        OSError.__init__(self, errno.ENOSPC, message)

    def __str__(self) -> str:
        return str(self.strerror)

    def __reduce__(self) -> tuple[object, ...]:
        return (DiskLimitError, (self.strerror,))


__all__ = ["DiskLimitError", "SupervisorUnresponsiveError"]
