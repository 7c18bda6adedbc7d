"""pai-sandbox-e2b benchmarks: the provider against the e2b SDK alone, on one emulator sandbox.

Run:  uv run python benchmarks/bench_e2b.py   (or: uv run nox -s bench)

Starts the offline E2B emulator (``pai.sandbox_e2b.testing.E2BEmulator``) on 127.0.0.1; where it
cannot run (it needs Linux user, mount, PID and network namespaces) it prints ``skipped: ...`` with the
reason and exits 0. The provider makes one sandbox; the raw side connects the SDK's own
``AsyncSandbox`` to that same sandbox, so both sides pay the same emulator costs.

Prints, in one run, medians and their ratios to a baseline measured in the same run:

- ``run_command("true")`` through the Sandbox facade and the E2B provider, against the SDK's raw
  ``sandbox.commands.run("true")`` (target: <= 1.15x);
- ``write_files`` of 200 small files through the facade (one call), against one SDK
  ``files.write_files`` of the same 200 files (target: <= 1.2x) and against 200 single SDK
  ``files.write`` calls (for reference, measured in 3 rounds of its own).

Configurations are interleaved round by round so that machine noise hits them alike. The
emulator, and with it the sandbox, is gone at the end.
"""

from __future__ import annotations

import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

FILES = 200
COMMAND_ROUNDS = 40
WRITE_ROUNDS = 12

Op = Callable[[], Awaitable[object]]


async def _timed(op: Op) -> float:
    started = time.perf_counter()
    await op()
    return time.perf_counter() - started


async def _measure(ops: dict[str, Op], rounds: int) -> dict[str, float]:
    """Median seconds of each op over ``rounds``, the ops interleaved round by round."""
    for op in ops.values():  # warm up connections and caches
        await op()
    times: dict[str, list[float]] = {name: [] for name in ops}
    for _ in range(rounds):
        for name, op in ops.items():
            times[name].append(await _timed(op))
    return {name: statistics.median(values) for name, values in times.items()}


def _report(title: str, medians: dict[str, float], baseline: str, target: float) -> bool:
    print(title)
    base = medians[baseline]
    for name, median in medians.items():
        print(f"  {name:<44} median {median * 1000:8.2f} ms   {median / base:5.2f}x")
    ratio = max(m for n, m in medians.items() if n != baseline and "reference" not in n) / base
    verdict = "ok" if ratio <= target else "OVER TARGET"
    print(f"  ratio {ratio:.2f}x (target <= {target:.2f}x): {verdict}")
    return ratio <= target


async def main() -> int:
    from e2b import AsyncSandbox

    from pai.sandbox import create_sandbox, create_sandbox_session_manager
    from pai.sandbox_e2b import E2BEmulatorUnavailableError, E2BSandboxProvider
    from pai.sandbox_e2b.testing import E2BEmulator

    emulator = E2BEmulator()
    try:
        await anyio.to_thread.run_sync(emulator.start)
    except E2BEmulatorUnavailableError as error:
        print(f"bench_e2b: skipped: {error}")
        return 0
    try:
        provider = E2BSandboxProvider(
            api_key=emulator.api_key,
            api_url=emulator.url,
            sandbox_url=emulator.url,
            namespace="pai-bench",
        )
        sessions = create_sandbox_session_manager(provider=provider)
        key = f"bench-{uuid.uuid4().hex[:8]}"
        sandbox = create_sandbox(sessions.handle(key))
        await sandbox.run_command("true")  # provisions the sandbox
        instance: Any = await sessions.handle(key).instance()
        raw = await AsyncSandbox.connect(
            instance.instance_id,
            timeout=300,
            api_key=emulator.api_key,
            api_url=emulator.url,
            sandbox_url=emulator.url,
        )

        print(
            f"bench_e2b: one emulator sandbox ({instance.instance_id}), python {sys.version.split()[0]}"
        )
        commands = await _measure(
            {
                "raw SDK commands.run('true')": lambda: raw.commands.run("true"),
                "provider run_command('true') (facade)": lambda: sandbox.run_command("true"),
            },
            COMMAND_ROUNDS,
        )
        ok_commands = _report(
            f"run_command('true'), {COMMAND_ROUNDS} rounds:",
            commands,
            "raw SDK commands.run('true')",
            1.15,
        )

        counter = iter(range(1_000_000))

        def batch() -> dict[str, bytes]:
            folder = f"/workspace/bench/{next(counter)}"
            return {f"{folder}/file-{i:03d}.txt": f"content {i}\n".encode() for i in range(FILES)}

        async def raw_write_files() -> None:
            await raw.files.write_files(
                [{"path": path, "data": data} for path, data in batch().items()]
            )

        async def raw_single_writes() -> None:
            for path, data in batch().items():
                await raw.files.write(path, data)

        async def provider_write_files() -> None:
            await sandbox.write_files(batch())

        writes = await _measure(
            {
                "raw SDK files.write_files (one call)": raw_write_files,
                "provider write_files (facade, one call)": provider_write_files,
            },
            WRITE_ROUNDS,
        )
        # The slow reference gets fewer rounds of its own (one round is 200 requests).
        writes.update(
            await _measure({"raw SDK 200 x files.write (reference)": raw_single_writes}, 3)
        )
        ok_writes = _report(
            f"write_files of {FILES} files, {WRITE_ROUNDS} rounds:",
            writes,
            "raw SDK files.write_files (one call)",
            1.2,
        )
        single = writes["raw SDK 200 x files.write (reference)"]
        provider_batch = writes["provider write_files (facade, one call)"]
        print(f"  provider write_files vs 200 single SDK writes: {provider_batch / single:.2f}x")
        await provider.destroy(key)
        await sessions.aclose()
        print(f"bench_e2b: targets {'met' if ok_commands and ok_writes else 'NOT met'}")
        return 0  # targets are reported, not enforced
    finally:
        await anyio.to_thread.run_sync(emulator.stop)


if __name__ == "__main__":
    sys.exit(anyio.run(main))
