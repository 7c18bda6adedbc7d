"""``pai runs ls|cancel|resume`` through the real command line (click's runner), on a
:class:`JournalEngine` that a plugin (a real distribution written to ``sys.path``) registers as
``[durability] engine = "journal"``: runs that succeeded, failed and crashed are listed, one is
cancelled and resumed, and what cannot be done says why."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner, Result

from pai.core import DurabilityError, UnknownDurableRunError
from pai.core.cli import create_cli
from pai.core.ext import DurableRunAdmin, RunSpec, Steps
from pai.core.testing import JournalEngine, SimulatedCrash

Run = Callable[..., Result]

PLUGIN = '''
from pai.core import DurabilityError
from pai.core.ext import DurabilityRegistration, hookimpl

ENGINE = None


class PlainEngine:
    """An engine without the admin side."""

    name = "plain"

    async def start(self, host): ...
    async def run(self, spec): ...
    async def aclose(self): ...


class UnreachableEngine(PlainEngine):
    name = "unreachable"

    def __init__(self, url):
        self.url = url

    async def list_runs(self, *, status=None, limit=100):
        raise DurabilityError(f"cannot reach {self.url}: connection refused")

    async def cancel_run(self, run_id): ...
    async def resume_run(self, run_id): ...
    async def aclose_admin(self): ...


@hookimpl
def pai_durability_engines():
    return [
        DurabilityRegistration(name="journal", factory=lambda settings: ENGINE),
        DurabilityRegistration(name="plain", factory=lambda settings: PlainEngine()),
        DurabilityRegistration(
            name="unreachable",
            factory=lambda settings: UnreachableEngine(settings.options["url"]),
        ),
    ]
'''


class Host:
    """Runs two steps, ``a`` then ``b``; a thread id of ``fail`` fails in ``b``."""

    async def execute(self, spec: RunSpec, steps: Steps) -> Any:
        return [await steps.step("a"), await steps.step("b")]

    async def perform(self, spec: RunSpec, name: str, payload: Any) -> Any:
        if name == "b" and spec.thread_id == "fail":
            raise ValueError("boom at b")
        return name


def spec(run_id: str, thread_id: str) -> RunSpec:
    return RunSpec(
        run_id=run_id,
        kind="send",
        thread_id=thread_id,
        agent_name="main",
        scope_key="acme",
        user_key=None,
    )


async def recorded_runs(engine: JournalEngine) -> None:
    """``ok`` succeeded, ``bad`` failed, ``lost`` crashed before step ``b`` (pending)."""
    await engine.start(Host())
    await engine.run(spec("ok", "t1"))
    with pytest.raises(ValueError, match="boom"):
        await engine.run(spec("bad", "fail"))
    engine.crash_at("b")
    with pytest.raises(SimulatedCrash):
        await engine.run(spec("lost", "t3"))


@pytest.fixture
def engine() -> JournalEngine:
    journal = JournalEngine()
    anyio.run(recorded_runs, journal)
    return journal


@pytest.fixture
def pai(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_plugins: None, engine: JournalEngine
) -> Iterator[Run]:
    """``pai runs ...`` in an empty folder, the test engines' plugin installed."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    site = tmp_path / "site"
    site.mkdir()
    (site / "pai_test_journal_runs.py").write_text(textwrap.dedent(PLUGIN))
    info = site / "pai_test_journal_runs-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: pai-test-journal-runs\nVersion: 1.0\n"
    )
    (info / "entry_points.txt").write_text("[pai]\npai-test-journal-runs = pai_test_journal_runs\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PAI_LOAD_PLUGINS", "pai-test-journal-runs")
    import pai_test_journal_runs  # pyright: ignore[reportMissingImports]

    pai_test_journal_runs.ENGINE = engine

    def run(*args: str, toml: str = '[durability]\nengine = "journal"\n') -> Result:
        (work / "pai.toml").write_text(toml)
        return CliRunner().invoke(create_cli(), ["runs", *args])

    yield run
    sys.modules.pop("pai_test_journal_runs", None)


def test_the_journal_engine_is_a_run_admin() -> None:
    assert isinstance(JournalEngine(), DurableRunAdmin)


def test_ls_lists_the_runs_newest_first_with_their_status(pai: Run) -> None:
    result = pai("ls")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split() == [
        "RUN",
        "STATUS",
        "THREAD",
        "AGENT",
        "CREATED",
        "UPDATED",
        "EXECUTOR",
        "ERROR",
    ]
    rows = [line.split()[:4] for line in lines[1:]]
    assert rows == [
        ["lost", "pending", "t3", "main"],
        ["bad", "failed", "fail", "main"],
        ["ok", "succeeded", "t1", "main"],
    ]
    assert "ValueError: boom at b" in lines[2]


