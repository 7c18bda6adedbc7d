"""The public names of ``pai.sandbox_inmemory`` are exactly its ``__all__``."""

from __future__ import annotations

import pai.sandbox_inmemory


def test_all_lists_exactly_the_public_names() -> None:
    public = {name for name in dir(pai.sandbox_inmemory) if not name.startswith("_")}
    public -= {"annotations", "lazy_exports", "TYPE_CHECKING"}  # imports, not exports
    assert sorted(pai.sandbox_inmemory.__all__) == sorted(public)


def test_all_is_sorted() -> None:
    assert list(pai.sandbox_inmemory.__all__) == sorted(pai.sandbox_inmemory.__all__)


def test_every_name_in_all_resolves() -> None:
    for name in pai.sandbox_inmemory.__all__:
        assert getattr(pai.sandbox_inmemory, name) is not None
