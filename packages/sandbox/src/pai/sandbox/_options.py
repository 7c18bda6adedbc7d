"""``[capabilities.sandbox]``: the sandbox capability's options model.

Kept apart from :mod:`pai.sandbox._plugin` and :mod:`pai.sandbox._settings` so that loading the
plugin (``pai --help``) imports no pydantic; the ``pai_capabilities`` hook imports it when it is
called.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from pai.sandbox._sandbox import DEFAULT_OUTPUT_LIMIT, DEFAULT_READ_LIMIT, DEFAULT_TIMEOUT


class SandboxSettings(BaseModel):
    """``[capabilities.sandbox]``: which provider, and the facade's limits.

    ``durable_commands``: what a durable run's commands do on a provider that keeps no receipts
    (in-memory): ``"exactly-once"`` refuses them, ``"at-least-once"`` runs them (again on replay).

    Each provider's own options go in a sub-table named after it (``[capabilities.sandbox.docker]``).
    """

    model_config: ClassVar[ConfigDict] = ConfigDict(extra="allow")

    provider: str | None = None
    """The sandbox provider's name (``"docker"``, ``"local"``...); unset: the in-memory one."""
    default_timeout: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = DEFAULT_TIMEOUT
    """Seconds a command may run when ``run_command`` gets no ``timeout``; None: no limit."""
    output_limit: Annotated[int, Field(ge=1)] = DEFAULT_OUTPUT_LIMIT
    """Bytes kept per output stream of one command."""
    read_limit: Annotated[int, Field(ge=1)] = DEFAULT_READ_LIMIT
    """The largest file ``read_file`` transfers; a larger one raises
    ``SandboxFileTooLargeError``."""
    durable_commands: Literal["exactly-once", "at-least-once"] = "exactly-once"
    """In a durable run on a provider that keeps no receipts (in-memory): ``"exactly-once"``
    refuses commands, ``"at-least-once"`` runs them (again on replay)."""


__all__ = ["SandboxSettings"]
