"""pai-skills benchmarks. Run:  uv run python benchmarks/bench_skills.py   (or: uv run nox -s bench)

Prints, in one run:
- ``instructions()`` for 1,000 skills, with and without an ``available`` predicate, in µs per
  call (target <= 1 ms), against joining the same 1,000 catalog lines (the floor);
- loading a plain skill through the tool (``run_tool``), against a tool that returns a constant;
- loading a sandbox skill of 100 files through the in-memory provider, counted in provider round
  trips: the first load (target: one batch write), a second load (target: zero writes, one
  marker read), and a load after the sandbox was re-created;
- ``generate_module`` over a 10 MiB tree (text files and binary fonts/archives), against reading
  the same files from disk.

Times are medians over several rounds. Ratios compare work measured in this same run.
"""

from __future__ import annotations

import os
import random
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
from pydantic import BaseModel

from pai.core import define_tool
from pai.core.testing import run_tool
from pai.sandbox import (
    create_sandbox,
    create_sandbox_session_manager,
)
from pai.sandbox.testing import RecordingProvider
from pai.sandbox_inmemory import create_in_memory_sandbox_provider
from pai.skills import SkillAvailableInput, SkillEntry, SkillFile, define_skills, generate_module

ROUNDS = 7


def median_us(samples: Sequence[float]) -> float:
    return statistics.median(samples) * 1e6


async def timed(fn: Callable[[], Awaitable[object]], calls: int) -> float:
    """Median seconds per call over ROUNDS rounds of ``calls`` calls."""
    rounds: list[float] = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        for _ in range(calls):
            await fn()
        rounds.append((time.perf_counter() - started) / calls)
    return statistics.median(rounds)


def entries(count: int) -> list[SkillEntry[str]]:
    return [
        SkillEntry(
            name=f"skill-{index:04d}",
            description=f"Does task number {index} when the user asks for it, in a few steps.",
            body=f"# Skill {index}\n\nStep one. Step two.\n",
        )
        for index in range(count)
    ]


async def bench_instructions() -> None:
    many = entries(1_000)
    plain = define_skills(skills=many)

    def available(input: SkillAvailableInput[Any, str]) -> bool:
        return not input.skill.name.endswith("7")

    predicate = define_skills(skills=many, available=available)
    lines = [f"- {e.name}: {e.description}" for e in many]

    async def floor() -> str:
        return "\n".join(["## Skills", "", "guidance", "", *lines])

    async def app_only() -> str:
        kept = [
            line
            for e, line in zip(many, lines, strict=True)
            if available(SkillAvailableInput(None, e))
        ]
        return "\n".join(["## Skills", "", "guidance", "", *kept])

    base = await timed(floor, 200)
    app = await timed(app_only, 200)
    without = await timed(plain.instructions, 200)
    with_available = await timed(predicate.instructions, 200)
    print("instructions() for 1,000 skills (target <= 1000 us)")
    print(f"  joining 1,000 lines (floor)       {base * 1e6:9.1f} us")
    print(f"  no available predicate            {without * 1e6:9.1f} us  ({without / base:.1f}x)")
    print(f"  the predicate's own 1,000 calls   {app * 1e6:9.1f} us")
    print(
        f"  a sync available predicate        {with_available * 1e6:9.1f} us  "
        f"({with_available / app:.1f}x the predicate's own calls)"
    )


class NoInput(BaseModel):
    pass


async def bench_plain_load() -> None:
    skills = define_skills(skills=entries(50))
    constant = define_tool(
        id="constant", description="c", input_schema=NoInput, execute=lambda ctx: "text"
    )

    async def load() -> object:
        return await run_tool(skills.tool, input={"name": "skill-0025"})

    async def baseline() -> object:
        return await run_tool(constant, input={})

    base = await timed(baseline, 500)
    loaded = await timed(load, 500)
    print("a plain skill loaded through the tool (run_tool)")
    print(f"  a tool returning a constant       {base * 1e6:9.1f} us")
    print(f"  the skill tool, SKILL.md          {loaded * 1e6:9.1f} us  ({loaded / base:.1f}x)")


def _counts(provider: RecordingProvider) -> dict[str, int]:
    """Calls per operation so far, and the files every ``write_files`` wrote."""
    counts = Counter(call.operation for call in provider.calls)
    return {**counts, "files written": provider.files_written()}


