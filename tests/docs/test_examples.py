"""Every fenced ``python`` block of the READMEs and of docs/ is run (`uv run nox -s examples`).

What is collected: the root README.md, each package's README.md and every docs/**/*.md.

Markers, read from a block's first line:

- ``# docs: not run (<kind>: <reason>)``: the block is reported as skipped with that reason
  (required), and counted under its kind: ``fragment`` (part of a larger program whose other
  names are the reader's), ``needs a service``, ``needs an account``, ``needs generated code``,
  ``not code`` (a signature shown as a block).
- ``# docs: continues``: the block runs in the namespace of the block before it in the same file
  (that one must run too), so a page can build one program in steps. Without it, each block runs
  alone in a fresh namespace.

How a block runs: compiled with top-level ``await`` allowed (``ast.PyCF_ALLOW_TOP_LEVEL_AWAIT``);
when it awaits at top level the code runs as one coroutine under ``anyio.run`` (asyncio), as an
``async def main()`` around the block would. A block that calls ``anyio.run(main)`` itself is plain
code. Each file's blocks run in a temporary working directory of their own, so a block writing
``runs.sqlite`` or ``pai.toml`` leaves nothing behind.

The session prints how many blocks ran and how many were skipped, grouped by reason.
"""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<ticks>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)")
NOT_RUN = re.compile(r"^#\s*docs:\s*not run\s*\((?P<reason>.+)\)\s*$")
CONTINUES = re.compile(r"^#\s*docs:\s*continues\s*$")
MARKER = re.compile(r"^#\s*docs:")

# Blocks in files this collector may not mark yet (another change owns them), by file and a line
# of the block: the reason is given here until the marker moves into the file. An entry that
# matches no block fails test_blocks_found, so a stale one is noticed.
NOT_RUN_ELSEWHERE: dict[tuple[str, str], str] = {
    (
        "packages/durable-temporal/README.md",
        'engine = TemporalEngine(target_host="127.0.0.1:7233", task_queue="support")',
    ): "needs a service: a Temporal server, and `agent` and `storage` are yours",
}


@dataclass
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    code: str
    skip: str | None = None
    continues: bool = False

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT).as_posix()}:{self.line}"


@dataclass
class Chain:
    """One block, or a block and the ``# docs: continues`` blocks after it: one test."""

    blocks: list[Block] = field(default_factory=list[Block])


def markdown_files() -> list[Path]:
    return [
        ROOT / "README.md",
        *sorted(ROOT.glob("packages/*/README.md")),
        *sorted((ROOT / "docs").rglob("*.md")),
    ]


def python_blocks(path: Path) -> Iterator[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        indent, ticks, lang = opening["indent"], opening["ticks"], opening["lang"].lower()
        end = index + 1
        while end < len(lines) and not lines[end].strip().startswith(ticks):
            end += 1
        if lang in ("python", "py"):
            body = [
                line[len(indent) :] if line.startswith(indent) else line
                for line in lines[index + 1 : end]
            ]
            yield _block(path, index + 1, "\n".join(body) + "\n")
        index = end + 1


def _block(path: Path, line: int, code: str) -> Block:
    block = Block(path=path, line=line, code=code)
    for (file, text), reason in NOT_RUN_ELSEWHERE.items():
        if block.where.startswith(f"{file}:") and text in code.splitlines():
            block.skip = reason
            return block
    first = code.lstrip("\n").split("\n", 1)[0].strip()
    if (match := NOT_RUN.match(first)) is not None:
        block.skip = match["reason"].strip()
    elif CONTINUES.match(first):
        block.continues = True
    elif MARKER.match(first):
        raise ValueError(
            f"{block.where}: unknown marker {first!r}; use '# docs: not run (<reason>)' "
            "or '# docs: continues'"
        )
    return block


def chains() -> list[Chain]:
    found: list[Chain] = []
    for path in markdown_files():
        previous: Chain | None = None
        for block in python_blocks(path):
            if block.continues:
                if previous is None or previous.blocks[-1].skip is not None:
                    raise ValueError(f"{block.where}: '# docs: continues' after no block that runs")
                previous.blocks.append(block)
                continue
            previous = Chain([block])
            found.append(previous)
    return found


CHAINS = chains()


def run_block(block: Block, namespace: dict[str, Any]) -> None:
    code = compile(
        block.code,
        block.where,
        "exec",
        flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT,
        dont_inherit=True,
    )
    if code.co_flags & inspect.CO_COROUTINE:

        async def main() -> None:
            await eval(code, namespace)

        anyio.run(main)
    else:
        exec(code, namespace)


@pytest.mark.parametrize("chain", CHAINS, ids=[chain.blocks[0].where for chain in CHAINS])
def test_example(chain: Chain, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = chain.blocks[0]
    if first.skip is not None:
        pytest.skip(first.skip)
    monkeypatch.chdir(tmp_path)
    # No key of the developer's reaches an example: one that would call a real API fails loudly.
    for name in ("OPENAI_API_KEY", "E2B_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    namespace: dict[str, Any] = {"__name__": "__docs_example__"}
    for block in chain.blocks:
        run_block(block, namespace)


def test_blocks_found() -> None:
    """The collector finds blocks (a broken fence pattern would otherwise pass with none), and
    every entry of NOT_RUN_ELSEWHERE still names a block."""
    assert len(CHAINS) >= 10, [chain.blocks[0].where for chain in CHAINS]
    blocks = [block for chain in CHAINS for block in chain.blocks]
    for file, text in NOT_RUN_ELSEWHERE:
        assert any(
            block.where.startswith(f"{file}:") and text in block.code.splitlines()
            for block in blocks
        ), f"NOT_RUN_ELSEWHERE: no block of {file} has the line {text!r}; remove the entry"
