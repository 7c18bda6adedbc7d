"""pai-sandbox benchmarks on the in-memory provider.

Run:  uv run python benchmarks/bench_sandbox.py   (or: uv run nox -s bench)

Prints, in one run:
- ``run_command("echo hi")`` through the Sandbox facade and the in-memory provider (the command
  runs in a worker process, its files stay in this one), against the bare interpreter call doing
  the same work in this process (a fresh just-bash ``Bash`` over an in-memory filesystem,
  ``await bash.exec("echo hi")``; target: <= 3x), and for reference against one reused ``Bash``
  (which keeps state between scripts, so it is not ``sh -c``);
- the facade's overhead per file operation: write_file, read_file and exists through the facade
  against the same call on the provider's instance;
- the host event loop's worst stall while an in-memory sandbox runs a CPU-bound command for 2 s
  (a 5 ms ticker's largest lateness; target: <= 50 ms);
- the host process's RSS growth while a command tries to allocate 1 GiB by doubling a string
  (target: <= the memory budget + 64 MiB);
- what 100 concurrent commands cost the host process: its peak thread count and RSS growth
  while they run (100 sandboxes, one ``echo`` each, all queued at once on the pool's workers;
  then one sandbox, each command listing a folder of its 20,000-file tree).

Medians over several rounds, configurations interleaved, on an asyncio host loop.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable, Coroutine
from functools import partial
from pathlib import Path
from typing import Any

import anyio
from just_bash import Bash, InMemoryFs

from pai.sandbox import CommandResult, create_sandbox, create_sandbox_session_manager
from pai.sandbox.provider import FileWrite
from pai.sandbox_inmemory import create_in_memory_sandbox_provider

ROUNDS = 9
MiB = 1024 * 1024


async def _per_call(op: Callable[[], Awaitable[object]], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        await op()
    return (time.perf_counter() - start) / n


async def _compare(
    title: str, ops: dict[str, Callable[[], Awaitable[object]]], n: int, baseline: str
) -> dict[str, float]:
    for op in ops.values():
        await _per_call(op, max(10, n // 10))  # warm up
    samples: dict[str, list[float]] = {name: [] for name in ops}
    for _ in range(ROUNDS):
        for name, op in ops.items():
            samples[name].append(await _per_call(op, n))
    medians = {name: statistics.median(values) for name, values in samples.items()}
    print(title)
    for name, value in medians.items():
        print(f"  {name:<44} {value * 1e6:9.1f} us   ratio: {value / medians[baseline]:5.2f}x")
    return medians


async def bench_commands() -> None:
    async with create_in_memory_sandbox_provider() as provider:
        sandbox = create_sandbox(create_sandbox_session_manager(provider=provider).handle("bench"))
        fs = InMemoryFs()
        reused = Bash(fs=fs, cwd="/")

        async def bare_fresh() -> object:
            return await Bash(fs=fs, cwd="/").exec("echo hi")

        medians = await _compare(
            'run_command("echo hi")',
            {
                "bare interpreter (fresh Bash per script)": bare_fresh,
                "bare interpreter (one reused Bash)": lambda: reused.exec("echo hi"),
                "Sandbox.run_command via in-memory provider": lambda: sandbox.run_command(
                    "echo hi"
                ),
            },
            n=300,
            baseline="bare interpreter (fresh Bash per script)",
        )
        ratio = (
            medians["Sandbox.run_command via in-memory provider"]
            / medians["bare interpreter (fresh Bash per script)"]
        )
        print(
            f"  ratio {ratio:.2f}x; target <= 3x against the fresh-Bash call: "
            f"{'met' if ratio <= 3 else 'MISSED'}"
        )


async def bench_files() -> None:
    async with create_in_memory_sandbox_provider() as provider:
        sandbox = create_sandbox(create_sandbox_session_manager(provider=provider).handle("files"))
        await sandbox.write_file("f.txt", "x")
        instance = await provider.find("files")
        assert instance is not None
        write = [FileWrite("/workspace/f.txt", b"hello")]
        for label, direct, facade in (
            (
                "write_file",
                lambda: instance.write_files(write),
                lambda: sandbox.write_file("f.txt", b"hello"),
            ),
            (
                "read_file",
                lambda: instance.read_file("/workspace/f.txt", max_bytes=64 * MiB),
                lambda: sandbox.read_file("f.txt"),
            ),
            (
                "exists",
                lambda: instance.exists("/workspace/f.txt"),
                lambda: sandbox.exists("f.txt"),
            ),
        ):
            medians = await _compare(
                f"{label}: facade overhead",
                {"provider instance (direct)": direct, "Sandbox facade": facade},
                n=2000,
                baseline="provider instance (direct)",
            )
            extra = medians["Sandbox facade"] - medians["provider instance (direct)"]
            print(f"  facade overhead: {extra * 1e6:.1f} us per call")


async def bench_loop_stall() -> None:
    async with create_in_memory_sandbox_provider() as provider:
        sandbox = create_sandbox(create_sandbox_session_manager(provider=provider).handle("cpu"))
        await sandbox.run_command("true")  # a worker is up
        interval, worst, ticks = 0.005, 0.0, 0
        done = anyio.Event()

        async def ticker() -> None:
            nonlocal worst, ticks
            while not done.is_set():
                before = time.perf_counter()
                await anyio.sleep(interval)
                worst = max(worst, time.perf_counter() - before - interval)
                ticks += 1

        outcome: list[CommandResult] = []
        async with anyio.create_task_group() as group:
            group.start_soon(ticker)
            outcome.append(await sandbox.run_command("while :; do :; done", timeout=2))
            done.set()
        (result,) = outcome
        assert result.timed_out
        print("host event loop while a sandbox runs `while :; do :; done` for 2 s")
        print(f"  ticks: {ticks}, worst stall: {worst * 1e3:.1f} ms")
        print(f"  target <= 50 ms: {'met' if worst <= 0.050 else 'MISSED'}")


def _rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


async def bench_memory() -> None:
    async with create_in_memory_sandbox_provider() as provider:
        budget = provider.memory_budget
        sandbox = create_sandbox(create_sandbox_session_manager(provider=provider).handle("mem"))
        await sandbox.run_command("true")
        before, peak = _rss(), 0
        done = anyio.Event()

        async def sample() -> None:
            nonlocal peak
            while not done.is_set():
                peak = max(peak, _rss())
                await anyio.sleep(0.005)

        # 16 bytes doubled 26 times is 1 GiB.
        script = "x=0123456789abcdef; i=0; while [ $i -lt 26 ]; do x=$x$x; i=$((i+1)); done"
        outcome: list[CommandResult] = []
        async with anyio.create_task_group() as group:
            group.start_soon(sample)
            outcome.append(await sandbox.run_command(script, timeout=60))
            done.set()
        (result,) = outcome
        growth = peak - before
        print("host RSS while a command tries to allocate 1 GiB (string doubling)")
        print(f"  command exit code {result.exit_code}: {result.stderr.strip()[:100]}")
        print(
            f"  host RSS growth: {growth / MiB:.1f} MiB "
            f"(budget {budget / MiB:g} MiB; target <= {budget / MiB + 64:g} MiB: "
            f"{'met' if growth <= budget + 64 * MiB else 'MISSED'})"
        )


def _threads() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return 0


async def _concurrent_cost(
    title: str, commands: list[Callable[[], Coroutine[Any, Any, object]]]
) -> None:
    before_threads, before_rss = _threads(), _rss()
    peak_threads, peak_rss = before_threads, before_rss
    done = anyio.Event()

    async def sample() -> None:
        nonlocal peak_threads, peak_rss
        while not done.is_set():
            peak_threads, peak_rss = max(peak_threads, _threads()), max(peak_rss, _rss())
            await anyio.sleep(0.005)

    started = time.perf_counter()
    async with anyio.create_task_group() as group:
        group.start_soon(sample)
        async with anyio.create_task_group() as runs:
            for command in commands:
                runs.start_soon(command)
        done.set()
    elapsed = time.perf_counter() - started
    print(title)
    print(
        f"  {len(commands)} commands in {elapsed:.2f} s; host threads {before_threads} -> peak "
        f"{peak_threads} (+{peak_threads - before_threads}); host RSS growth "
        f"{(peak_rss - before_rss) / MiB:.1f} MiB"
    )


async def bench_concurrency_cost() -> None:
    async with create_in_memory_sandbox_provider() as provider:
        manager = create_sandbox_session_manager(provider=provider)
        sandboxes = [create_sandbox(manager.handle(f"c{n}")) for n in range(100)]
        await sandboxes[0].run_command("true")  # the workers are up
        await _concurrent_cost(
            "host cost of 100 concurrent commands (100 sandboxes, `echo hi` each)",
            [partial(s.run_command, "echo hi") for s in sandboxes],
        )
        tree = sandboxes[0]
        await tree.write_files(
            [FileWrite(path=f"/workspace/t/d{n % 10}/f{n}", content=b"") for n in range(20_000)]
        )
        await _concurrent_cost(
            "host cost of 100 concurrent commands (one sandbox, each listing a folder of 2,000 files)",
            [partial(tree.run_command, "ls t/d1 | wc -l", timeout=120) for _ in range(100)],
        )


async def main() -> None:
    await bench_commands()
    await bench_files()
    await bench_loop_stall()
    await bench_memory()
    await bench_concurrency_cost()


if __name__ == "__main__":
    anyio.run(main, backend="asyncio")
