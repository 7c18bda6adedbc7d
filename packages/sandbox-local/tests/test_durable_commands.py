"""Exactly-once sandbox commands in a durable run: a run on the JournalEngine whose tool appends
a line through the local provider, crashed after the tool ran and before its step was recorded,
appends the line once (the replay finds the command's receipt in the sandbox)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from pai.core import InMemoryStorage, ToolContext, create_agent_runtime, define_agent, define_tool
from pai.core.testing import (
    FunctionModel,
    JournalEngine,
    SimulatedCrash,
    durable_call,
    text,
    tool_call,
)

# Both backends here (the package's conftest keeps the rest on asyncio): a durable replay's
# receipts must hold on trio too.
from pai.core.testing.pytest_plugin import anyio_backend as anyio_backend
from pai.sandbox import (
    create_sandbox,
    create_sandbox_session_manager,
    sandbox,
    sandbox_capability,
)
from pai.sandbox_local import LocalSandboxProvider

pytestmark = pytest.mark.anyio


class Line(BaseModel):
    line: str


async def append(ctx: ToolContext[Line, Any]) -> str:
    result = await ctx.capabilities.sandbox.run_command(f"echo {ctx.input.line} >> log.txt")
    return f"exit {result.exit_code}"


def build(engine: JournalEngine, storage: InMemoryStorage, state_dir: Path) -> Any:
    tool = define_tool(
        id="append",
        description="append a line",
        input_schema=Line,
        capabilities={"sandbox": sandbox},
        execute=append,
    )

    def model(request: Any) -> Any:
        if request.step == 1:
            return tool_call("append", {"line": "once"}, id="x")
        return text("done")

    agent = define_agent(name="main", model=FunctionModel(model), tools={"append": tool})
    return create_agent_runtime(
        agent=agent,
        storage=storage,
        scope_key=lambda identity: "acme",
        durability=engine,
        capabilities={
            # A new provider object per runtime, as a restarted process would have.
            "sandbox": sandbox_capability(provider=LocalSandboxProvider(state_dir=state_dir))
        },
    )


@pytest.mark.parametrize("when", ["before", "after"])
async def test_a_crash_around_a_tool_step_appends_the_line_once(
    state_dir: Path, when: Literal["before", "after"]
) -> None:
    engine, storage = JournalEngine(), InMemoryStorage()
    engine.crash_at("pai.tool/1/0/append", when=when)
    async with build(engine, storage, state_dir) as runtime:
        thread = await runtime.admin(identity="ann").create_thread(thread_id="t")
        with pytest.raises(SimulatedCrash):
            await thread.send("go")
    async with build(engine, storage, state_dir):
        [resumed] = await engine.recover()
    assert (resumed["status"], resumed["text"]) == ("completed", "done")
    provider = LocalSandboxProvider(state_dir=state_dir)
    try:
        [info] = await provider.list_instances()
        instance = await provider.find(info.key)
        assert instance is not None
        assert await instance.read_file("/workspace/log.txt", max_bytes=1024) == b"once\n"
        await provider.destroy(info.key)
    finally:
        await provider.aclose()


async def test_the_cost_of_a_durable_command(state_dir: Path) -> None:
    """Not a bound: prints what a durable command costs over a plain one on this machine."""
    provider = LocalSandboxProvider(state_dir=state_dir)
    sessions = create_sandbox_session_manager(provider=provider)
    facade = create_sandbox(sessions.handle("cost"))
    try:
        await facade.run_command("true")
        rounds = 30

        started = time.perf_counter()
        for _ in range(rounds):
            await facade.run_command("echo hi")
        plain = (time.perf_counter() - started) / rounds

        started = time.perf_counter()
        for i in range(rounds):
            with durable_call(f"cost/1/{i}"):
                await facade.run_command("echo hi")
        durable = (time.perf_counter() - started) / rounds

        started = time.perf_counter()
        for i in range(rounds):
            with durable_call(f"cost/1/{i}"):
                await facade.run_command("echo hi")
        replayed = (time.perf_counter() - started) / rounds
        print(
            f"\nplain {plain * 1000:.2f} ms, durable {durable * 1000:.2f} ms "
            f"(+{(durable - plain) * 1000:.2f} ms), replayed from the receipt "
            f"{replayed * 1000:.2f} ms"
        )
    finally:
        await sessions.dispose("cost")
        await sessions.aclose()
