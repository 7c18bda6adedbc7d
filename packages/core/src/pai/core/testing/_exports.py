"""``assert_one_public_home``: every public name of a distribution has exactly one public home."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from collections.abc import Iterable, Iterator
from types import ModuleType


def _public_submodules(package: ModuleType) -> Iterator[ModuleType]:
    yield package
    path = getattr(package, "__path__", None)
    if path is None:
        return
    for info in sorted(pkgutil.iter_modules(path), key=lambda info: info.name):
        if info.name.startswith("_"):
            continue
        yield from _public_submodules(importlib.import_module(f"{package.__name__}.{info.name}"))


def public_modules(top: str) -> list[ModuleType]:
    """``top`` and every module under it whose dotted path has no component starting with ``_``."""
    return list(_public_submodules(importlib.import_module(top)))


def _bound_names(body: Iterable[ast.stmt]) -> Iterator[str]:
    # What a module binds at its top level (inside if/try too, not inside def/class): its own
    # definitions, and the imports written as explicit re-exports (``import a as a``,
    # ``from m import a as a``, the typing convention). Other imports are for internal use.
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield node.name
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        yield name.id
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                if alias.asname is not None and alias.asname == alias.name.split(".")[-1]:
                    yield alias.asname
        elif isinstance(node, ast.If | ast.Try | ast.With):
            yield from _bound_names(node.body)
            yield from _bound_names(getattr(node, "orelse", []))
            for handler in getattr(node, "handlers", []):
                yield from _bound_names(handler.body)
            yield from _bound_names(getattr(node, "finalbody", []))


def public_attributes(module: ModuleType) -> set[str]:
    """The names ``module`` makes public, whether or not its ``__all__`` lists them.

    A public name does not start with ``_`` and is not a submodule (nor ``TYPE_CHECKING``). It
    is a name the module's source binds at the top level (inside ``if`` and ``try`` too) by
    ``def``, ``class``, assignment, or an import written as an explicit re-export (``from m
    import a as a``, the typing convention), or a name its ``__dir__`` lists when it defines one
    (a lazy module, see :func:`pai.core.ext.lazy_exports`). A plain import (``from typing import
    Any``) is for the module's internal use and is not public.
    """
    names = set(_bound_names(ast.parse(inspect.getsource(module)).body))
    if "__dir__" in vars(module):
        names |= set(dir(module))
    return {
        name
        for name in names
        if not name.startswith("_")
        and not isinstance(getattr(module, name, None), ModuleType)
        and name != "TYPE_CHECKING"
    }


def _problems_of(module: ModuleType) -> list[str]:
    exported = vars(module).get("__all__")
    if exported is None:
        return [f"{module.__name__} has no __all__"]
    problems: list[str] = []
    for name in exported:
        try:
            getattr(module, name)
        except AttributeError:
            problems.append(f"{module.__name__}.__all__ lists {name!r}, which does not resolve")
    if len(set(exported)) != len(exported):
        problems.append(f"{module.__name__}.__all__ lists a name twice")
    for name in sorted(public_attributes(module) - set(exported)):
        problems.append(
            f"{module.__name__}.{name} is public but not in __all__ "
            "(add it to __all__, or rename it with a leading underscore)"
        )
    return problems


def _installed_tops(namespace: str) -> list[str]:
    package = importlib.import_module(namespace)
    return sorted(
        f"{namespace}.{info.name}"
        for info in pkgutil.iter_modules(package.__path__)
        if not info.name.startswith("_")
    )


def assert_one_public_home(*tops: str, namespace: str = "pai") -> None:
    """Fail unless each public module of the packages ``tops`` (``"pai.core"``) is tidy, and no
    name is exported from two public modules of all installed ``namespace`` distributions.

    Tidy: the module has ``__all__``, every name in it resolves, and every public attribute (see
    :func:`public_attributes`) is in it. One home: a name is in the ``__all__`` of one public
    module across every installed ``pai.*`` package (``pai.core`` and ``pai.core.ext`` both
    exporting ``Storage`` fails, and so does a different object under the same name). Modelled
    on trio's ``test_exports``; call it from a distribution's own test suite::

        def test_every_public_name_has_one_home() -> None:
            assert_one_public_home("pai.sandbox_docker")
    """
    problems: list[str] = []
    for top in tops:
        for module in public_modules(top):
            problems.extend(_problems_of(module))
    homes: dict[str, list[str]] = {}
    for top in _installed_tops(namespace):
        for module in public_modules(top):
            for name in vars(module).get("__all__", ()):
                homes.setdefault(name, []).append(module.__name__)
    mine = tuple(f"{top}." for top in tops)
    for name, modules in sorted(homes.items()):
        if len(modules) > 1 and any(m in tops or m.startswith(mine) for m in modules):
            problems.append(f"{name!r} is exported by {len(modules)} modules: {', '.join(modules)}")
    assert not problems, "not one public home per name:\n  " + "\n  ".join(problems)
