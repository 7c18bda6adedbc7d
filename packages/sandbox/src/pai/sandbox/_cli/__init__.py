"""The sandbox commands of the ``pai`` command line, added through pai-sandbox's ``pai_cli`` hook.

::

    pai providers [--json]                              installed sandbox providers and their options
    pai sandbox exec [--key K] [--timeout S] [-e NAME=VALUE] [--cwd DIR] [--json] [--] CMD...
                                                        run a command in the configured provider
    pai sandbox ls [--json]                             the provider's sandboxes
    pai sandbox rm KEY... [--force] [--json]            destroy sandboxes by key
    pai sandbox prune [--older-than D] [--yes] [--json] destroy sandboxes (older than D)
    pai demo [--keep]                                   a worked example agent (scripted model)

One module per command family: ``_providers`` (``pai providers``), ``_sandboxes`` (``pai sandbox
...``), ``_demo`` (``pai demo``), and ``_common`` for what they share. Every command but
``providers`` checks the configuration as ``pai config --check`` does
(:func:`pai.core.cli.load_checked_config`) and then uses the provider it selects
(:func:`~pai.sandbox._settings.configured_provider`); when none is configured it says so on stderr
and uses the embedded default. Heavy imports (the provider, the agent runtime, rich) happen
inside the commands, so ``pai plugins`` stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import click


def add_commands(cli: click.Group) -> None:
    """Add the sandbox commands to the ``pai`` group (pai-sandbox's ``pai_cli`` hook)."""
    from pai.sandbox._cli._demo import demo_command
    from pai.sandbox._cli._providers import providers_command
    from pai.sandbox._cli._sandboxes import sandbox_group

    cli.add_command(providers_command)
    cli.add_command(sandbox_group)
    cli.add_command(demo_command)
