"""`pai generate skills --skip-invalid`, through the real `pai` command: a published tree with
one invalid skill still gives a module of the others, each skill left out is reported with its
file and reason, and without the flag nothing is written and the error names the flag."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from pai.core.cli import create_cli
from pai.skills import SkillSourceError, generate_module

GOOD = [f"skill-{n:02d}" for n in range(1, 12)]  # eleven good skills
LONG = "x" * 1100


def write(root: Path, name: str, description: str = "Does a thing.", body: str = "# Do\n") -> None:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: {description}\n---\n{body}", encoding="utf-8"
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    for name in GOOD:
        write(root, name)
    write(root, "too-long", description=LONG)
    return root


def pai(*args: str | Path) -> Result:
    return CliRunner().invoke(create_cli(), ["generate", "skills", *map(str, args)])


def names_in(module: Path) -> list[str]:
    spec = importlib.util.spec_from_file_location(f"skipped_{abs(hash(module))}", module)
    assert spec is not None
    assert spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return [entry.name for entry in loaded.skills]


LONG_PROBLEM = "too-long/SKILL.md:3: description is 1100 characters long; at most 1024 are allowed"


def test_without_the_flag_nothing_is_written_and_the_error_names_the_flag(
    tree: Path, tmp_path: Path
) -> None:
    out = tmp_path / "app" / "skills_generated.py"
    result = pai(tree, "-o", out)

    assert result.exit_code == 2
    assert not out.exists()
    assert f"{tree}{os.sep}{LONG_PROBLEM}" in result.stderr
    assert result.stderr.rstrip().endswith(
        "To write the 11 valid skills and leave the invalid ones out, pass --skip-invalid."
    )


def test_the_flag_writes_the_valid_skills_and_reports_the_others_exiting_0(
    tree: Path, tmp_path: Path
) -> None:
    out = tmp_path / "app" / "skills_generated.py"
    result = pai(tree, "-o", out, "--skip-invalid")

    assert result.exit_code == 0, result.output
    assert names_in(out) == GOOD
    lines = result.stderr.splitlines()
    assert lines[0] == "pai: warning: left out the invalid skill 'too-long'; fix it and run again:"
    assert lines[1] == f"  {tree}{os.sep}{LONG_PROBLEM}"
    assert lines[2].startswith(f"pai: wrote {out}: 11 skills (skill-01, ")
    assert lines[2].endswith("; 1 warning: 1 invalid skill left out")
    assert len(lines) == 3
    assert result.stdout == ""


def test_every_invalid_skill_is_reported_with_each_of_its_problems(
    tree: Path, tmp_path: Path
) -> None:
    (tree / "no-body").mkdir()
    write(tree, "misnamed", body="# Misnamed\n")
    (tree / "misnamed" / "SKILL.md").write_text(
        "---\nname: other\ndescriptoin: d\n---\n", encoding="utf-8"
    )
    out = tmp_path / "skills_generated.py"
    result = pai(tree, "-o", out, "--skip-invalid")

    assert result.exit_code == 0, result.output
    assert names_in(out) == GOOD
    warnings = [line for line in result.stderr.splitlines() if "warning:" in line]
    assert warnings == [
        "pai: warning: left out the invalid skill 'misnamed'; fix it and run again:",
        "pai: warning: left out the invalid skill 'no-body'; fix it and run again:",
        "pai: warning: left out the invalid skill 'too-long'; fix it and run again:",
    ]
    stderr = result.stderr.replace(f"{tree}{os.sep}", "")
    assert "  misnamed/SKILL.md:3: unknown frontmatter key 'descriptoin'" in stderr
    assert "  misnamed/SKILL.md:1: the frontmatter has no description" in stderr
    assert "  misnamed/SKILL.md:2: name 'other' differs from its folder 'misnamed'" in stderr
    assert "  no-body/SKILL.md: missing: every folder under the skills folder" in stderr
    assert stderr.splitlines()[-1].endswith("; 3 warnings: 3 invalid skills left out")


def test_to_stdout_the_module_holds_the_valid_skills_and_warnings_go_to_stderr(
    tree: Path,
) -> None:
    result = pai(tree, "--skip-invalid")

    assert result.exit_code == 0, result.output
    assert '"too-long"' not in result.stdout
    assert 'name="skill-11"' in result.stdout
    assert "left out the invalid skill 'too-long'" in result.stderr
    summary = result.stderr.splitlines()[-1]
    assert summary.startswith("pai: 11 skills; the module is ")
    assert summary.endswith(" KiB; 1 warning: 1 invalid skill left out")


def test_check_with_the_flag_compares_the_valid_skills(tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "skills_generated.py"
    assert pai(tree, "-o", out, "--skip-invalid").exit_code == 0

    current = pai(tree, "-o", out, "--check", "--skip-invalid")
    write(tree, "too-long", description="Now short.")
    fixed = pai(tree, "-o", out, "--check", "--skip-invalid")

    assert current.exit_code == 0, current.output
    assert "is up to date (11 skills" in current.stderr
    assert "left out the invalid skill 'too-long'" in current.stderr
    assert fixed.exit_code == 1
    assert "is stale (added: too-long)" in fixed.stderr


def test_nothing_valid_is_an_error_even_with_the_flag(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write(root, "too-long", description=LONG)
    out = tmp_path / "skills_generated.py"

    flagged = pai(root, "-o", out, "--skip-invalid")
    strict = pai(root, "-o", out)

    assert flagged.exit_code == 2
    assert not out.exists()
    assert f"{root}{os.sep}{LONG_PROBLEM}" in flagged.stderr
    assert f"{root}: holds no valid skill folder" in flagged.stderr
    assert strict.exit_code == 2
    assert "--skip-invalid" not in strict.stderr  # it would not help


def test_an_empty_folder_is_an_error_with_the_flag_too(tmp_path: Path) -> None:
    result = pai(tmp_path, "--skip-invalid")

    assert result.exit_code == 2
    assert f"{tmp_path}: holds no skill folders (each a <name>/SKILL.md)" in result.stderr


def test_generate_module_skip_invalid_lists_each_skill_left_out(tree: Path) -> None:
    module = generate_module(tree, skip_invalid=True)

    assert module.names == tuple(GOOD)
    assert list(module.skipped) == ["too-long"]
    [problem] = module.skipped["too-long"]
    assert (problem.file, problem.line) == (str(tree / "too-long" / "SKILL.md"), 3)
    with pytest.raises(SkillSourceError):
        generate_module(tree)
    assert generate_module(tree, skip_invalid=True).text == module.text


def test_a_misspelt_pai_requires_is_reported_by_the_command_with_its_file(tree: Path) -> None:
    (tree / "skill-01" / "SKILL.md").write_text(
        "---\nname: skill-01\ndescription: d\nmetadata:\n  pai-require: sandbox\n---\n",
        encoding="utf-8",
    )

    strict = pai(tree)
    skipping = pai(tree, "--skip-invalid")

    problem = (
        f"  {tree / 'skill-01' / 'SKILL.md'}:5: metadata key 'pai-require' looks like a "
        "misspelling of 'pai-requires', so it would be ignored; did you mean 'pai-requires'?"
    )
    assert strict.exit_code == 2
    assert problem in strict.stderr
    assert skipping.exit_code == 0
    assert problem in skipping.stderr
    assert "left out the invalid skill 'skill-01'" in skipping.stderr
    assert 'name="skill-01"' not in skipping.stdout
