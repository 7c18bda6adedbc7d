"""The public names of ``pai.storage_postgres`` are exactly its ``__all__``."""

from __future__ import annotations

import pai.storage_postgres


def test_all_lists_exactly_the_public_names() -> None:
    public = {name for name in dir(pai.storage_postgres) if not name.startswith("_")}
    public -= {"annotations", "lazy_exports", "TYPE_CHECKING", "testing"}  # not exports
    assert sorted(pai.storage_postgres.__all__) == sorted(public)


def test_every_name_in_all_resolves() -> None:
    for name in pai.storage_postgres.__all__:
        assert getattr(pai.storage_postgres, name) is not None
