"""pai-http as a plugin: adds ``pai serve`` to the ``pai`` command line."""

from __future__ import annotations

import click

from pai.core import hookimpl


@hookimpl
def pai_cli(cli: click.Group) -> None:
    from pai.http._serve import serve_command

    cli.add_command(serve_command)
