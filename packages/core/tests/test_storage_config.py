"""Storage from configuration: ``[storage] url``, ``PAI_STORAGE__URL``, and backends by scheme."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from pai.core import (
    ConfigError,
    DuplicateRegistrationError,
    InMemoryStorage,
    SqliteStorage,
    create_agent_runtime,
    create_pai,
    define_agent,
    load_config,
    open_storage,
    storage_from_config,
)
from pai.core.ext import Plugins, Storage, StorageRegistration, StorageURL, hookimpl

pytestmark = pytest.mark.anyio


def config_in(folder: Path, text: str, environ: dict[str, str] | None = None) -> object:
    (folder / "pai.toml").write_text(text, encoding="utf-8")
    return load_config(folder, environ=environ or {})


def storage_of(folder: Path, text: str, **kwargs: object) -> Storage | None:
    return storage_from_config(config_in(folder, text), **kwargs)  # type: ignore[arg-type]


class CustomBackend:
    def __init__(self, scheme: str = "custom") -> None:
        self.scheme = scheme
        self.opened: list[StorageURL] = []

    @hookimpl
    def pai_storage_backends(self) -> Sequence[StorageRegistration]:
        def factory(url: StorageURL) -> Storage:
            self.opened.append(url)
            return InMemoryStorage()

        return [StorageRegistration(scheme=self.scheme, factory=factory, description="custom")]


def plugins_with(backend: CustomBackend) -> Plugins:
    plugins = Plugins()
    plugins.register(backend, name="custom-backend", distribution="pai-storage-custom")
    return plugins


# -- the built-in schemes ---------------------------------------------------------------------


def test_a_relative_sqlite_path_is_taken_from_the_config_files_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    (tmp_path / "data").mkdir()

    storage = storage_of(tmp_path, '[storage]\nurl = "sqlite:///data/threads.db"\n')

    assert isinstance(storage, SqliteStorage)
    assert Path(storage.path) == tmp_path / "data" / "threads.db"


def test_an_absolute_sqlite_path_has_four_slashes(tmp_path: Path) -> None:
    target = tmp_path / "abs.db"

    storage = storage_of(tmp_path, f'[storage]\nurl = "sqlite:///{target}"\n')

    assert isinstance(storage, SqliteStorage)
    assert Path(storage.path) == target


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:"])
def test_sqlite_without_a_path_is_an_in_process_database(tmp_path: Path, url: str) -> None:
    storage = storage_of(tmp_path, f'[storage]\nurl = "{url}"\n')

    assert isinstance(storage, SqliteStorage)
    assert storage.path == ":memory:"


def test_memory_is_the_in_memory_storage(tmp_path: Path) -> None:
    assert isinstance(storage_of(tmp_path, '[storage]\nurl = "memory://"\n'), InMemoryStorage)


def test_no_storage_table_means_no_configured_storage(tmp_path: Path) -> None:
    assert storage_of(tmp_path, "") is None


def test_the_environment_sets_the_storage_url(tmp_path: Path) -> None:
    config = config_in(tmp_path, "", environ={"PAI_STORAGE__URL": "memory://"})

    assert isinstance(storage_from_config(config), InMemoryStorage)  # type: ignore[arg-type]


async def test_a_runtime_keeps_its_threads_in_the_configured_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pai.toml").write_text('[storage]\nurl = "sqlite:///threads.db"\n')
    monkeypatch.chdir(tmp_path)
    agent = define_agent(name="main")

    async with create_agent_runtime(agent=agent, scope_key=lambda _: "acme") as runtime:
        await runtime.admin(identity=None).create_thread(thread_id="kept")
    async with create_agent_runtime(agent=agent, scope_key=lambda _: "acme") as again:
        threads = await again.admin(identity=None).list_threads()

    assert [t.id for t in threads] == ["kept"]
    assert (tmp_path / "threads.db").exists()


async def test_an_app_shares_the_configured_storage_between_its_agents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pai.toml").write_text('[storage]\nurl = "memory://"\n')
    monkeypatch.chdir(tmp_path)

    async with create_pai(
        agents={"a": {"agent": define_agent(name="a")}, "b": {"agent": define_agent(name="b")}},
        scope_key=lambda _: "acme",
    ) as pai:
        assert isinstance(pai.storage, InMemoryStorage)
        assert pai.runtime("a").storage is pai.storage is pai.runtime("b").storage


# -- mistakes ---------------------------------------------------------------------------------


def test_a_misspelt_scheme_names_the_file_the_key_and_the_closest_scheme(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:  # no plugin: the built-in schemes alone
        storage_of(tmp_path, '[storage]\nurl = "sqlit:///threads.db"\n', plugins=Plugins())

    message = str(caught.value)
    assert "'sqlit:///threads.db'" in message
    assert "storage.url" in message
    assert str(tmp_path / "pai.toml") in message
    assert "did you mean sqlite://?" in message
    assert "memory://, sqlite://" in message


def test_an_unknown_scheme_lists_the_installed_ones_without_a_guess(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no storage backend is installed") as caught:
        storage_of(tmp_path, '[storage]\nurl = "postgresql://db/pai"\n', plugins=Plugins())

    assert "did you mean" not in str(caught.value)


def test_a_misspelt_key_in_the_storage_table_is_an_error_with_the_valid_key(
    tmp_path: Path,
) -> None:
    with pytest.raises(ConfigError, match=r"unknown key storage\.uri .*did you mean 'url'"):
        storage_of(tmp_path, '[storage]\nuri = "memory://"\n')


def test_a_storage_table_without_a_url_says_what_to_add(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="has no url"):
        storage_of(tmp_path, "[storage]\n")


def test_a_storage_that_is_not_a_table_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is not a table"):
        storage_of(tmp_path, 'storage = "sqlite:///x.db"\n')


def test_a_url_without_a_scheme_shows_the_form(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="has no scheme"):
        storage_of(tmp_path, '[storage]\nurl = "threads.db"\n')


def test_a_url_that_is_not_a_string_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="must be a string"):
        storage_of(tmp_path, "[storage]\nurl = 5\n")


def test_a_database_in_a_missing_folder_names_the_folder(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist") as caught:
        storage_of(tmp_path, '[storage]\nurl = "sqlite:///no/such/dir/threads.db"\n')

    assert str(tmp_path / "no" / "such" / "dir") in str(caught.value)


def test_an_environment_url_names_the_variable_in_its_error(tmp_path: Path) -> None:
    config = config_in(tmp_path, "", environ={"PAI_STORAGE__URL": "sqlit://"})

    with pytest.raises(ConfigError, match="PAI_STORAGE__URL"):
        storage_from_config(config)  # type: ignore[arg-type]


def test_a_sqlite_url_with_a_host_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="host part"):
        open_storage("sqlite://server/threads.db")


# -- backends from plugins --------------------------------------------------------------------


def test_a_plugin_registers_a_backend_by_scheme() -> None:
    backend = CustomBackend()

    storage = open_storage("custom://host/db?pool=4", plugins=plugins_with(backend))

    assert isinstance(storage, InMemoryStorage)
    [url] = backend.opened
    assert (url.scheme, url.netloc, url.path, dict(url.query)) == (
        "custom",
        "host",
        "db",
        {"pool": "4"},
    )


@pytest.mark.parametrize("scheme", ["sqlite", "memory"])
def test_a_plugin_registering_a_built_in_scheme_is_an_error_naming_its_distribution(
    scheme: str,
) -> None:
    plugins = plugins_with(CustomBackend(scheme=scheme))

    with pytest.raises(DuplicateRegistrationError, match="pai-storage-custom"):
        plugins.storage_backends()


def test_plugin_schemes_are_listed_when_a_scheme_is_unknown() -> None:
    with pytest.raises(ConfigError, match="custom://, memory://, sqlite://"):
        open_storage("other://x", plugins=plugins_with(CustomBackend()))


def test_a_built_in_scheme_needs_no_plugins_loaded() -> None:
    class Exploding(Plugins):
        def storage_backends(self) -> dict[str, StorageRegistration]:
            raise AssertionError("plugins were consulted for a built-in scheme")

    assert isinstance(open_storage("memory://", plugins=Exploding()), InMemoryStorage)


# -- options and failures ---------------------------------------------------------------------


def test_a_sqlite_url_sets_the_busy_timeout(tmp_path: Path) -> None:
    storage = open_storage("sqlite:///threads.db?busy_timeout=12.5", base=tmp_path)

    assert isinstance(storage, SqliteStorage)
    assert storage.busy_timeout == 12.5
    assert Path(storage.path) == tmp_path / "threads.db"


def test_an_unknown_sqlite_option_is_an_error_naming_it_and_the_valid_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"'timeout'.*busy_timeout") as caught:
        storage_of(tmp_path, '[storage]\nurl = "sqlite:///threads.db?timeout=3"\n')

    assert str(tmp_path / "pai.toml") in str(caught.value)


@pytest.mark.parametrize("value", ["soon", "-1", "nan"])
def test_a_busy_timeout_that_is_not_a_number_of_seconds_is_an_error(value: str) -> None:
    with pytest.raises(ConfigError, match=rf"busy_timeout='{value}'; write a number of seconds"):
        open_storage(f"sqlite://?busy_timeout={value}")


def test_a_sqlite_url_naming_a_folder_says_to_name_a_file(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()

    with pytest.raises(ConfigError, match=r"is a folder; name a database file in it"):
        open_storage("sqlite:///data", base=tmp_path)


def test_memory_with_options_is_refused() -> None:
    with pytest.raises(ConfigError, match="takes neither; write memory://"):
        open_storage("memory://?size=3")


def test_a_backend_that_fails_to_open_is_a_config_error_naming_its_distribution() -> None:
    class Failing:
        @hookimpl
        def pai_storage_backends(self) -> Sequence[StorageRegistration]:
            def factory(url: StorageURL) -> Storage:
                raise ValueError("port must be a number")

            return [StorageRegistration(scheme="failing", factory=factory)]

    plugins = Plugins()
    plugins.register(Failing(), name="failing", distribution="pai-storage-failing")

    with pytest.raises(
        ConfigError, match=r"pai-storage-failing could not open it: ValueError: port"
    ):
        open_storage("failing://db:x", plugins=plugins)
