"""The public names of pai.skills are exactly its __all__."""

from __future__ import annotations

import types

import pai.skills


def test_all_lists_exactly_the_public_names() -> None:
    # dir(): the package imports each name's module when the name is first used.
    public = {
        name
        for name in dir(pai.skills)
        if not name.startswith("_")
        and name != "TYPE_CHECKING"
        and not isinstance(getattr(pai.skills, name), types.ModuleType)
    }

    assert sorted(pai.skills.__all__) == sorted(public)


def test_every_name_in_all_resolves() -> None:
    for name in pai.skills.__all__:
        assert getattr(pai.skills, name) is not None
