"""``pai storage check`` and ``pai storage migrate`` against the real server, through the real
command line (click's runner): versions, what is pending, exit statuses, the password masked."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from click.testing import CliRunner, Result

from pai.core.cli import create_cli
from pai.core.testing import reset_plugins
from pai.storage_postgres import LATEST_VERSION
from pai.storage_postgres.testing import TestSchemas

Run = Callable[..., Result]


@pytest.fixture
def pai(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Run]:
    monkeypatch.chdir(tmp_path)  # no pai.toml above
    reset_plugins()

    def run(url: str, *args: str) -> Result:
        command = list(args) if args[0] == "config" else ["storage", *args]
        return CliRunner().invoke(
            create_cli(), command, env={"PAI_STORAGE__URL": url}, catch_exceptions=False
        )

    yield run
    reset_plugins()


def _password(url: str) -> str:
    return urlsplit(url).password or "no password"


def test_check_reports_pending_then_migrate_applies_then_check_is_clean(
    pai: Run, postgres_url: str, schemas: TestSchemas
) -> None:
    run = pai
    url = f"{postgres_url}?schema={schemas.fresh()}&migrate=false"

    before = run(url, "check")
    assert before.exit_code == 1, before.output
    assert f"version: 0 (this code: {LATEST_VERSION})" in before.stdout
    assert "1: threads, messages and run leases" in before.stdout
    assert "run `pai storage migrate`" in before.stderr

    migrated = run(url, "migrate")
    assert migrated.exit_code == 0, migrated.output
    assert "applied:\n  1: threads, messages and run leases\n  2: runs and their frames" in (
        migrated.stdout
    )

    again = run(url, "migrate", "--json")
    assert json.loads(again.stdout)["just_applied"] == []

    after = run(url, "check", "--json")
    assert after.exit_code == 0, after.output
    report = json.loads(after.stdout)
    assert (report["status"], report["current"], report["latest"]) == (
        "ok",
        LATEST_VERSION,
        LATEST_VERSION,
    )
    assert report["pending"] == []
    for result in (before, migrated, again, after):
        assert _password(postgres_url) not in result.output
    assert "pai_test:***@" in report["storage"]


def test_check_of_an_unreachable_server_exits_1_with_the_reason(
    pai: Run, postgres_url: str
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"postgresql://pai_test:hush-hush-pw@127.0.0.1:{port}/pai_test?connect_timeout=2"
    result = pai(url, "check")
    assert result.exit_code == 1
    assert "Connection refused" in result.stderr
    assert "start the server" in result.stderr
    assert "hush-hush-pw" not in result.output
    assert "pai_test:***@127.0.0.1" in result.stderr


def test_a_misspelt_option_is_a_usage_error_with_a_did_you_mean(
    pai: Run, postgres_url: str
) -> None:
    result = pai(postgres_url + "?shema=x", "check")
    assert result.exit_code == 2
    assert "did you mean 'schema'?" in result.stderr
    assert _password(postgres_url) not in result.output


def test_pai_config_shows_the_storage_url_with_its_password_masked(
    pai: Run, postgres_url: str
) -> None:
    for args in (("config",), ("config", "--check"), ("config", "--json")):
        result = pai(postgres_url + "?schema=masked", *args)
        assert result.exit_code == 0, result.output
        assert _password(postgres_url) not in result.output
        assert "pai_test:***@127.0.0.1" in result.output
