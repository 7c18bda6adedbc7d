"""Typing test, checked by pyright (strict) in `nox -s typecheck`; pytest does not collect it.

Each `assert_type` proves what pyright infers. Each `# pyright: ignore[rule]` marks a wrong use
that pyright must report: the project sets `reportUnnecessaryTypeIgnoreComment`, so if pyright ever
stopped reporting one of those errors, the now-unneeded ignore would fail the check.
"""

from __future__ import annotations

from typing import Protocol, assert_type

from pydantic import BaseModel

from pai.core import (
    AcquireInput,
    Capability,
    CapabilityBinding,
    CommandContext,
    InstructionsInput,
    RuntimeContextInput,
    Tool,
    ToolContext,
    ToolEnabledInput,
    ToolEntry,
    create_capability_binding,
    define_agent,
    define_capability,
    define_command,
    define_tool,
)


class Sandbox(Protocol):
    async def run_command(self, command: str) -> str: ...


class Vault(Protocol):
    def secret(self, name: str) -> str: ...


sandbox = define_capability(Sandbox, id="sandbox")
vault = define_capability(Vault, id="acme.vault")
assert_type(sandbox, Capability[Sandbox])
assert_type(vault, Capability[Vault])


class RunInput(BaseModel):
    command: str


async def execute(ctx: ToolContext[RunInput]) -> str:
    box = ctx.capabilities[sandbox]
    assert_type(box, Sandbox)
    assert_type(ctx.input, RunInput)
    assert_type(ctx.input.command, str)
    assert_type(await box.run_command(ctx.input.command), str)

    # Wrong uses pyright must report:
    ctx.capabilities[vault].run_command("ls")  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]
    wrong: int = ctx.capabilities[sandbox]  # pyright: ignore[reportAssignmentType]
    ctx.capabilities["sandbox"]  # pyright: ignore[reportArgumentType]
    ctx.input.no_such_field  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]
    del wrong
    return await box.run_command(ctx.input.command)


run_script = define_tool(
    id="runScript",
    description="Run a command in the sandbox.",
    input_schema=RunInput,
    capabilities={"sandbox": sandbox},
    execute=execute,
)
assert_type(run_script, Tool[RunInput, str])


class FakeSandbox:
    async def run_command(self, command: str) -> str:
        return command


def acquire_sandbox(input: AcquireInput) -> FakeSandbox:
    return FakeSandbox()


binding = create_capability_binding(capability=sandbox, acquire=acquire_sandbox)
assert_type(binding, CapabilityBinding[Sandbox])


def acquire_int(input: AcquireInput) -> int:
    return 1


# A binding factory declares what it returns (as capability packages do); an acquire returning
# the wrong facade type is then reported:
def broken_binding() -> CapabilityBinding[Sandbox]:
    return create_capability_binding(capability=sandbox, acquire=acquire_int)  # pyright: ignore[reportReturnType]


# Bindings are covariant in their facade, so a binding record accepts every binding:
record: dict[str, CapabilityBinding[object]] = {"sandbox": binding}


# -- runtime context and tool entries -----------------------------------------------------------


class Plan(BaseModel):
    tier: str


def plan_of(run: RuntimeContextInput) -> Plan:
    return Plan(tier="gold")


async def plan_tool(ctx: ToolContext[RunInput, Plan]) -> str:
    assert_type(ctx.runtime_context, Plan)
    assert_type(ctx.runtime_context.tier, str)
    ctx.runtime_context.no_such_field  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]
    return ctx.runtime_context.tier


def untyped_tool(ctx: ToolContext[RunInput]) -> str:
    # Without a context type argument the runtime context is Any: no error, no help.
    return str(ctx.runtime_context)


def plan_command(ctx: CommandContext[RunInput, Plan]) -> str:
    assert_type(ctx.runtime_context, Plan)
    return ctx.runtime_context.tier


def gold_only(check: ToolEnabledInput[Plan]) -> bool:
    assert_type(check.runtime_context, Plan)
    assert_type(check.step, int)
    return check.runtime_context.tier == "gold"


def instructions(run: InstructionsInput[Plan]) -> str:
    assert_type(run.runtime_context, Plan)
    return f"You serve a {run.runtime_context.tier} customer."


tiered = define_tool(id="tiered", description="t", input_schema=RunInput, execute=plan_tool)
entry = ToolEntry(tool=tiered, enabled=gold_only)
assert_type(entry, ToolEntry[Plan])
agent = define_agent(
    name="clerk",
    runtime_context=plan_of,
    instructions=instructions,
    tools={"tiered": entry, "runScript": run_script},
    commands={"plan": define_command(input=RunInput, run=plan_command)},
)
ToolEntry(tool=tiered, enabled=lambda check: "yes")  # pyright: ignore[reportArgumentType]
ToolEntry(tool="tiered")  # pyright: ignore[reportArgumentType]
