"""Values that cross the facade and provider boundary."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, TypeAlias

EntryType: TypeAlias = Literal["file", "directory", "symlink", "other"]


@dataclass(frozen=True, slots=True)
class CommandResult:
    """The outcome of :meth:`Sandbox.run_command`. A non-zero exit is a result, not an exception.

    ``stdout`` and ``stderr`` are decoded as UTF-8 with replacement characters and capped at the
    sandbox's output limit per stream (``truncated`` says a cap was hit). ``timed_out`` says the
    command was killed at its timeout; ``environment_reset`` that the sandbox had vanished and was
    re-created (with its seed files) before this command ran; ``duration`` is wall time in seconds.
    """

    stdout: str
    stderr: str
    exit_code: int
    timed_out: bool = False
    truncated: bool = False
    environment_reset: bool = False
    duration: float = 0.0

    @property
    def ok(self) -> bool:
        """Exit code 0 and no timeout."""
        return self.exit_code == 0 and not self.timed_out


@dataclass(frozen=True, slots=True)
class RawCommandResult:
    """What a provider's instance returns for a command: bytes, already capped while streaming."""

    stdout: bytes
    stderr: bytes
    exit_code: int
    timed_out: bool = False
    truncated: bool = False


@dataclass(frozen=True, slots=True)
class DirEntry:
    """One entry of :meth:`Sandbox.list_dir`."""

    name: str
    path: str
    type: EntryType
    size: int


@dataclass(frozen=True, slots=True)
class FileWrite:
    """One file to write: absolute sandbox path, content and permission bits."""

    path: str
    content: bytes
    mode: int = 0o644


@dataclass(frozen=True, slots=True)
class SeedFile:
    """A file written into every new sandbox, and again after every re-creation.

    ``path`` must be absolute, inside ``/workspace`` and outside ``/workspace/.pai``; text content
    is written as UTF-8. ``executable=True`` sets mode 0755.

    Example::

        SeedFile("/workspace/README.md", "# Project\\n")
        SeedFile("/workspace/bin/run.sh", "#!/bin/sh\\necho hi\\n", executable=True)
    """

    path: str
    content: bytes | str
    executable: bool = False

    def to_write(self) -> FileWrite:
        data = self.content.encode() if isinstance(self.content, str) else self.content
        return FileWrite(self.path, data, 0o755 if self.executable else 0o644)


@dataclass(frozen=True, slots=True)
class InstanceInfo:
    """A sandbox instance a provider owns, for listing and pruning."""

    key: str
    instance_id: str
    created_at: datetime
    provider: str
    details: dict[str, str] = field(default_factory=dict[str, str])
