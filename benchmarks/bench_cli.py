"""CLI start-up cost. Run:  uv run python benchmarks/bench_cli.py   (or: uv run nox -s bench)

Prints the wall time of ``pai plugins`` (plugin discovery over every installed distribution,
output piped) against ``python -c pass`` (the interpreter's own start-up), as medians of
interleaved runs, and their ratio. Heavy provider SDKs are imported only when a provider is
chosen, so discovery should cost little more than importing pai-core itself, which is shown too.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

RUNS = 15

COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "python -c 'import pai.core'": [sys.executable, "-c", "import pai.core"],
    "pai plugins": [sys.executable, "-m", "pai.core.cli", "plugins"],
}


def _once(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main() -> None:
    for argv in COMMANDS.values():
        _once(argv)  # warm the file cache
    samples: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(RUNS):
        for name, argv in COMMANDS.items():
            samples[name].append(_once(argv))
    base = statistics.median(samples["python -c pass"])
    print(f"CLI start-up, median of {RUNS} interleaved runs")
    for name, values in samples.items():
        median = statistics.median(values)
        print(
            f"  {name:<30} {median * 1e3:8.1f} ms   ratio to python -c pass: {median / base:5.2f}x"
        )


if __name__ == "__main__":
    main()