def test_ls_json_has_stable_keys_and_filters(pai: Run) -> None:
    result = pai("ls", "--json")
    assert result.exit_code == 0, result.output
    runs = json.loads(result.output)["runs"]
    assert [run["id"] for run in runs] == ["lost", "bad", "ok"]
    assert set(runs[0]) == {
        "id",
        "status",
        "thread",
        "agent",
        "created_at",
        "updated_at",
        "executor",
        "error",
        "engine_status",
    }
    assert runs[1]["error"] == "ValueError: boom at b"
    assert runs[2]["error"] is None

    failed = json.loads(pai("ls", "--status", "failed", "--json").output)["runs"]
    assert [run["id"] for run in failed] == ["bad"]
    newest = json.loads(pai("ls", "--limit", "1", "--json").output)["runs"]
    assert [run["id"] for run in newest] == ["lost"]
    assert pai("ls", "--status", "cancelled").stderr == "pai: no cancelled durable runs recorded\n"
    wrong = pai("ls", "--status", "done")
    assert wrong.exit_code == 2
    assert "'done' is not one of 'pending', 'running', 'succeeded'" in wrong.output


def test_cancel_then_resume(pai: Run, engine: JournalEngine) -> None:
    result = pai("cancel", "lost")
    assert result.exit_code == 0, result.output
    assert result.stdout == "lost\n"
    assert "pai runs resume lost" in result.stderr
    [cancelled] = json.loads(pai("ls", "--status", "cancelled", "--json").output)["runs"]
    assert cancelled["id"] == "lost"
    # A cancelled run is not recovered, and running it again says why.
    assert engine.pending() == []
    with pytest.raises(DurabilityError, match="'lost' was cancelled"):
        anyio.run(engine.run, spec("lost", "t3"))

    result = pai("resume", "lost", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"id": "lost", "status": "pending"}
    assert engine.pending() == ["lost"]
    # The engine's next recovery finishes it; step a is replayed, only b runs.
    engine.executed.clear()
    assert anyio.run(engine.recover) == [["a", "b"]]
    assert engine.executed == [("lost", "b")]
    [done] = json.loads(pai("ls", "--limit", "1", "--json").output)["runs"]
    assert done["status"] == "succeeded"


def test_an_unknown_run_is_named_with_exit_status_1(pai: Run) -> None:
    for command in ("cancel", "resume"):
        result = pai(command, "nope")
        assert result.exit_code == 1, result.output
        assert result.stderr.startswith("Error: no durable run 'nope' is recorded")
    with pytest.raises(UnknownDurableRunError) as caught:
        anyio.run(JournalEngine().cancel_run, "nope")
    assert caught.value.run_id == "nope"
    assert isinstance(caught.value, LookupError)


def test_a_finished_run_is_neither_cancelled_nor_resumed(pai: Run) -> None:
    result = pai("cancel", "ok")
    assert result.exit_code == 1
    assert "durable run 'ok' already succeeded; there is nothing to cancel" in result.stderr
    result = pai("resume", "bad")
    assert result.exit_code == 1
    assert "durable run 'bad' already failed" in result.stderr


def test_without_durability_it_says_what_to_add(pai: Run) -> None:
    for args in (("ls",), ("cancel", "x"), ("resume", "x")):
        result = pai(*args, toml="")
        assert result.exit_code == 2
        assert "no [durability] is configured" in result.stderr
        assert 'engine = "dbos"' in result.stderr


def test_an_engine_without_admin_is_named(pai: Run) -> None:
    result = pai("ls", toml='[durability]\nengine = "plain"\n')
    assert result.exit_code == 2
    assert "the durability engine 'plain'" in result.stderr
    assert "does not implement pai.core.ext.DurableRunAdmin" in result.stderr


def test_a_database_password_is_never_printed(pai: Run) -> None:
    toml = '[durability]\nengine = "unreachable"\nurl = "postgresql://app:topsecret@db/runs"\n'
    result = pai("ls", toml=toml)
    assert result.exit_code == 1
    assert "cannot reach postgresql://app:***@db/runs" in result.stderr
    assert "topsecret" not in result.output


def test_runs_is_a_pai_command(pai: Run) -> None:
    result = CliRunner().invoke(create_cli(), ["--help"])
    assert "runs" in result.output
    result = pai("--help")
    assert "List, cancel and resume durable runs" in result.output
