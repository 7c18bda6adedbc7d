"""pai-sandbox-docker benchmarks on a real Docker engine.

Run:  uv run python benchmarks/bench_docker.py   (or: uv run nox -s bench)

Needs a Docker engine (DOCKER_HOST honoured) and the test image
(``bash scripts/build-test-image.sh``; ``PAI_DOCKER_TEST_IMAGE`` names it). Without them it prints
``skipped: ...`` with the reason and exits 0, or fails when ``PAI_REQUIRE_DOCKER=1``.

Prints, in one run, medians and their ratios to a baseline measured in the same run with the
docker SDK alone, on the same engine and image:

- ``run_command("true")`` through the Sandbox facade and the Docker provider, against the SDK's
  raw ``container.exec_run("true")`` on the same container (target: <= 1.15x);
- ``write_files`` of 200 small files (one call), against one raw ``exec_run`` of ``sh -c`` writing
  the same 200 files with ``printf`` (target: <= 3x); the SDK's raw ``put_archive`` of the same
  files as one tar is shown for reference;
- the cold first command: a new instance created by the provider and its first
  ``run_command("true")``, against raw ``containers.run(detach=True)`` of the same image (network
  none, ``sleep infinity``) and one ``exec_run("true")`` (target: <= 1.2x);
- 100 concurrent ``run_command("true")`` on one sandbox: the wall clock, and how many host
  threads and how much host memory (RSS) they add at their peak (target: threads within the
  provider's ``max_concurrent_commands`` plus a few for kills and probes).

Configurations are interleaved round by round so that machine noise hits them alike. Every
container made here is removed at the end (namespace ``pai-bench`` for the provider's, a label for
the raw ones), and the count left is printed.
"""

from __future__ import annotations

import io
import os
import shlex
import statistics
import sys
import tarfile
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn

import anyio

IMAGE = os.environ.get("PAI_DOCKER_TEST_IMAGE", "pai-test-busybox:latest")
NAMESPACE = "pai-bench"
RAW_LABEL = "pai.bench.raw"  # on the containers this script makes with the SDK alone
RUN_ID = uuid.uuid4().hex[:8]
FILES = 200
CONCURRENT = 100

Op = Callable[[], Awaitable[object]]


def _skip(reason: str) -> NoReturn:
    if os.environ.get("PAI_REQUIRE_DOCKER") == "1":
        print(f"bench_docker: FAILED: {reason} (and PAI_REQUIRE_DOCKER=1)")
        sys.exit(1)
    print(f"bench_docker: skipped: {reason}")
    sys.exit(0)


def _client() -> Any:
    """The docker SDK's client, or a skip saying why there is none to benchmark with."""
    try:
        import docker
        from docker.errors import ImageNotFound
    except ImportError as error:
        _skip(f"no Docker engine (the docker SDK is not installed: {error})")
    try:
        client = docker.from_env(timeout=30)
        client.ping()
    except Exception as error:
        where = os.environ.get("DOCKER_HOST", "the default socket")
        _skip(f"no Docker engine at {where} ({type(error).__name__}: {error})")
    try:
        client.images.get(IMAGE)
    except ImageNotFound:
        _skip(f"the test image {IMAGE} is not present (build it: bash scripts/build-test-image.sh)")
    try:
        from pai.sandbox_docker import DockerSandboxProvider  # noqa: F401
    except ImportError as error:
        _skip(f"pai-sandbox-docker is not installed ({error})")
    return client


