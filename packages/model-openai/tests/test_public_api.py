"""The public names of pai.model_openai and pai.model_openai.testing are exactly their __all__."""

from __future__ import annotations

import types

import pai.model_openai
import pai.model_openai.testing


def public_names(module: types.ModuleType) -> set[str]:
    return {
        name
        for name in dir(module)
        if not name.startswith("_")
        and not isinstance(getattr(module, name), types.ModuleType)
        and name != "TYPE_CHECKING"
    }


def test_the_package_exports_exactly_its_public_names() -> None:
    module = pai.model_openai
    assert module.__all__ == sorted(module.__all__)
    assert set(module.__all__) == public_names(module)


def test_the_testing_package_exports_exactly_its_public_names() -> None:
    module = pai.model_openai.testing
    assert module.__all__ == sorted(module.__all__)
    assert set(module.__all__) == public_names(module)
