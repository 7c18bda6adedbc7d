"""PAI sandbox capability: one ``Sandbox`` facade over every provider.

Declare ``capabilities={"sandbox": sandbox}`` on a tool; bind
``sandbox_capability(provider=...)`` at the runtime; pick a provider package (in-memory, Docker,
E2B) that implements :class:`~pai.sandbox.provider.SandboxProvider`. Writing a provider? Its
interface is in :mod:`pai.sandbox.provider`; the errors it raises are here.

Every public name is importable from here, but the module that defines it is imported only when
the name is first used, so loading the ``sandbox`` plugin (``pai --help``) imports no pydantic.
"""

from typing import TYPE_CHECKING

from pai.core.ext import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from pai.sandbox._capability import SandboxService as SandboxService
    from pai.sandbox._capability import create_sandbox_service as create_sandbox_service
    from pai.sandbox._capability import sandbox as sandbox
    from pai.sandbox._capability import sandbox_capability as sandbox_capability
    from pai.sandbox._errors import SandboxClosedError as SandboxClosedError
    from pai.sandbox._errors import SandboxDirectoryNotEmptyError as SandboxDirectoryNotEmptyError
    from pai.sandbox._errors import SandboxError as SandboxError
    from pai.sandbox._errors import SandboxFileExistsError as SandboxFileExistsError
    from pai.sandbox._errors import SandboxFileNotFoundError as SandboxFileNotFoundError
    from pai.sandbox._errors import SandboxFileTooLargeError as SandboxFileTooLargeError
    from pai.sandbox._errors import SandboxInputError as SandboxInputError
    from pai.sandbox._errors import SandboxIsADirectoryError as SandboxIsADirectoryError
    from pai.sandbox._errors import SandboxNotADirectoryError as SandboxNotADirectoryError
    from pai.sandbox._errors import SandboxNotDurableError as SandboxNotDurableError
    from pai.sandbox._errors import SandboxPathError as SandboxPathError
    from pai.sandbox._errors import SandboxProviderError as SandboxProviderError
    from pai.sandbox._errors import SandboxReplayError as SandboxReplayError
    from pai.sandbox._errors import SandboxUnavailableError as SandboxUnavailableError
    from pai.sandbox._errors import SandboxVanishedError as SandboxVanishedError
    from pai.sandbox._errors import SeedPathError as SeedPathError
    from pai.sandbox._options import SandboxSettings as SandboxSettings
    from pai.sandbox._paths import RESERVED as RESERVED
    from pai.sandbox._paths import WORKSPACE as WORKSPACE
    from pai.sandbox._paths import check_seed as check_seed
    from pai.sandbox._paths import resolve_path as resolve_path
    from pai.sandbox._provider import probe_provider as probe_provider
    from pai.sandbox._registry import ProviderOptionsError as ProviderOptionsError
    from pai.sandbox._registry import UnknownProviderError as UnknownProviderError
    from pai.sandbox._registry import build_provider as build_provider
    from pai.sandbox._registry import sandbox_providers as sandbox_providers
    from pai.sandbox._sandbox import DEFAULT_OUTPUT_LIMIT as DEFAULT_OUTPUT_LIMIT
    from pai.sandbox._sandbox import DEFAULT_READ_LIMIT as DEFAULT_READ_LIMIT
    from pai.sandbox._sandbox import DEFAULT_TIMEOUT as DEFAULT_TIMEOUT
    from pai.sandbox._sandbox import Sandbox as Sandbox
    from pai.sandbox._sandbox import create_sandbox as create_sandbox
    from pai.sandbox._session import SandboxHandle as SandboxHandle
    from pai.sandbox._session import SandboxSessionManager as SandboxSessionManager
    from pai.sandbox._session import (
        create_sandbox_session_manager as create_sandbox_session_manager,
    )
    from pai.sandbox._settings import DEFAULT_PROVIDER as DEFAULT_PROVIDER
    from pai.sandbox._types import CommandResult as CommandResult
    from pai.sandbox._types import DirEntry as DirEntry
    from pai.sandbox._types import EntryType as EntryType
    from pai.sandbox._types import InstanceInfo as InstanceInfo
    from pai.sandbox._types import SeedFile as SeedFile

