"""Checking a configuration as a runtime would read it: one function for every command.

Two levels:

* :func:`check_static`: what can be checked from the configuration and the installed packages
  alone, importing no user code and opening no connection: the tables, the capability ids, the
  tables plugins read themselves (the ``pai_check_config`` hook), the storage URL, the options
  of every configured capability, and ``[model]`` (its provider and options; the model is not
  built, so commands that use none run without an API key). Every
  command that reads configuration runs it (through :func:`pai.core.cli.load_checked_config`),
  so a misspelt table stops the command instead of letting it run on a default. It builds the
  storage and every configured capability's binding (so their providers, which may import an
  SDK such as Docker's) and closes them; none of them connects until used.
* :func:`check_config`: the static checks and the rest ``pai config --check`` does: the model
  built (so a missing API key shows) and the agent ``[chat]`` names (its module is imported).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pai.core._binding import CapabilityBinding
    from pai.core._config import PaiConfig
    from pai.core._plugins import Plugins


def check_static(config: PaiConfig, *, plugins: Plugins | None = None) -> None:
    """Raise a :class:`~pai.core.PaiError` for the first problem of ``config`` that needs no user
    code and no network: capability ids, storage URL, every configured capability's options,
    ``[model]``. What it builds to check (the storage, the capability bindings) is closed before
    it returns. Call it outside a running event loop.

    A :class:`~pai.core.ConfigError` whose message quotes a secret of ``config`` (a value at a
    key named like a secret, a URL's password) is raised again with the secret masked, and
    without the original as its cause."""
    from pai.core._errors import ConfigError
    from pai.core._secrets import config_secrets, mask_text

    try:
        _check_static(config, plugins=plugins)
    except ConfigError as error:
        message = str(error)
        masked = mask_text(message, config_secrets(config.data))
        if masked == message or type(error) is not ConfigError:
            raise
        raise ConfigError(masked, ids=error.ids) from None


def _check_static(config: PaiConfig, *, plugins: Plugins | None) -> None:
    import anyio

    from pai.core._agent import Requirement
    from pai.core._config import check_capability_ids
    from pai.core._config_binding import bindings_from_config
    from pai.core._model_config import check_model_config
    from pai.core._plugins import get_plugins
    from pai.core._storage_config import run_options, storage_from_config

    plugins = plugins if plugins is not None else get_plugins()
    registrations = plugins.capabilities()
    check_capability_ids(config, registrations)
    plugins.manager.hook.pai_check_config(config=config)  # the tables plugins read themselves
    run_options(config)  # [storage] run_lease_ttl, busy_thread_wait
    if "durability" in config.data:
        from pai.core._durability_config import durability_from_config

        durability_from_config(config, plugins=plugins)  # an engine connects only on start
    storage = storage_from_config(config, plugins=plugins)
    bindings: dict[str, CapabilityBinding[object]] = {}
    try:
        configured = {
            cap_id: Requirement(registration.capability, ())  # configured, not declared
            for cap_id, registration in registrations.items()
            if config.capability(cap_id) is not None
        }
        bindings = bindings_from_config(configured, config=config, plugins=plugins)
        check_model_config(config, plugins=plugins, build=False)  # builds no model
    finally:

        async def release() -> None:
            for binding in bindings.values():
                await binding.close()
            if storage is not None:
                await storage.aclose()

        anyio.run(release)


def check_config(config: PaiConfig, *, plugins: Plugins | None = None) -> None:
    """Everything ``pai config --check`` validates: :func:`check_static`, then the agent
    ``[chat]`` names, built as ``pai chat`` would build it (its module imported, its runtime
    made, what it lacks reported). Raises a :class:`~pai.core.PaiError` for the first problem."""
    import anyio

    from pai.core._chat_target import check_configured_target
    from pai.core._model import aclose_if_closable
    from pai.core._model_config import check_model_config

    check_static(config, plugins=plugins)
    # Building the model shows what the static check cannot: an API key missing from the
    # environment.
    anyio.run(aclose_if_closable, check_model_config(config, plugins=plugins))
    check_configured_target(config, plugins=plugins)  # user code: after the static checks


__all__ = ["check_config", "check_static"]
