"""The skill tool through a real runtime with a scripted model: the catalog per request, what the
tool answers and the text the model reads, and what the thread keeps."""

from __future__ import annotations

from typing import Any

import pytest
from skills_golden.generated import skills as generated
from skills_helpers import Plan, enterprise_only, plan_of, tool_results

from pai.core import InMemoryStorage, ModelRequest, define_agent
from pai.core.testing import (
    FunctionModel,
    ScriptedModel,
    create_test_runtime,
    run_tool,
    text,
    tool_call,
)
from pai.skills import (
    TOOL_ID,
    SkillEntry,
    SkillFile,
    SkillToolNotFound,
    SkillToolOk,
    SkillToolUnavailable,
    define_skills,
)

pytestmark = pytest.mark.anyio

PLAIN = tuple(entry for entry in generated if not entry.requires_sandbox)


def clerk(skills: Any, model: Any) -> Any:
    return define_agent(
        name="clerk",
        model=model,
        runtime_context=plan_of,
        instructions=skills.instructions,
        tools={**skills.tools},
    )


async def run(skills: Any, *script: Any, identity: str = "enterprise") -> tuple[Any, Any]:
    """Send one message to a fresh thread; the scripted model and the run's result."""
    model = ScriptedModel(script)
    async with create_test_runtime(agent=clerk(skills, model)) as runtime:
        thread = await runtime.admin(identity=identity).create_thread()
        result = await thread.send("help me")
    return model, result


def seed_example() -> Any:
    return define_skills(skills=generated, context_schema=Plan, available=enterprise_only)


# -- the catalog ---------------------------------------------------------------------------------


async def test_the_catalog_offers_matter_intake_on_the_enterprise_plan_only() -> None:
    skills = seed_example()

    enterprise, _ = await run(skills, text("ok"), identity="enterprise")
    starter, _ = await run(skills, text("ok"), identity="starter")

    assert enterprise.requests[0].instructions == (
        "## Skills\n\n"
        "Skills hold instructions for specific tasks. When a task matches a skill's description, "
        "load the skill with the skill tool before you start, and follow it.\n\n"
        "- matter-intake: Open a new legal matter from an intake call. Use when a client "
        "describes a new case.\n"
        "- release-notes: Write release notes — grouped by area, in the team's voice: déjà-vu "
        "free, 日本語 too."
    )
    assert "matter-intake" not in starter.requests[0].instructions
    assert "- release-notes: " in starter.requests[0].instructions


async def test_the_catalog_is_empty_and_the_tool_not_offered_when_no_skill_is() -> None:
    skills = define_skills(skills=PLAIN, available=lambda _: False)

    model, _ = await run(skills, text("ok"))

    assert model.requests[0].instructions == ""
    assert [spec.name for spec in model.requests[0].tools] == []


async def test_the_skill_tool_is_named_skill_and_has_the_id_pai_skills_skill() -> None:
    skills = define_skills(skills=PLAIN)

    model, _ = await run(skills, text("ok"))

    assert [spec.name for spec in model.requests[0].tools] == ["skill"]
    assert skills.tool.id == TOOL_ID == "pai.skills.skill"
    assert skills.tool.capabilities == {}


async def test_instructions_without_an_input_use_no_runtime_context() -> None:
    skills = define_skills(skills=PLAIN)

    catalog = await skills.instructions()

    assert catalog.startswith("## Skills\n\n")
    assert catalog.endswith("- release-notes: " + PLAIN[1].description)


async def test_available_runs_for_the_catalog_each_model_step_and_inside_the_tool() -> None:
    offered = {"on": True}
    asked: list[str] = []

    def available(input: Any) -> bool:
        asked.append(input.skill.name)
        return offered["on"]

    skills = define_skills(skills=PLAIN[:1], available=available)

    def answer(request: ModelRequest) -> Any:
        if request.step == 1:
            offered["on"] = False  # withdrawn after the step offered the tool
            return tool_call("skill", {"name": "matter-intake"})
        return text("done")

    model = FunctionModel(answer)
    async with create_test_runtime(agent=clerk(skills, model)) as runtime:
        thread = await runtime.admin(identity="enterprise").create_thread()
        result = await thread.send("help")

    [saved] = tool_results(result.messages)
    assert saved.content == "No skill named 'matter-intake' is available. Available skills: none."
    assert [spec.name for spec in model.requests[1].tools] == []
    # catalog, step 1, the tool (twice: the skill, then the offered list), step 2
    assert len(asked) == 5


# -- loading ----------------------------------------------------------------------------------------


