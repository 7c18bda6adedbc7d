"""``[capabilities.sandbox.e2b]``: the ``e2b`` sandbox provider's options model.

Kept apart from :mod:`pai.sandbox_e2b._plugin` so that loading the plugin (``pai --help``) imports
no pydantic; the ``pai_sandbox_providers`` hook imports it when it is called.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

#: The longest sandbox life E2B allows (seconds).
MAX_TIMEOUT = 86_400


class E2BOptions(BaseModel):
    """``[capabilities.sandbox.e2b]``: where and how sandboxes are made on E2B (the
    :class:`~pai.sandbox_e2b.E2BSandboxProvider` checks its arguments with this model too).

    The API key is read from ``E2B_API_KEY`` unless ``api_key`` is given (prefer the variable: a
    key in ``pai.toml`` ends up in version control). ``api_url`` / ``sandbox_url`` (or
    ``E2B_API_URL`` / ``E2B_SANDBOX_URL``) point the SDK elsewhere, e.g. at the offline emulator.

    Example::

        [capabilities.sandbox]
        provider = "e2b"

        [capabilities.sandbox.e2b]
        template = "base"
        timeout = 600                  # seconds each sandbox lives after its last use
        max_lifetime = 14400           # never kept alive past 4 h after its creation
        allow_internet_access = false  # the default
    """

    # strict: `timeout = "5"` is a mistake to report, not a string to convert.
    model_config: ClassVar[ConfigDict] = ConfigDict(extra="forbid", strict=True)

    template: str = Field(default="base", min_length=1, description="E2B template name or id")
    timeout: int = Field(
        default=300,
        gt=0,
        le=MAX_TIMEOUT,
        description=(
            "seconds a sandbox lives after its last use, create or connect (1 to 86 400: 24 h)"
        ),
    )
    max_lifetime: int | None = Field(
        default=None,
        gt=0,
        description=(
            "seconds after its creation past which a sandbox is no longer kept alive "
            "(unset: no bound but E2B's plan)"
        ),
    )
    api_key: str | None = Field(default=None, min_length=1, description="default: E2B_API_KEY")
    domain: str | None = Field(
        default=None, min_length=1, description="default: E2B_DOMAIN or e2b.app"
    )
    api_url: str | None = Field(default=None, min_length=1, description="default: E2B_API_URL")
    sandbox_url: str | None = Field(
        default=None, min_length=1, description="default: E2B_SANDBOX_URL"
    )
    metadata: dict[str, str] = Field(
        default_factory=dict[str, str], description="added to every sandbox's metadata"
    )
    namespace: str = Field(
        default="pai", min_length=1, description="the sandboxes `pai sandbox ls/rm/prune` see"
    )
    env: dict[str, str] = Field(
        default_factory=dict[str, str], description="environment of every sandbox"
    )
    allow_internet_access: bool = Field(
        default=False, description="true lets commands reach the internet"
    )
    user: str = Field(default="user", min_length=1, description="the sandbox user commands run as")
    request_timeout: float = Field(
        default=30.0,
        gt=0,
        allow_inf_nan=False,
        description="seconds an E2B API or envd request may take",
    )

    @field_validator("api_url", "sandbox_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(
                "not an http:// or https:// URL; write the whole URL, e.g. the emulator's url "
                "(http://127.0.0.1:PORT)"
            )
        return value

    @field_validator("metadata")
    @classmethod
    def _own_metadata(cls, value: dict[str, str]) -> dict[str, str]:
        reserved = sorted(name for name in value if name.startswith("pai."))
        if reserved:
            raise ValueError(
                "keys starting with 'pai.' are the provider's own (it sets 'pai.namespace', "
                f"'pai.key', ...): rename {', '.join(map(repr, reserved))}"
            )
        return value


__all__ = ["MAX_TIMEOUT", "E2BOptions"]
