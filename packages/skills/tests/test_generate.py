"""`pai generate skills`: the module it writes from a realistic tree, and every validation rule."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from click.testing import CliRunner

from pai.skills import SkillSourceError, generate_module
from pai.skills import _generate as generate
from pai.skills._cli import generate_skills_command

HERE = Path(__file__).parent
TREE = HERE / "skills_tree"
GOLDEN = HERE / "skills_golden" / "generated.py"

VALID = "---\nname: {name}\ndescription: Does {name} things.\n---\n# {name}\n"


def write_skill(root: Path, folder: str, skill_md: str, **files: bytes) -> Path:
    skill = root / folder
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(skill_md, encoding="utf-8")
    for name, content in files.items():
        path = skill / name.replace("__", "/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    return skill


def problems_of(root: Path) -> list[str]:
    with pytest.raises(SkillSourceError) as caught:
        generate_module(root)
    return [str(p).replace(str(root) + os.sep, "") for p in caught.value.problems]


def load_module(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"generated_{abs(hash(path))}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- the realistic tree ----------------------------------------------------------------------------


def test_the_tree_generates_the_checked_in_golden_module() -> None:
    assert generate_module(TREE).text == GOLDEN.read_text(encoding="utf-8")


def test_generate_module_takes_a_path_or_a_string() -> None:
    assert generate_module(str(TREE)).text == generate_module(TREE).text


def test_the_same_tree_gives_byte_identical_output_whatever_the_order_files_were_made(
    tmp_path: Path,
) -> None:
    copy = tmp_path / "skills"
    copy.mkdir()
    for skill in sorted(TREE.iterdir(), reverse=True):  # made in the other order
        shutil.copytree(skill, copy / skill.name)

    assert generate_module(copy).text.encode() == generate_module(TREE).text.encode()


def test_a_formatter_leaves_the_module_byte_for_byte_so_check_stays_meaningful(
    tmp_path: Path,
) -> None:
    if importlib.util.find_spec("ruff") is None:
        pytest.skip("ruff is not installed in this environment")
    copy = tmp_path / "generated.py"
    shutil.copy(GOLDEN, copy)

    subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--no-cache", str(copy)],
        check=True,
        capture_output=True,
    )

    assert copy.read_bytes() == GOLDEN.read_bytes()


def test_the_module_exports_skills_sorted_by_name_and_a_skill_name_literal() -> None:
    module = load_module(GOLDEN)

    assert [s.name for s in module.skills] == [
        "csv-report",
        "matter-intake",
        "pdf-forms",
        "release-notes",
    ]
    assert module.SkillName.__args__ == (
        "csv-report",
        "matter-intake",
        "pdf-forms",
        "release-notes",
    )


def test_a_block_scalar_description_is_collapsed_to_one_line() -> None:
    pdf = next(s for s in load_module(GOLDEN).skills if s.name == "pdf-forms")

    assert pdf.description == (
        "Fill in PDF forms from structured data. Use when the user hands over a form and the "
        "values to put in it."
    )


def test_the_frontmatter_ends_at_the_first_closing_line_and_the_body_keeps_its_rules() -> None:
    pdf = next(s for s in load_module(GOLDEN).skills if s.name == "pdf-forms")

    assert pdf.body.startswith("# Filling PDF forms\n")
    assert pdf.body.endswith("say so and stop.\n\n---\n")
    assert "name: pdf-forms" not in pdf.body


def test_frontmatter_fields_are_carried_over() -> None:
    by_name = {s.name: s for s in load_module(GOLDEN).skills}

    pdf = by_name["pdf-forms"]
    assert (pdf.license, pdf.compatibility) == ("Apache-2.0", "Needs a sandbox with a POSIX shell.")
    assert pdf.metadata == {"author": "Docs team", "pai-requires": "sandbox", "version": "1.2"}
    assert pdf.requires_sandbox is True
    assert pdf.allowed_tools == ("Bash", "Read")  # a YAML list
    assert by_name["release-notes"].allowed_tools == ("Read", "Grep")  # a space-separated string
    assert by_name["release-notes"].requires_sandbox is False


def test_files_are_sorted_text_or_base64_data_for_binary_files() -> None:
    pdf = next(s for s in load_module(GOLDEN).skills if s.name == "pdf-forms")

    assert [f["path"] for f in pdf.files] == [
        "assets/stamp.png",
        "references/forms.md",
        "references/nested/checkboxes.md",
        "scripts/fill.sh",
    ]
    assert pdf.files[0]["data"]["type"] == "data"
    assert pdf.files[1]["data"] == {
        "type": "text",
        "text": (TREE / "pdf-forms/references/forms.md").read_text(encoding="utf-8"),
    }


def test_a_utf8_bom_is_not_text_content_and_unicode_is_kept() -> None:
    notes = next(s for s in load_module(GOLDEN).skills if s.name == "release-notes")

    assert (TREE / "release-notes/style.md").read_bytes().startswith(b"\xef\xbb\xbf")
    assert notes.files[0]["data"]["text"].startswith("# Style guide")
    assert "José, Zoë, 李雷" in notes.body
    assert "日本語" in notes.description


def test_any_text_survives_the_module_exactly(tmp_path: Path) -> None:
    odd = "a\u2028b\u2029c\x85d\x0ce\x1bf\rg\x7fh'''\"\"\"\\ {x} \\u0041 \U0001f600\n"
    write_skill(tmp_path, "skill", VALID.format(name="skill"), **{"odd.txt": odd.encode()})
    out = tmp_path / "generated.py"
    out.write_text(generate_module(tmp_path).text, encoding="utf-8")

    [skill] = load_module(out).skills

    assert skill.files == ({"path": "odd.txt", "data": {"type": "text", "text": odd}},)


# -- the command -----------------------------------------------------------------------------------


def test_the_command_writes_the_module_and_says_how_large_it_is(tmp_path: Path) -> None:
    out = tmp_path / "app" / "skills_generated.py"

    result = CliRunner().invoke(generate_skills_command, [str(TREE), "-o", str(out)])

    assert result.exit_code == 0, result.output
    assert out.read_bytes() == GOLDEN.read_bytes()
    assert f"wrote {out}: 4 skills (csv-report, matter-intake, pdf-forms, release-notes), " in (
        result.stderr
    )
    assert f"{GOLDEN.stat().st_size / 1024:.1f} KiB" in result.stderr


def test_without_an_output_the_module_goes_to_stdout() -> None:
    result = CliRunner().invoke(generate_skills_command, [str(TREE)])

    assert result.exit_code == 0
    assert result.stdout == GOLDEN.read_text(encoding="utf-8")


def test_check_passes_when_the_module_is_current(tmp_path: Path) -> None:
    out = tmp_path / "generated.py"
    shutil.copy(GOLDEN, out)

    result = CliRunner().invoke(generate_skills_command, [str(TREE), "-o", str(out), "--check"])

    assert result.exit_code == 0, result.output
    assert "is up to date (4 skills" in result.stderr


def test_check_exits_1_naming_the_changed_added_and_removed_skills(tmp_path: Path) -> None:
    tree = tmp_path / "skills"
    shutil.copytree(TREE, tree)
    out = tmp_path / "generated.py"
    shutil.copy(GOLDEN, out)
    (tree / "matter-intake/references/checklist.md").write_text("changed\n", encoding="utf-8")
    shutil.rmtree(tree / "csv-report")
    write_skill(tree, "new-skill", VALID.format(name="new-skill"))
    before = out.read_bytes()

    result = CliRunner().invoke(generate_skills_command, [str(tree), "-o", str(out), "--check"])

    assert result.exit_code == 1
    assert "is stale (changed: matter-intake; added: new-skill; removed: csv-report)" in (
        result.stderr
    )
    assert out.read_bytes() == before


def test_check_names_a_skill_changed_by_a_new_file(tmp_path: Path) -> None:
    tree = tmp_path / "skills"
    shutil.copytree(TREE, tree)
    out = tmp_path / "generated.py"
    shutil.copy(GOLDEN, out)
    (tree / "release-notes" / "extra.md").write_text("# Extra\n", encoding="utf-8")

    result = CliRunner().invoke(generate_skills_command, [str(tree), "-o", str(out), "--check"])

    assert result.exit_code == 1
    assert "is stale (changed: release-notes)" in result.stderr


def test_check_of_a_module_that_is_not_utf8_says_it_is_stale(tmp_path: Path) -> None:
    out = tmp_path / "generated.py"
    out.write_bytes(b"\xff\xfe garbage")

    result = CliRunner().invoke(generate_skills_command, [str(TREE), "-o", str(out), "--check"])

    assert result.exit_code == 1
    assert "is stale (added: csv-report, matter-intake, pdf-forms, release-notes)" in (
        result.stderr
    )


def test_check_of_an_invalid_tree_exits_2_like_any_skills_error(tmp_path: Path) -> None:
    write_skill(tmp_path / "skills", "broken", "---\nname: broken\n---\n")
    out = tmp_path / "generated.py"
    shutil.copy(GOLDEN, out)

    result = CliRunner().invoke(
        generate_skills_command, [str(tmp_path / "skills"), "-o", str(out), "--check"]
    )

    assert result.exit_code == 2
    assert "broken/SKILL.md:1: the frontmatter has no description" in result.stderr


def test_an_output_that_cannot_be_written_is_one_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "app"
    blocker.write_text("a file where the folder should be\n", encoding="utf-8")

    result = CliRunner().invoke(
        generate_skills_command, [str(TREE), "-o", str(blocker / "generated.py")]
    )

    assert result.exit_code == 2
    assert f"Error: cannot write {blocker / 'generated.py'}: " in result.stderr
    assert blocker.read_text(encoding="utf-8") == "a file where the folder should be\n"


def test_an_output_inside_a_skill_folder_is_refused(tmp_path: Path) -> None:
    tree = tmp_path / "skills"
    shutil.copytree(TREE, tree)
    out = tree / "csv-report" / "generated.py"

    result = CliRunner().invoke(generate_skills_command, [str(tree), "-o", str(out)])

    assert result.exit_code == 2
    assert (
        f"{out} is inside the skill folder {tree / 'csv-report'}, so it would become a file of "
        "that skill"
    ) in result.stderr
    assert not out.exists()


def test_an_output_directly_in_the_skills_folder_is_written_and_stays_current(
    tmp_path: Path,
) -> None:
    tree = tmp_path / "skills"
    shutil.copytree(TREE, tree)
    out = tree / "generated.py"

    written = CliRunner().invoke(generate_skills_command, [str(tree), "-o", str(out)])
    checked = CliRunner().invoke(generate_skills_command, [str(tree), "-o", str(out), "--check"])

    assert (written.exit_code, checked.exit_code) == (0, 0)
    assert out.read_bytes() == GOLDEN.read_bytes()


def test_check_without_an_output_is_refused() -> None:
    result = CliRunner().invoke(generate_skills_command, [str(TREE), "--check"])

    assert result.exit_code == 2
    assert "--check compares against a module: give it with -o MODULE.py" in result.stderr


def test_nothing_is_written_when_any_skill_is_invalid(tmp_path: Path) -> None:
    tree = tmp_path / "skills"
    shutil.copytree(TREE, tree)
    write_skill(tree, "broken", "---\nname: broken\n---\n")
    out = tmp_path / "generated.py"

    result = CliRunner().invoke(generate_skills_command, [str(tree), "-o", str(out)])

    assert result.exit_code == 2
    assert "broken/SKILL.md:1: the frontmatter has no description" in result.stderr
    assert "nothing was written" in result.stderr
    assert not out.exists()


# -- validation: every problem of every skill, at once, with file and line ------------------------


def test_every_problem_of_every_skill_is_reported_at_once(tmp_path: Path) -> None:
    write_skill(tmp_path, "good", VALID.format(name="good"))
    write_skill(tmp_path, "first", "---\nname: other\ndescripton: x\n---\n")
    write_skill(tmp_path, "second", "---\nname: second\ndescription: ok\ncompatibility: 7\n---\n")
    (tmp_path / "third").mkdir()

    problems = problems_of(tmp_path)

    assert problems == [
        "first/SKILL.md:3: unknown frontmatter key 'descripton'; did you mean 'description'? "
        "(known: name, description, license, compatibility, metadata, allowed-tools; put other "
        "fields under metadata)",
        "first/SKILL.md:2: name 'other' differs from its folder 'first'; a skill's name is its "
        "folder name, so rename one of them",
        "first/SKILL.md:1: the frontmatter has no description; add one saying when to use the "
        "skill",
        "second/SKILL.md:4: compatibility must be a string, got int 7; quote it in the YAML",
        "third/SKILL.md: missing: every folder under the skills folder is a skill and needs a "
        "SKILL.md",
    ]


@pytest.mark.parametrize(
    "name",
    ["Upper", "two--hyphens", "-leading", "trailing-", "under_score", "dotted.name", "spa ce"],
)
def test_a_name_must_be_lowercase_letters_digits_and_single_hyphens(
    tmp_path: Path, name: str
) -> None:
    write_skill(tmp_path, "skill", f"---\nname: {name!r}\ndescription: d\n---\n")

    assert problems_of(tmp_path)[0] == (
        f"skill/SKILL.md:2: name {name!r} must be lowercase letters, digits and single hyphens, "
        "not starting or ending with a hyphen"
    )


def test_a_name_is_at_most_64_characters(tmp_path: Path) -> None:
    name = "a" * 65
    write_skill(tmp_path, name, f"---\nname: {name}\ndescription: d\n---\n")
    write_skill(tmp_path, "b" * 64, VALID.format(name="b" * 64))

    assert problems_of(tmp_path) == [
        f"{name}/SKILL.md:2: name is 65 characters long; at most 64 are allowed"
    ]


def test_a_name_is_required(tmp_path: Path) -> None:
    write_skill(tmp_path, "skill", "---\ndescription: d\n---\n")

    assert problems_of(tmp_path) == [
        "skill/SKILL.md:1: the frontmatter has no name; add 'name: skill'"
    ]


def test_a_description_is_at_most_1024_characters_after_collapsing_whitespace(
    tmp_path: Path,
) -> None:
    long = "word " * 205  # 1024 characters once collapsed
    write_skill(tmp_path, "fits", f"---\nname: fits\ndescription: >\n  {long}\n    \n  \n---\n")
    write_skill(tmp_path, "over", f"---\nname: over\ndescription: '{long}x y'\n---\n")

    assert problems_of(tmp_path) == [
        "over/SKILL.md:3: description is 1028 characters long; at most 1024 are allowed"
    ]


def test_a_description_must_be_a_non_empty_string(tmp_path: Path) -> None:
    write_skill(tmp_path, "boolean", "---\nname: boolean\ndescription: yes\n---\n")
    write_skill(tmp_path, "empty", "---\nname: empty\ndescription: '   '\n---\n")

    assert problems_of(tmp_path) == [
        "boolean/SKILL.md:3: description must be a string, got bool True; quote it in the YAML",
        "empty/SKILL.md:3: description is empty",
    ]


def test_an_empty_value_is_reported_as_empty_not_as_a_type(tmp_path: Path) -> None:
    write_skill(tmp_path, "skill", "---\nname:\ndescription: ~\nmetadata:\n  owner:\n---\n")

    assert problems_of(tmp_path) == [
        "skill/SKILL.md:2: name is empty; write its value after 'name:'",
        "skill/SKILL.md:3: description is empty; write its value after 'description:'",
        "skill/SKILL.md:5: metadata.owner is empty; write its value after 'owner:'",
    ]


def test_a_description_that_is_a_yaml_number_must_be_quoted(tmp_path: Path) -> None:
    write_skill(tmp_path, "skill", "---\nname: skill\ndescription: 42\n---\n")

    assert problems_of(tmp_path) == [
        "skill/SKILL.md:3: description must be a string, got int 42; quote it in the YAML"
    ]


def test_a_yaml_alias_bomb_is_reported_briefly(tmp_path: Path) -> None:
    # Each level repeats the one before nine times: the description is 9**6 strings deep down.
    levels = ['  l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, 6):
        levels.append(f"  l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * 9)}]")
    write_skill(
        tmp_path,
        "skill",
        "---\nname: skill\nmetadata:\n" + "\n".join(levels) + "\ndescription: [*l5]\n---\n",
    )

    problems = problems_of(tmp_path)

    assert any(
        p.startswith("skill/SKILL.md:10: description must be a string, got list [[")
        for p in problems
    )
    assert max(len(problem) for problem in problems) < 500


def test_license_must_be_a_string(tmp_path: Path) -> None:
    write_skill(tmp_path, "skill", "---\nname: skill\ndescription: d\nlicense: [MIT]\n---\n")

    assert problems_of(tmp_path) == [
        "skill/SKILL.md:4: license must be a string, got list ['MIT']; quote it in the YAML"
    ]


def test_compatibility_is_at_most_500_characters(tmp_path: Path) -> None:
    write_skill(
        tmp_path, "skill", f"---\nname: skill\ndescription: d\ncompatibility: {'c' * 501}\n---\n"
    )

    assert problems_of(tmp_path) == [
        "skill/SKILL.md:4: compatibility is 501 characters long; at most 500 are allowed"
    ]


def test_metadata_must_map_strings_to_strings_each_problem_at_its_key(tmp_path: Path) -> None:
    write_skill(tmp_path, "listed", "---\nname: listed\ndescription: d\nmetadata: [a]\n---\n")
    write_skill(
        tmp_path,
        "numbers",
        "---\nname: numbers\ndescription: d\nmetadata:\n  version: 1.0\n  1: one\n---\n",
    )

    assert problems_of(tmp_path) == [
        "listed/SKILL.md:4: metadata must be a mapping of string keys to string values, got list",
        "numbers/SKILL.md:5: metadata.version must be a string, got float 1.0; quote it in "
        "the YAML",
        "numbers/SKILL.md:6: metadata key 1 must be a string; quote it",
    ]


def test_pai_requires_accepts_only_sandbox_reported_at_its_line(tmp_path: Path) -> None:
    write_skill(
        tmp_path, "skill", "---\nname: skill\ndescription: d\nmetadata:\n  pai-requires: gpu\n---\n"
    )

    assert problems_of(tmp_path) == [
        "skill/SKILL.md:5: metadata.pai-requires is 'gpu'; the only value is 'sandbox'"
    ]


@pytest.mark.parametrize(
    "key",
    ["pai-require", "pai_requires", "pai-requries", "PAI-Requires", "pairequires", "pai-required"],
)
def test_a_misspelt_pai_requires_is_an_error_with_a_suggestion(tmp_path: Path, key: str) -> None:
    write_skill(
        tmp_path,
        "skill",
        f"---\nname: skill\ndescription: d\nmetadata:\n  owner: docs\n  {key}: sandbox\n---\n",
    )

    assert problems_of(tmp_path) == [
        f"skill/SKILL.md:6: metadata key {key!r} looks like a misspelling of 'pai-requires', so "
        "it would be ignored; did you mean 'pai-requires'? (write 'pai-requires: sandbox' for a "
        "skill that needs a sandbox, or give your own field another name)"
    ]


def test_a_close_key_without_the_pai_prefix_is_an_error_only_when_it_says_sandbox(
    tmp_path: Path,
) -> None:
    write_skill(
        tmp_path,
        "plain",
        "---\nname: plain\ndescription: d\nmetadata:\n  requires: python3\n"
        "  pai-version: '2'\n---\n",
    )
    write_skill(
        tmp_path, "boxed", "---\nname: boxed\ndescription: d\nmetadata:\n  requires: sandbox\n---\n"
    )

    assert problems_of(tmp_path) == [
        "boxed/SKILL.md:5: metadata key 'requires' looks like a misspelling of 'pai-requires', "
        "so it would be ignored; did you mean 'pai-requires'? (write 'pai-requires: sandbox' "
        "for a skill that needs a sandbox, or give your own field another name)"
    ]
    (tmp_path / "boxed" / "SKILL.md").write_text(
        "---\nname: boxed\ndescription: d\nmetadata:\n  pai-requires: sandbox\n---\n"
    )
    module = generate_module(tmp_path)
    assert module.names == ("boxed", "plain")
    assert '"requires": "python3"' in module.chunks["plain"]
    assert "requires_sandbox=True" in module.chunks["boxed"]


def test_pai_requires_at_the_top_level_says_it_goes_under_metadata(tmp_path: Path) -> None:
    write_skill(tmp_path, "skill", "---\nname: skill\ndescription: d\npai-requires: sandbox\n---\n")

    assert problems_of(tmp_path) == [
        "skill/SKILL.md:4: unknown frontmatter key 'pai-requires': 'pai-requires' goes under "
        "metadata, indented ('metadata:' then '  pai-requires: sandbox')"
    ]


def test_allowed_tools_is_a_string_or_a_list_of_strings(tmp_path: Path) -> None:
    write_skill(tmp_path, "skill", "---\nname: skill\ndescription: d\nallowed-tools: [1, 2]\n---\n")

    assert problems_of(tmp_path) == [
        "skill/SKILL.md:4: allowed-tools must be a space-separated string (or a YAML list of "
        "strings), e.g. 'Bash(git:*) Read'"
    ]


def test_a_key_may_appear_only_once(tmp_path: Path) -> None:
    write_skill(tmp_path, "skill", "---\nname: skill\ndescription: a\ndescription: b\n---\n")

    assert problems_of(tmp_path) == [
        "skill/SKILL.md:4: key 'description' appears twice (first at line 3); keep one"
    ]


def test_a_key_may_appear_only_once_inside_metadata_too(tmp_path: Path) -> None:
    write_skill(
        tmp_path,
        "skill",
        "---\nname: skill\ndescription: d\nmetadata:\n  owner: a\n  owner: b\n---\n",
    )

    assert problems_of(tmp_path) == [
        "skill/SKILL.md:6: key 'metadata.owner' appears twice (first at line 5); keep one"
    ]


def test_an_unknown_key_that_is_not_a_string_is_reported_at_its_line(tmp_path: Path) -> None:
    write_skill(tmp_path, "skill", "---\nname: skill\ndescription: d\nnull: x\n---\n")

    [problem] = problems_of(tmp_path)
    assert problem.startswith("skill/SKILL.md:4: unknown frontmatter key None ")


def test_crlf_line_endings_are_read_like_lf(tmp_path: Path) -> None:
    write_skill(
        tmp_path,
        "skill",
        "---\r\nname: skill\r\ndescription: >\r\n  Two\r\n  lines.\r\n---\r\n# Body\r\n---\r\n",
    )

    module = generate_module(tmp_path)

    assert '        description="Two lines.",' in module.text
    assert '        body="# Body\\r\\n---\\r\\n",' in module.text


def test_a_bom_before_the_frontmatter_is_ignored(tmp_path: Path) -> None:
    skill = write_skill(tmp_path, "skill", "")
    (skill / "SKILL.md").write_bytes(b"\xef\xbb\xbf" + VALID.format(name="skill").encode())

    assert generate_module(tmp_path).names == ("skill",)


def test_only_a_line_of_three_hyphens_closes_the_frontmatter(tmp_path: Path) -> None:
    write_skill(
        tmp_path,
        "skill",
        "---\nname: skill\ndescription: |\n  a\n  ---\n  b\n---  \nbody\n",
    )

    module = generate_module(tmp_path)

    assert '        description="a --- b",' in module.text
    assert '        body="body\\n",' in module.text


def test_skill_md_must_be_utf8_text(tmp_path: Path) -> None:
    skill = write_skill(tmp_path, "skill", "")
    (skill / "SKILL.md").write_bytes(b"---\nname: skill\ndescription: caf\xe9\n---\n")

    assert problems_of(tmp_path) == [
        "skill/SKILL.md:3: SKILL.md is not UTF-8: the byte e9 at column 17 (byte 32) is not "
        "valid UTF-8 (invalid continuation byte); save it as UTF-8 text"
    ]


def test_skill_md_must_open_and_close_its_frontmatter(tmp_path: Path) -> None:
    write_skill(tmp_path, "bare", "# Just a body\n")
    write_skill(tmp_path, "open", "---\nname: open\ndescription: d\n")

    assert problems_of(tmp_path) == [
        "bare/SKILL.md:1: SKILL.md must start with YAML frontmatter: a line '---', the name and "
        "description, and a closing '---'",
        "open/SKILL.md:1: the frontmatter opened here is never closed; add a line '---' after it",
    ]


def test_invalid_yaml_is_reported_at_its_line(tmp_path: Path) -> None:
    write_skill(tmp_path, "skill", '---\nname: skill\ndescription: "unclosed\nlicense: x\n---\n')
    write_skill(tmp_path, "scalar", "---\njust a sentence\n---\n")

    problems = problems_of(tmp_path)

    assert (
        problems[0]
        == "scalar/SKILL.md:2: the frontmatter must be a YAML mapping of keys (name, description, ...)"
    )
    assert problems[1].startswith("skill/SKILL.md:5: the frontmatter is not valid YAML: ")


def test_a_symlink_leaving_the_tree_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("secret\n", encoding="utf-8")
    other = tmp_path / "elsewhere"
    write_skill(other, "away", VALID.format(name="away"))
    root = tmp_path / "skills"
    skill = write_skill(root, "skill", VALID.format(name="skill"))
    (skill / "leak.txt").symlink_to(outside)
    (root / "away").symlink_to(other / "away")

    assert problems_of(root) == [
        f"away: symlink to {str(other / 'away')!r} leaves the skills folder; move the skill into "
        "it instead",
        f"skill/leak.txt: symlink to {str(outside)!r} leaves the skills folder; copy the file into "
        "the skill instead",
    ]


def test_a_symlink_inside_the_tree_is_followed(tmp_path: Path) -> None:
    other = write_skill(tmp_path, "other", VALID.format(name="other"), **{"terms.md": b"# Terms\n"})
    skill = write_skill(tmp_path, "skill", VALID.format(name="skill"))
    (skill / "terms.md").symlink_to(other / "terms.md")
    (skill / "shared").symlink_to(other)

    module = generate_module(tmp_path)

    chunk = module.chunks["skill"]
    assert '{"path": "terms.md", "data": {"type": "text", "text": "# Terms\\n"}}' in chunk
    assert '{"path": "shared/terms.md", ' in chunk
    assert '{"path": "shared/SKILL.md", ' in chunk


def test_a_symlink_looping_back_into_its_folder_is_refused(tmp_path: Path) -> None:
    skill = write_skill(tmp_path, "skill", VALID.format(name="skill"))
    (skill / "loop").symlink_to(skill)

    assert problems_of(tmp_path) == ["skill/loop: symlink makes a loop back into its own folder"]


def test_a_symlink_loop_is_refused_without_crashing(tmp_path: Path) -> None:
    skill = write_skill(tmp_path, "skill", VALID.format(name="skill"))
    (skill / "a").symlink_to("b")
    (skill / "b").symlink_to("a")
    (tmp_path / "x").symlink_to("y")
    (tmp_path / "y").symlink_to("x")

    assert problems_of(tmp_path) == [
        "skill/a: symlink to 'b' loops; remove it",
        "skill/b: symlink to 'a' loops; remove it",
        "x: symlink to 'y' loops; remove it",
        "y: symlink to 'x' loops; remove it",
    ]


def test_a_file_next_to_the_skill_folders_is_not_read_wherever_it_links(tmp_path: Path) -> None:
    outside = tmp_path / "README.md"
    outside.write_text("notes\n", encoding="utf-8")
    root = tmp_path / "skills"
    write_skill(root, "skill", VALID.format(name="skill"))
    (root / "README.md").symlink_to(outside)

    module = generate_module(root)

    assert module.names == ("skill",)
    assert "notes" not in module.text


def test_a_file_that_is_not_regular_is_refused(tmp_path: Path) -> None:
    skill = write_skill(tmp_path, "skill", VALID.format(name="skill"))
    os.mkfifo(skill / "pipe")

    assert problems_of(tmp_path) == ["skill/pipe: is not a regular file or folder; remove it"]


def test_folder_symlinks_multiplying_paths_are_refused_not_walked_forever(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(generate, "MAX_ENTRIES", 1_000)
    skill = write_skill(tmp_path, "skill", VALID.format(name="skill"))
    # d0 links twice to d1, d1 twice to d2, ...: 2**20 paths from 21 folders.
    for level in range(20, -1, -1):
        folder = skill / f"d{level}"
        folder.mkdir()
        (folder / "file.txt").write_text("x\n", encoding="utf-8")
        if level < 20:
            (folder / "a").symlink_to(f"../d{level + 1}")
            (folder / "b").symlink_to(f"../d{level + 1}")

    problems = problems_of(tmp_path)

    assert len(problems) == 1
    assert "the skill holds more than 1,000 files and folders" in problems[0]


def test_a_file_named_like_the_sandbox_marker_is_refused(tmp_path: Path) -> None:
    write_skill(tmp_path, "skill", VALID.format(name="skill"), **{".pai-skill": b"x"})

    assert problems_of(tmp_path) == [
        "skill/.pai-skill: .pai-skill is the name pai-skills gives its sandbox marker; rename it"
    ]


def test_a_folder_without_skills_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("notes\n", encoding="utf-8")

    [problem] = problems_of(tmp_path)
    assert problem.endswith("holds no skill folders (each a <name>/SKILL.md)")


def test_top_level_files_and_hidden_folders_are_not_skills(tmp_path: Path) -> None:
    write_skill(tmp_path, "skill", VALID.format(name="skill"), **{"scripts__run.sh": b"echo\n"})
    (tmp_path / "README.md").write_text("notes\n", encoding="utf-8")
    (tmp_path / ".cache").mkdir()
    (tmp_path / "skill" / "__pycache__").mkdir()
    (tmp_path / "skill" / "__pycache__" / "x.pyc").write_bytes(b"\x00")

    module = generate_module(tmp_path)

    assert module.names == ("skill",)
    assert '"path": "scripts/run.sh"' in module.text
    assert "pyc" not in module.text
