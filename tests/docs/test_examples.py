"""Every fenced ``python`` block of the READMEs and of docs/ is run (`uv run nox -s examples`), and
every ``bash``, ``sh`` and ``console`` block too (see :func:`test_shell_example`).

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
import os
import re
import subprocess
import sys
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


@dataclass
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    code: str
    lang: str = "python"
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


PYTHON = ("python", "py")
SHELL = ("bash", "sh", "shell", "console")


def python_blocks(path: Path) -> Iterator[Block]:
    return fenced_blocks(path, PYTHON)


def fenced_blocks(path: Path, langs: tuple[str, ...]) -> Iterator[Block]:
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
        if lang in langs:
            body = [
                line[len(indent) :] if line.startswith(indent) else line
                for line in lines[index + 1 : end]
            ]
            yield _block(path, index + 1, "\n".join(body) + "\n", lang)
        index = end + 1


def _block(path: Path, line: int, code: str, lang: str = "python") -> Block:
    block = Block(path=path, line=line, code=code, lang=lang)
    first = code.lstrip("\n").split("\n", 1)[0].strip()
    if (match := NOT_RUN.match(first)) is not None:
        block.skip = match["reason"].strip()
    elif CONTINUES.match(first) and lang in PYTHON:
        block.continues = True
    elif MARKER.match(first):
        raise ValueError(
            f"{block.where}: unknown marker {first!r}; use '# docs: not run (<reason>)' "
            "or '# docs: continues' (Python blocks only)"
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


SHELL_BLOCKS = [block for path in markdown_files() for block in fenced_blocks(path, SHELL)]


def console_steps(code: str) -> list[tuple[str, list[str]]]:
    """A ``console`` block's commands (lines starting ``$ ``), each with the lines shown after
    it: what it must print (``*`` in a shown line stands for any text)."""
    steps: list[tuple[str, list[str]]] = []
    for line in code.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line)
        elif line.strip():
            raise ValueError(f"a console block's first line must be a '$ ' command: {line!r}")
    return steps


def _shell(script: str, where: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # The environment running the tests is the reader's: its bin folder (the `pai` command)
    # comes first on PATH, and no key of the developer's reaches a command.
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "E2B_API_KEY")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, (
        f"{where}: exit status {done.returncode}\n--- stdout\n{done.stdout[-3000:]}"
        f"\n--- stderr\n{done.stderr[-3000:]}"
    )
    return done


def _matches(line: str, shown: str) -> bool:
    """Whether ``line`` is what ``shown`` shows, ``*`` standing for any text (nothing else is a
    pattern: brackets are TOML's, not a character class)."""
    pattern = ".*".join(re.escape(part) for part in shown.split("*"))
    return re.fullmatch(pattern, line) is not None


@pytest.mark.parametrize("block", SHELL_BLOCKS, ids=[block.where for block in SHELL_BLOCKS])
def test_shell_example(block: Block, tmp_path: Path) -> None:
    """Each ``bash``/``sh`` block runs (``bash -euo pipefail``) in a temporary folder and must
    exit 0; each ``console`` block's commands run in turn and print what the block shows."""
    if block.skip is not None:
        pytest.skip(block.skip)
    if block.lang != "console":
        _shell(block.code, block.where, tmp_path)
        return
    for command, shown in console_steps(block.code):
        printed = _shell(command, f"{block.where}: $ {command}", tmp_path).stdout.splitlines()
        while shown and not shown[-1].strip():
            shown.pop()
        same = len(printed) == len(shown) and all(
            _matches(line, pattern) for line, pattern in zip(printed, shown, strict=True)
        )
        report = "\n".join([*printed, "--- not what the block shows:", *shown])
        assert same, f"{block.where}: $ {command} printed\n{report}"


def test_blocks_found() -> None:
    """The collector finds blocks: a broken fence pattern would otherwise pass with none."""
    assert len(CHAINS) >= 10, [chain.blocks[0].where for chain in CHAINS]
    assert len(SHELL_BLOCKS) >= 10, [block.where for block in SHELL_BLOCKS]
