"""The ``sandbox`` capability token, its binding factory and the sandbox service."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from pai.core import (
    AcquireInput,
    Capability,
    CapabilityBinding,
    CapabilityBindingError,
    CapabilityScope,
    DisposeInput,
    create_capability_binding,
    define_capability,
)
from pai.core.ext import derive_instance_key
from pai.sandbox._provider import SandboxProvider
from pai.sandbox._receipts import DurableCommands, check_durable_commands
from pai.sandbox._sandbox import (
    DEFAULT_OUTPUT_LIMIT,
    DEFAULT_READ_LIMIT,
    DEFAULT_TIMEOUT,
    Sandbox,
    check_limit,
    check_timeout,
)
from pai.sandbox._session import SandboxSessionManager
from pai.sandbox._types import SeedFile

sandbox: Capability[Sandbox] = define_capability(
    Sandbox, id="sandbox", description="Command and filesystem execution environment."
)
"""The sandbox capability token: declare ``capabilities={"sandbox": sandbox}`` on an operation."""


class SandboxService:
    """Sandboxes of one provider and scope, for the runtime and for work outside operations.

    ``binding`` is what you register with the runtime; :meth:`acquire` gives the same facade an
    operation would get, for pipeline work such as staging attachments before a model run.
    Make one with :func:`create_sandbox_service`.
    """

    def __init__(
        self,
        *,
        provider: SandboxProvider,
        scope: CapabilityScope,
        seed: Iterable[SeedFile],
        default_timeout: float | None,
        output_limit: int,
        read_limit: int = DEFAULT_READ_LIMIT,
        durable_commands: DurableCommands = "exactly-once",
    ) -> None:
        self._default_timeout = check_timeout("default_timeout", default_timeout)
        self._output_limit = check_limit("output_limit", output_limit)
        self._read_limit = check_limit("read_limit", read_limit)
        self._durable_commands: DurableCommands = check_durable_commands(durable_commands)
        self.sessions: SandboxSessionManager = SandboxSessionManager(provider, seed=seed)
        self.scope: CapabilityScope = scope
        self.binding: CapabilityBinding[Sandbox] = create_capability_binding(
            capability=sandbox,
            scope=scope,
            acquire=self._acquire,
            dispose=self._dispose,
            close=self.sessions.aclose,
        )

    def sandbox_for_key(self, key: str, *, owner_created_at: datetime | None = None) -> Sandbox:
        """The facade for an instance key (lazy: nothing is provisioned until it is used).

        ``owner_created_at``: when the thread owning the key was created; when that was before
        this service started and the provider finds no instance, the first result says
        ``environment_reset=True`` (see :meth:`SandboxSessionManager.resume`).
        """
        return Sandbox(
            self.sessions.handle(key, owner_created_at=owner_created_at),
            default_timeout=self._default_timeout,
            output_limit=self._output_limit,
            read_limit=self._read_limit,
            durable_commands=self._durable_commands,
        )

    def _acquire(self, input: AcquireInput) -> Sandbox:
        return self.sandbox_for_key(input.key, owner_created_at=input.thread_created_at)

    async def _dispose(self, input: DisposeInput) -> None:
        await self.sessions.dispose(input.key)

    def acquire(
        self,
        *,
        scope_key: str,
        thread_id: str,
        root_thread_id: str | None = None,
        user_key: str | None = None,
        identity: object = None,
    ) -> Sandbox:
        """The facade an operation in ``thread_id`` of ``scope_key`` would receive.

        For ``"rootThread"`` and custom scopes pass ``root_thread_id`` (it defaults to
        ``thread_id``, right for a top-level thread); for ``"user"`` scope pass ``user_key``.

        Example::

            workspace = sandboxes.acquire(scope_key="acme", thread_id=thread.id)
            await workspace.write_file("attachments/report.pdf", pdf_bytes)
        """
        key = derive_instance_key(
            sandbox.id,
            self.scope,
            scope_key=scope_key,
            thread_id=thread_id,
            root_thread_id=root_thread_id,
            user_key=user_key,
            identity=identity,
        )
        return self.sandbox_for_key(key)


def create_sandbox_service(
    *,
    provider: SandboxProvider,
    scope: CapabilityScope = "thread",
    seed: Iterable[SeedFile] = (),
    default_timeout: float | None = DEFAULT_TIMEOUT,
    output_limit: int = DEFAULT_OUTPUT_LIMIT,
    read_limit: int = DEFAULT_READ_LIMIT,
    durable_commands: DurableCommands = "exactly-once",
) -> SandboxService:
    """Sandboxes for the runtime (``.binding``) and for pipeline work (``.acquire(...)``).

    The limits are those of :func:`sandbox_capability`, checked here (``SandboxInputError``
    naming the option).

    Example::

        sandboxes = create_sandbox_service(provider=provider, scope="thread")
        runtime = create_agent_runtime(
            agent=agent, scope_key=..., capabilities={"sandbox": sandboxes.binding}
        )
        workspace = sandboxes.acquire(scope_key="acme", thread_id=thread_id)
    """
    if not isinstance(provider, SandboxProvider):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise CapabilityBindingError(
            f"provider {provider!r} does not implement the SandboxProvider protocol; pass a "
            "provider such as create_in_memory_sandbox_provider()",
            ids=[sandbox.id],
        )
    return SandboxService(
        provider=provider,
        scope=scope,
        seed=seed,
        default_timeout=default_timeout,
        output_limit=output_limit,
        read_limit=read_limit,
        durable_commands=durable_commands,
    )


def sandbox_capability(
    *,
    provider: SandboxProvider,
    scope: CapabilityScope = "thread",
    seed: Iterable[SeedFile] = (),
    default_timeout: float | None = DEFAULT_TIMEOUT,
    output_limit: int = DEFAULT_OUTPUT_LIMIT,
    read_limit: int = DEFAULT_READ_LIMIT,
    durable_commands: DurableCommands = "exactly-once",
) -> CapabilityBinding[Sandbox]:
    """The sandbox binding for a runtime: ``capabilities={"sandbox": sandbox_capability(...)}``.

    ``scope`` picks which operations share a sandbox (default: one per thread). ``seed`` files are
    written into every new sandbox and after every re-creation; their paths are checked here,
    before any I/O. Thread deletion destroys thread-scoped sandboxes; runtime close keeps them.
    ``default_timeout`` (seconds, ``None`` for none) applies to commands given no timeout,
    ``output_limit`` caps each output stream of a command (1 MiB by default), and ``read_limit``
    is the largest file ``read_file`` transfers (64 MiB by default; a larger one raises
    ``SandboxFileTooLargeError``). ``durable_commands`` is what a durable run's commands do on a
    provider that keeps no receipts (in-memory): ``"exactly-once"`` (the default) refuses them
    with ``SandboxNotDurableError``, ``"at-least-once"`` runs them, again on a replay after a
    crash. Bad values raise ``SandboxInputError`` naming the option.

    Example::

        capabilities={
            "sandbox": sandbox_capability(
                provider=create_in_memory_sandbox_provider(),
                seed=[SeedFile("/workspace/README.md", "# Project\\n")],
            )
        }
    """
    return create_sandbox_service(
        provider=provider,
        scope=scope,
        seed=seed,
        default_timeout=default_timeout,
        output_limit=output_limit,
        read_limit=read_limit,
        durable_commands=durable_commands,
    ).binding
