"""Loading the plugin for the command line imports neither YAML nor the generator; running
``pai generate skills`` does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HEAVY = ("yaml", "pai.skills._generate", "pai.skills._define")


def _modules_after(argv: list[str]) -> set[str]:
    """The modules a fresh interpreter has imported after ``pai ARGV`` (run in-process)."""
    code = (
        "import json, sys\nfrom pai.core.cli import main\n"
        f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_pai_help_loads_the_plugin_without_yaml_or_the_generator() -> None:
    modules = _modules_after(["generate", "--help"])

    assert {"pai.skills._plugin", "pai.skills._cli"} <= modules
    assert sorted(modules & set(HEAVY)) == []


def test_importing_the_package_imports_none_of_its_modules() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, sys, pai.skills; print(json.dumps(sorted(sys.modules)))",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    modules = set(json.loads(done.stdout.strip().splitlines()[-1]))

    assert sorted(m for m in modules if m.startswith("pai.skills.")) == []
    assert "yaml" not in modules


def test_generating_imports_the_generator(tmp_path: Path) -> None:
    modules = _modules_after(["generate", "skills", str(tmp_path)])

    assert {"yaml", "pai.skills._generate"} <= modules
