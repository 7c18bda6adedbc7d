"""Lazy public names for provider packages, so plugin discovery does not import heavy SDKs.

A provider package's ``__init__`` declares its names under ``TYPE_CHECKING`` (for type checkers)
and resolves them on first use at run time::

    _getattr, _dir = lazy_exports(__name__, {"DockerSandboxProvider": "pai.sandbox_docker._provider"})

    def __getattr__(name: str) -> object:
        return _getattr(name)
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping


def lazy_exports(
    package: str, names: Mapping[str, str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """A module ``__getattr__`` and ``__dir__`` importing each of ``names`` from its module on
    first use (then cached in the package)."""

    def __getattr__(name: str) -> object:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted([*vars(sys.modules[package]), *names])

    return __getattr__, __dir__
