"""A PAI sandbox provider with an in-memory filesystem and an in-process bash interpreter.

The embedded default: no container engine, no network, nothing outside the process. Each
instance is a just-bash in-memory filesystem with ``/workspace`` as the working folder; each
command runs in a fresh just-bash interpreter over it.

Example::

    from pai.sandbox import create_sandbox, create_sandbox_session_manager
    from pai.sandbox_inmemory import create_in_memory_sandbox_provider

    sessions = create_sandbox_session_manager(provider=create_in_memory_sandbox_provider())
    sandbox = create_sandbox(sessions.handle("t"))
    assert (await sandbox.run_command("echo hi")).stdout == "hi\\n"
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pai.sandbox.provider import lazy_exports

# Names resolve on first use: plugin discovery imports this package (for its entry-point module,
# ``_plugin``), and must not pay for importing the interpreter (just-bash pulls in aiohttp) until
# the provider is chosen.
if TYPE_CHECKING:
    from pai.sandbox_inmemory._just_bash import EXIT_INTERPRETER_ERROR as EXIT_INTERPRETER_ERROR
    from pai.sandbox_inmemory._just_bash import ExecutionLimits as ExecutionLimits
    from pai.sandbox_inmemory._provider import EXIT_TIMEOUT as EXIT_TIMEOUT
    from pai.sandbox_inmemory._provider import InMemorySandboxInstance as InMemorySandboxInstance
    from pai.sandbox_inmemory._provider import InMemorySandboxProvider as InMemorySandboxProvider
    from pai.sandbox_inmemory._provider import (
        create_in_memory_sandbox_provider as create_in_memory_sandbox_provider,
    )

_LAZY = {
    "EXIT_INTERPRETER_ERROR": "pai.sandbox_inmemory._just_bash",
    "ExecutionLimits": "pai.sandbox_inmemory._just_bash",
    "EXIT_TIMEOUT": "pai.sandbox_inmemory._provider",
    "InMemorySandboxInstance": "pai.sandbox_inmemory._provider",
    "InMemorySandboxProvider": "pai.sandbox_inmemory._provider",
    "create_in_memory_sandbox_provider": "pai.sandbox_inmemory._provider",
}

_getattr, _dir = lazy_exports(__name__, _LAZY)


def __getattr__(name: str) -> object:
    return _getattr(name)


def __dir__() -> list[str]:
    return _dir()


__all__ = [
    "EXIT_INTERPRETER_ERROR",
    "EXIT_TIMEOUT",
    "ExecutionLimits",
    "InMemorySandboxInstance",
    "InMemorySandboxProvider",
    "create_in_memory_sandbox_provider",
]