async def test_loading_a_skill_gives_its_body_without_frontmatter_in_skill_content_with_its_files() -> (
    None
):
    skills = seed_example()

    _, result = await run(skills, tool_call("skill", {"name": "matter-intake"}), text("done"))

    [saved] = tool_results(result.messages)
    assert saved.content == (
        '<skill_content name="matter-intake">\n'
        "# Matter intake\n\n"
        "Ask for the parties, the deadline and the conflict check before anything else.\n"
        "See `references/checklist.md`.\n\n"
        "Files of this skill (read one with the skill tool, name 'matter-intake' and its path):\n"
        "- references/checklist.md\n"
        "</skill_content>"
    )
    assert "---" not in saved.content
    assert saved.output == {
        "status": "ok",
        "name": "matter-intake",
        "path": "SKILL.md",
        "text": next(e for e in generated if e.name == "matter-intake").body,
        "files": ["references/checklist.md"],
        "binary": None,
        "sandbox_path": None,
        "environment_reset": None,
    }


async def test_a_body_keeps_its_horizontal_rules() -> None:
    entry = next(e for e in generated if e.name == "pdf-forms")

    assert entry.body.count("\n---\n") == 2
    assert entry.body.startswith("# Filling PDF forms\n")


async def test_loading_a_file_gives_it_in_skill_file() -> None:
    skills = seed_example()

    _, result = await run(
        skills,
        tool_call("skill", {"name": "release-notes", "path": "style.md"}),
        text("done"),
    )

    [saved] = tool_results(result.messages)
    assert saved.content == (
        '<skill_file name="release-notes" path="style.md">\n'
        "# Style guide\n\nWrite “curly quotes” and em dashes — never two hyphens.\n"
        "</skill_file>"
    )


async def test_a_leading_dot_slash_is_ignored_and_paths_otherwise_match_exactly() -> None:
    skills = seed_example()

    _, result = await run(
        skills,
        tool_call("skill", {"name": "matter-intake", "path": "./references/checklist.md"}),
        tool_call("skill", {"name": "matter-intake", "path": "references/Checklist.md"}),
        tool_call("skill", {"name": "matter-intake", "path": "./SKILL.md"}),
        text("done"),
    )

    found, missing, skill_md = tool_results(result.messages)
    assert found.content.startswith(
        '<skill_file name="matter-intake" path="references/checklist.md">'
    )
    assert missing.content == (
        "The skill 'matter-intake' has no file 'references/Checklist.md'. Its files: SKILL.md, "
        "references/checklist.md. Did you mean 'references/checklist.md'?"
    )
    assert skill_md.content.startswith('<skill_content name="matter-intake">')


async def test_paths_leaving_or_rewriting_the_folder_match_no_file() -> None:
    skills = seed_example()
    suggested = {
        "../SKILL.md": " Did you mean 'SKILL.md'?",
        "references/../SKILL.md": " Did you mean 'SKILL.md'?",
        "/SKILL.md": " Did you mean 'SKILL.md'?",
        "references//checklist.md": " Did you mean 'references/checklist.md'?",
        "": "",
    }

    _, result = await run(
        skills,
        *(tool_call("skill", {"name": "matter-intake", "path": path}) for path in suggested),
        text("done"),
    )

    for (path, hint), saved in zip(suggested.items(), tool_results(result.messages), strict=True):
        assert isinstance(saved.output, dict)
        assert saved.output["status"] == "not_found"
        assert saved.content == (
            f"The skill 'matter-intake' has no file {path!r}. Its files: SKILL.md, "
            f"references/checklist.md.{hint}"
        )


async def test_a_misspelled_skill_name_gets_a_did_you_mean() -> None:
    skills = seed_example()

    _, result = await run(
        skills,
        tool_call("skill", {"name": "Matter-Intake"}),
        tool_call("skill", {"name": "release_notes"}),
        text("done"),
    )

    upper, underscore = tool_results(result.messages)
    assert upper.content.endswith(
        "Available skills: matter-intake, release-notes. Did you mean 'matter-intake'?"
    )
    assert underscore.content.endswith("Did you mean 'release-notes'?")


async def test_an_available_function_that_raises_fails_the_call_with_its_error() -> None:
    def broken(input: Any) -> bool:
        raise LookupError("plan service down")

    skills = define_skills(skills=PLAIN, available=broken)

    ran = await run_tool(skills.tool, input={"name": "release-notes"})

    assert ran.output is None
    assert ran.result.is_error
    assert ran.result.content.endswith("LookupError: plan service down")


async def test_a_sandbox_function_that_raises_fails_the_call_with_its_error() -> None:
    def broken(input: Any) -> bool:
        raise LookupError("no sandbox info")

    skills = define_skills(skills=generated, sandbox=broken)

    ran = await run_tool(
        skills.tool, input={"name": "csv-report"}, capabilities={"sandbox": object()}
    )

    assert ran.result.is_error
    assert ran.result.content.endswith("LookupError: no sandbox info")


