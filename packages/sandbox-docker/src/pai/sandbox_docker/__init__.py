"""A PAI sandbox provider on a Docker engine: one hardened container per instance key.

Example::

    from pai.sandbox import sandbox_capability
    from pai.sandbox_docker import DockerSandboxProvider

    capability = sandbox_capability(provider=DockerSandboxProvider(image="python:3.12-slim"))
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pai.core.ext import lazy_exports as _lazy_exports

# Names resolve on first use: plugin discovery imports this package (for its entry-point module,
# ``_plugin``), and must not pay for importing the docker SDK until the provider is chosen.
if TYPE_CHECKING:
    from pai.sandbox_docker._errors import (
        SandboxDirectoryTooLargeError as SandboxDirectoryTooLargeError,
    )
    from pai.sandbox_docker._errors import SandboxHelperOutputError as SandboxHelperOutputError
    from pai.sandbox_docker._errors import SandboxHelperTimeoutError as SandboxHelperTimeoutError
    from pai.sandbox_docker._instance import DockerSandboxInstance as DockerSandboxInstance
    from pai.sandbox_docker._labels import container_name as container_name
    from pai.sandbox_docker._options import DockerOptions as DockerOptions
    from pai.sandbox_docker._provider import DockerSandboxProvider as DockerSandboxProvider

_LAZY = {
    "DockerOptions": "pai.sandbox_docker._options",
    "DockerSandboxInstance": "pai.sandbox_docker._instance",
    "DockerSandboxProvider": "pai.sandbox_docker._provider",
    "container_name": "pai.sandbox_docker._labels",
    "SandboxDirectoryTooLargeError": "pai.sandbox_docker._errors",
    "SandboxHelperOutputError": "pai.sandbox_docker._errors",
    "SandboxHelperTimeoutError": "pai.sandbox_docker._errors",
}

if not TYPE_CHECKING:  # type checkers see the imports above, and no catch-all attribute
    __getattr__, __dir__ = _lazy_exports(__name__, _LAZY)


__all__ = [
    "DockerOptions",
    "DockerSandboxInstance",
    "DockerSandboxProvider",
    "SandboxDirectoryTooLargeError",
    "SandboxHelperOutputError",
    "SandboxHelperTimeoutError",
    "container_name",
]
