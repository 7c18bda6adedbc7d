"""Plugin discovery must not import a provider's heavy dependencies until the provider is chosen."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("just_bash", "aiohttp", "docker", "e2b")

# Runs a command line in a fresh interpreter, then reports which modules it imported.
PROBE = """
import json, runpy, sys
sys.argv = {argv!r}
try:
    runpy.run_module({module!r}, run_name="__main__")
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)))
"""


def _modules_after(module: str, *argv: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(argv=[module, *argv], module=module)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_pai_plugins_lists_the_in_memory_provider_without_importing_its_interpreter() -> None:
    modules = _modules_after("pai.core.cli", "plugins")
    assert "pai.sandbox_inmemory._plugin" in modules  # the plugin was discovered and loaded
    assert sorted(m for m in modules if m.split(".")[0] in HEAVY) == []


def test_choosing_the_provider_imports_the_interpreter() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from pai.sandbox import build_provider; build_provider('inmemory'); "
            "print('just_bash' in sys.modules)",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, done.stdout.strip()) == (0, "True"), done.stderr
