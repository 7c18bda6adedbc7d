"""CLI start-up cost. Run:  uv run python benchmarks/bench_cli.py   (or: uv run nox -s bench)

Prints how long ``pai --help``, ``pai --version`` and ``pai plugins`` take, cold, against
``python -c pass`` (the interpreter's own start-up), with ``import pai.core`` alone for
reference: medians of interleaved runs, their ratio to the baseline, and the CPU time (user +
system) each process used, which a busy machine inflates less than the wall time. Target:
``pai --help`` and ``pai --version`` under 0.5 s of wall time.

Cold means a fresh interpreter for every run, as when a person types the command: nothing is
cached in the process, every plugin is discovered and imported again. The operating system's
file cache is warm (one untimed run of each command first), and the bytecode (``.pyc``) is
cached, as it is once a package is installed: the untimed run writes it to a private
``PYTHONPYCACHEPREFIX`` directory, so the benchmark neither depends on nor changes the
environment's ``__pycache__`` folders. A last line shows ``pai --help`` with no bytecode at all
(every module compiled from source on each run, as under ``PYTHONDONTWRITEBYTECODE=1`` with
nothing cached), for information.

The commands run as ``python -m pai.core ...``, the documented equivalent of the ``pai``
script, with their output piped.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

RUNS = 15
TARGET = 0.5
"""Seconds of wall time ``pai --help`` and ``pai --version`` must stay under."""

_PAI = [sys.executable, "-m", "pai.core"]

COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "python -c 'import pai.core'": [sys.executable, "-c", "import pai.core"],
    "pai --version": [*_PAI, "--version"],
    "pai --help": [*_PAI, "--help"],
    "pai plugins": [*_PAI, "plugins"],
}
TARGETED = ("pai --version", "pai --help")


def _once(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one run of ``argv``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _environment(pycache: str, *, write: bool) -> dict[str, str]:
    """The runs' environment: bytecode read from ``pycache``, and written there if ``write``."""
    skip = ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")
    env = {key: value for key, value in os.environ.items() if key not in skip}
    env["PYTHONPYCACHEPREFIX"] = pycache
    if not write:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:7.1f} ms"


def main() -> None:
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-cli-pycache-") as pycache:
        env = _environment(pycache, write=True)
        for argv in COMMANDS.values():
            _once(argv, env)  # warm the file cache and write the bytecode
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in COMMANDS}
        for _ in range(RUNS):
            for name, argv in COMMANDS.items():
                samples[name].append(_once(argv, env))
    with tempfile.TemporaryDirectory(prefix="bench-cli-empty-") as empty:
        no_bytecode = _environment(empty, write=False)
        bare = [_once(COMMANDS["pai --help"], no_bytecode) for _ in range(max(RUNS // 3, 3))]

    walls = {name: statistics.median(w for w, _ in values) for name, values in samples.items()}
    cpus = {name: statistics.median(c for _, c in values) for name, values in samples.items()}
    base = walls["python -c pass"]
    print(
        f"CLI start-up, cold (a fresh interpreter per run; file cache warm; bytecode cached), "
        f"median of {RUNS} interleaved runs; load average {load:.2f} at the start "
        f"on {os.cpu_count()} CPUs"
    )
    for name in COMMANDS:
        low = min(w for w, _ in samples[name])
        high = max(w for w, _ in samples[name])
        print(
            f"  {name:<28} {_ms(walls[name])} wall ({_ms(low)} .. {_ms(high)})  "
            f"{_ms(cpus[name])} CPU   ratio to python -c pass: {walls[name] / base:5.2f}x"
        )
    for name in TARGETED:
        verdict = "met" if walls[name] < TARGET else "MISSED"
        print(f"  {name}: {_ms(walls[name]).strip()} (target < {TARGET * 1e3:.0f} ms: {verdict})")
    if load > (os.cpu_count() or 1):
        print(
            "  the machine was busy (load average above its CPU count): the wall times include "
            "waiting for a CPU, and the CPU times are the closer figure; run it on a quiet machine"
        )
    print(
        f"  for information, pai --help with no bytecode (compiled on every run), median of "
        f"{len(bare)}: {_ms(statistics.median(w for w, _ in bare)).strip()} wall, "
        f"{_ms(statistics.median(c for _, c in bare)).strip()} CPU"
    )


if __name__ == "__main__":
    main()
