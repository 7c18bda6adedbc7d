"""The sandbox capability end to end: tools, agents and the runtime over the in-memory provider."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from pai.core import ToolContext, define_agent, define_tool
from pai.core.testing import ScriptedModel, create_test_runtime, run_tool, text, tool_call
from pai.sandbox import (
    CommandResult,
    SeedFile,
    create_sandbox,
    create_sandbox_session_manager,
    sandbox,
    sandbox_capability,
)
from pai.sandbox_inmemory import InMemorySandboxProvider


class RunScriptInput(BaseModel):
    command: str


async def run_script_execute(ctx: ToolContext[RunScriptInput]) -> CommandResult:
    return await ctx.capabilities.sandbox.run_command(ctx.input.command)


run_script = define_tool(
    id="runScript",
    description="Run a command in this conversation's sandbox.",
    input_schema=RunScriptInput,
    capabilities={"sandbox": sandbox},
    execute=run_script_execute,
)


pytestmark = pytest.mark.anyio


async def test_seed_001_tool_test_runs_with_a_facade_from_a_session_manager(
    provider: InMemorySandboxProvider,
) -> None:
    sessions = create_sandbox_session_manager(provider=provider)

    tool = await run_tool(
        run_script,
        input={"command": "echo hi"},
        capabilities={"sandbox": create_sandbox(sessions.handle("t"))},
    )

    assert tool.expect_output().stdout == "hi\n"


async def test_two_threads_get_two_sandboxes_under_thread_scope(
    provider: InMemorySandboxProvider,
) -> None:
    model = ScriptedModel(
        [
            tool_call("runScript", {"command": "echo one > mine.txt"}),
            text("wrote"),
            tool_call("runScript", {"command": "ls"}),
            text("listed"),
        ]
    )
    agent = define_agent(name="coder", model=model, tools={"runScript": run_script})
    async with create_test_runtime(
        agent=agent, capabilities={"sandbox": sandbox_capability(provider=provider)}
    ) as runtime:
        admin = runtime.admin(identity=None)
        first, second = await admin.create_thread(), await admin.create_thread()
        await first.send("write a file")
        result = await second.send("list files")

        listing = result.messages[2]
        assert listing.role == "tool"
        assert "mine.txt" not in listing.content  # the second thread has its own sandbox
        keys = {info.key for info in await provider.list_instances()}
        assert len(keys) == 2


async def test_a_subagent_shares_its_roots_sandbox_under_root_thread_scope(
    provider: InMemorySandboxProvider,
) -> None:
    helper = define_agent(
        name="helper",
        model=ScriptedModel(
            [tool_call("runScript", {"command": "cat shared.txt"}), text("it says hello")]
        ),
        tools={"runScript": run_script},
    )
    lead = define_agent(
        name="lead",
        model=ScriptedModel(
            [
                tool_call("runScript", {"command": "echo hello > shared.txt"}),
                tool_call("helper", {"task": "read shared.txt"}),
                text("done"),
            ]
        ),
        tools={"runScript": run_script},
        subagents={"helper": helper},
    )
    binding = sandbox_capability(provider=provider, scope="rootThread")
    async with create_test_runtime(agent=lead, capabilities={"sandbox": binding}) as runtime:
        thread = await runtime.admin(identity=None).create_thread()
        await thread.send("share a file with your helper")

        (child,) = await thread.children()
        child_messages = await runtime.admin(identity=None).thread(child.id).messages()
        tool_results = [m for m in child_messages if m.role == "tool"]
        assert tool_results[0].output["stdout"] == "hello\n"  # type: ignore[index]
        assert len(await provider.list_instances()) == 1


async def test_deleting_a_thread_disposes_its_sandbox(provider: InMemorySandboxProvider) -> None:
    model = ScriptedModel([tool_call("runScript", {"command": "touch here"}), text("ok")])
    agent = define_agent(name="coder", model=model, tools={"runScript": run_script})
    async with create_test_runtime(
        agent=agent, capabilities={"sandbox": sandbox_capability(provider=provider)}
    ) as runtime:
        thread = await runtime.admin(identity=None).create_thread()
        await thread.send("touch a file")
        assert len(await provider.list_instances()) == 1

        await thread.delete()

        assert await provider.list_instances() == []


async def test_seed_files_are_in_every_new_sandbox(provider: InMemorySandboxProvider) -> None:
    model = ScriptedModel([tool_call("runScript", {"command": "cat README.md"}), text("read")])
    agent = define_agent(name="coder", model=model, tools={"runScript": run_script})
    binding = sandbox_capability(
        provider=provider, seed=[SeedFile("/workspace/README.md", "# seeded\n")]
    )
    async with create_test_runtime(agent=agent, capabilities={"sandbox": binding}) as runtime:
        thread = await runtime.admin(identity=None).create_thread()
        result = await thread.send("read the readme")
        assert result.messages[2].output["stdout"] == "# seeded\n"  # type: ignore[union-attr,index]
