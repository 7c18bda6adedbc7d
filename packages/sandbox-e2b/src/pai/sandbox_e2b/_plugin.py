"""pai-sandbox-e2b as a plugin: registers the ``e2b`` sandbox provider.

Kept light: it imports neither the ``e2b`` SDK nor the provider until the provider is chosen.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pai.core.ext import hookimpl

if TYPE_CHECKING:
    # Types only: loading this plugin (``pai --help``) imports no pydantic; the hook imports
    # the options model when it is called.
    from pai.sandbox.provider import SandboxProvider, SandboxProviderRegistration
    from pai.sandbox_e2b._options import E2BOptions

_OPTIONS_NAMES = frozenset({"MAX_TIMEOUT", "E2BOptions"})


def __getattr__(name: str) -> Any:
    # The options model lives in _options (pydantic): imported when asked for.
    if name in _OPTIONS_NAMES:
        from pai.sandbox_e2b import _options

        return getattr(_options, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _make_provider(options: E2BOptions) -> SandboxProvider:
    from pai.sandbox_e2b._provider import E2BSandboxProvider

    return E2BSandboxProvider(
        template=options.template,
        timeout=options.timeout,
        max_lifetime=options.max_lifetime,
        api_key=options.api_key,
        domain=options.domain,
        api_url=options.api_url,
        sandbox_url=options.sandbox_url,
        metadata=options.metadata,
        namespace=options.namespace,
        env=options.env,
        allow_internet_access=options.allow_internet_access,
        user=options.user,
        request_timeout=options.request_timeout,
    )


@hookimpl
def pai_sandbox_providers() -> list[SandboxProviderRegistration]:
    from pai.sandbox.provider import SandboxProviderRegistration
    from pai.sandbox_e2b._options import E2BOptions

    return [
        SandboxProviderRegistration(
            name="e2b",
            factory=_make_provider,
            options=E2BOptions,
            description="Sandboxes in E2B microVMs (the e2b SDK); internet access off by default.",
            install_hint="pip install pai-sandbox-e2b",
        )
    ]
