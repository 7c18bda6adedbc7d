"""``import pai.core`` is cheap: each public name's module is imported when the name is used."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import subprocess
import sys
from types import ModuleType

import pytest

import pai.core
import pai.model_openai
import pai.sandbox
import pai.sandbox.provider


def _run(code: str) -> list[str]:
    """The modules a fresh interpreter has imported after running ``code`` (a JSON list)."""
    done = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    modules: list[str] = json.loads(done.stdout.splitlines()[-1])
    return modules


def _typed_imports(package: ModuleType = pai.core) -> dict[str, str]:
    """Name -> module, as the ``if TYPE_CHECKING:`` block of the package's ``__init__`` imports
    them."""
    tree = ast.parse(inspect.getsource(package))
    block = next(
        node
        for node in tree.body
        if isinstance(node, ast.If)
        and isinstance(node.test, ast.Name)
        and node.test.id == "TYPE_CHECKING"
    )
    found: dict[str, str] = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom), ast.dump(node)
        assert node.module is not None
        for alias in node.names:
            assert alias.asname == alias.name, f"{alias.name} must be re-exported as itself"
            found[alias.name] = node.module
    return found


def test_importing_pai_core_imports_none_of_its_modules() -> None:
    modules = _run("import pai.core")

    assert [name for name in modules if name.startswith("pai.core.")] == []
    assert "pydantic" not in modules


def test_using_a_name_imports_only_what_defines_it() -> None:
    modules = _run("from pai.core import PaiError")

    assert "pai.core._errors" in modules
    assert "pai.core._messages" not in modules
    assert "pydantic" not in modules


def test_every_exported_name_is_the_object_its_module_defines() -> None:
    typed = _typed_imports()

    assert sorted(typed) == pai.core.__all__
    for name, module in typed.items():
        assert getattr(pai.core, name) is getattr(importlib.import_module(module), name), name


# The packages that export through pai.core.ext.lazy_exports and that this package's tests install
# (pai-skills is not among them: it is not installed in them).
LAZY_PACKAGES = [pai.core, pai.sandbox, pai.sandbox.provider, pai.model_openai]


@pytest.mark.parametrize("package", LAZY_PACKAGES, ids=lambda m: m.__name__)
def test_the_typed_imports_and_the_lazy_table_agree(package: ModuleType) -> None:
    # What pyright reads (the TYPE_CHECKING imports) must be what runs (the lazy table).
    lazy: dict[str, str] = vars(package)["_SOURCES"]

    assert lazy == _typed_imports(package)
    assert sorted(lazy) == sorted(package.__all__)
    for name, module in lazy.items():
        assert getattr(package, name) is getattr(importlib.import_module(module), name), name


def test_an_unknown_name_fails_to_import() -> None:
    with pytest.raises(ImportError, match=r"cannot import name 'create_pia' from 'pai\.core'"):
        exec("from pai.core import create_pia", {})
    assert not hasattr(pai.core, "create_pia")


def test_star_import_gives_every_exported_name() -> None:
    namespace: dict[str, object] = {}
    exec("from pai.core import *", namespace)

    assert sorted(name for name in namespace if not name.startswith("__")) == pai.core.__all__


def test_pai_help_imports_no_runtime_module() -> None:
    # What `pai --help` needs is the command tree: click, the plugin manager and each plugin's
    # registration module, never the runtime, storage backends or rich.
    modules = _run(
        "from pai.core.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass"
    )

    assert "pai.core.cli" in modules
    runtime = {
        "pai.core._admin",
        "pai.core._agent",
        "pai.core._assembly",
        "pai.core._chat",
        "pai.core._runtime",
        "pai.core._storage_sqlite",
        "rich",
        "sqlite3",
        "yaml",
    }
    assert sorted(runtime & set(modules)) == []


@pytest.mark.parametrize("argv", [["--help"], ["--version"]])
def test_pai_help_and_version_import_no_pydantic(argv: list[str]) -> None:
    # Registering commands needs no options model: every plugin imports its options, providers
    # and pydantic inside the hooks that use them, and --version is answered before plugins load.
    modules = _run(
        f"from pai.core.cli import main\ntry:\n    main({argv!r})\nexcept SystemExit:\n    pass"
    )

    assert "pai.core.cli" in modules
    loaded = [name for name in modules if name == "pydantic" or name.startswith("pydantic.")]
    assert loaded == []


@pytest.mark.parametrize(
    "module",
    [
        "pai.core._plugins",
        "pai.sandbox._plugin",
        "pai.sandbox_docker._plugin",
        "pai.sandbox_e2b._plugin",
        "pai.sandbox_inmemory._plugin",
        "pai.model_openai._plugin",  # pai-skills has its own test_import_weight.py
    ],
)
def test_a_plugin_module_imports_without_pydantic(module: str) -> None:
    modules = _run(f"import {module}")

    assert module in modules
    assert [name for name in modules if name.split(".")[0] == "pydantic"] == []
