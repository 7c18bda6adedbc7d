"""The errors this adapter raises itself; a run's own errors reach its caller as their class."""

from __future__ import annotations

from pai.core import DurabilityError

__all__ = ["TemporalEngineError", "rebuild"]


class TemporalEngineError(DurabilityError):
    """Temporal could not run PAI's durable runs (unreachable, misconfigured), or a run failed
    with an error that is not one of ``pai.core``'s: ``error_type`` is the name of the exception
    the run raised (the type Temporal recorded), and the message says what it said."""

    def __init__(
        self, message: str, *, error_type: str | None = None, error_message: str | None = None
    ) -> None:
        super().__init__(message)
        self.error_type: str | None = error_type
        """The recorded type of the failure (an exception class's name), when a run failed."""
        self.error_message: str = message if error_message is None else error_message
        """The recorded message of the failure (without its type)."""


def rebuild(error_type: str | None, message: str) -> Exception:
    """The exception a failure recorded as ``error_type`` (an exception class's name) and
    ``message`` stands for: an instance of the ``pai.core`` error class of that name (e.g.
    :class:`~pai.core.StepLimitExceededError`, :class:`~pai.core.DurabilityError`) carrying the
    message, else a :class:`TemporalEngineError` naming the type."""
    import pai.core

    found: object = getattr(pai.core, error_type, None) if error_type else None
    if isinstance(found, type) and issubclass(found, pai.core.PaiError):
        try:
            return found(message)
        except Exception:
            # A class whose constructor takes other arguments (UnknownDurableRunError): made
            # without calling it, carrying the message as its only argument.
            error = found.__new__(found)
            Exception.__init__(error, message)
            return error
    shown = f"{error_type}: {message}" if error_type else message
    return TemporalEngineError(shown, error_type=error_type, error_message=message)
