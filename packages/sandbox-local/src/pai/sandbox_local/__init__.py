"""A PAI sandbox provider on this machine: bubblewrap namespaces around the host's programs.

Example::

    from pai.sandbox import sandbox_capability
    from pai.sandbox_local import LocalSandboxProvider

    capability = sandbox_capability(provider=LocalSandboxProvider())
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pai.core.ext import lazy_exports as _lazy_exports

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

if not TYPE_CHECKING:  # type checkers see the imports above, and no catch-all attribute
    __getattr__, __dir__ = _lazy_exports(__name__, _LAZY)


__all__ = [
    "DiskLimitError",
    "LocalOptions",
    "LocalSandboxInstance",
    "LocalSandboxProvider",
    "SupervisorUnresponsiveError",
]
