"""Options from the URL and from keyword arguments: validated before anything connects, each
mistake one ConfigError naming the URL (password masked) and the fix."""

from __future__ import annotations

import pytest

from pai.core import ConfigError, open_storage
from pai.storage_postgres import PostgresOptions, PostgresStorage, mask_url
from pai.storage_postgres._options import parse_url

URL = "postgresql://app:s3cr3t-pw@127.0.0.1:5432/appdb"


def refused(url: str, **options: object) -> str:
    with pytest.raises(ConfigError) as raised:
        PostgresStorage(url, **options)  # pyright: ignore[reportArgumentType]
    message = str(raised.value)
    assert "s3cr3t-pw" not in message, f"the password leaked into {message!r}"
    return message


def test_defaults() -> None:
    storage = PostgresStorage(URL)
    assert storage.options == PostgresOptions()
    assert storage.options.schema == "public"


def test_options_come_from_the_query_and_leave_libpq_parameters_to_libpq() -> None:
    settings = parse_url(
        URL + "?schema=tenant1&pool_min_size=0&pool_max_size=4&connect_timeout=2.5"
        "&migrate=false&sslmode=disable&application_name=worker"
    )
    assert settings.options == PostgresOptions(
        schema="tenant1", pool_min_size=0, pool_max_size=4, connect_timeout=2.5, migrate=False
    )
    assert settings.conninfo["sslmode"] == "disable"
    assert settings.conninfo["application_name"] == "worker"
    assert settings.conninfo["connect_timeout"] == "3", "libpq's timeout is whole seconds"
    assert "schema" not in settings.conninfo
    assert (settings.conninfo["host"], settings.conninfo["port"]) == ("127.0.0.1", "5432")
    assert (settings.conninfo["user"], settings.conninfo["dbname"]) == ("app", "appdb")


def test_keyword_arguments_set_options_and_may_repeat_the_url() -> None:
    storage = PostgresStorage(URL + "?schema=a", schema="a", pool_max_size=3)
    assert (storage.options.schema, storage.options.pool_max_size) == ("a", 3)


def test_a_keyword_argument_contradicting_the_url_is_refused() -> None:
    message = refused(URL + "?schema=a", schema="b")
    assert "schema='a' in the URL and schema='b' as an argument" in message


def test_both_schemes_are_accepted() -> None:
    assert parse_url("postgres://app@db/x").conninfo["host"] == "db"
    assert parse_url("postgresql://app@db/x").conninfo["dbname"] == "x"


def test_an_unknown_query_key_is_refused_with_a_did_you_mean() -> None:
    message = refused(URL + "?shema=tenant1")
    assert "unknown option 'shema'" in message
    assert "did you mean 'schema'?" in message
    assert "postgresql://app:***@127.0.0.1:5432/appdb?shema=tenant1" in message


def test_a_password_in_the_query_is_refused_and_masked() -> None:
    message = refused("postgresql://app@127.0.0.1/appdb?password=s3cr3t-pw")
    assert "password=***" in message
    assert "password_env" in message


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("pool_max_size=0", "pool_max_size='0' is not a whole number >= 1"),
        ("pool_min_size=-1", "pool_min_size='-1' is not a whole number >= 0"),
        ("pool_min_size=5&pool_max_size=2", "pool_min_size=5 is more than pool_max_size=2"),
        ("connect_timeout=soon", "connect_timeout='soon' is not a number of seconds > 0"),
        ("connect_timeout=nan", "connect_timeout='nan' is not a number of seconds > 0"),
        ("migrate=maybe", "migrate='maybe' is not true or false"),
        ("schema=pg_catalog", "starts with pg_"),
        ("schema=" + "x" * 64, "longer than PostgreSQL's 63 bytes"),
        ("schema=a%00b", "holds a NUL character"),
        ("schema=a&schema=b", "the option 'schema' is given twice"),
    ],
)
def test_bad_option_values_are_refused_naming_the_option(query: str, expected: str) -> None:
    assert expected in refused(f"{URL}?{query}")


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("mysql://app@db/x", "starts with postgresql://"),
        ("postgresql://app:s3cr3t-pw@db:99999/x", "the port '99999' is not a number"),
        ("postgresql://app:s3cr3t-pw@db:abc/x", "the port 'abc' is not a number"),
        ("postgresql://app:s3cr3t-pw@db/x#frag", "#fragment"),
    ],
)
def test_a_malformed_url_is_refused(url: str, expected: str) -> None:
    assert expected in refused(url)


def test_password_env_supplies_the_password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APP_DB_PASSWORD", "from-the-env")
    settings = parse_url("postgresql://app@db/x?password_env=APP_DB_PASSWORD")
    assert settings.conninfo["password"] == "from-the-env"
    assert settings.password_source == "APP_DB_PASSWORD (password_env)"
    assert "from-the-env" not in repr(
        PostgresStorage("postgresql://app@db/x", password_env="APP_DB_PASSWORD")
    )


def test_password_env_naming_an_unset_variable_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    message = refused("postgresql://app@db/x?password_env=NOT_SET_ANYWHERE")
    assert "NOT_SET_ANYWHERE names an environment variable that is not set" in message


def test_password_env_that_looks_like_a_password_is_not_echoed() -> None:
    message = refused("postgresql://app@db/x", password_env="hunter2-is-my-pass!")
    assert "hunter2" not in message
    assert "must name an environment variable" in message


def test_a_password_given_two_ways_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APP_DB_PASSWORD", "other")
    message = refused(URL, password_env="APP_DB_PASSWORD")
    assert "give the password one way" in message


def test_the_repr_and_url_mask_the_password() -> None:
    storage = PostgresStorage("postgresql://app:p%40ss%3Aw0rd@127.0.0.1/appdb?schema=t1")
    assert "p%40ss" not in repr(storage)
    assert "w0rd" not in repr(storage)
    assert repr(storage) == (
        "PostgresStorage('postgresql://app:***@127.0.0.1/appdb?schema=t1', schema='t1')"
    )
    assert storage.url == "postgresql://app:***@127.0.0.1/appdb?schema=t1"


def test_a_percent_escaped_password_reaches_libpq_decoded() -> None:
    settings = parse_url("postgresql://app:p%40ss%3Aw0rd@127.0.0.1/appdb")
    assert settings.conninfo["password"] == "p@ss:w0rd"
    assert settings.password_source == "the URL"


def test_mask_url_masks_the_userinfo_and_secret_query_parameters() -> None:
    assert mask_url("postgresql://a:b@h/d") == "postgresql://a:***@h/d"
    assert mask_url("postgresql://a@h/d?sslpassword=x&sslmode=require") == (
        "postgresql://a@h/d?sslpassword=***&sslmode=require"
    )
    assert mask_url("postgresql://h/d") == "postgresql://h/d"


def test_open_storage_selects_the_backend_for_both_schemes() -> None:
    for scheme in ("postgresql", "postgres"):
        storage = open_storage(f"{scheme}://app@127.0.0.1/appdb?schema=s")
        assert isinstance(storage, PostgresStorage)
        assert storage.options.schema == "s"


def test_open_storage_reports_a_bad_option_naming_where_the_url_came_from() -> None:
    with pytest.raises(ConfigError) as raised:
        open_storage(URL + "?pool_max_size=none", source="storage.url, pai.toml")
    assert "(storage.url, pai.toml)" in str(raised.value)
    assert "s3cr3t-pw" not in str(raised.value)
