"""Project automation. `uv run nox` runs lint, typecheck, every package's tests and the examples.

Each package's tests run in an environment of their own holding only that package, the workspace
packages it depends on, and its `test` dependency group, so an undeclared import fails there.
"""

from __future__ import annotations

import re
import tempfile
import tomllib
from pathlib import Path

import nox

nox.options.default_venv_backend = "uv"
nox.options.sessions = [
    "lint",
    "typecheck",
    "tests",
    "quick_loop",
    "capability_package",
    "examples",
    "e2e",
    "docs",
]
nox.options.error_on_external_run = True

ROOT = Path(__file__).parent
PYTHON = "3.11"


def _pyproject(package: str) -> dict[str, object]:
    return tomllib.loads((ROOT / "packages" / package / "pyproject.toml").read_text())


def _packages() -> dict[str, str]:
    """Distribution name -> folder name, for every workspace package."""
    found: dict[str, str] = {}
    for path in sorted((ROOT / "packages").glob("*/pyproject.toml")):
        found[tomllib.loads(path.read_text())["project"]["name"]] = path.parent.name
    return found


PACKAGES = _packages()


def _local_closure(package: str) -> list[str]:
    """The package folder and the folders of every workspace package it needs, transitively."""
    seen: list[str] = []
    todo = [package]
    while todo:
        folder = todo.pop()
        if folder in seen:
            continue
        seen.append(folder)
        project = _pyproject(folder)["project"]
        assert isinstance(project, dict)
        for requirement in project.get("dependencies", []):
            name = _name(requirement)
            if name in PACKAGES:
                todo.append(PACKAGES[name])
    return seen


def _with_extras(folder: str) -> str:
    """``packages/<folder>`` with every optional extra it declares (the ``testing`` extras hold
    the emulator's and the test server's dependencies, which the type checker must see)."""
    project = _pyproject(folder)["project"]
    assert isinstance(project, dict)
    extras = sorted(project.get("optional-dependencies", {}))
    return f"packages/{folder}[{','.join(extras)}]" if extras else f"packages/{folder}"


def _name(requirement: str) -> str:
    """The distribution name of a requirement string (``"pai-core==0.1.0"`` -> ``"pai-core"``)."""
    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0]


@nox.session(python=PYTHON)
@nox.parametrize("package", sorted(PACKAGES.values()))
def tests(session: nox.Session, package: str) -> None:
    """One package's tests, in its own environment.

    Sessions inherit this process's environment, so PAI_REQUIRE_DOCKER, PAI_DOCKER_TEST_IMAGE and
    DOCKER_HOST (set by .ci/run and scripts/with-docker.sh) reach the Docker provider's tests.
    """
    pyproject = _pyproject(package)
    group = nox.project.dependency_groups(pyproject, "test")
    # Workspace packages in the test group (pai-skills tests against pai-sandbox-inmemory) are
    # installed from their folders, with what they need: they are not on any index.
    local = [package, *(PACKAGES[_name(req)] for req in group if _name(req) in PACKAGES)]
    folders = list(dict.fromkeys(f for each in local for f in _local_closure(each)))
    editable = [arg for folder in folders for arg in ("-e", f"packages/{folder}")]
    session.install(*editable, *(req for req in group if _name(req) not in PACKAGES))
    # pytest exits 5 when it collects no test; nox treats that as a failure, as it should.
    session.run("pytest", f"packages/{package}/tests", *session.posargs)


