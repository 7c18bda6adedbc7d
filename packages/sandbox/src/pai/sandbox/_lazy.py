"""``pai.sandbox.provider.lazy_exports``: pai-core's, which every pai package uses.

A provider package's ``__init__`` declares its names under ``TYPE_CHECKING`` (for type checkers)
and resolves them on first use at run time; :mod:`pai.core.lazy` shows how.
"""

from __future__ import annotations

from pai.core.lazy import lazy_exports as lazy_exports

__all__ = ["lazy_exports"]
