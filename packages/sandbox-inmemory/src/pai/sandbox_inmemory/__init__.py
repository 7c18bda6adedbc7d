"""A PAI sandbox provider with an in-memory filesystem and a bash interpreter in worker processes.

The embedded default: no container engine, no network. Each instance is an in-memory filesystem
held by this process, with ``/workspace`` as the working folder; each command runs in a fresh
just-bash interpreter in a locked-down worker process that reaches only those files.

Example::

    from pai.sandbox import create_sandbox, create_sandbox_session_manager
    from pai.sandbox_inmemory import create_in_memory_sandbox_provider

    sessions = create_sandbox_session_manager(provider=create_in_memory_sandbox_provider())
    sandbox = create_sandbox(sessions.handle("t"))
    assert (await sandbox.run_command("echo hi")).stdout == "hi\\n"

The modules, host side: ``_options.py`` (``InMemoryOptions``), ``_plugin.py`` (the plugin's
hook, imported by nothing here), ``_provider.py`` (the lifecycle: create, find, destroy, list,
close), ``_instance.py`` (one instance's commands and files), ``_pool.py`` (the worker pool: the
one module that talks to the worker processes), ``_hostfs.py`` and ``_files.py`` (the instances'
files and the file API over them), ``_isolation.py`` and ``_errors.py``. Worker side, the
``_worker`` package: its ``__init__`` is the worker process's entry point (it closes itself off
and serves commands), ``_shell`` and ``_scripts`` the interpreter, ``_commands`` the command
registry and its audit, with ``_coreutils``, ``_semantics``, ``_texttools`` (``_awk``, ``_sed``,
``_grep``, ``_jq``, over ``_posix``) and ``_zones``. Both sides import ``_protocol.py`` (the
frames and exit codes they share) and ``_confine.py`` (the kernel confinement the worker applies
and the host expects).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pai.core.ext import lazy_exports as _lazy_exports

# Names resolve on first use: plugin discovery imports this package (for its entry-point module,
# ``_plugin``), and must not pay for importing the interpreter (just-bash pulls in aiohttp) until
# the provider is chosen.
if TYPE_CHECKING:
    from just_bash import ExecutionLimits as ExecutionLimits

    from pai.sandbox_inmemory._errors import SandboxMemoryBudgetError as SandboxMemoryBudgetError
    from pai.sandbox_inmemory._instance import EXIT_TIMEOUT as EXIT_TIMEOUT
    from pai.sandbox_inmemory._instance import InMemorySandboxInstance as InMemorySandboxInstance
    from pai.sandbox_inmemory._isolation import Isolation as Isolation
    from pai.sandbox_inmemory._protocol import EXIT_INTERPRETER_ERROR as EXIT_INTERPRETER_ERROR
    from pai.sandbox_inmemory._protocol import EXIT_OUT_OF_MEMORY as EXIT_OUT_OF_MEMORY
    from pai.sandbox_inmemory._provider import DEFAULT_MEMORY_BUDGET as DEFAULT_MEMORY_BUDGET
    from pai.sandbox_inmemory._provider import InMemorySandboxProvider as InMemorySandboxProvider
    from pai.sandbox_inmemory._provider import (
        create_in_memory_sandbox_provider as create_in_memory_sandbox_provider,
    )

_LAZY = {
    "DEFAULT_MEMORY_BUDGET": "pai.sandbox_inmemory._provider",
    "EXIT_INTERPRETER_ERROR": "pai.sandbox_inmemory._protocol",
    "EXIT_OUT_OF_MEMORY": "pai.sandbox_inmemory._protocol",
    "EXIT_TIMEOUT": "pai.sandbox_inmemory._instance",
    "ExecutionLimits": "just_bash",
    "InMemorySandboxInstance": "pai.sandbox_inmemory._instance",
    "Isolation": "pai.sandbox_inmemory._isolation",
    "InMemorySandboxProvider": "pai.sandbox_inmemory._provider",
    "SandboxMemoryBudgetError": "pai.sandbox_inmemory._errors",
    "create_in_memory_sandbox_provider": "pai.sandbox_inmemory._provider",
}

if not TYPE_CHECKING:  # type checkers see the imports above, and no catch-all attribute
    __getattr__, __dir__ = _lazy_exports(__name__, _LAZY)


__all__ = [
    "DEFAULT_MEMORY_BUDGET",
    "EXIT_INTERPRETER_ERROR",
    "EXIT_OUT_OF_MEMORY",
    "EXIT_TIMEOUT",
    "ExecutionLimits",
    "InMemorySandboxInstance",
    "InMemorySandboxProvider",
    "Isolation",
    "SandboxMemoryBudgetError",
    "create_in_memory_sandbox_provider",
]
