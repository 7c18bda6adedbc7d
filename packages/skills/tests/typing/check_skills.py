"""Typing test, checked by pyright (strict) from test_typing.py; pytest does not collect it.

Each `assert_type` proves what pyright infers. Each `# pyright: ignore[rule]` marks a wrong use
that pyright must report: with `reportUnnecessaryTypeIgnoreComment`, if pyright ever stopped
reporting one of those errors, the now-unneeded ignore would fail the check.
"""

# pyright: strict, reportUnnecessaryTypeIgnoreComment=true

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Optional, TypedDict, Union, assert_type

from skills_golden.generated import SkillName, skills

from pai.core import InstructionsInput, ToolEntry, define_agent
from pai.skills import (
    SandboxInput,
    SkillAvailableInput,
    SkillEntry,
    Skills,
    SkillToolOutput,
    define_skills,
)


@dataclass(frozen=True)
class Plan:
    plan: Literal["enterprise", "starter"]


def enterprise_only(input: SkillAvailableInput[Plan, SkillName]) -> bool:
    # The generated SkillName narrows: comparing with a name that is not a skill is an error.
    if input.skill.name == "matter-intake":
        return input.runtime_context.plan == "enterprise"
    return True


typed = define_skills(skills=skills, context_schema=Plan, available=enterprise_only)
assert_type(typed, Skills[SkillName, Plan])
assert_type(typed.skills[0].name, SkillName)
assert_type(typed.tools["skill"], ToolEntry[Any])

# A lambda's input is typed by context_schema.
inferred = define_skills(
    skills=skills,
    context_schema=Plan,
    available=lambda input: (
        input.skill.name != "matter-intake" or input.runtime_context.plan == "enterprise"
    ),
)
assert_type(inferred, Skills[SkillName, Plan])

# A name that is no skill's is not a SkillName.
wrong: SkillName = "no-such-skill"  # pyright: ignore[reportAssignmentType]


def names(entry: SkillEntry[SkillName]) -> SkillName:
    return entry.name


# sandbox takes True or a function; a bool variable is a type error (pass a callable).
flag: bool = bool(len(skills))
define_skills(skills=skills, sandbox=True)
define_skills(skills=skills, sandbox=lambda input: flag)
define_skills(skills=skills, sandbox=flag)  # pyright: ignore[reportArgumentType]


def has_sandbox(input: SandboxInput[Plan]) -> bool:
    return input.runtime_context.plan == "enterprise"


define_skills(skills=skills, context_schema=Plan, sandbox=has_sandbox)


# context_schema takes any type: unions, Optional, dict[str, Any], TypedDicts (total or not).
class PlanDict(TypedDict):
    plan: Literal["enterprise", "starter"]


class PartialPlan(TypedDict, total=False):
    plan: Literal["enterprise", "starter"]


class Account(TypedDict):
    owner: str
    plan: PlanDict


assert_type(
    define_skills(skills=skills, context_schema=Plan | None), Skills[SkillName, Plan | None]
)
assert_type(
    define_skills(skills=skills, context_schema=Optional[Plan]),  # noqa: UP045
    Skills[SkillName, Plan | None],
)
assert_type(
    define_skills(skills=skills, context_schema=Union[Plan, PlanDict]),  # noqa: UP007
    Skills[SkillName, Plan | PlanDict],
)
assert_type(
    define_skills(skills=skills, context_schema=dict[str, Any]), Skills[SkillName, dict[str, Any]]
)
assert_type(
    define_skills(skills=skills, context_schema=PartialPlan), Skills[SkillName, PartialPlan]
)


def account_plan(input: SkillAvailableInput[Account | None, SkillName]) -> bool:
    context = input.runtime_context
    return context is not None and context["plan"]["plan"] == "enterprise"


accounts = define_skills(skills=skills, context_schema=Account | None, available=account_plan)
assert_type(accounts, Skills[SkillName, Account | None])
define_skills(
    skills=skills,
    context_schema=PartialPlan | None,
    available=lambda input: (
        input.runtime_context is not None and input.runtime_context.get("plan") == "enterprise"
    ),
)
# A value is not a type.
define_skills(skills=skills, context_schema=Plan("starter"))  # pyright: ignore[reportArgumentType]

# Merging generated modules keeps each module's names.
extra: tuple[SkillEntry[Literal["extra"]], ...] = (
    SkillEntry(name="extra", description="An extra skill.", body="Do the extra thing.\n"),
)
merged = define_skills(skills=(*skills, *extra))
assert_type(merged, Skills[SkillName | Literal["extra"], Any])


# The catalog takes the agent's instructions input; the tools spread into define_agent.
async def instructions(input: InstructionsInput[Plan]) -> str:
    return await typed.instructions(input)


agent = define_agent(name="clerk", instructions=instructions, tools={**typed.tools})
agent_direct = define_agent(name="clerk", instructions=typed.instructions, tools=typed.tools)


def status(output: SkillToolOutput) -> str:
    if output.status == "ok":
        return output.text
    if output.status == "not_found":
        return ", ".join(output.available)
    assert_type(output.status, Literal["unavailable"])
    return output.name
