"""The binding factory: ``acme.vault`` bound to a vault service, with a scope and lifecycle hooks.

Two ways in, one binding:

- in code: ``vault_capability(url="memory://", scope="user")``;
- from configuration: the plugin registers :func:`vault_binding_from_settings`, which receives the
  ``[capabilities.acme.vault]`` section already validated by :class:`VaultOptions`.
"""

from __future__ import annotations

from typing import TypeGuard, get_args

from pai.core import (
    AcquireInput,
    CapabilityBinding,
    CapabilityBindingError,
    CapabilityScope,
    DisposeInput,
    ScopeKind,
    create_capability_binding,
)
from pai.core.ext import CapabilitySettings
from pydantic import BaseModel, ConfigDict, Field, field_validator

from acme_vault._server import parse_url
from acme_vault._vault import DEFAULT_RETRIES, DEFAULT_RETRY_DELAY, Vault, VaultClient, vault

DEFAULT_SCOPE: ScopeKind = "user"
"""Secrets belong to people: one vault per user unless configured otherwise."""

_SCOPE_KINDS: tuple[str, ...] = get_args(ScopeKind)


def _is_scope_kind(value: str) -> TypeGuard[ScopeKind]:
    return value in _SCOPE_KINDS


class VaultOptions(BaseModel):
    """The options of ``[capabilities.acme.vault]`` (``scope`` sits beside them, read by PAI).

    ``extra="forbid"``: a misspelt key is an error naming it, not a silently ignored setting.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = Field(
        description="Where the vault service is: memory://<server name>.",
        examples=["memory://", "memory://team-secrets"],
    )
    retries: int = Field(
        default=DEFAULT_RETRIES, ge=0, le=10, description="Reconnects per call after a drop."
    )
    retry_delay: float = Field(
        default=DEFAULT_RETRY_DELAY, ge=0, description="Seconds before the first retry."
    )

    @field_validator("url")
    @classmethod
    def _check_url(cls, url: str) -> str:
        parse_url(url)  # ValueError with the fix; pydantic reports it under the key "url"
        return url


def vault_capability(
    *,
    url: str,
    scope: CapabilityScope = DEFAULT_SCOPE,
    retries: int = DEFAULT_RETRIES,
    retry_delay: float = DEFAULT_RETRY_DELAY,
) -> CapabilityBinding[Vault]:
    """Bind ``acme.vault`` to the vault service at ``url``, one vault per ``scope`` instance.

    Lifecycle: ``acquire`` returns a lazy :class:`Vault` (nothing opens until it is used); when a
    thread that owns an instance is deleted (``"thread"`` and ``"rootThread"`` scopes) its vault is
    deleted; ``close`` closes connections and keeps every vault.

    Example::

        runtime = create_agent_runtime(
            agent=agent,
            scope_key=lambda identity: identity.tenant,
            user_key=lambda identity: identity.user,
            capabilities={"acme.vault": vault_capability(url="memory://", scope="user")},
        )
    """
    options = VaultOptions(url=url, retries=retries, retry_delay=retry_delay)
    client = VaultClient(options.url, retries=options.retries, retry_delay=options.retry_delay)

    def acquire(input: AcquireInput) -> Vault:
        # Once per operation, so cheap: a facade over the shared client, nothing opened yet.
        return client.vault(input.key)

    async def dispose(input: DisposeInput) -> None:
        # The thread that owned this instance was deleted: its vault goes with it.
        await client.dispose(input.key)

    return create_capability_binding(
        capability=vault,
        scope=scope,
        acquire=acquire,
        dispose=dispose,
        close=client.aclose,  # connections only: the vaults are durable state and stay
    )


def vault_binding_from_settings(
    settings: CapabilitySettings[VaultOptions],
) -> CapabilityBinding[Vault]:
    """The plugin's factory: the binding ``[capabilities.acme.vault]`` describes.

    ``settings.options`` is already validated by :class:`VaultOptions`; ``settings.scope`` is the
    section's ``scope`` (``None`` when absent: the default, ``"user"``).
    """
    scope = settings.scope if settings.scope is not None else DEFAULT_SCOPE
    if not _is_scope_kind(scope):
        raise CapabilityBindingError(
            f"{settings.section} scope = {scope!r} is not a scope; use one of "
            f"{', '.join(repr(k) for k in _SCOPE_KINDS)}",
            ids=[vault.id],
        )
    options = settings.options
    return vault_capability(
        url=options.url,
        scope=scope,
        retries=options.retries,
        retry_delay=options.retry_delay,
    )
