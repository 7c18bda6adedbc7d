"""define_skills(): its options, the catalog's rules, and the files sandbox skills copy."""

from __future__ import annotations

import re
from typing import Any

import pytest
from skills_golden.generated import skills as generated
from skills_helpers import Plan, enterprise_only

from pai.core import DefinitionError
from pai.sandbox import SeedFile, SeedPathError, sandbox_capability
from pai.skills import (
    MARKER,
    DuplicateSkillError,
    SandboxInput,
    SkillDefinitionError,
    SkillEntry,
    define_skills,
)

pytestmark = pytest.mark.anyio

CSV = next(e for e in generated if e.name == "csv-report")
PDF = next(e for e in generated if e.name == "pdf-forms")


def entry(name: str, **options: Any) -> SkillEntry[str]:
    return SkillEntry(name=name, description=f"The {name} skill.", body=f"# {name}\n", **options)


# -- options ---------------------------------------------------------------------------------------


def test_duplicate_names_raise_naming_them() -> None:
    with pytest.raises(DuplicateSkillError, match=r"\['alpha'\] appear more than once"):
        define_skills(skills=[entry("alpha"), entry("beta"), entry("alpha")])


def test_several_generated_modules_merge() -> None:
    skills = define_skills(skills=(*generated, entry("extra")))

    assert [s.name for s in skills.skills][-1] == "extra"


def test_a_duplicate_is_a_definition_error() -> None:
    assert issubclass(DuplicateSkillError, SkillDefinitionError)
    assert issubclass(SkillDefinitionError, DefinitionError)


@pytest.mark.parametrize(
    ("sandbox_dir", "message"),
    [
        ("skills", "is not absolute; write it as '/workspace/skills'"),
        ("/", "is the root folder"),
        ("//", "is the root folder"),
        ("/a/..", "is the root folder"),
        ("", "must be an absolute folder path"),
    ],
)
def test_sandbox_dir_must_be_absolute_and_not_the_root(sandbox_dir: str, message: str) -> None:
    with pytest.raises(SkillDefinitionError, match=message):
        define_skills(skills=generated, sandbox=True, sandbox_dir=sandbox_dir)


def test_sandbox_dir_is_normalized() -> None:
    skills = define_skills(skills=generated, sandbox=True, sandbox_dir="/workspace/./tools//")

    assert skills.sandbox_dir == "/workspace/tools"
    assert skills.sandbox_files[0].path.startswith("/workspace/tools/csv-report/")


@pytest.mark.parametrize("value", ["yes", 1, 0])
def test_sandbox_must_be_true_or_a_callable(value: Any) -> None:
    with pytest.raises(SkillDefinitionError, match="pass a callable such as sandbox=lambda"):
        define_skills(skills=generated, sandbox=value)


def test_sandbox_false_gives_the_read_only_tool() -> None:
    skills = define_skills(skills=generated, sandbox=False)  # type: ignore[arg-type]

    assert skills.sandbox is None
    assert skills.tool.capabilities == {}
    assert skills.sandbox_files == ()


def test_with_sandbox_set_the_tool_declares_the_sandbox_capability() -> None:
    for option in (True, lambda _: True):
        skills = define_skills(skills=generated, sandbox=option)

        assert [c.id for c in skills.tool.capabilities.values()] == ["sandbox"]


def test_available_must_be_callable() -> None:
    with pytest.raises(SkillDefinitionError, match="available must be a function"):
        define_skills(skills=generated, available="all")  # type: ignore[arg-type]


def test_skills_must_be_entries() -> None:
    with pytest.raises(SkillDefinitionError, match="must hold SkillEntry values"):
        define_skills(skills=[{"name": "x"}])  # type: ignore[list-item]


@pytest.mark.parametrize("path", [MARKER, "SKILL.md"])
def test_a_file_named_like_the_body_or_the_marker_is_refused(path: str) -> None:
    file = {"path": path, "data": {"type": "text", "text": "x"}}
    with pytest.raises(SkillDefinitionError, match="neither can be a file of the skill"):
        define_skills(skills=[entry("alpha", files=(file,))])


