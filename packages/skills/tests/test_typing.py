"""pyright (strict) accepts the generated module and the typing test, and reports the misuses
the typing test marks (``reportUnnecessaryTypeIgnoreComment`` fails it if they stop)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
ROOT = HERE.parents[2]


def pyright(*files: Path) -> subprocess.CompletedProcess[str]:
    executable = shutil.which("pyright", path=str(Path(sys.executable).parent))
    if executable is None:
        pytest.skip("pyright is not installed in this environment (it is in the dev group)")
    return subprocess.run(
        [executable, *map(str, files)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_the_generated_module_and_the_typing_test_pass_pyright_strict() -> None:
    result = pyright(HERE / "skills_golden" / "generated.py", HERE / "typing" / "check_skills.py")

    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 errors" in result.stdout


def test_pyright_reports_a_bool_for_sandbox_a_value_for_context_schema_and_a_wrong_name(
    tmp_path: Path,
) -> None:
    check = (HERE / "typing" / "check_skills.py").read_text(encoding="utf-8")
    unmarked = HERE / "typing" / "_unmarked_check.py"
    unmarked.write_text(
        check.replace("  # pyright: ignore[reportArgumentType]", "").replace(
            "  # pyright: ignore[reportAssignmentType]", ""
        ),
        encoding="utf-8",
    )
    try:
        result = pyright(unmarked)
    finally:
        unmarked.unlink()

    assert result.returncode != 0
    assert '"bool" is not assignable to type "Literal[True]"' in result.stdout
    assert "\"Literal['no-such-skill']\" is not assignable to type" in result.stdout
    assert 'Argument of type "Plan" cannot be assigned to parameter "context_schema"' in (
        result.stdout
    )
    assert "3 errors" in result.stdout