_SOURCES: dict[str, str] = {
    "SandboxService": "pai.sandbox._capability",
    "create_sandbox_service": "pai.sandbox._capability",
    "sandbox": "pai.sandbox._capability",
    "sandbox_capability": "pai.sandbox._capability",
    "SandboxClosedError": "pai.sandbox._errors",
    "SandboxDirectoryNotEmptyError": "pai.sandbox._errors",
    "SandboxError": "pai.sandbox._errors",
    "SandboxFileExistsError": "pai.sandbox._errors",
    "SandboxFileNotFoundError": "pai.sandbox._errors",
    "SandboxFileTooLargeError": "pai.sandbox._errors",
    "SandboxInputError": "pai.sandbox._errors",
    "SandboxIsADirectoryError": "pai.sandbox._errors",
    "SandboxNotADirectoryError": "pai.sandbox._errors",
    "SandboxNotDurableError": "pai.sandbox._errors",
    "SandboxPathError": "pai.sandbox._errors",
    "SandboxProviderError": "pai.sandbox._errors",
    "SandboxReplayError": "pai.sandbox._errors",
    "SandboxUnavailableError": "pai.sandbox._errors",
    "SandboxVanishedError": "pai.sandbox._errors",
    "SeedPathError": "pai.sandbox._errors",
    "RESERVED": "pai.sandbox._paths",
    "WORKSPACE": "pai.sandbox._paths",
    "check_seed": "pai.sandbox._paths",
    "resolve_path": "pai.sandbox._paths",
    "DEFAULT_PROVIDER": "pai.sandbox._settings",
    "ProviderOptionsError": "pai.sandbox._registry",
    "SandboxSettings": "pai.sandbox._options",
    "UnknownProviderError": "pai.sandbox._registry",
    "build_provider": "pai.sandbox._registry",
    "sandbox_providers": "pai.sandbox._registry",
    "probe_provider": "pai.sandbox._provider",
    "DEFAULT_OUTPUT_LIMIT": "pai.sandbox._sandbox",
    "DEFAULT_READ_LIMIT": "pai.sandbox._sandbox",
    "DEFAULT_TIMEOUT": "pai.sandbox._sandbox",
    "Sandbox": "pai.sandbox._sandbox",
    "create_sandbox": "pai.sandbox._sandbox",
    "SandboxHandle": "pai.sandbox._session",
    "SandboxSessionManager": "pai.sandbox._session",
    "create_sandbox_session_manager": "pai.sandbox._session",
    "CommandResult": "pai.sandbox._types",
    "DirEntry": "pai.sandbox._types",
    "EntryType": "pai.sandbox._types",
    "InstanceInfo": "pai.sandbox._types",
    "SeedFile": "pai.sandbox._types",
}
"""The module that defines each public name: imported when the name is first used."""

__all__ = [
    "DEFAULT_OUTPUT_LIMIT",
    "DEFAULT_PROVIDER",
    "DEFAULT_READ_LIMIT",
    "DEFAULT_TIMEOUT",
    "RESERVED",
    "WORKSPACE",
    "CommandResult",
    "DirEntry",
    "EntryType",
    "InstanceInfo",
    "ProviderOptionsError",
    "Sandbox",
    "SandboxClosedError",
    "SandboxDirectoryNotEmptyError",
    "SandboxError",
    "SandboxFileExistsError",
    "SandboxFileNotFoundError",
    "SandboxFileTooLargeError",
    "SandboxHandle",
    "SandboxInputError",
    "SandboxIsADirectoryError",
    "SandboxNotADirectoryError",
    "SandboxNotDurableError",
    "SandboxPathError",
    "SandboxProviderError",
    "SandboxReplayError",
    "SandboxService",
    "SandboxSessionManager",
    "SandboxSettings",
    "SandboxUnavailableError",
    "SandboxVanishedError",
    "SeedFile",
    "SeedPathError",
    "UnknownProviderError",
    "build_provider",
    "check_seed",
    "create_sandbox",
    "create_sandbox_service",
    "create_sandbox_session_manager",
    "probe_provider",
    "resolve_path",
    "sandbox",
    "sandbox_capability",
    "sandbox_providers",
]

if not TYPE_CHECKING:  # type checkers see the imports above, and no catch-all attribute
    __getattr__, __dir__ = _lazy_exports(__name__, _SOURCES)