@pytest.mark.parametrize("path", ["../escape.sh", "/etc/passwd", "a/../../b", "a//b", "./a", ""])
def test_a_file_path_leaving_the_skill_folder_is_refused(path: str) -> None:
    file = {"path": path, "data": {"type": "text", "text": "x"}}
    with pytest.raises(SkillDefinitionError, match="file paths are relative to the skill folder"):
        define_skills(skills=[entry("alpha", files=(file,))])


# -- the catalog -----------------------------------------------------------------------------------


async def test_the_catalog_follows_the_plan() -> None:
    skills = define_skills(skills=generated, context_schema=Plan, available=enterprise_only)

    enterprise = await skills.offered(Plan("enterprise"))
    starter = await skills.offered(Plan("starter"))

    assert [s.name for s in enterprise] == ["matter-intake", "release-notes"]
    assert [s.name for s in starter] == ["release-notes"]


async def test_the_catalog_is_a_heading_a_guidance_line_and_one_line_per_skill() -> None:
    skills = define_skills(skills=[entry("alpha"), entry("beta")])

    catalog = await skills.instructions()

    assert catalog.splitlines() == [
        "## Skills",
        "",
        "Skills hold instructions for specific tasks. When a task matches a skill's description, "
        "load the skill with the skill tool before you start, and follow it.",
        "",
        "- alpha: The alpha skill.",
        "- beta: The beta skill.",
    ]


async def test_the_catalog_is_empty_when_no_skill_is_offered() -> None:
    skills = define_skills(skills=generated)  # only sandbox skills would be left out...
    nothing = define_skills(skills=generated, available=lambda _: False)

    assert await skills.instructions() != ""
    assert await nothing.instructions() == ""


async def test_sandbox_skills_are_offered_only_when_sandbox_is_or_resolves_true() -> None:
    always = define_skills(skills=generated, sandbox=True)
    never = define_skills(skills=generated, sandbox=lambda _: False)
    omitted = define_skills(skills=generated)

    assert [s.name for s in await always.offered(None)] == [e.name for e in generated]
    assert [s.name for s in await never.offered(None)] == ["matter-intake", "release-notes"]
    assert [s.name for s in await omitted.offered(None)] == ["matter-intake", "release-notes"]


async def test_an_async_sandbox_function_and_async_available_are_awaited() -> None:
    async def has_sandbox(input: SandboxInput[Plan]) -> bool:
        return input.runtime_context.plan == "enterprise"

    async def available(input: Any) -> bool:
        return input.skill.name != "release-notes"

    skills = define_skills(skills=generated, available=available, sandbox=has_sandbox)

    assert [s.name for s in await skills.offered(Plan("enterprise"))] == [
        "csv-report",
        "matter-intake",
        "pdf-forms",
    ]
    assert [s.name for s in await skills.offered(Plan("starter"))] == ["matter-intake"]


async def test_the_sandbox_function_runs_only_when_available_offers_a_sandbox_skill() -> None:
    calls: list[object] = []

    def has_sandbox(input: SandboxInput[Any]) -> bool:
        calls.append(input.runtime_context)
        return True

    plain_only = define_skills(
        skills=generated, available=lambda i: not i.skill.requires_sandbox, sandbox=has_sandbox
    )
    with_sandbox_skills = define_skills(skills=generated, sandbox=has_sandbox)

    await plain_only.instructions()
    assert calls == []
    await with_sandbox_skills.instructions()
    assert calls == [None]  # once per request, however many sandbox skills


async def test_a_predicate_returning_a_non_bool_is_an_error_naming_it() -> None:
    skills = define_skills(skills=generated, available=lambda _: "yes")  # type: ignore[arg-type,return-value]

    with pytest.raises(
        SkillDefinitionError, match="available \\(for skill 'csv-report'\\) must return a bool"
    ):
        await skills.instructions()