async def test_a_skill_not_offered_cannot_be_read_by_name() -> None:
    skills = seed_example()

    _, result = await run(
        skills,
        tool_call("skill", {"name": "matter-intake"}),
        tool_call("skill", {"name": "matter-intake", "path": "references/checklist.md"}),
        text("done"),
        identity="starter",
    )

    for saved in tool_results(result.messages):
        assert saved.content == (
            "No skill named 'matter-intake' is available. Available skills: release-notes."
        )
        assert "Intake checklist" not in saved.content


async def test_an_unknown_skill_is_not_found_with_the_offered_names() -> None:
    skills = seed_example()

    _, result = await run(skills, tool_call("skill", {"name": "pdf"}), text("done"))

    [saved] = tool_results(result.messages)
    assert saved.content == (
        "No skill named 'pdf' is available. Available skills: matter-intake, release-notes."
    )


async def test_a_sandbox_skill_is_never_offered_when_sandbox_is_omitted() -> None:
    skills = define_skills(skills=generated)

    model, result = await run(skills, tool_call("skill", {"name": "csv-report"}), text("done"))

    assert "csv-report" not in model.requests[0].instructions
    assert "pdf-forms" not in model.requests[0].instructions
    [saved] = tool_results(result.messages)
    assert saved.content == (
        "The skill 'csv-report' needs a sandbox, and this conversation has none, so it cannot be "
        "used here."
    )
    assert skills.sandbox_files == ()


async def test_the_tool_output_is_the_structured_skill_tool_output() -> None:
    skills = define_skills(skills=generated, available=lambda i: i.skill.name != "pdf-forms")
    from pai.core.testing import run_tool

    ok = await run_tool(skills.tool, input={"name": "release-notes"})
    missing = await run_tool(skills.tool, input={"name": "pdf-forms"})
    unavailable = await run_tool(skills.tool, input={"name": "csv-report"})

    assert ok.expect_output() == SkillToolOk(
        name="release-notes",
        path="SKILL.md",
        text=PLAIN[1].body,
        files=("style.md",),
    )
    assert missing.expect_output() == SkillToolNotFound(
        name="pdf-forms", available=("matter-intake", "release-notes")
    )
    assert unavailable.expect_output() == SkillToolUnavailable(name="csv-report")


async def test_a_binary_file_has_binary_true_and_empty_text_and_is_not_sent_to_a_sandbox() -> None:
    logo: SkillFile = {"path": "logo.png", "data": {"type": "data", "data": "iVBORw0KGgo="}}
    entry = SkillEntry(
        name="brand", description="Brand rules.", body="Use the logo.\n", files=(logo,)
    )
    skills = define_skills(skills=[entry])

    _, result = await run(
        skills, tool_call("skill", {"name": "brand", "path": "logo.png"}), text("done")
    )

    [saved] = tool_results(result.messages)
    assert isinstance(saved.output, dict)
    assert saved.output["binary"] is True
    assert saved.content == (
        '<skill_file name="brand" path="logo.png" binary="true">\n'
        "This is a binary file, which cannot be shown as text.\n"
        "</skill_file>"
    )
    from pai.core.testing import run_tool

    direct = (
        await run_tool(skills.tool, input={"name": "brand", "path": "logo.png"})
    ).expect_output()
    assert direct == SkillToolOk(name="brand", path="logo.png", text="", binary=True)


async def test_results_are_saved_in_the_thread_and_replay_reads_the_saved_text() -> None:
    storage = InMemoryStorage()
    first = ScriptedModel([tool_call("skill", {"name": "release-notes"}), text("loaded")])
    async with create_test_runtime(
        agent=clerk(define_skills(skills=PLAIN), first), storage=storage
    ) as runtime:
        thread = await runtime.admin(identity="enterprise").create_thread(thread_id="t")
        await thread.send("write the notes")
    # The skill changes afterwards; the thread keeps what the model read.
    changed = [
        SkillEntry(name=e.name, description=e.description, body="REWRITTEN\n", files=e.files)
        for e in PLAIN
    ]
    second = ScriptedModel([text("again")])
    async with create_test_runtime(
        agent=clerk(define_skills(skills=changed), second), storage=storage
    ) as runtime:
        thread = runtime.admin(identity="enterprise").thread("t")
        await thread.send("and again")

    [saved] = tool_results(second.requests[0].messages)
    assert saved.content.startswith('<skill_content name="release-notes">\n# Release notes ✍️')
    assert "REWRITTEN" not in saved.content
