"""A durable run on DBOS whose tool appends a line inside a local sandbox, as a worker process
that kills itself with SIGKILL where ``PAI_CRASH_AT`` says (see ``test_crash_sandbox.py``).

    python dbos_sandbox_worker.py DIR STATE run       # create thread "t", send "go"
    python dbos_sandbox_worker.py DIR STATE recover   # start again: DBOS resumes the run

``DIR`` holds the thread storage, DBOS's database and ``result.json``; ``STATE`` is the local
provider's state folder (short: the supervisor's socket lives in it). Crash points:
``tool:before`` (the tool started, no command yet), ``command`` (the command wrote its line and
is still running), ``tool:after`` (the command returned, its step not recorded), ``append:1``
(step 1 appended, its step not recorded) and ``model:2``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from pai.core import (
    ModelRequest,
    SqliteStorage,
    ToolContext,
    create_agent_runtime,
    define_agent,
    define_tool,
    message_adapter,
)
from pai.core.testing import FunctionModel, text, tool_call
from pai.sandbox import sandbox, sandbox_capability
from pai.sandbox_local import LocalSandboxProvider

COMMAND = "echo a >> lines.txt; sleep 1"


class Line(BaseModel):
    line: str


def die_at(point: str) -> None:
    if os.environ.get("PAI_CRASH_AT") == point:
        os.kill(os.getpid(), signal.SIGKILL)


def die_when_the_line_is_written(state: Path) -> None:
    """For ``command``: kill this process once the command's line is in the workspace (the
    command still sleeping)."""

    def watch() -> None:
        while True:
            for path in state.glob("*/*/workspace/lines.txt"):
                if path.read_text():
                    os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(0.005)

    threading.Thread(target=watch, daemon=True).start()


class CountingStorage(SqliteStorage):
    async def append_messages(self, thread_id: str, messages: Any, *, lease: Any = None) -> None:
        await super().append_messages(thread_id, messages, lease=lease)
        if len(await self.get_messages(thread_id)) == 3:
            die_at("append:1")


async def main(folder: Path, state: Path, mode: str) -> None:
    from pai.durable_dbos import DbosEngine

    async def append(ctx: ToolContext[Line, Any]) -> str:
        die_at("tool:before")
        if os.environ.get("PAI_CRASH_AT") == "command":
            die_when_the_line_is_written(state)
        result = await ctx.capabilities.sandbox.run_command(COMMAND)
        die_at("tool:after")
        return f"exit {result.exit_code}"

    def model(request: ModelRequest) -> Any:
        if request.step == 2:
            die_at("model:2")
        if request.step == 1:
            return tool_call("append", {"line": "a"}, id="x")
        return text("done")

    tool = define_tool(
        id="append",
        description="append a line in the sandbox",
        input_schema=Line,
        capabilities={"sandbox": sandbox},
        execute=append,
    )
    storage = CountingStorage(folder / "threads.sqlite")
    engine = DbosEngine(
        system_database_url=f"sqlite:///{folder / 'dbos.sqlite'}",
        executor_id="pai:sandbox-harness",
        recovery_interval=0.1,
    )
    runtime = create_agent_runtime(
        agent=define_agent(name="main", model=FunctionModel(model), tools={"append": tool}),
        storage=storage,
        scope_key=lambda identity: "acme",
        durability=engine,
        capabilities={
            "sandbox": sandbox_capability(provider=LocalSandboxProvider(state_dir=state))
        },
    )
    async with runtime:
        if mode == "run":
            thread = await runtime.admin(identity="ann").create_thread(thread_id="t")
            await thread.send("go")
        else:
            # DBOS resumes the run at launch; wait for its last append.
            while True:
                messages = await storage.get_messages("t")
                if messages and getattr(messages[-1], "content", None) == "done":
                    break
                await asyncio.sleep(0.05)
        messages = await storage.get_messages("t")
    (folder / "result.json").write_text(
        json.dumps([message_adapter.dump_python(m, mode="json") for m in messages])
    )


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]))
