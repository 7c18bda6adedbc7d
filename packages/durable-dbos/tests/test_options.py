"""DbosOptions: what is accepted, what is refused with which message, and that no message or repr
shows the system database's password."""

from __future__ import annotations

import socket

import pytest
from pydantic import ValidationError

from pai.core import ConfigError
from pai.durable_dbos import DEFAULT_APPLICATION_VERSION, DbosEngine, DbosOptions
from pai.durable_dbos._executor import database_identity
from pai.durable_dbos._options import mask_url

SECRET = "s3cret-pw"
PG = f"postgresql://app:{SECRET}@db.internal:5432/runs"


def test_defaults() -> None:
    options = DbosOptions(system_database_url="sqlite:///runs.sqlite")
    assert options.app_name == "pai"
    assert options.application_version == DEFAULT_APPLICATION_VERSION == "pai-durable-1"
    assert options.recovery_interval == 1.0
    assert options.system_schema == "dbos"
    assert options.takeover_after == 30.0
    assert options.is_sqlite
    assert DbosEngine(options).name == "dbos"


def test_takeover_is_turned_off_by_none_or_false() -> None:
    url = "sqlite:///runs.sqlite"
    assert DbosOptions(system_database_url=url, takeover_after=None).takeover_after is None
    # What `takeover_after = false` in pai.toml gives (TOML has no null).
    assert (
        DbosOptions.model_validate(
            {"system_database_url": url, "takeover_after": False}
        ).takeover_after
        is None
    )


def test_the_default_executor_id_is_the_host_and_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PAI_DURABLE_EXECUTOR", raising=False)
    host = socket.gethostname()
    assert DbosOptions(system_database_url="sqlite:///x.sqlite").executor_id == f"pai:{host}"
    monkeypatch.setenv("PAI_DURABLE_EXECUTOR", "worker-2")
    options = DbosOptions(system_database_url="sqlite:///x.sqlite")
    assert options.executor_id == f"pai:{host}:worker-2"
    assert DbosOptions(
        system_database_url="sqlite:///x.sqlite", executor_id="web-1"
    ).executor_id == ("web-1")


def test_the_password_is_never_shown() -> None:
    options = DbosOptions(system_database_url=PG)
    assert SECRET not in repr(options)
    assert SECRET not in repr(DbosEngine(options))
    assert options.display_url == "postgresql://app:***@db.internal:5432/runs"
    assert SECRET not in database_identity(options)
    assert mask_url(f"postgresql://app@db/runs?password={SECRET}&sslmode=require") == (
        "postgresql://app@db/runs?password=***&sslmode=require"
    )
    with pytest.raises(ValidationError) as caught:
        DbosOptions(system_database_url=f"mysql://app:{SECRET}@db/runs")
    assert SECRET not in str(caught.value)
    with pytest.raises(ConfigError) as config_error:
        DbosEngine(system_database_url=f"mysql://app:{SECRET}@db/runs", executor_id="")
    message = str(config_error.value)
    assert SECRET not in message
    assert "mysql://app:***@db/runs" in message
    assert "executor_id" in message


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"system_database_url": "sqlite:///:memory:"}, "names no file"),
        ({"system_database_url": "sqlite://"}, "names no file"),
        ({"system_database_url": "runs.sqlite"}, "neither sqlite"),
        ({"system_database_url": "postgresql://"}, "names no server"),
        ({"app_name": "My App"}, "lowercase"),
        ({"app_name": "ab"}, "3 to 256"),
        ({"executor_id": "has space"}, "executor_id 'has space'"),
        ({"recovery_interval": 0}, "0.01 to 60"),
        ({"takeover_after": 0.1}, "0.5 to 86400"),
        ({"takeover_after": float("inf")}, "0.5 to 86400"),
        ({"recovery_interval": float("nan")}, "0.01 to 60"),
        ({"system_schema": "pg_catalog"}, "not starting with pg_"),
        ({"system_schema": "a-b"}, "plain PostgreSQL name"),
        ({"recovery": 1}, "recovery: Extra inputs are not permitted"),
    ],
)
def test_bad_options_are_refused_by_name(options: dict[str, object], expected: str) -> None:
    given = {"system_database_url": "sqlite:///runs.sqlite", **options}
    with pytest.raises(ConfigError, match="DbosEngine options") as caught:
        DbosEngine(**given)
    assert expected in str(caught.value)


def test_options_and_keywords_are_not_mixed() -> None:
    options = DbosOptions(system_database_url="sqlite:///runs.sqlite")
    with pytest.raises(TypeError, match="not both"):
        DbosEngine(options, recovery_interval=0.5)


def test_options_are_frozen() -> None:
    options = DbosOptions(system_database_url="sqlite:///runs.sqlite")
    with pytest.raises(ValidationError):
        options.app_name = "other"


def test_database_identity_ignores_the_spelling(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(str(tmp_path))
    relative = DbosOptions(system_database_url="sqlite:///runs.sqlite")
    absolute = DbosOptions(system_database_url=f"sqlite:///{tmp_path}/runs.sqlite")
    assert database_identity(relative) == database_identity(absolute)
    other_schema = DbosOptions(system_database_url=PG, system_schema="tenant2")
    assert database_identity(other_schema) != database_identity(DbosOptions(system_database_url=PG))
