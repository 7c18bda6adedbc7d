"""pai-skills as a plugin: adds ``pai generate skills`` to the core's ``generate`` group."""

from __future__ import annotations

import click

from pai.core.ext import hookimpl


@hookimpl
def pai_cli(cli: click.Group) -> None:
    from pai.core.cli import generate_group
    from pai.skills._cli import generate_skills_command

    generate_group(cli).add_command(generate_skills_command)
