"""``pai providers``: the installed sandbox providers and the options each takes."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, is_dataclass
from typing import TYPE_CHECKING

import click

from pai.core.cli import echo_json, echo_table, json_option
from pai.sandbox._cli._common import json_text

if TYPE_CHECKING:
    from pydantic import BaseModel

    from pai.sandbox._registry import SandboxProviderRegistration


def _type_name(annotation: object) -> str:
    if annotation is None or annotation is type(None):
        return "None"
    if isinstance(annotation, type) and not getattr(annotation, "__args__", None):
        return annotation.__name__
    return repr(annotation).replace("typing.", "")


def _constraint(item: object) -> str:
    if is_dataclass(item) and not isinstance(item, type):
        return ", ".join(f"{f.name}={getattr(item, f.name)!r}" for f in fields(item))
    return repr(item)


@dataclass(frozen=True, slots=True)
class _Option:
    """One option of a provider's options model, for ``pai providers``."""

    name: str
    type: str
    required: bool
    default: object  # JSON
    constraints: list[str]
    description: str

    def type_text(self) -> str:
        return self.type + (f" ({'; '.join(self.constraints)})" if self.constraints else "")


def _options_of(model: type[BaseModel]) -> list[_Option]:
    from pydantic_core import to_jsonable_python

    options: list[_Option] = []
    for name, info in model.model_fields.items():
        required = info.is_required()
        default = None if required else info.get_default(call_default_factory=True)
        options.append(
            _Option(
                name=name,
                type=_type_name(info.annotation),
                required=required,
                default=to_jsonable_python(default, fallback=repr),
                constraints=[_constraint(item) for item in info.metadata],
                description=info.description or "",
            )
        )
    return options


def _provider_json(registration: SandboxProviderRegistration, default: str) -> dict[str, object]:
    return {
        "name": registration.name,
        "distribution": registration.distribution,
        "description": registration.description,
        "install_hint": registration.install_hint,
        "default": registration.name == default,
        "options": [asdict(option) for option in _options_of(registration.options)],
    }


@click.command("providers")
@json_option
def providers_command(as_json: bool) -> None:
    """List installed sandbox providers and their options.

    Each provider's options go in a sub-table named after it, [capabilities.sandbox.<name>] of
    pai.toml; choose the provider with provider = "<name>" in [capabilities.sandbox].
    """
    from pai.sandbox._registry import sandbox_providers
    from pai.sandbox._settings import DEFAULT_PROVIDER

    registrations = [registration for _, registration in sorted(sandbox_providers().items())]
    if as_json:
        echo_json(
            {
                "default": DEFAULT_PROVIDER,
                "providers": [_provider_json(r, DEFAULT_PROVIDER) for r in registrations],
            }
        )
        return
    if not registrations:
        click.echo(
            "no sandbox providers installed; install one: pip install pai-sandbox-inmemory "
            "(in-process, the default), pai-sandbox-docker or pai-sandbox-e2b"
        )
        return
    echo_table(
        [
            {
                "name": r.name + (" (default)" if r.name == DEFAULT_PROVIDER else ""),
                "distribution": r.distribution,
                "description": r.description,
            }
            for r in registrations
        ],
        [("name", "Provider"), ("distribution", "Distribution"), ("description", "Description")],
    )
    for registration in registrations:
        click.echo("")
        options = _options_of(registration.options)
        title = f"options of {registration.name!r}: [capabilities.sandbox.{registration.name}]"
        if not options:
            click.echo(f"{title}: none")
            continue
        echo_table(
            [
                {
                    "name": option.name,
                    "type": option.type_text(),
                    "default": "(required)" if option.required else json_text(option.default),
                    "description": option.description or None,
                }
                for option in options
            ],
            [
                ("name", "Option"),
                ("type", "Type"),
                ("default", "Default"),
                ("description", "Description"),
            ],
            title=title,
        )
