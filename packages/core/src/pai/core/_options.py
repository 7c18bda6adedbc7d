"""The options model of a registration that takes no options.

Kept apart from :mod:`pai.core._plugins` so that registering plugins (and ``pai --help``) does
not import pydantic; a :class:`~pai.core.ext.CapabilityRegistration` without ``options`` gets this
model when it is built.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict


class NoOptions(BaseModel):
    """The options model of a registration that takes no options."""

    model_config: ClassVar[ConfigDict] = ConfigDict(extra="forbid")


__all__ = ["NoOptions"]
