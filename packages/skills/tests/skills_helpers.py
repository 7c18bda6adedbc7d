"""Helpers for the pai-skills tests: a provider wrapper that counts what reaches the backend."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from pai.core import Message, RuntimeContextInput, ToolContext, ToolResultMessage, define_tool
from pai.sandbox import FileWrite, SandboxInstance, SandboxProvider, sandbox
from pai.skills import SkillAvailableInput


class CountingInstance:
    """A provider's instance that records every batch write (one list of paths per round trip)."""

    def __init__(self, inner: SandboxInstance, writes: list[list[str]]) -> None:
        self._inner = inner
        self._writes = writes

    @property
    def key(self) -> str:
        return self._inner.key

    @property
    def instance_id(self) -> str:
        return self._inner.instance_id

    async def write_files(self, files: Sequence[FileWrite]) -> None:
        self._writes.append([file.path for file in files])
        await self._inner.write_files(files)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class CountingProvider:
    """Wraps a real provider; ``writes`` holds the paths of each ``write_files`` round trip and
    ``created`` the keys of each instance created."""

    def __init__(self, inner: SandboxProvider) -> None:
        self.inner = inner
        self.writes: list[list[str]] = []
        self.created: list[str] = []

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def features(self) -> Any:
        return self.inner.features

    async def create(self, key: str) -> CountingInstance:
        self.created.append(key)
        return CountingInstance(await self.inner.create(key), self.writes)

    async def find(self, key: str) -> CountingInstance | None:
        found = await self.inner.find(key)
        return None if found is None else CountingInstance(found, self.writes)

    async def destroy(self, key: str) -> None:
        await self.inner.destroy(key)

    async def list_instances(self) -> Any:
        return await self.inner.list_instances()

    async def aclose(self) -> None:
        await self.inner.aclose()


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
