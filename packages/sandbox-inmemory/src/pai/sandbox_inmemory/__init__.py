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

from pai.sandbox_inmemory._just_bash import EXIT_INTERPRETER_ERROR, ExecutionLimits
from pai.sandbox_inmemory._provider import (
    EXIT_TIMEOUT,
    InMemorySandboxInstance,
    InMemorySandboxProvider,
    create_in_memory_sandbox_provider,
)

__all__ = [
    "EXIT_INTERPRETER_ERROR",
    "EXIT_TIMEOUT",
    "ExecutionLimits",
    "InMemorySandboxInstance",
    "InMemorySandboxProvider",
    "create_in_memory_sandbox_provider",
]
