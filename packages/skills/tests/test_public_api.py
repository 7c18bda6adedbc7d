"""The public names of pai.skills are exactly its __all__."""

from __future__ import annotations

import pai.skills


def test_all_lists_exactly_the_public_names() -> None:
    public = {name for name in vars(pai.skills) if not name.startswith("_")}

    assert sorted(pai.skills.__all__) == sorted(public)


def test_every_name_in_all_resolves() -> None:
    for name in pai.skills.__all__:
        assert getattr(pai.skills, name) is not None
