"""pai-sandbox benchmarks on the in-memory provider.

Run:  uv run python benchmarks/bench_sandbox.py   (or: uv run nox -s bench)

Prints, in one run:
- ``run_command("echo hi")`` through the Sandbox facade and the in-memory provider, against the
  bare interpreter call doing the same work (a fresh just-bash ``Bash`` over an in-memory
  filesystem, ``await bash.exec("echo hi")``; target: <= 1.3x), and for reference against one
  reused ``Bash`` (which keeps state between scripts, so it is not ``sh -c``);
- the facade's overhead per file operation: write_file, read_file and exists through the facade
  against the same call on the provider's instance.

Medians over several rounds, configurations interleaved, on an asyncio host loop.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable

import anyio
from just_bash import Bash, InMemoryFs

from pai.sandbox import FileWrite, create_sandbox, create_sandbox_session_manager
from pai.sandbox_inmemory import create_in_memory_sandbox_provider

ROUNDS = 9


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
            f"  target <= 1.3x against the fresh-Bash call: {'met' if ratio <= 1.3 else 'MISSED'}"
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
                lambda: instance.read_file("/workspace/f.txt"),
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


async def main() -> None:
    await bench_commands()
    await bench_files()


if __name__ == "__main__":
    anyio.run(main, backend="asyncio")
