"""Options of :class:`~pai.durable_temporal.TemporalEngine`, validated before Temporal's SDK is
imported. The API key is a :class:`~pydantic.SecretStr`: no repr, message or error shows it."""

from __future__ import annotations

import math
import re
from typing import ClassVar, Final

from pydantic import BaseModel, ConfigDict, SecretStr, field_validator

__all__ = ["DEFAULT_TARGET_HOST", "TemporalOptions"]

DEFAULT_TARGET_HOST: Final = "127.0.0.1:7233"
"""Where a local Temporal server (``temporal server start-dev``) listens."""

_TARGET: Final = re.compile(r"[A-Za-z0-9_.\-\[\]:]+:[0-9]{1,5}")
_NAME: Final = re.compile(r"[^\s]{1,255}")


class TemporalOptions(BaseModel):
    """How :class:`~pai.durable_temporal.TemporalEngine` reaches Temporal and runs steps.

    ``target_host`` and ``namespace`` name the Temporal service (a ``temporal server`` of yours,
    or Temporal Cloud: ``<namespace>.<account>.tmprl.cloud:7233`` with ``api_key``, which turns
    TLS on unless ``tls = false``). ``task_queue`` is the queue PAI's workers poll: every process
    whose runtime has the same agents may serve it, and any of them may take over a step or a
    run another one left.

    ``step_timeout`` bounds one attempt of one step (a model's answer, a tool call): Temporal
    gives up an attempt that ran that long and retries it. ``heartbeat_timeout`` is how soon a
    step whose worker died (killed, its machine gone) is given to another worker: a running step
    heartbeats every third of it. Lower detects dead workers sooner and costs a little more
    traffic.

    ``identity`` is this worker's name in Temporal's records (``pai runs ls`` shows the last
    worker of a run); Temporal's default is ``<pid>@<host name>``. ``shutdown_grace`` is how long
    a closing engine lets its steps in flight finish before cancelling them.

    Example::

        TemporalOptions(target_host="temporal.internal:7233", task_queue="support-bot")
    """

    model_config: ClassVar[ConfigDict] = ConfigDict(
        frozen=True, extra="forbid", hide_input_in_errors=True
    )

    target_host: str = DEFAULT_TARGET_HOST
    """``host:port`` of the Temporal frontend (Temporal Cloud: the namespace's endpoint)."""
    namespace: str = "default"
    """The Temporal namespace PAI's runs are recorded in."""
    task_queue: str = "pai"
    """The task queue PAI's workers poll and runs are started on."""
    api_key: SecretStr | None = None
    """An API key (Temporal Cloud); never shown in a repr or a message."""
    tls: bool | None = None
    """TLS to the frontend: ``None`` (the default) is on with an ``api_key`` and off without."""
    step_timeout: float = 600.0
    """Seconds one attempt of a step may run before Temporal retries it (start-to-close)."""
    heartbeat_timeout: float = 10.0
    """Seconds without a heartbeat after which a step's worker is taken for dead and the step is
    given to another worker."""
    identity: str | None = None
    """This worker's identity in Temporal's records (Temporal's default: ``<pid>@<host>``)."""
    shutdown_grace: float = 5.0
    """Seconds a closing engine lets its steps in flight finish before it cancels them (Temporal
    then retries them on another worker)."""

    @field_validator("target_host")
    @classmethod
    def _check_target(cls, value: str) -> str:
        if not _TARGET.fullmatch(value):
            raise ValueError(
                f"target_host {value!r} must be host:port (for example 127.0.0.1:7233 or "
                "my-ns.a1b2c.tmprl.cloud:7233), without a scheme"
            )
        return value

    @field_validator("namespace", "task_queue")
    @classmethod
    def _check_name(cls, value: str) -> str:
        if not _NAME.fullmatch(value):
            raise ValueError(
                f"{value!r} must be 1 to 255 characters without spaces (a Temporal name)"
            )
        return value

    @field_validator("identity")
    @classmethod
    def _check_identity(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("identity must not be empty (leave it unset for Temporal's default)")
        return value

    @field_validator("api_key")
    @classmethod
    def _check_key(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().strip():
            raise ValueError("api_key is empty (leave it unset for a server without one)")
        return value

    @field_validator("step_timeout")
    @classmethod
    def _check_step_timeout(cls, value: float) -> float:
        if not math.isfinite(value) or not 1 <= value <= 86_400:
            raise ValueError(f"step_timeout={value!r} must be from 1 to 86400 seconds")
        return value

    @field_validator("shutdown_grace")
    @classmethod
    def _check_grace(cls, value: float) -> float:
        if not math.isfinite(value) or not 0 <= value <= 3_600:
            raise ValueError(f"shutdown_grace={value!r} must be from 0 to 3600 seconds")
        return value

    @field_validator("heartbeat_timeout")
    @classmethod
    def _check_heartbeat(cls, value: float) -> float:
        if not math.isfinite(value) or not 1 <= value <= 3_600:
            raise ValueError(f"heartbeat_timeout={value!r} must be from 1 to 3600 seconds")
        return value

    @property
    def use_tls(self) -> bool:
        """Whether the connection uses TLS (``tls``, or whether an ``api_key`` is set)."""
        return self.tls if self.tls is not None else self.api_key is not None
