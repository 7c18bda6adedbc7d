"""Fail when a distribution imports another distribution's private modules.

Run:  python scripts/check_private_imports.py   (the nox ``lint`` session runs it)

Each folder under ``packages/`` is one distribution owning one leaf of the ``pai`` namespace
(``packages/sandbox-docker`` owns ``pai.sandbox_docker``). Its code and tests may import its own
private modules (``pai.sandbox_docker._provider``), but from any other distribution only public
modules: ``pai.core``, ``pai.core.testing``, ``pai.sandbox.provider``, never ``pai.core._plugins``.
The examples, benchmarks and repository tests are held to the same rule, owning no leaf.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHECKED = ("packages", "examples", "benchmarks", "tests")


def owned_leaf(path: Path) -> str | None:
    """The ``pai`` leaf the file's distribution owns, or ``None`` outside ``packages/``."""
    parts = path.relative_to(ROOT).parts
    if parts[0] == "packages" and len(parts) > 1:
        return parts[1].replace("-", "_")
    return None


def imported_modules(tree: ast.AST) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module
            for alias in node.names:  # from pai.core import _plugins
                if alias.name.startswith("_"):
                    yield node.lineno, f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name


def violations(path: Path) -> Iterator[str]:
    own = owned_leaf(path)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for line, module in imported_modules(tree):
        parts = module.split(".")
        if len(parts) < 3 or parts[0] != "pai":
            continue
        leaf, rest = parts[1], parts[2:]
        if leaf == own:
            continue
        private = next((part for part in rest if part.startswith("_")), None)
        if private is not None:
            where = path.relative_to(ROOT)
            yield (
                f"{where}:{line}: imports {module}, a private module of pai.{leaf}; import the "
                f"public name from pai.{leaf} (or its public extension module) instead, or make "
                "it public there"
            )


def main() -> int:
    found: list[str] = []
    for folder in CHECKED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if any(part in (".venv", ".nox", "node_modules", "build") for part in path.parts):
                continue
            found.extend(violations(path))
    for line in found:
        print(line)
    if found:
        print(f"{len(found)} import(s) of another distribution's private modules", file=sys.stderr)
        return 1
    print("no distribution imports another's private modules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
