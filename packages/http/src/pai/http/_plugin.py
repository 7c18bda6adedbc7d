"""pai-http as a plugin: adds ``pai serve`` to the ``pai`` command line."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from pai.core.ext import hookimpl

if TYPE_CHECKING:
    from pai.core import PaiConfig


@hookimpl
def pai_cli(cli: click.Group) -> None:
    from pai.http._serve import serve_command

    cli.add_command(serve_command)


@hookimpl
def pai_check_config(config: PaiConfig) -> None:
    """``[serve]``: known keys, values of the right types."""
    from pai.http._serve import serve_settings

    serve_settings(config)
