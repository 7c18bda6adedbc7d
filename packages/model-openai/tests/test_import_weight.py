"""Discovering the plugin and importing the package must not import the openai SDK; building a
model does."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("openai", "httpx2", "httpcore2", "uvicorn")


def _modules_after(code: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport json, sys; print(json.dumps(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY)


def test_importing_the_plugin_and_the_package_does_not_import_the_sdk() -> None:
    modules = _modules_after(
        "import pai.model_openai._plugin, pai.model_openai\n"
        "pai.model_openai._plugin.model_registrations()"
    )
    assert "pai.model_openai._plugin" in modules
    assert _heavy(modules) == []


def test_pai_plugins_loads_the_plugin_without_the_sdk() -> None:
    modules = _modules_after(
        "import runpy, sys\nsys.argv = ['pai', 'plugins']\n"
        "try:\n    runpy.run_module('pai.core.cli', run_name='__main__')\n"
        "except SystemExit:\n    pass"
    )
    assert "pai.model_openai._plugin" in modules
    assert _heavy(modules) == []


def test_building_a_model_imports_the_sdk() -> None:
    modules = _modules_after(
        "from pai.model_openai import OpenAIModel\nOpenAIModel('m', api_key='k')"
    )
    assert "openai" in modules
