"""Errors only this provider raises, under the ``pai.sandbox`` tree."""

from __future__ import annotations

from pai.sandbox.provider import SandboxProviderError


class SupervisorUnresponsiveError(SandboxProviderError):
    """The supervisor inside a local sandbox did not answer in time; the sandbox was restarted."""

    def __init__(self, what: str, key: str, seconds: float) -> None:
        super().__init__(
            f"{what} in the local sandbox {key!r} got no answer within {seconds:g} s: a command "
            "may have stopped or killed the sandbox's supervisor. Its processes were ended and "
            "the next operation starts them again (the files in /workspace are kept)"
        )
        self.seconds = seconds


__all__ = ["SupervisorUnresponsiveError"]