@nox.session(python=PYTHON)
def quick_loop(session: nox.Session) -> None:
    """`pytest` from the repository root (the README's quick loop) in the workspace environment
    `uv run` makes: it must collect every package's tests without an error.

    Collection only (the `tests` sessions run them), so it stays cheap; it fails when the root
    configuration stops collecting a package (a conftest pytest refuses there, two helper modules
    of one name, a package missing from testpaths)."""
    session.run_install(
        "uv",
        "sync",
        f"--python={session.virtualenv.location}",
        env={"UV_PROJECT_ENVIRONMENT": session.virtualenv.location},
    )
    # --assert=plain: collecting needs no assert rewriting, which is half its time (13 s of 26 s
    # for 3,800 tests).
    output = session.run(
        "pytest", "--collect-only", "-q", "--assert=plain", *session.posargs, silent=True
    )
    assert isinstance(output, str)
    collected = [line for line in output.splitlines() if "::" in line]
    missing = [
        folder
        for folder in PACKAGES.values()
        if (ROOT / "packages" / folder / "tests").is_dir()
        and not any(line.startswith(f"packages/{folder}/tests/") for line in collected)
    ]
    if missing:
        session.error(
            f"`pytest` from the repository root collected no test of {', '.join(missing)}; "
            "check testpaths and addopts in [tool.pytest.ini_options] of pyproject.toml"
        )
    session.log(f"`pytest` from the repository root collects {len(collected)} tests")


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff: lint and format check over the whole repository; no cross-distribution private
    imports."""
    session.install("ruff>=0.8")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    # No distribution imports another's private modules (pai.core._plugins, pai.sandbox._types).
    session.run("python", "scripts/check_private_imports.py")


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """pyright strict on every package's src/ and the typing tests that prove what it catches,
    basic on the other tests, the benchmarks, the examples and the scripts."""
    editable = [arg for folder in PACKAGES.values() for arg in ("-e", _with_extras(folder))]
    # The tests are checked too, so what every package's test group needs (pytest, hypothesis,
    # trio, uvicorn: workspace packages are installed above).
    tests_need = sorted(
        {
            req
            for folder in PACKAGES.values()
            for req in nox.project.dependency_groups(_pyproject(folder), "test")
            if _name(req) not in PACKAGES
        }
    )
    # trio: code that detects a trio host imports it there (pai.model_openai); pyright resolves it.
    # types-pyyaml: PyYAML ships no annotations (pai-skills parses frontmatter with it).
    session.install(
        *editable, *tests_need, "pyright[nodejs]>=1.1.390", "trio>=0.27", "types-pyyaml>=6.0"
    )
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pyright"]
    for folder in PACKAGES.values():
        for setting in ("include", "strict"):
            if f"packages/{folder}/src" not in config[setting]:
                session.error(
                    f"[tool.pyright] {setting} in pyproject.toml lacks packages/{folder}/src; "
                    "add it so the package is type-checked strictly"
                )
    session.run("pyright", "--pythonpath", str(Path(session.bin) / "python"))
    for distribution, folder in PACKAGES.items():
        module = "pai." + folder.replace("-", "_")
        session.log(f"public API type completeness of {distribution}")
        session.run(
            "pyright",
            "--pythonpath",
            str(Path(session.bin) / "python"),
            "--verifytypes",
            module,
            "--ignoreexternal",
        )


@nox.session(python=PYTHON)
def capability_package(session: nox.Session) -> None:
    """examples/acme-vault, the third-party capability package template, in isolation: its own
    tests (the binding conformance suite among them) and pyright strict on its source."""
    example = ROOT / "examples" / "acme-vault"
    pyproject = tomllib.loads((example / "pyproject.toml").read_text())
    session.install(
        "-e",
        "packages/core",
        "-e",
        "examples/acme-vault",
        "pyright[nodejs]>=1.1.390",
        *nox.project.dependency_groups(pyproject, "test"),
    )
    session.run("pytest", "-c", str(example / "pyproject.toml"), str(example / "tests"))
    session.run("pyright", "-p", str(example), "--pythonpath", str(Path(session.bin) / "python"))


@nox.session(python=PYTHON)
def e2e(session: nox.Session) -> None:
    """The real install path, as the README gives it: build the wheels, pip-install them into a
    fresh venv outside the repository, run `pai` there (`pai chat -p` against the OpenAI test
    server, which runs from this session's environment)."""
    session.install("pytest>=8.3", "-e", "packages/core", "-e", "packages/model-openai[testing]")
    session.run("pytest", "tests/e2e", *session.posargs)


@nox.session(python=PYTHON)
def examples(session: nox.Session) -> None:
    """Every runnable example, start to finish (the README's main job among them)."""
    editable = [arg for folder in PACKAGES.values() for arg in ("-e", _with_extras(folder))]
    session.install(*editable, "pytest>=8.3")
    for script in sorted((ROOT / "examples").glob("*.py")):  # runnable scripts, not packages
        session.run("python", str(script))
    # Every ```python block of the READMEs and docs/ (tests/docs/test_examples.py says how; it
    # prints how many ran and how many were skipped, by reason).
    session.run("pytest", "tests/docs", "-p", "no:cacheprovider", "-rfE", *session.posargs)


# The docs site's tools, pinned: a new release that warns differently must not break CI unasked.
DOC_TOOLS = [
    "mkdocs==1.6.1",
    "mkdocs-material==9.8.1",
    "mkdocstrings==1.0.8",
    "mkdocstrings-python==2.0.11",
    "ruff>=0.8",  # formats the signatures mkdocstrings shows
]


@nox.session(python=PYTHON)
def docs(session: nox.Session) -> None:
    """The docs site (mkdocs.yml, docs/): `mkdocs build --strict`, so a warning (a broken link, a
    docstring griffe cannot read, a name mkdocstrings cannot find) fails it. Built into a
    temporary folder; `uv run nox -s docs -- --site-dir site` keeps it in site/ (ignored)."""
    nav = (ROOT / "mkdocs.yml").read_text()
    missing = []
    for folder in PACKAGES.values():
        page = ROOT / "docs" / "reference" / f"{folder}.md"
        if (
            not page.exists()
            or f"::: pai.{folder.replace('-', '_')}\n" not in page.read_text()
            or f"reference/{folder}.md" not in nav
        ):
            missing.append(folder)
    if missing:
        session.error(
            f"no API reference page for {', '.join(missing)}: add docs/reference/<folder>.md "
            "with '::: pai.<module>' and list it in the nav of mkdocs.yml"
        )
    editable = [arg for folder in PACKAGES.values() for arg in ("-e", f"packages/{folder}")]
    session.install(*editable, *DOC_TOOLS)
    if session.posargs:
        session.run("mkdocs", "build", "--strict", *session.posargs)
        return
    with tempfile.TemporaryDirectory(prefix="pai-docs-") as site:
        session.run("mkdocs", "build", "--strict", "--site-dir", site)
        pages = sorted(Path(site).rglob("index.html"))
        session.log(f"built {len(pages)} pages")


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Every benchmark in benchmarks/, printing ratios against a baseline measured in the run.

    bench_docker.py needs a Docker engine and the test image (scripts/build-test-image.sh); without
    them it prints "skipped: ..." with the reason and exits 0 (it fails if PAI_REQUIRE_DOCKER=1).
    """
    editable = [arg for folder in PACKAGES.values() for arg in ("-e", f"packages/{folder}")]
    session.install(*editable)
    for script in sorted((ROOT / "benchmarks").glob("bench_*.py")):
        session.run("python", str(script), *session.posargs)
