"""A PAI sandbox provider on this machine: bubblewrap namespaces around the host's programs.

Example::

    from pai.sandbox import sandbox_capability
    from pai.sandbox_local import LocalSandboxProvider

    capability = sandbox_capability(provider=LocalSandboxProvider())
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pai.sandbox.provider import lazy_exports

# Names resolve on first use: plugin discovery imports this package (for its entry-point
# module, ``_plugin``), and must not pay for pydantic until the provider is chosen.
if TYPE_CHECKING:
    from pai.sandbox_local._errors import DiskLimitError as DiskLimitError
    from pai.sandbox_local._errors import (
        SupervisorUnresponsiveError as SupervisorUnresponsiveError,
    )
    from pai.sandbox_local._instance import LocalSandboxInstance as LocalSandboxInstance
    from pai.sandbox_local._options import LocalOptions as LocalOptions
    from pai.sandbox_local._provider import LocalSandboxProvider as LocalSandboxProvider

_LAZY = {
    "DiskLimitError": "pai.sandbox_local._errors",
    "LocalOptions": "pai.sandbox_local._options",
    "LocalSandboxInstance": "pai.sandbox_local._instance",
    "LocalSandboxProvider": "pai.sandbox_local._provider",
    "SupervisorUnresponsiveError": "pai.sandbox_local._errors",
}

_getattr, _dir = lazy_exports(__name__, _LAZY)


def __getattr__(name: str) -> object:
    return _getattr(name)


def __dir__() -> list[str]:
    return _dir()


__all__ = [
    "DiskLimitError",
    "LocalOptions",
    "LocalSandboxInstance",
    "LocalSandboxProvider",
    "SupervisorUnresponsiveError",
]
