"""context_schema takes what a type checker takes as a type (pyright's view is in
typing/check_skills.py); the runtime context reaches available, the catalog and the tool as the
agent computed it, None included."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, NewType, Optional, TypedDict, Union

import pytest
from skills_golden.generated import skills as generated

from pai.core import RuntimeContextInput, define_agent
from pai.core.testing import ScriptedModel, create_test_runtime, text
from pai.skills import SkillAvailableInput, SkillDefinitionError, define_skills

pytestmark = pytest.mark.anyio

PLAIN = tuple(entry for entry in generated if not entry.requires_sandbox)


@dataclass(frozen=True)
class Plan:
    plan: str


class PlanDict(TypedDict):
    plan: str


class PartialPlan(TypedDict, total=False):
    plan: str


class Account(TypedDict):
    owner: str
    plan: PlanDict


Identity = NewType("Identity", str)


@pytest.mark.parametrize(
    "schema",
    [
        Plan,
        PlanDict,
        PartialPlan,
        Account,
        dict[str, Any],
        Plan | None,
        Optional[Plan],  # noqa: UP045 (the spelling under test)
        Union[Plan, PlanDict],  # noqa: UP007 (the spelling under test)
        Plan | PlanDict | None,
        list[Account] | None,
        Literal["enterprise", "starter"],
        Identity,
        Any,
        "Plan",
        None,
    ],
    ids=repr,
)
def test_every_type_form_is_accepted(schema: Any) -> None:
    skills = define_skills(skills=PLAIN, context_schema=schema)

    assert [entry.name for entry in skills.skills] == ["matter-intake", "release-notes"]


@pytest.mark.parametrize("value", [Plan("enterprise"), 42, {"plan": "x"}, [Plan]], ids=repr)
def test_a_value_that_is_no_type_is_refused_naming_it(value: Any) -> None:
    with pytest.raises(SkillDefinitionError) as caught:
        define_skills(skills=PLAIN, context_schema=value)

    assert str(caught.value).startswith(f"context_schema must be a type, got {value!r} (a ")
    assert "pass the type itself" in str(caught.value)
    assert "Plan | None or dict[str, Any]" in str(caught.value)


def enterprise_only(
    input: SkillAvailableInput[Plan | PlanDict | dict[str, Any] | None, str],
) -> bool:
    """matter-intake for enterprise contexts, as a dataclass, a TypedDict or a plain dict; a
    request without a context gets the other skills."""
    context = input.runtime_context
    if input.skill.name != "matter-intake":
        return True
    if context is None:
        return False
    plan = context.plan if isinstance(context, Plan) else context.get("plan")
    return plan == "enterprise"


async def catalog_for(schema: Any, context: Any, *, with_context: bool = True) -> str:
    """The instructions the model gets when the agent computes ``context``, or computes none."""
    skills = define_skills(skills=PLAIN, context_schema=schema, available=enterprise_only)
    model = ScriptedModel([text("ok")])

    def runtime_context(_: RuntimeContextInput) -> Any:
        return context

    agent = define_agent(
        name="clerk",
        model=model,
        runtime_context=runtime_context if with_context else None,
        instructions=skills.instructions,
        tools={**skills.tools},
    )
    async with create_test_runtime(agent=agent) as runtime:
        thread = await runtime.admin(identity="u").create_thread()
        await thread.send("help")
    return model.requests[0].instructions


@pytest.mark.parametrize(
    ("schema", "context"),
    [
        (Plan | None, Plan("enterprise")),
        (PlanDict, PlanDict(plan="enterprise")),
        (PartialPlan, PartialPlan(plan="enterprise")),
        (dict[str, Any], {"plan": "enterprise", "seats": 40}),
        (Optional[Plan | PlanDict], {"plan": "enterprise"}),  # noqa: UP045
    ],
    ids=["union-none", "typeddict", "typeddict-partial", "dict", "optional-union"],
)
async def test_the_context_reaches_available_through_a_real_runtime(
    schema: Any, context: Any
) -> None:
    catalog = await catalog_for(schema, context)

    assert "- matter-intake: " in catalog
    assert "- release-notes: " in catalog


async def test_a_partial_typeddict_without_the_key_is_not_enterprise() -> None:
    catalog = await catalog_for(PartialPlan, PartialPlan())

    assert "matter-intake" not in catalog
    assert "- release-notes: " in catalog


async def test_an_agent_without_runtime_context_gives_none_to_the_functions() -> None:
    catalog = await catalog_for(Plan | None, None, with_context=False)

    assert "matter-intake" not in catalog
    assert "- release-notes: " in catalog


async def test_instructions_treat_an_input_without_runtime_context_as_none() -> None:
    seen: list[object] = []

    def record(input: SkillAvailableInput[Plan | None, str]) -> bool:
        seen.append(input.runtime_context)
        return True

    skills = define_skills(skills=PLAIN, context_schema=Plan | None, available=record)

    class NoContext:
        thread_id = "t"

    catalog = await skills.instructions(NoContext())  # type: ignore[arg-type]

    assert seen == [None, None]
    assert "- matter-intake: " in catalog
