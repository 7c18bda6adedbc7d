"""README.md's "Dependencies, and why" names every third-party dependency a distribution declares,
and every one of the development group, so a new dependency comes with its reason."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _name(requirement: str) -> str:
    match = NAME.match(requirement)
    assert match is not None, requirement
    return match.group(1).lower().replace("_", "-")


def declared() -> dict[str, set[str]]:
    """Each third-party dependency, with the files that declare it."""
    found: dict[str, set[str]] = {}
    for pyproject in [ROOT / "pyproject.toml", *sorted(ROOT.glob("packages/*/pyproject.toml"))]:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        project = data.get("project", {})
        requirements = [*project.get("dependencies", [])]
        for extra in project.get("optional-dependencies", {}).values():
            requirements.extend(extra)
        for group in data.get("dependency-groups", {}).values():
            requirements.extend(item for item in group if isinstance(item, str))
        where = pyproject.relative_to(ROOT).as_posix()
        for requirement in requirements:
            name = _name(requirement)
            if not name.startswith("pai-"):
                found.setdefault(name, set()).add(where)
    return found


def table() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Dependencies, and why", 1)
    assert len(section) == 2, "README.md has no '## Dependencies, and why' section"
    return section[1].split("\n## ", 1)[0]


def test_every_declared_dependency_has_a_row_saying_why() -> None:
    rows = [line for line in table().splitlines() if line.startswith("| `")]
    named = {
        name.lower().replace("_", "-")
        for row in rows
        for name in re.findall(r"`([A-Za-z0-9][A-Za-z0-9._\[\]-]*)`", row.split("|")[1])
    }
    named |= {name.split("[", 1)[0] for name in named}
    missing = {name: sorted(files) for name, files in declared().items() if name not in named}
    assert not missing, (
        "README.md's 'Dependencies, and why' has no row for "
        + "; ".join(f"{name} (declared in {', '.join(files)})" for name, files in missing.items())
        + ": add one saying what it is for"
    )


def test_the_check_reads_real_declarations() -> None:
    names = declared()
    assert {"anyio", "pydantic", "psycopg", "temporalio", "nox"} <= set(names)
