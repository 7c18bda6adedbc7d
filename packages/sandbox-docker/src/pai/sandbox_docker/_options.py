"""``[capabilities.sandbox.docker]``: the ``docker`` sandbox provider's options model.

Kept apart from :mod:`pai.sandbox_docker._plugin` so that loading the plugin (``pai --help``) imports
no pydantic; the ``pai_sandbox_providers`` hook imports it when it is called.
"""

from __future__ import annotations

import re
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

#: Who commands run as unless the ``user`` option says otherwise: an unprivileged uid/gid, so a
#: command cannot replace the image's programs (``/bin/sh`` and the rest belong to root).
DEFAULT_USER = "1000:1000"


class DockerOptions(BaseModel):
    """``[capabilities.sandbox.docker]``: the container every sandbox runs in.

    Example::

        [capabilities.sandbox.docker]
        image = "python:3.12-slim"
        memory = "1g"
        network = "bridge"   # the default, "none", gives no network access
        runtime = "runsc"    # gVisor, where the engine has it registered
        user = "root"        # the default, "1000:1000", runs commands unprivileged
    """

    model_config: ClassVar[ConfigDict] = ConfigDict(extra="forbid")

    image: str = Field(
        min_length=1,
        description='the image every sandbox runs, e.g. "python:3.12-slim" (pulled when absent)',
    )
    workdir: str = Field(
        default="/workspace",
        description="the sandbox's workspace folder inside the container (absolute)",
    )
    user: str | None = Field(
        default=DEFAULT_USER,
        min_length=1,
        description='who commands run as: "uid:gid" or a user of the image; "root" opts back '
        "into root; None: the image's USER",
    )
    env: dict[str, str] = Field(
        default_factory=dict[str, str],
        description="environment variables set in every sandbox",
    )
    cpus: float | None = Field(
        default=None, gt=0, description="CPUs a sandbox may use, e.g. 1.5; None: no limit"
    )
    memory: str | int | None = Field(
        default="512m", description='memory limit, e.g. "1g" or bytes; None: no limit'
    )
    pids_limit: int | None = Field(
        default=256, gt=0, description="processes a sandbox may have at once; None: no limit"
    )
    network: str = Field(
        default="none",
        description='Docker network; "none": loopback only, "bridge" (or a name): network access',
    )
    labels: dict[str, str] = Field(
        default_factory=dict[str, str],
        description="labels added to every container (not starting with 'pai.')",
    )
    namespace: str = Field(
        default="pai",
        min_length=1,
        description="separates applications' sandboxes: ls, rm and prune see one namespace",
    )
    idle_ttl: float | None = Field(
        default=None,
        ge=0,
        description="seconds unused after which a sandbox is removed (at a later create); "
        "None: kept",
    )
    docker_host: str | None = Field(
        default=None,
        description='the engine, e.g. "unix:///var/run/docker.sock" or "tcp://host:2376"; '
        "None: DOCKER_HOST, then the default socket",
    )
    runtime: str | None = Field(
        default=None,
        description='OCI runtime of the engine, e.g. "runsc" (gVisor); None: the default',
    )
    disk: str | None = Field(
        default=None,
        description='writable-layer size limit, e.g. "2g"; needs a storage driver with quotas',
    )
    max_concurrent_commands: int = Field(
        default=8,
        gt=0,
        le=1024,
        description="commands of one sandbox running at once (each holds a host thread); "
        "more wait for a slot, their timeout counting",
    )
    list_limit: int = Field(
        default=10_000,
        gt=0,
        description="entries list_dir returns at most; a larger folder is an error",
    )
    helper_timeout: float = Field(
        default=30.0,
        gt=0,
        description="seconds a file operation's helper inside the sandbox may take",
    )

    @field_validator("workdir")
    @classmethod
    def _absolute_workdir(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError(f"workdir must be an absolute path such as /workspace, got {value!r}")
        return value

    @field_validator("labels")
    @classmethod
    def _own_labels(cls, value: dict[str, str]) -> dict[str, str]:
        reserved = sorted(name for name in value if name.startswith("pai."))
        if reserved:
            raise ValueError(
                f"labels {reserved} use the reserved prefix 'pai.' (the provider's own labels); "
                "rename them"
            )
        return value

    @field_validator("runtime")
    @classmethod
    def _runtime_name(cls, value: str | None) -> str | None:
        if value is not None and not _RUNTIME.fullmatch(value):
            raise ValueError(
                f"runtime {value!r} is not a Docker runtime name; use the name the engine "
                'registers it under (`docker info` lists them), e.g. "runsc" for gVisor'
            )
        return value

    @field_validator("disk")
    @classmethod
    def _disk_size(cls, value: str | None) -> str | None:
        if value is not None and not _SIZE.fullmatch(value):
            raise ValueError(
                f"disk {value!r} is not a size; write a number with an optional unit "
                'b, k, m, g or t, such as "2g"'
            )
        return value

    @field_validator("memory")
    @classmethod
    def _docker_memory(cls, value: str | int | None) -> str | int | None:
        # Checked here, where configuration is read, rather than by the engine at the first
        # command (which reached the model as a raw DockerException).
        if isinstance(value, int):
            if value <= 0:
                raise ValueError(f"memory must be a positive number of bytes, got {value}")
            return value
        if value is not None and not _MEMORY.fullmatch(value):
            raise ValueError(
                f"memory {value!r} is not a Docker memory size; write a number with an optional "
                'unit b, k, m or g, such as "512m" or "1g", or a number of bytes'
            )
        return value


_MEMORY = re.compile(r"[1-9][0-9]*(\.[0-9]+)?[bkmgBKMG]?")
_SIZE = re.compile(r"[1-9][0-9]*(\.[0-9]+)?[bkmgtBKMGT]?")
_RUNTIME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}")


__all__ = ["DEFAULT_USER", "DockerOptions"]
