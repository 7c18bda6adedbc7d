"""``pai storage check`` and ``pai storage migrate`` through the real command line (click's
runner): on SQLite files, on in-process stores, and on backends that plugins register (a real
distribution written to ``sys.path``, whose storage keeps its schema version in a file)."""

from __future__ import annotations

import json
import sqlite3
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from pai.core._cli_storage import MigratableStorage
from pai.core.cli import create_cli

Run = Callable[..., Result]

VERSIONED_PLUGIN = '''
import json
from dataclasses import dataclass
from pathlib import Path

from pai.core import InMemoryStorage, StorageError
from pai.core.ext import StorageRegistration, hookimpl

MIGRATIONS = ("1: threads", "2: leases")


@dataclass(frozen=True)
class Status:
    location: str
    schema: str
    current: int
    latest: int
    applied: tuple
    pending: tuple
    just_applied: tuple = ()


class VersionedStorage(InMemoryStorage):
    """Keeps its schema version in a file named by the URL's path."""

    def __init__(self, url):
        super().__init__()
        self.url = url
        self.file = Path("/" + url.path)

    def _status(self, just_applied=()):
        if "fail" in self.url.url:
            raise StorageError(f"cannot reach {self.url.url}: refused; start it")
        current = json.loads(self.file.read_text()) if self.file.exists() else 0
        return Status(
            location=self.url.url.replace("topsecret", "***"),
            schema="app",
            current=current,
            latest=len(MIGRATIONS),
            applied=MIGRATIONS[:current],
            pending=MIGRATIONS[current:],
            just_applied=just_applied,
        )

    async def schema_status(self):
        return self._status()

    async def migrate(self):
        before = self._status()
        self.file.write_text(json.dumps(len(MIGRATIONS)))
        return self._status(just_applied=before.pending)


class PlainStorage:
    """A storage kept elsewhere that has no schema version to report."""

    async def aclose(self):
        pass


@hookimpl
def pai_storage_backends():
    return [
        StorageRegistration(scheme="versioned", factory=VersionedStorage),
        StorageRegistration(scheme="plain", factory=lambda url: PlainStorage()),
    ]
'''


@pytest.fixture
def pai(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_plugins: None) -> Iterator[Run]:
    """``pai storage ...`` in an empty folder, the test backends' plugin installed."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    site = tmp_path / "site"
    site.mkdir()
    (site / "pai_test_versioned_storage.py").write_text(textwrap.dedent(VERSIONED_PLUGIN))
    info = site / "pai_test_versioned_storage-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: pai-test-versioned-storage\nVersion: 1.0\n"
    )
    (info / "entry_points.txt").write_text(
        "[pai]\npai-test-versioned-storage = pai_test_versioned_storage\n"
    )
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PAI_LOAD_PLUGINS", "pai-test-versioned-storage")

    def run(*args: str, url: str | None = None) -> Result:
        env = {} if url is None else {"PAI_STORAGE__URL": url}
        return CliRunner().invoke(create_cli(), ["storage", *args], env=env)

    yield run
    sys.modules.pop("pai_test_versioned_storage", None)


def test_without_storage_configured_there_is_nothing_to_check_or_migrate(pai: Run) -> None:
    for command in ("check", "migrate"):
        result = pai(command)
        assert result.exit_code == 0, result.output
        assert "no [storage] is configured" in result.stdout


def test_an_in_process_store_has_no_schema(pai: Run) -> None:
    for url in ("memory://", "sqlite://"):
        result = pai("check", url=url)
        assert result.exit_code == 0, result.output
        assert "lives in this process only" in result.stdout


def test_a_new_sqlite_file_is_pending_until_migrate_creates_it(pai: Run, tmp_path: Path) -> None:
    database = tmp_path / "work" / "threads.db"
    url = "sqlite:///threads.db"

    before = pai("check", url=url)
    assert before.exit_code == 1, before.output
    assert "version: 0 (this code:" in before.stdout
    assert "run `pai storage migrate` (SQLite also applies them" in before.stderr
    assert not database.exists(), "check created the database"

    migrated = pai("migrate", url=url)
    assert migrated.exit_code == 0, migrated.output
    assert "applied:\n  1: SQLite schema version 1" in migrated.stdout
    with sqlite3.connect(database) as connection:
        (version,) = connection.execute("PRAGMA user_version").fetchone()
    assert f"version: {version} (this code: {version})" in migrated.stdout

    again = pai("migrate", "--json", url=url)
    assert json.loads(again.stdout)["just_applied"] == []
    after = pai("check", "--json", url=url)
    assert after.exit_code == 0, after.output
    report = json.loads(after.stdout)
    assert (report["status"], report["pending"], report["current"]) == ("ok", [], version)


def test_a_plugin_backend_is_checked_and_migrated_through_its_methods(
    pai: Run, tmp_path: Path
) -> None:
    url = f"versioned://app:topsecret@db{tmp_path}/version.json"

    before = pai("check", url=url)
    assert before.exit_code == 1, before.output
    assert "pending:\n  1: threads\n  2: leases" in before.stdout
    assert "schema: app" in before.stdout

    migrated = pai("migrate", url=url)
    assert migrated.exit_code == 0, migrated.output
    assert "applied:\n  1: threads\n  2: leases" in migrated.stdout
    assert "version: 2 (this code: 2)" in migrated.stdout

    after = pai("check", "--json", url=url)
    assert after.exit_code == 0
    assert json.loads(after.stdout) == {
        "status": "ok",
        "storage": f"versioned://app:***@db{tmp_path}/version.json",
        "schema": "app",
        "current": 2,
        "latest": 2,
        "applied": ["1: threads", "2: leases"],
        "pending": [],
        "just_applied": [],
    }
    for result in (before, migrated, after):
        assert "topsecret" not in result.output


def test_an_unreachable_storage_exits_1_with_its_reason_and_no_password(pai: Run) -> None:
    url = "versioned://app:topsecret@db/fail"
    result = pai("check", url=url)
    assert result.exit_code == 1
    assert "Error: cannot reach versioned://app:***@db/fail: refused; start it" in result.stderr
    assert "topsecret" not in result.output

    as_json = pai("migrate", "--json", url=url)
    assert as_json.exit_code == 1
    assert json.loads(as_json.stdout)["error"]["type"] == "StorageError"
    assert "topsecret" not in as_json.output


def test_a_backend_without_a_schema_version_says_it_manages_its_own(pai: Run) -> None:
    result = pai("check", url="plain://")
    assert result.exit_code == 0, result.output
    assert "the configured storage (PlainStorage) does not report a schema version" in (
        result.stdout
    )


def test_an_unknown_scheme_is_a_usage_error(pai: Run) -> None:
    result = pai("check", url="nosuch://x")
    assert result.exit_code == 2
    assert "no storage backend is installed for the scheme 'nosuch'" in result.stderr


def test_the_protocol_is_structural() -> None:
    class Minimal:
        async def schema_status(self) -> object: ...
        async def migrate(self) -> object: ...

    assert isinstance(Minimal(), MigratableStorage)
    assert not isinstance(object(), MigratableStorage)
