"""``pai sandbox exec / ls / rm / prune`` with ``provider = "e2b"``, against the E2B emulator.

The configuration is a ``pai.toml`` in a temporary folder; the emulator's key and URLs come from
the ``E2B_*`` environment variables, as they would for a user.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from pai.core.cli import create_cli
from pai.core.testing import reset_plugins
from pai.sandbox_e2b.testing import E2BEmulator


@pytest.fixture(autouse=True)
def configured(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, emulator: E2BEmulator, namespace: str
) -> Iterator[str]:
    for name in list(os.environ):
        if name.startswith(("PAI_", "E2B_")):
            monkeypatch.delenv(name)
    for name, value in emulator.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PAI_LOAD_PLUGINS", "pai-sandbox,pai-sandbox-e2b")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pai.toml").write_text(
        '[capabilities.sandbox]\nprovider = "e2b"\n\n'
        f'[capabilities.sandbox.e2b]\nnamespace = "{namespace}"\ntimeout = 120\n'
    )
    reset_plugins()
    yield namespace
    reset_plugins()


def invoke(*args: str) -> Result:
    return CliRunner().invoke(create_cli(), list(args), catch_exceptions=False)


def listed() -> list[str]:
    result = invoke("sandbox", "ls", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["provider"] == "e2b"
    return sorted(row["key"] for row in data["instances"])


def test_exec_runs_in_an_e2b_sandbox_and_passes_the_exit_status_through(
    emulator: E2BEmulator, configured: str
) -> None:
    key = uuid.uuid4().hex
    result = invoke("sandbox", "exec", "--key", key, "--", "sh", "-c", "echo hi from e2b; exit 3")
    assert result.exit_code == 3, result.output
    assert "hi from e2b" in result.stdout
    assert len(emulator.find(**{"pai.namespace": configured})) == 1
    invoke("sandbox", "rm", key)


def test_a_second_exec_reaches_the_same_sandbox(configured: str) -> None:
    key = uuid.uuid4().hex
    assert invoke("sandbox", "exec", "--key", key, "--", "sh", "-c", "echo 1 > n").exit_code == 0
    again = invoke("sandbox", "exec", "--key", key, "--", "cat", "n")
    assert (again.exit_code, again.stdout.strip()) == (0, "1")
    invoke("sandbox", "rm", key)


def test_ls_rm_and_prune_see_the_namespaces_sandboxes(
    emulator: E2BEmulator, configured: str
) -> None:
    first, second = sorted(uuid.uuid4().hex for _ in range(2))
    for key in (first, second):
        assert invoke("sandbox", "exec", "--key", key, "--", "true").exit_code == 0
    assert listed() == [first, second]

    assert invoke("sandbox", "rm", first).exit_code == 0
    assert listed() == [second]

    assert invoke("sandbox", "prune", "--yes").exit_code == 0
    assert listed() == []
    assert emulator.find(**{"pai.namespace": configured}) == []
