"""Lazy public names, so importing a package (or discovering its plugin) stays cheap.

A package's ``__init__`` imports its public names under ``TYPE_CHECKING`` (what type checkers
read), maps each to its defining module, and lets :func:`lazy_exports` import it on first use::

    from typing import TYPE_CHECKING

    from pai.core.lazy import lazy_exports

    if TYPE_CHECKING:
        from mypkg._model import MyModel as MyModel

    _SOURCES = {"MyModel": "mypkg._model"}

    if not TYPE_CHECKING:  # type checkers see the imports above, and no catch-all attribute
        __getattr__, __dir__ = lazy_exports(__name__, _SOURCES)

    __all__ = ["MyModel"]

Importing this module imports nothing beyond :mod:`pai.core` itself, which is just as lazy.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

# Defined in pai.core itself, which uses it and must import none of its own modules.
from pai.core import _lazy_exports  # pyright: ignore[reportPrivateUsage]


def lazy_exports(
    package: str, names: Mapping[str, str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """A module ``__getattr__`` and ``__dir__`` for ``package``.

    ``names`` maps each public name to the module that defines it. The ``__getattr__`` imports
    that module on the name's first use and caches the value in the package, so later look-ups
    do not call it; an unknown name raises :class:`AttributeError` (so ``from package import
    name`` raises :class:`ImportError`). The ``__dir__`` lists the package's attributes and
    every name in ``names``.
    """
    return _lazy_exports(package, names)


__all__ = ["lazy_exports"]
