"""Each package's README.md is its page on the package index: it says how to install the
distribution, and its options table names every key the options model takes.

The options models are found the way the configuration reference finds them
(docs/_gen_reference.py): sandbox providers, model providers and durability engines of the
installed plugins, each with the distribution that registers it. A key the model takes and the
providing README's tables do not name fails here, so a new option cannot go undocumented on the
package's page. Runs where mkdocs is not installed (`uv run nox -s examples`).
"""

from __future__ import annotations

import re
import sys
import tomllib
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

INSTALL = re.compile(r"^```bash\n(?P<body>.*?)^```", re.MULTILINE | re.DOTALL)
NOT_PUBLISHED = (
    "# docs: not run (not published: nothing is on PyPI yet; "
    "README.md's install section builds the wheels)"
)


@cache
def generator() -> ModuleType:
    if str(DOCS) not in sys.path:
        sys.path.insert(0, str(DOCS))
    import _gen_reference  # pyright: ignore[reportMissingImports]

    return _gen_reference


@cache
def readmes() -> dict[str, Path]:
    """Distribution name -> its README.md, for every workspace package."""
    found: dict[str, Path] = {}
    for pyproject in sorted((ROOT / "packages").glob("*/pyproject.toml")):
        name = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["name"]
        found[name] = pyproject.parent / "README.md"
    return found


def options_models() -> list[tuple[str, str, Any]]:
    """(what, distribution, options model) for every installed registration that has one."""
    gen: Any = generator()
    plugins = gen._plugins()
    found: list[tuple[str, str, Any]] = []
    for name, registration in sorted(gen._sandbox_providers(plugins).items()):
        found.append((f"sandbox:{name}", registration.distribution, registration.options))
    for name, registration in sorted(plugins.models().items()):
        found.append((f"model:{name}", registration.distribution, registration.options))
    for name, registration in sorted(plugins.durability_engines().items()):
        found.append(
            (f"engine:{name}", registration.distribution, gen.engine_options(registration))
        )
    return [(what, dist, model) for what, dist, model in found if gen._is_model(model)]


def table_keys(text: str) -> set[str]:
    """Every `` `key` `` in the first cell of a markdown table row."""
    keys: set[str] = set()
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("|"):
            continue
        first = line[1:].split("|", 1)[0]
        keys.update(re.findall(r"`([A-Za-z_][\w.-]*)`", first))
    return keys


def test_options_models_found() -> None:
    """The discovery finds what the workspace provides; an empty list would pass vacuously."""
    kinds = {what.split(":", 1)[0] for what, _, _ in options_models()}
    assert kinds == {"sandbox", "model", "engine"}, kinds


@pytest.mark.parametrize(
    ("what", "distribution", "model"),
    options_models(),
    ids=[what for what, _, _ in options_models()],
)
def test_readme_names_every_option(what: str, distribution: str, model: Any) -> None:
    readme = readmes().get(distribution)
    assert readme is not None, f"{what}: {distribution} is not a workspace package"
    named = table_keys(readme.read_text(encoding="utf-8"))
    missing = [key for key in model.model_fields if key not in named]
    assert not missing, (
        f"{readme.relative_to(ROOT)}: the options table of {what} ({model.__name__}) does not "
        f"name {', '.join(missing)} (as `key` in a table row's first cell)"
    )


@pytest.mark.parametrize("distribution", sorted(readmes()))
def test_readme_has_install_block(distribution: str) -> None:
    readme = readmes()[distribution]
    text = readme.read_text(encoding="utf-8")
    blocks = [m["body"] for m in INSTALL.finditer(text)]
    install = [
        b for b in blocks if re.search(rf"^pip install {re.escape(distribution)}(?=\s|$)", b, re.M)
    ]
    assert install, (
        f"{readme.relative_to(ROOT)}: no ```bash block with `pip install {distribution}`"
    )
    first = install[0].splitlines()[0]
    assert first == NOT_PUBLISHED, (
        f"{readme.relative_to(ROOT)}: the install block's first line is {first!r}, not the "
        "not-published marker (nothing is on PyPI yet)"
    )