async def _per_call(op: Op, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        await op()
    return (time.perf_counter() - start) / n


async def _compare(
    title: str, ops: dict[str, Op], *, n: int, rounds: int, baseline: str, target: float
) -> None:
    for op in ops.values():
        await op()  # warm up
    samples: dict[str, list[float]] = {name: [] for name in ops}
    for _ in range(rounds):
        for name, op in ops.items():
            samples[name].append(await _per_call(op, n))
    _report(title, samples, baseline=baseline, target=target, count=n)


def _report(
    title: str, samples: dict[str, list[float]], *, baseline: str, target: float, count: int
) -> None:
    medians = {name: statistics.median(values) for name, values in samples.items()}
    print(f"{title}  (medians of {len(samples[baseline])} rounds of {count} call(s))")
    for name, value in medians.items():
        print(f"  {name:<58} {value * 1e3:8.1f} ms   ratio: {value / medians[baseline]:5.2f}x")
    subject = next(name for name in medians if name.startswith("pai"))
    ratio = medians[subject] / medians[baseline]
    print(
        f"  target <= {target}x against the raw baseline: {'met' if ratio <= target else 'MISSED'}"
    )


def _raw_write_script(files: dict[str, bytes], folder: str) -> list[str]:
    """One ``sh -c`` writing every file with printf, creating the folder first."""
    parts = [f"mkdir -p {shlex.quote(folder)}"]
    for name, content in files.items():
        parts.append(
            f"printf '%s' {shlex.quote(content.decode())} > {shlex.quote(f'{folder}/{name}')}"
        )
    return ["sh", "-c", " && ".join(parts)]


def _tar(files: dict[str, bytes], folder: str) -> bytes:
    """The files as one tar archive to extract at ``/``, with their folder."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        directory = tarfile.TarInfo(folder.lstrip("/"))
        directory.type = tarfile.DIRTYPE
        directory.mode = 0o755
        archive.addfile(directory)
        for name, content in files.items():
            info = tarfile.TarInfo(f"{folder.lstrip('/')}/{name}")
            info.size = len(content)
            info.mode = 0o644
            archive.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


async def bench_warm(client: Any, sandbox: Any, provider: Any) -> None:
    from pai.sandbox import WORKSPACE

    await sandbox.run_command("true")  # provisions the instance
    instance = await provider.find(sandbox.key)
    assert instance is not None, "the provider does not find the instance it just made"
    container = client.containers.get(instance.instance_id)

    def raw_exec() -> object:
        result = container.exec_run("true")
        assert result.exit_code == 0, result
        return result

    async def raw() -> object:
        return raw_exec()

    async def facade() -> object:
        result = await sandbox.run_command("true")
        assert result.exit_code == 0, result
        return result

    await _compare(
        'run_command("true") on one warm container',
        {
            'raw SDK: container.exec_run("true")': raw,
            'pai: Sandbox.run_command("true") via DockerSandboxProvider': facade,
        },
        n=10,
        rounds=7,
        baseline='raw SDK: container.exec_run("true")',
        target=1.15,
    )

    files = {f"f{i:03}.txt": f"file {i}: some small content\n".encode() for i in range(FILES)}
    facade_folder, raw_folder, put_folder = (
        f"{WORKSPACE}/bench-facade",
        f"{WORKSPACE}/bench-raw",
        f"{WORKSPACE}/bench-put",
    )
    raw_command = _raw_write_script(files, raw_folder)
    archive = _tar(files, put_folder)
    facade_files = {f"{facade_folder}/{name}": content for name, content in files.items()}

    async def raw_write() -> object:
        result = container.exec_run(raw_command)
        assert result.exit_code == 0, result
        return result

    async def raw_put() -> object:
        assert container.put_archive("/", archive)
        return None

    async def facade_write() -> object:
        await sandbox.write_files(facade_files)
        return None

    await _compare(
        f"write_files of {FILES} small files, one call",
        {
            f"raw SDK: one exec_run of sh -c printf x{FILES}": raw_write,
            "raw SDK: put_archive of one tar (reference)": raw_put,
            f"pai: Sandbox.write_files({FILES} files)": facade_write,
        },
        n=5,
        rounds=7,
        baseline=f"raw SDK: one exec_run of sh -c printf x{FILES}",
        target=3.0,
    )
    # The three wrote the same bytes.
    last = f"f{FILES - 1:03}.txt"
    check = container.exec_run(
        ["sh", "-c", f"cat {raw_folder}/{last} {put_folder}/{last} {facade_folder}/{last}"]
    )
    assert check.output == files[last] * 3, check.output


async def bench_cold(client: Any, manager: Any) -> None:
    from pai.sandbox import create_sandbox

    counter = 0

    async def facade() -> float:
        nonlocal counter
        counter += 1
        key = f"cold-{RUN_ID}-{counter}"
        start = time.perf_counter()
        result = await create_sandbox(manager.handle(key)).run_command("true")
        elapsed = time.perf_counter() - start
        assert result.exit_code == 0, result
        await manager.dispose(key)
        return elapsed

    async def raw() -> float:
        start = time.perf_counter()
        container = client.containers.run(
            IMAGE,
            ["sleep", "infinity"],
            detach=True,
            network_mode="none",
            labels={RAW_LABEL: RUN_ID},
        )
        result = container.exec_run("true")
        elapsed = time.perf_counter() - start
        assert result.exit_code == 0, result
        container.remove(force=True)
        return elapsed

    ops: dict[str, Callable[[], Awaitable[float]]] = {
        "raw SDK: containers.run(detach=True) + exec_run": raw,
        "pai: provider create + first run_command": facade,
    }
    for op in ops.values():
        await op()  # warm up
    rounds = 5
    samples: dict[str, list[float]] = {name: [] for name in ops}
    for _ in range(rounds):
        for name, op in ops.items():
            samples[name].append(await op())
    _report(
        'cold first command: a new container and its first "true"',
        samples,
        baseline="raw SDK: containers.run(detach=True) + exec_run",
        target=1.2,
        count=1,
    )


def _rss_bytes() -> int:
    """This process's resident memory now (Linux /proc; 0 elsewhere)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


async def bench_concurrent(sandbox: Any, provider: Any) -> None:
    """Host threads and memory while CONCURRENT commands run at once on one sandbox."""
    await sandbox.run_command("true")
    rounds: list[tuple[float, int, int]] = []
    for _ in range(3):
        threads_before, rss_before = threading.active_count(), _rss_bytes()
        peak_threads, peak_rss = threads_before, rss_before

        async def watch() -> None:
            nonlocal peak_threads, peak_rss
            while True:
                peak_threads = max(peak_threads, threading.active_count())
                peak_rss = max(peak_rss, _rss_bytes())
                await anyio.sleep(0.005)

        async def one() -> None:
            result = await sandbox.run_command("true")
            assert result.exit_code == 0, result

        start = time.perf_counter()
        async with anyio.create_task_group() as outer:
            outer.start_soon(watch)
            async with anyio.create_task_group() as group:
                for _ in range(CONCURRENT):
                    group.start_soon(one)
            outer.cancel_scope.cancel()
        elapsed = time.perf_counter() - start
        rounds.append((elapsed, peak_threads - threads_before, peak_rss - rss_before))
    wall = statistics.median(r[0] for r in rounds)
    threads = max(r[1] for r in rounds)
    rss = max(r[2] for r in rounds)
    limit = provider.max_concurrent_commands
    print(f'{CONCURRENT} concurrent run_command("true") on one sandbox  (3 rounds)')
    print(f"  wall clock (median)                                        {wall * 1e3:8.1f} ms")
    print(f"  host threads added at the peak (max)                       {threads:8d}")
    print(f"  host RSS growth at the peak (max)                          {rss / 2**20:8.1f} MiB")
    target = limit + 2
    verdict = "met" if threads <= target else "MISSED"
    print(f"  target threads <= {target} (max_concurrent_commands={limit} + 2): {verdict}")


async def main() -> None:
    client = _client()
    from pai.sandbox import create_sandbox, create_sandbox_session_manager
    from pai.sandbox_docker import DockerSandboxProvider

    provider = DockerSandboxProvider(IMAGE, namespace=NAMESPACE)
    manager = create_sandbox_session_manager(provider=provider)
    print(f"Docker engine {client.version().get('Version')}, image {IMAGE}, one run")
    try:
        await bench_warm(client, create_sandbox(manager.handle(f"warm-{RUN_ID}")), provider)
        await bench_concurrent(create_sandbox(manager.handle(f"many-{RUN_ID}")), provider)
        await bench_cold(client, manager)
    finally:
        with anyio.CancelScope(shield=True):
            for info in await provider.list_instances():
                await provider.destroy(info.key)
            left = len(await provider.list_instances())
            await manager.aclose()
            for container in client.containers.list(
                all=True, filters={"label": f"{RAW_LABEL}={RUN_ID}"}
            ):
                container.remove(force=True)
            left += len(
                client.containers.list(all=True, filters={"label": f"{RAW_LABEL}={RUN_ID}"})
            )
            print(f"cleanup: {left} benchmark containers left")
            client.close()


if __name__ == "__main__":
    anyio.run(main, backend="asyncio")