def sandbox_skill(files: int) -> SkillEntry[str]:
    rng = random.Random(7)
    contents: list[SkillFile] = [
        {"path": f"scripts/step{index:02d}.sh", "data": {"type": "text", "text": f"echo {index}\n"}}
        for index in range(20)
    ]
    for index in range(files - 20):
        words = "words " * rng.randint(50, 500)
        contents.append(
            {
                "path": f"references/part{index:02d}.md",
                "data": {"type": "text", "text": f"# Part {index}\n{words}"},
            }
        )
    return SkillEntry(
        name="big-tool",
        description="A sandbox skill with 100 files.",
        body="# Big tool\n",
        files=tuple(contents),
        requires_sandbox=True,
    )


async def bench_sandbox_load() -> None:
    skills = define_skills(skills=[sandbox_skill(100)], sandbox=True)
    provider = RecordingProvider(create_in_memory_sandbox_provider())
    sessions = create_sandbox_session_manager(provider=provider)
    sandbox = create_sandbox(sessions.handle("bench"))
    await sandbox.run_command("true")  # provision first: count only what loading does

    def snapshot() -> dict[str, int]:
        return _counts(provider)

    def delta(before: dict[str, int]) -> str:
        after = _counts(provider)
        changed = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
        return ", ".join(f"{k} {v}" for k, v in sorted(changed.items())) or "nothing"

    async def load() -> object:
        return await run_tool(
            skills.tool, input={"name": "big-tool"}, capabilities={"sandbox": sandbox}
        )

    print("a sandbox skill of 100 files (in-memory provider), provider round trips per load")
    before = snapshot()
    started = time.perf_counter()
    await load()
    first = time.perf_counter() - started
    print(f"  first load (target: one batch)    {delta(before)}  [{first * 1e3:.1f} ms]")
    before = snapshot()
    again = await timed(load, 20)
    after = _counts(provider)
    per_load = {k: (after[k] - before.get(k, 0)) / (20 * ROUNDS) for k in after}
    shown = ", ".join(f"{k} {v:g}" for k, v in sorted(per_load.items()) if v) or "nothing"
    print(f"  current marker (target: 0 writes) {shown}  [{again * 1e3:.2f} ms]")
    await provider.inner.destroy(sandbox.key)
    before = snapshot()
    await load()
    print(f"  after the sandbox was re-created  {delta(before)}")
    await sessions.aclose()


def make_tree(root: Path, total: int) -> int:
    """Skills with text references and binary assets, ``total`` bytes in all."""
    rng = random.Random(11)
    written = 0
    index = 0
    while written < total:
        skill = root / f"skill-{index:02d}"
        (skill / "references").mkdir(parents=True)
        (skill / "assets").mkdir()
        (skill / "SKILL.md").write_text(
            f"---\nname: skill-{index:02d}\ndescription: Skill {index}.\n---\n# Skill {index}\n",
            encoding="utf-8",
        )
        for part in range(10):
            text = ("lorem ipsum dolor sit amet " * 400)[: 8_000 + part * 100]
            (skill / "references" / f"part{part}.md").write_text(text, encoding="utf-8")
            written += len(text)
        for asset in range(3):
            data = rng.randbytes(150_000)  # a font, an archive: incompressible binary
            (skill / "assets" / f"asset{asset}.bin").write_bytes(data)
            written += len(data)
        index += 1
    return written


def bench_generate() -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "skills"
        size = make_tree(root, 10 * 1024 * 1024)
        files = [Path(d) / f for d, _, names in os.walk(root) for f in names]

        def read_all() -> None:
            for path in files:
                path.read_bytes()

        reads: list[float] = []
        generations: list[float] = []
        module_size = 0
        for _ in range(3):
            started = time.perf_counter()
            read_all()
            reads.append(time.perf_counter() - started)
            started = time.perf_counter()
            module = generate_module(root)
            (Path(folder) / "generated.py").write_text(module.text, encoding="utf-8")
            generations.append(time.perf_counter() - started)
            module_size = module.size
        read = statistics.median(reads)
        generated = statistics.median(generations)
        print(f"generate_module over a {size / 2**20:.1f} MiB tree ({len(files)} files)")
        print(f"  reading the files                 {read * 1e3:9.1f} ms")
        print(
            f"  generating and writing the module {generated * 1e3:9.1f} ms  "
            f"({generated / read:.1f}x; module {module_size / 2**20:.1f} MiB)"
        )


async def main() -> None:
    await bench_instructions()
    await bench_plain_load()
    await bench_sandbox_load()
    bench_generate()


if __name__ == "__main__":
    anyio.run(main)
