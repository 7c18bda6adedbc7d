"""Exactly-once sandbox commands under real crashes: a DBOS worker whose tool appends a line in a
local sandbox is killed with SIGKILL around and during the command, then started again; the run
completes and the line is in the sandbox once. Where the command itself was cut off by the
crash, the resumed run gets it as interrupted (exit 255), not run again."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

WORKER = Path(__file__).with_name("dbos_sandbox_worker.py")
POINTS = ("tool:before", "command", "tool:after", "append:1", "model:2")


def _unavailable() -> str | None:
    from pai.sandbox import SandboxError
    from pai.sandbox_local import LocalSandboxProvider

    try:
        asyncio.run(LocalSandboxProvider(state_dir="/nonexistent-pai-probe").probe())
    except SandboxError as error:
        return str(error)
    return None


@pytest.fixture(scope="module", autouse=True)
def _bwrap_works() -> None:
    reason = _unavailable()
    if reason is None:
        return
    if os.environ.get("PAI_REQUIRE_BWRAP") == "1":
        pytest.fail(f"bwrap cannot make a sandbox here (and PAI_REQUIRE_BWRAP=1): {reason}")
    pytest.skip(f"bwrap cannot make a sandbox here: {reason}")


@pytest.fixture
def state() -> Iterator[Path]:
    # Short: the supervisor's socket lives in it, and a Unix socket path holds 107 bytes.
    folder = Path(tempfile.mkdtemp(prefix="sbx", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def work(folder: Path, state: Path, mode: str, point: str | None = None) -> int:
    env = {k: v for k, v in os.environ.items() if k != "PAI_CRASH_AT"}
    if point is not None:
        env["PAI_CRASH_AT"] = point
    with (folder / "worker.log").open("a") as log:
        return subprocess.run(
            [sys.executable, str(WORKER), str(folder), str(state), mode],
            env=env,
            stdout=log,
            stderr=log,
            timeout=180,
            check=False,
        ).returncode


def lines(state: Path) -> str:
    [path] = state.glob("*/*/workspace/lines.txt")
    return path.read_text()


def messages(folder: Path) -> list[Any]:
    return json.loads((folder / "result.json").read_text())


@pytest.fixture(scope="module")
def uncrashed(tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    folder = tmp_path_factory.mktemp("uncrashed")
    state = Path(tempfile.mkdtemp(prefix="sbx", dir="/tmp"))
    try:
        code = work(folder, state, "run")
        assert code == 0, (folder / "worker.log").read_text()[-3000:]
        assert lines(state) == "a\n"
        return messages(folder)
    finally:
        shutil.rmtree(state, ignore_errors=True)


@pytest.mark.parametrize("point", POINTS)
def test_a_killed_worker_resumes_and_the_command_ran_once(
    point: str, tmp_path: Path, state: Path, uncrashed: list[Any]
) -> None:
    first = work(tmp_path, state, "run", point)
    log = tmp_path / "worker.log"
    assert first == -9, log.read_text()[-3000:]
    second = work(tmp_path, state, "recover")
    assert second == 0, log.read_text()[-3000:]
    assert lines(state) == "a\n"  # once, whatever the point
    resumed = messages(tmp_path)
    [tool_result] = [m for m in resumed if m["role"] == "tool"]
    if point == "command":
        # Cut off mid-command: reported as interrupted, and not run again.
        assert tool_result["content"] == "exit 255"
        assert [m["role"] for m in resumed] == [m["role"] for m in uncrashed]
    else:
        assert tool_result["content"] == "exit 0"
        assert resumed == uncrashed
