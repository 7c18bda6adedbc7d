"""What a sandbox provider package needs from pai-sandbox: the public extension interface.

A provider package (``pai-sandbox-docker``, ``pai-sandbox-e2b``, yours) imports from here and from
:mod:`pai.sandbox`, never from ``pai.sandbox._*``. Each member's contract is documented where it
is defined:

- the protocols it implements: :class:`SandboxProvider` (create, find, destroy, list, close) and
  :class:`SandboxInstance` (run, files), with :class:`ProviderFeatures` saying what it supports;
- the values they exchange: :class:`RawCommandResult`, :class:`DirEntry` / :data:`EntryType`,
  :class:`FileWrite`, :class:`InstanceInfo`, :data:`OutputCallback`;
- the errors they raise: a vanished instance is :class:`SandboxVanishedError` (the facade then
  re-creates it, re-seeds it and says so), a backend failure :class:`SandboxProviderError`, file
  errors the ``Sandbox*Error`` classes (each also the matching builtin ``OSError``);
- registration: :class:`SandboxProviderRegistration` returned from a ``pai_sandbox_providers``
  hook (:class:`SandboxHookSpecs`), with :func:`build_provider` / :func:`sandbox_providers` to
  look providers up and :class:`UnknownProviderError` / :class:`ProviderOptionsError` for
  configuration mistakes;
- :func:`lazy_exports`, so a package's ``__init__`` imports its heavy SDK only when used.

Providers prove they keep the contract with :class:`pai.sandbox.testing.SandboxProviderConformance`.

Example::

    from pai.core import hookimpl
    from pai.sandbox.provider import SandboxProviderRegistration

    @hookimpl
    def pai_sandbox_providers() -> list[SandboxProviderRegistration]:
        return [SandboxProviderRegistration(name="acme", factory=make, options=AcmeOptions)]
"""

from pai.sandbox._errors import SandboxClosedError as SandboxClosedError
from pai.sandbox._errors import SandboxDirectoryNotEmptyError as SandboxDirectoryNotEmptyError
from pai.sandbox._errors import SandboxError as SandboxError
from pai.sandbox._errors import SandboxFileExistsError as SandboxFileExistsError
from pai.sandbox._errors import SandboxFileNotFoundError as SandboxFileNotFoundError
from pai.sandbox._errors import SandboxInputError as SandboxInputError
from pai.sandbox._errors import SandboxIsADirectoryError as SandboxIsADirectoryError
from pai.sandbox._errors import SandboxNotADirectoryError as SandboxNotADirectoryError
from pai.sandbox._errors import SandboxPathError as SandboxPathError
from pai.sandbox._errors import SandboxProviderError as SandboxProviderError
from pai.sandbox._errors import SandboxVanishedError as SandboxVanishedError
from pai.sandbox._lazy import lazy_exports as lazy_exports
from pai.sandbox._plugin import KNOWN_PROVIDERS as KNOWN_PROVIDERS
from pai.sandbox._plugin import ProviderOptionsError as ProviderOptionsError
from pai.sandbox._plugin import SandboxHookSpecs as SandboxHookSpecs
from pai.sandbox._plugin import SandboxProviderRegistration as SandboxProviderRegistration
from pai.sandbox._plugin import UnknownProviderError as UnknownProviderError
from pai.sandbox._plugin import build_provider as build_provider
from pai.sandbox._plugin import sandbox_providers as sandbox_providers
from pai.sandbox._provider import OutputCallback as OutputCallback
from pai.sandbox._provider import ProviderFeatures as ProviderFeatures
from pai.sandbox._provider import SandboxInstance as SandboxInstance
from pai.sandbox._provider import SandboxProvider as SandboxProvider
from pai.sandbox._types import DirEntry as DirEntry
from pai.sandbox._types import EntryType as EntryType
from pai.sandbox._types import FileWrite as FileWrite
from pai.sandbox._types import InstanceInfo as InstanceInfo
from pai.sandbox._types import RawCommandResult as RawCommandResult

__all__ = [
    "KNOWN_PROVIDERS",
    "DirEntry",
    "EntryType",
    "FileWrite",
    "InstanceInfo",
    "OutputCallback",
    "ProviderFeatures",
    "ProviderOptionsError",
    "RawCommandResult",
    "SandboxClosedError",
    "SandboxDirectoryNotEmptyError",
    "SandboxError",
    "SandboxFileExistsError",
    "SandboxFileNotFoundError",
    "SandboxHookSpecs",
    "SandboxInputError",
    "SandboxInstance",
    "SandboxIsADirectoryError",
    "SandboxNotADirectoryError",
    "SandboxPathError",
    "SandboxProvider",
    "SandboxProviderError",
    "SandboxProviderRegistration",
    "SandboxVanishedError",
    "UnknownProviderError",
    "build_provider",
    "lazy_exports",
    "sandbox_providers",
]
