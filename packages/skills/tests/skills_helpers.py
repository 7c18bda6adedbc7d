"""Helpers for the pai-skills tests: a provider wrapper that counts what reaches the backend."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from pydantic import BaseModel

from pai.core import Message, RuntimeContextInput, ToolContext, ToolResultMessage, define_tool
from pai.sandbox import sandbox
from pai.sandbox.testing import RecordingProvider
from pai.skills import SkillAvailableInput


class CountingProvider(RecordingProvider):
    """Wraps a real provider and records its calls; ``writes`` holds the paths of each
    ``write_files`` round trip and ``created`` the keys of each instance created."""

    @property
    def writes(self) -> list[list[str]]:
        return [[file.path for file in call.arguments[0]] for call in self.calls_to("write_files")]

    @property
    def created(self) -> list[str]:
        return [cast("str", call.key) for call in self.calls_to("create")]


@dataclass(frozen=True)
class Plan:
    """The runtime context of the seed's example: the customer's plan."""

    plan: Literal["enterprise", "starter"]


def plan_of(run: RuntimeContextInput) -> Plan:
    """The example's runtime_context: the identity names the plan."""
    return Plan(plan="enterprise" if run.identity == "enterprise" else "starter")


def enterprise_only(input: SkillAvailableInput[Plan, str]) -> bool:
    """The seed's rule: matter-intake is enterprise-only; every other skill is on every plan."""
    return input.skill.name != "matter-intake" or input.runtime_context.plan == "enterprise"


def tool_results(messages: Sequence[Message]) -> list[ToolResultMessage]:
    return [m for m in messages if isinstance(m, ToolResultMessage)]


class RunInput(BaseModel):
    command: str


run_tool_in_sandbox = define_tool(
    id="run",
    description="Run a shell command in the sandbox.",
    input_schema=RunInput,
    capabilities={"sandbox": sandbox},
    execute=lambda ctx: ctx.capabilities[sandbox].run_command(ctx.input.command, timeout=60),
)
"""A tool running a command in the sandbox, the way an agent runs a skill's script."""


class ReadInput(BaseModel):
    path: str


async def _read_base64(ctx: ToolContext[ReadInput, Any]) -> str:
    return base64.b64encode(await ctx.capabilities[sandbox].read_file(ctx.input.path)).decode()


read_tool_in_sandbox = define_tool(
    id="read",
    description="Read a file of the sandbox, as base64.",
    input_schema=ReadInput,
    capabilities={"sandbox": sandbox},
    execute=_read_base64,
)
