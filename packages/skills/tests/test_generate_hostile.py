"""`pai generate skills` given what cannot go into a UTF-8 Python module, or would garble it:
lone surrogates from YAML escapes, names that are not UTF-8 or hold control characters, a
SKILL.md that is not UTF-8 text, frontmatter nested too deeply. Each is a skill problem with its
file (and line), and nothing is written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from pai.skills import SkillSourceError, generate_module
from pai.skills import _generate as generate
from pai.skills._cli import generate_skills_command

VALID = "---\nname: {name}\ndescription: Does {name} things.\n---\n# {name}\n"


def write_skill(root: Path, folder: str, skill_md: str | bytes) -> Path:
    skill = root / folder
    skill.mkdir(parents=True)
    data = skill_md if isinstance(skill_md, bytes) else skill_md.encode()
    (skill / "SKILL.md").write_bytes(data)
    return skill


def problems_of(root: Path) -> list[str]:
    with pytest.raises(SkillSourceError) as caught:
        generate_module(root)
    return [str(p).replace(str(root) + os.sep, "") for p in caught.value.problems]


def make_raw(path: bytes, *, folder: bool = False) -> None:
    """Create a file or folder whose name is raw bytes; skip where the file system refuses."""
    try:
        if folder:
            os.mkdir(path)
        else:
            with open(path, "wb") as file:
                file.write(b"hello\n")
    except OSError as error:  # pragma: no cover - file systems that insist on UTF-8 names
        pytest.skip(f"this file system refuses the name {path!r}: {error}")


SURROGATES = {
    "description": ('description: "before \\ud800 after"\n', 3, "description"),
    "license": ('description: d\nlicense: "\\udfff"\n', 4, "license"),
    "compatibility": ('description: d\ncompatibility: "x\\udc80"\n', 4, "compatibility"),
    "metadata value": ('description: d\nmetadata:\n  version: "\\ud800"\n', 5, "metadata.version"),
    "metadata key": (
        'description: d\nmetadata:\n  "k\\ud800": v\n',
        5,
        "the key 'metadata.k\\ud800'",
    ),
    "allowed-tools list": (
        'description: d\nallowed-tools:\n  - Read\n  - "B\\ud800"\n',
        6,
        "allowed-tools[1]",
    ),
    "allowed-tools string": ('description: d\nallowed-tools: "Read \\ud800"\n', 4, "allowed-tools"),
    "a pair of escapes": ('description: "smile \\ud83d\\ude00"\n', 3, "description"),
}


@pytest.mark.parametrize("where", SURROGATES)
def test_a_lone_surrogate_from_a_yaml_escape_is_a_problem_with_its_line(
    where: str, tmp_path: Path
) -> None:
    frontmatter, line, label = SURROGATES[where]
    write_skill(tmp_path, "skill", f"---\nname: skill\n{frontmatter}---\nBody\n")

    [problem] = problems_of(tmp_path)

    assert problem.startswith(f"skill/SKILL.md:{line}: {label} holds the lone surrogate U+D")
    assert "cannot be written to the generated module as UTF-8" in problem
    problem.encode("utf-8")  # the report itself can be printed


@pytest.mark.parametrize(
    "name", [b"\xff.txt", b"caf\xe9.md", b"refs/\xfe\xfd"], ids=["ff", "latin-1", "in a folder"]
)
def test_a_file_name_that_is_not_utf8_is_a_problem_naming_it_printably(
    name: bytes, tmp_path: Path
) -> None:
    skill = write_skill(tmp_path, "skill", VALID.format(name="skill"))
    (skill / "refs").mkdir()
    make_raw(os.path.join(os.fsencode(skill), name))

    [problem] = problems_of(tmp_path)

    shown = name.decode("utf-8", "backslashreplace")
    assert problem.startswith(f"skill/{shown}: its name is not valid UTF-8 (the byte ")
    assert "rename it in UTF-8" in problem
    problem.encode("utf-8")


def test_a_folder_inside_a_skill_that_is_not_utf8_is_a_problem_and_not_read(
    tmp_path: Path,
) -> None:
    skill = write_skill(tmp_path, "skill", VALID.format(name="skill"))
    folder = os.path.join(os.fsencode(skill), b"data\xff")
    make_raw(folder, folder=True)
    make_raw(os.path.join(folder, b"inner.txt"))

    assert problems_of(tmp_path) == [
        "skill/data\\xff: its name is not valid UTF-8 (the byte ff at byte 4 of b'data\\xff'), "
        "so it cannot be written to the generated module; rename it in UTF-8"
    ]


def test_a_skill_folder_whose_name_is_not_utf8_is_a_problem(tmp_path: Path) -> None:
    write_skill(tmp_path, "good", VALID.format(name="good"))
    folder = os.path.join(os.fsencode(tmp_path), b"\xff")
    make_raw(folder, folder=True)
    with open(os.path.join(folder, b"SKILL.md"), "w", encoding="utf-8") as file:
        file.write(VALID.format(name="x"))

    [problem] = problems_of(tmp_path)

    assert problem.startswith("\\xff: this folder is not a skill: its name is not valid UTF-8")
    assert "lowercase letters, digits and single hyphens" in problem


@pytest.mark.parametrize(
    ("name", "shown", "code"),
    [
        ("two\nlines.txt", "two\\nlines.txt", "U+000A"),
        ("red\x1b[31m.txt", "red\\x1b[31m.txt", "U+001B"),
        ("tab\there.txt", "tab\\there.txt", "U+0009"),
        ("del\x7f.txt", "del\\x7f.txt", "U+007F"),
        ("cod\u202etxt.exe", "cod\\u202etxt.exe", "U+202E"),
        ("iso\u2066late.md", "iso\\u2066late.md", "U+2066"),
    ],
    ids=["newline", "escape", "tab", "delete", "rtl-override", "isolate"],
)
def test_a_file_name_with_a_control_character_is_a_problem_shown_escaped(
    name: str, shown: str, code: str, tmp_path: Path
) -> None:
    skill = write_skill(tmp_path, "skill", VALID.format(name="skill"))
    (skill / name).write_text("x")

    [problem] = problems_of(tmp_path)

    assert problem.startswith(f"skill/{shown}: its name holds the control character {code} ")
    assert "\n" not in problem
    assert "\x1b" not in problem


def test_a_skill_folder_with_a_control_character_is_a_problem(tmp_path: Path) -> None:
    write_skill(tmp_path, "bad\x1bname", VALID.format(name="bad"))

    [problem] = problems_of(tmp_path)

    assert problem.startswith("bad\\x1bname: this folder is not a skill: its name holds the ")
    assert "U+001B" in problem


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            b"---\nname: skill\ndescription: d\n---\n# Body\nline \xc3\x28 two\n",
            "skill/SKILL.md:6: SKILL.md is not UTF-8: the byte c3 at column 6 (byte 47)",
        ),
        (
            b"\xef\xbb\xbf---\nname: skill\ndescription: \xff\n---\n",
            "skill/SKILL.md:3: SKILL.md is not UTF-8: the byte ff at column 14 (byte 32)",
        ),
        (
            b"---\nname: skill\ndescription: d\n---\n\nNUL \x00 here\n",
            "skill/SKILL.md:6: SKILL.md holds a NUL byte, so it is not text",
        ),
        (
            b"---\nname: skill\ndescription: d\n---\n\xed\xa0\x80 an encoded surrogate\n",
            "skill/SKILL.md:5: SKILL.md is not UTF-8: the byte ed at column 1 (byte 35)",
        ),
    ],
    ids=["body", "after a bom", "nul", "encoded surrogate"],
)
def test_a_skill_md_that_is_not_utf8_text_is_a_problem_at_its_line(
    data: bytes, expected: str, tmp_path: Path
) -> None:
    write_skill(tmp_path, "skill", data)

    [problem] = problems_of(tmp_path)

    assert problem.startswith(expected)
    assert problem.endswith("save it as UTF-8 text")


@pytest.mark.parametrize(
    "frontmatter",
    [
        "description: d\nmetadata: " + "[" * 10_000 + "]" * 10_000 + "\n",
        "description: d\nmetadata: " + "{a: " * 10_000 + "b" + "}" * 10_000 + "\n",
        "description: d\nmetadata:\n" + "".join(f"{'  ' * n}k{n}:\n" for n in range(1, 3_000)),
    ],
    ids=["flow lists", "flow mappings", "block mappings"],
)
def test_frontmatter_nested_too_deeply_is_a_problem_not_a_recursion_error(
    frontmatter: str, tmp_path: Path
) -> None:
    write_skill(tmp_path, "skill", f"---\nname: skill\n{frontmatter}---\nBody\n")

    [problem] = problems_of(tmp_path)

    assert problem.startswith("skill/SKILL.md:2: the frontmatter nests mappings or lists too")


def test_rendering_refuses_text_that_cannot_be_written_as_utf8() -> None:
    skill = generate.ParsedSkill(name="skill", description="d", body="lone \ud800")

    with pytest.raises(SkillSourceError) as caught:
        generate.render_module([skill])

    [problem] = caught.value.problems
    assert problem.file == "skill/SKILL.md"
    assert "'\\ud800'" in problem.message


def test_the_cli_reports_them_all_and_writes_nothing(tmp_path: Path) -> None:
    source = tmp_path / "skills"
    write_skill(source, "alpha", '---\nname: alpha\ndescription: "\\ud800"\n---\n')
    beta = write_skill(source, "beta", VALID.format(name="beta"))
    make_raw(os.path.join(os.fsencode(beta), b"\xff.txt"))
    (beta / "two\nlines").write_text("x")
    out = tmp_path / "skills_generated.py"
    out.write_bytes(b"# the module as it was\n")

    result = CliRunner().invoke(
        generate_skills_command, [str(source), "-o", str(out)], catch_exceptions=False
    )

    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert lines[0].startswith("Error: 3 problems in the skills folder")
    assert "alpha/SKILL.md:3: description holds the lone surrogate U+D800" in lines[1]
    assert "beta/two\\nlines: its name holds the control character U+000A" in lines[2]
    assert "beta/\\xff.txt: its name is not valid UTF-8" in lines[3]
    assert len(lines) == 4
    assert out.read_bytes() == b"# the module as it was\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["skills", "skills_generated.py"]
    result.stderr.encode("ascii")  # every offending character is shown escaped
