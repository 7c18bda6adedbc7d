"""pai-core benchmarks. Run:  uv run python benchmarks/bench_core.py   (or: uv run nox -s bench)

Prints, in one run:
- per-operation dispatch cost of a command with 0, 1 and 4 capabilities (in-memory bindings),
  and the ratio to 0 (targets: 1 capability <= 1.5x, 4 <= 2.5x);
- instance-key derivation cost per scope;
- storage reads made by the rootThread walk at depth 10, on the first and on repeated operations
  (target: the walk is not repeated once a thread's root is known).

Times are medians over several rounds, with the configurations interleaved so that machine noise
hits them alike. Ratios compare configurations measured in this same run.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable

import anyio
from pydantic import BaseModel

from pai.core import (
    AcquireInput,
    AgentRuntime,
    CapabilityBinding,
    CapabilityScope,
    CapabilityScopeInput,
    InMemoryStorage,
    ThreadRecord,
    create_agent_runtime,
    create_capability_binding,
    define_agent,
    define_capability,
    define_command,
    instance_key,
)

ROUNDS = 9
OPS_PER_ROUND = 2_000


class Facade:
    """A lazy facade: acquiring it costs one object; nothing is provisioned."""

    __slots__ = ("key",)

    def __init__(self, key: str) -> None:
        self.key = key


class NoInput(BaseModel):
    pass


def _facade(input: AcquireInput) -> Facade:
    return Facade(input.key)


def _runtime(
    n_capabilities: int, storage: InMemoryStorage, scope: CapabilityScope = "thread"
) -> AgentRuntime:
    tokens = [define_capability(Facade, id=f"bench{i}") for i in range(n_capabilities)]
    command = define_command(
        input=NoInput, capabilities={f"c{i}": t for i, t in enumerate(tokens)}, run=lambda ctx: None
    )
    agent = define_agent(name="bench", commands={"op": command})
    bindings: dict[str, CapabilityBinding[object]] = {
        t.id: create_capability_binding(capability=t, acquire=_facade, scope=scope) for t in tokens
    }
    return create_agent_runtime(
        agent=agent, storage=storage, scope_key=lambda _: "acme", capabilities=bindings
    )


async def _time_ops(op: Callable[[], Awaitable[object]], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        await op()
    return (time.perf_counter() - start) / n


async def bench_dispatch() -> None:
    configs = (0, 1, 4)
    ops: dict[int, Callable[[], Awaitable[object]]] = {}
    for n in configs:
        runtime = _runtime(n, InMemoryStorage())
        thread = await runtime.admin(identity=None).create_thread(thread_id="t")
        handle = runtime.admin(identity=None).thread(thread.id)
        ops[n] = lambda handle=handle: handle.commands.op({})
        await _time_ops(ops[n], 200)  # warm up
    samples: dict[int, list[float]] = {n: [] for n in configs}
    for _ in range(ROUNDS):
        for n in configs:
            samples[n].append(await _time_ops(ops[n], OPS_PER_ROUND))
    base = statistics.median(samples[0])
    targets = {1: 1.5, 4: 2.5}
    print("dispatch: one command per operation, in-memory storage and bindings")
    for n in configs:
        per_op = statistics.median(samples[n])
        ratio = per_op / base
        verdict = ""
        if n in targets:
            met = "met" if ratio <= targets[n] else "MISSED"
            verdict = f"  (target <= {targets[n]}x: {met})"
        print(f"  {n} capabilities: {per_op * 1e6:8.2f} us/op   ratio to 0: {ratio:5.2f}x{verdict}")


def bench_keys() -> None:
    cases: dict[str, Callable[[], str]] = {
        "thread": lambda: instance_key("sandbox", "thread", ("acme", "3f2c9a0e1b7d4c55")),
        "rootThread": lambda: instance_key("sandbox", "rootThread", ("acme", "3f2c9a0e1b7d4c55")),
        "user": lambda: instance_key("sandbox", "user", ("acme", "user-42")),
        "scope": lambda: instance_key("sandbox", "scope", ("acme",)),
        "global": lambda: instance_key("sandbox", "global", ()),
        "thread (escaped id)": lambda: instance_key("sandbox", "thread", ("Acme Corp", "Thread/ß")),
    }
    custom_input = CapabilityScopeInput("t", "root", "acme", "u", None)

    def custom_scope(s: CapabilityScopeInput) -> str:
        return f"{s.scope_key}:{s.root_thread_id}"

    cases["custom"] = lambda: custom_scope(custom_input)
    n = 50_000
    print("key derivation per scope")
    for name, fn in cases.items():
        rounds = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(n):
                fn()
            rounds.append((time.perf_counter() - start) / n)
        print(f"  {name:<20} {statistics.median(rounds) * 1e9:8.0f} ns/key")


async def bench_root_walk(depth: int = 10, repeats: int = 100) -> None:
    storage = InMemoryStorage()
    runtime = _runtime(1, storage, scope="rootThread")
    admin = runtime.admin(identity=None)
    root = await admin.create_thread(thread_id="d0")
    parent = root.id
    for level in range(1, depth + 1):
        record = ThreadRecord(
            id=f"d{level}", scope_key="acme", agent_name="bench", parent_thread_id=parent
        )
        await storage.create_thread(record)
        parent = record.id
    deepest = admin.thread(parent)
    before = storage.reads
    await deepest.commands.op({})
    first = storage.reads - before - 1  # minus the read of the thread itself
    before = storage.reads
    for _ in range(repeats):
        await deepest.commands.op({})
    repeated = (storage.reads - before) / repeats - 1
    met = "met" if repeated == 0 else "MISSED"
    print(f"rootThread walk at depth {depth} (storage reads beyond the thread's own record)")
    print(f"  first operation:    {first} reads")
    print(f"  repeated operations: {repeated:.2f} reads/op over {repeats} ops (target 0: {met})")


async def main() -> None:
    await bench_dispatch()
    bench_keys()
    await bench_root_walk()


if __name__ == "__main__":
    anyio.run(main)
