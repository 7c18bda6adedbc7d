"""Loading pai-http for the command line (``pai --help``, ``pai serve --help``) imports neither
Starlette, uvicorn nor pydantic; importing ``pai.http`` imports none of its modules."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("starlette", "uvicorn", "pydantic", "ag_ui", "pai.http._app")


def _modules_after(code: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def _after_pai(argv: list[str]) -> set[str]:
    return _modules_after(
        f"from pai.core.cli import main\ntry:\n    main({argv!r})\nexcept SystemExit:\n    pass"
    )


def test_pai_help_and_serve_help_import_nothing_heavy() -> None:
    for argv in (["--help"], ["serve", "--help"]):
        modules = _after_pai(argv)
        assert {"pai.http._plugin", "pai.http._serve"} <= modules
        assert sorted(m for m in modules if m.split(".")[0] in HEAVY or m in HEAVY) == [], argv


def test_importing_the_package_imports_none_of_its_modules() -> None:
    modules = _modules_after("import pai.http")
    assert sorted(m for m in modules if m.startswith("pai.http.")) == []
    assert "starlette" not in modules
