"""pai-skills adds `pai generate skills` to the `pai` command line through its plugin."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from pai.core.cli import create_cli

TREE = Path(__file__).parent / "skills_tree"
GOLDEN = Path(__file__).parent / "skills_golden" / "generated.py"


def test_pai_generate_lists_the_skills_generator() -> None:
    result = CliRunner().invoke(create_cli(), ["generate"])

    assert result.exit_code == 0, result.output
    assert "pai generate skills" in result.stdout


def test_pai_generate_skills_writes_the_module(tmp_path: Path) -> None:
    out = tmp_path / "skills_generated.py"

    result = CliRunner().invoke(create_cli(), ["generate", "skills", str(TREE), "-o", str(out)])

    assert result.exit_code == 0, result.output
    assert out.read_bytes() == GOLDEN.read_bytes()
