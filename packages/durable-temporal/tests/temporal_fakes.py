"""A DurableHost without a runtime: its workflow code asks for a few steps, its steps record what
they did (in memory, and in a file when given one) and can be told to wait, fail, or return what
is not JSON."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pai.core import StepLimitExceededError
from pai.core.ext import RunSpec, Steps


class FakeHost:
    """``execute``: step ``a``, then ``gather`` of ``b`` and ``c`` (``limit`` at a time), then the
    steps named by the spec's staged message (``{"extra": [...]}``), and returns what they
    returned. ``perform`` records each call, waits while its step is in ``hold``, and raises or
    returns something odd for the step names ``limit``, ``value-error`` and ``not-json``."""

    def __init__(
        self, *, limit: int = 2, delays: dict[str, float] | None = None, file: Path | None = None
    ) -> None:
        self.limit = limit
        self.delays = delays or {}
        self.file = file
        self.calls: list[str] = []
        self.running = 0
        self.most_running = 0
        self.hold: dict[str, asyncio.Event] = {}
        self.started: dict[str, asyncio.Event] = {}
        self.executions = 0

    async def execute(self, spec: RunSpec, steps: Steps) -> Any:
        self.executions += 1
        first = await steps.step("a", {"n": 1})
        pair = await steps.gather([("b", {"n": 2}), ("c", {"n": 3})], limit=self.limit)
        extra: Sequence[str] = spec.staged[0].get("extra", []) if spec.staged else []
        more = [await steps.step(name, None) for name in extra]
        if "not-json-payload" in extra:
            await steps.step("odd", {1, 2})
        return {"first": first, "pair": pair, "more": more}

    async def perform(self, spec: RunSpec, name: str, payload: Any) -> Any:
        self.calls.append(name)
        if self.file is not None:
            with self.file.open("a") as out:
                out.write(json.dumps([spec.run_id, name]) + "\n")
        self.started.setdefault(name, asyncio.Event()).set()
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        try:
            if name in self.hold:
                await self.hold[name].wait()
            await asyncio.sleep(self.delays.get(name, 0))
        finally:
            self.running -= 1
        if name == "limit":
            raise StepLimitExceededError("the run took too many steps")
        if name == "value-error":
            raise ValueError("bad value")
        if name == "not-json":
            return {"when": object()}
        return {"step": name, "payload": payload}


def spec(run_id: str, *extra: str) -> RunSpec:
    return RunSpec(
        run_id=run_id,
        kind="send",
        thread_id="t-" + run_id,
        agent_name="main",
        scope_key="acme",
        user_key=None,
        staged=({"extra": list(extra)},),
    )
