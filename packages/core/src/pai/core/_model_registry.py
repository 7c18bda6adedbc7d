"""Model providers as plugins register them: by name, the prefix of ``"openai:gpt-4.1-mini"``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # Types only: registering plugins (and ``pai --help``) imports no pydantic.
    from pydantic import BaseModel

    from pai.core._model import Model

__all__ = ["ModelRegistration"]


@dataclass(frozen=True, slots=True)
class ModelRegistration:
    """A model provider, as its plugin registers it.

    ``factory(name, options)`` builds the model called ``name`` (the part after the colon in
    ``"openai:gpt-4.1-mini"``) from options validated by ``options`` (a pydantic model with
    ``extra="forbid"``, so a typo is an error naming the key). Import the provider's SDK inside
    the factory, not at the top of the plugin module. ``install_hint`` says what to install.

    Example::

        def pai_models() -> list[ModelRegistration]:
            return [
                ModelRegistration(
                    name="acme",
                    factory=lambda name, options: AcmeModel(name, region=options.region),
                    options=AcmeOptions,
                    description="Acme's hosted models.",
                    install_hint="pip install pai-model-acme",
                )
            ]
    """

    name: str
    factory: Callable[[str, Any], Model]
    options: type[BaseModel]
    description: str = ""
    install_hint: str = ""
    distribution: str = ""
    """Filled in by the plugin manager: the distribution whose plugin registered it."""
