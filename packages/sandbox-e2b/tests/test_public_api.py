"""The public names of pai.sandbox_e2b and pai.sandbox_e2b.testing are exactly their __all__."""

from __future__ import annotations

import types

import pai.sandbox_e2b
import pai.sandbox_e2b.testing


def _public(module: types.ModuleType) -> set[str]:
    return {
        name
        for name in dir(module)
        if not name.startswith("_")
        and not isinstance(getattr(module, name), types.ModuleType)
        and name not in ("annotations", "TYPE_CHECKING", "lazy_exports", "Iterator", "pytest")
    }


def test_package_all_is_the_public_names() -> None:
    assert sorted(pai.sandbox_e2b.__all__) == sorted(_public(pai.sandbox_e2b))


def test_every_name_in_all_resolves() -> None:
    for name in pai.sandbox_e2b.__all__:
        assert getattr(pai.sandbox_e2b, name) is not None


def test_testing_all_is_the_public_names() -> None:
    assert sorted(pai.sandbox_e2b.testing.__all__) == sorted(_public(pai.sandbox_e2b.testing))