# -- sandbox_files ---------------------------------------------------------------------------------


def test_sandbox_files_list_each_copied_file_then_the_marker_with_scripts_executable() -> None:
    skills = define_skills(skills=generated, sandbox=True)

    files = [(f.path, f.executable) for f in skills.sandbox_files]

    assert files == [
        ("/workspace/.skills/csv-report/data/sample.csv", False),
        ("/workspace/.skills/csv-report/scripts/count.sh", True),
        ("/workspace/.skills/csv-report/.pai-skill", False),
        ("/workspace/.skills/pdf-forms/assets/stamp.png", False),
        ("/workspace/.skills/pdf-forms/references/forms.md", False),
        ("/workspace/.skills/pdf-forms/references/nested/checkboxes.md", False),
        ("/workspace/.skills/pdf-forms/scripts/fill.sh", True),
        ("/workspace/.skills/pdf-forms/.pai-skill", False),
    ]
    assert skills.sandbox_files[3].content[:4] == b"\x89PNG"
    assert skills.sandbox_files[1].content == CSV.files[1]["data"]["text"].encode()  # type: ignore[typeddict-item]


def test_sandbox_files_cover_every_copying_skill_whatever_available_says() -> None:
    skills = define_skills(skills=generated, sandbox=lambda _: False, available=lambda _: False)

    assert {f.path.split("/")[3] for f in skills.sandbox_files} == {"csv-report", "pdf-forms"}


def test_sandbox_files_are_empty_without_sandbox() -> None:
    assert define_skills(skills=generated).sandbox_files == ()


def test_a_sandbox_skill_without_scripts_or_binary_files_copies_nothing() -> None:
    docs = entry(
        "docs",
        requires_sandbox=True,
        files=({"path": "notes.md", "data": {"type": "text", "text": "notes"}},),
    )
    skills = define_skills(skills=[docs], sandbox=True)

    assert skills.sandbox_files == ()


def test_the_marker_records_the_version_and_changes_with_the_content() -> None:
    before = define_skills(skills=[CSV], sandbox=True).sandbox_files[-1]
    edited = SkillEntry(
        name=CSV.name,
        description=CSV.description,
        body=CSV.body,
        files=(
            CSV.files[0],
            {"path": "scripts/count.sh", "data": {"type": "text", "text": "echo\n"}},
        ),
        requires_sandbox=True,
    )
    after = define_skills(skills=[edited], sandbox=True).sandbox_files[-1]
    body_only = SkillEntry(
        name=CSV.name,
        description="new words",
        body="new body",
        files=CSV.files,
        requires_sandbox=True,
    )
    same = define_skills(skills=[body_only], sandbox=True).sandbox_files[-1]

    assert before.path == after.path == "/workspace/.skills/csv-report/.pai-skill"
    assert isinstance(before.content, bytes)
    assert before.content.startswith(b"pai-skill csv-report ")
    assert before.content != after.content
    assert same.content == before.content  # only the copied files make the version


def test_the_seed_refuses_sandbox_files_outside_workspace_naming_the_path() -> None:
    skills = define_skills(skills=generated, sandbox=True, sandbox_dir="/opt/skills")
    reserved = define_skills(skills=generated, sandbox=True, sandbox_dir="/workspace/.pai/skills")
    from pai.sandbox_inmemory import create_in_memory_sandbox_provider

    provider = create_in_memory_sandbox_provider()

    with pytest.raises(
        SeedPathError, match=re.escape("'/opt/skills/csv-report/data/sample.csv' is outside")
    ):
        sandbox_capability(provider=provider, seed=skills.sandbox_files)
    with pytest.raises(
        SeedPathError, match=re.escape("'/workspace/.pai/skills/csv-report/data/sample.csv'")
    ):
        sandbox_capability(provider=provider, seed=reserved.sandbox_files)
    assert all(isinstance(f, SeedFile) for f in skills.sandbox_files)
