"""Errors of the sandbox capability, under pai-core's ``PaiError``.

    PaiError
    └── SandboxError
        ├── SandboxInputError              (ValueError: a bad argument: env name, timeout, ...)
        ├── SandboxPathError               (ValueError: a path is malformed or not allowed)
        │   └── SeedPathError                    (a seed file path outside /workspace or in /workspace/.pai)
        ├── SandboxFileNotFoundError       (FileNotFoundError)
        ├── SandboxIsADirectoryError       (IsADirectoryError)
        ├── SandboxNotADirectoryError      (NotADirectoryError)
        ├── SandboxFileExistsError         (FileExistsError)
        ├── SandboxDirectoryNotEmptyError  (OSError: remove() of a non-empty folder without recursive)
        ├── SandboxFileTooLargeError       (OSError EFBIG: a file over the read limit, read_limit)
        ├── SandboxVanishedError           (the instance is gone: expired, removed, crashed)
        ├── SandboxClosedError             (RuntimeError: the session manager was closed)
        ├── SandboxReplayError             (a durable run's replay ran another command under a key)
        ├── SandboxNotDurableError         (a durable run on a provider that keeps no receipts)
        └── SandboxProviderError           (RuntimeError: the backend failed; the message says how)
            └── SandboxUnavailableError      (a probe found the backend unusable: engine down, ...)

The file errors subclass the matching builtin, so ``except FileNotFoundError`` works on them, and
carry the sandbox path in ``.filename``. Providers raise them from their backends' errors;
``SandboxVanishedError`` tells the facade to re-create the instance (operation bodies never see it).
"""

from __future__ import annotations

import errno

from pai.core import PaiError


class SandboxError(PaiError):
    """Root of the sandbox errors."""


class SandboxInputError(SandboxError, ValueError):
    """An argument to a sandbox operation is invalid (an env name, a timeout, ...)."""


class SandboxPathError(SandboxError, ValueError):
    """A path is malformed (empty, NUL byte) or not allowed where it was given."""


class SeedPathError(SandboxPathError):
    """A seed file path is not absolute, not inside ``/workspace``, or inside ``/workspace/.pai``."""


class _SandboxOSError(SandboxError, OSError):
    _errno: int = 0
    _what: str = ""

    def __init__(self, path: str, detail: str | None = None) -> None:
        message = f"{self._what}: {path!r}" + (f" ({detail})" if detail else "")
        OSError.__init__(self, self._errno, message)
        self.filename = path

    def __str__(self) -> str:
        return str(self.strerror)


class SandboxFileNotFoundError(_SandboxOSError, FileNotFoundError):
    """No file or folder at that sandbox path."""

    _errno = errno.ENOENT
    _what = "no such file or directory in the sandbox"


class SandboxIsADirectoryError(_SandboxOSError, IsADirectoryError):
    """A file operation got a folder."""

    _errno = errno.EISDIR
    _what = "is a directory in the sandbox (use list_dir, or remove(..., recursive=True))"


class SandboxNotADirectoryError(_SandboxOSError, NotADirectoryError):
    """A folder operation got a file (or a path goes through a file)."""

    _errno = errno.ENOTDIR
    _what = "not a directory in the sandbox"


class SandboxFileExistsError(_SandboxOSError, FileExistsError):
    """Something already exists at that path."""

    _errno = errno.EEXIST
    _what = "already exists in the sandbox (pass parents=True to make_dir to accept that)"


class SandboxDirectoryNotEmptyError(_SandboxOSError):
    """``remove`` of a non-empty folder without ``recursive=True``."""

    _errno = errno.ENOTEMPTY
    _what = (
        "directory is not empty in the sandbox; pass recursive=True to remove it and its contents"
    )


class SandboxFileTooLargeError(SandboxError, OSError):
    """``read_file`` of a file larger than the read limit (the facade's ``read_limit``).

    Providers check the size *before* transferring the file, so the host never holds more than
    the limit. Carries the sandbox ``path`` (also ``.filename``), the file's ``size`` and the
    ``limit``, both in bytes.
    """

    def __init__(self, path: str, *, size: int, limit: int) -> None:
        message = (
            f"file {path!r} in the sandbox is {size} bytes, over the read limit of {limit} bytes "
            "(option read_limit); read part of it with a command (head -c, tail -c, split) or "
            "raise read_limit"
        )
        OSError.__init__(self, errno.EFBIG, message)
        self.filename = path
        self.path = path
        self.size = size
        self.limit = limit

    def __str__(self) -> str:
        return str(self.strerror)

    def __reduce__(self) -> tuple[object, ...]:
        return (_too_large, (self.path, self.size, self.limit))


def _too_large(path: str, size: int, limit: int) -> SandboxFileTooLargeError:
    return SandboxFileTooLargeError(path, size=size, limit=limit)


class SandboxVanishedError(SandboxError):
    """The sandbox instance no longer exists (expired, removed, crashed).

    Providers raise it; the :class:`~pai.sandbox.Sandbox` facade catches it, re-creates the
    instance with its seed, and reports ``environment_reset=True``.
    """


class SandboxClosedError(SandboxError, RuntimeError):
    """The session manager (and so every facade over it) was closed."""


class SandboxReplayError(SandboxError):
    """A durable run replayed a tool call that ran a different command (or cwd, env, stdin)
    under a key whose receipt records another: the tool is not deterministic in the commands it
    runs. The message names the key."""


class SandboxNotDurableError(SandboxError):
    """A durable run used a provider that keeps no receipts of commands (``features.durable``
    is ``False``), so a replay could run a command a second time. Allow that with
    ``durable_commands="at-least-once"`` (``sandbox_capability`` or ``[capabilities.sandbox]``)."""


class SandboxProviderError(SandboxError, RuntimeError):
    """The provider's backend failed in a way the facade cannot repair."""


class SandboxUnavailableError(SandboxProviderError):
    """The provider's backend cannot be used as configured: what a provider's ``probe()`` raises.

    The message says what is wrong and how to fix it: the Docker engine does not answer at the
    socket tried (start it, or set DOCKER_HOST), the image is not present (``docker pull``), the
    E2B API refuses the key, ...
    """
