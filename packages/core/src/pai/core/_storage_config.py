"""Storage chosen by URL: ``[storage] url = "sqlite:///threads.db"`` or ``PAI_STORAGE__URL``.

A URL's scheme names the backend; the built-in ones are always there:

========================== ==============================================================
``sqlite:///threads.db``   :class:`~pai.core.SqliteStorage` on a file; a relative path is
                           taken from the folder of the configuration file that set it (the
                           working directory for an environment variable or code)
``sqlite:////var/pai.db``  an absolute path (four slashes, as SQLAlchemy writes it)
``sqlite://``              an in-process SQLite database (also ``sqlite:///:memory:``)
``memory://``              :class:`~pai.core.InMemoryStorage`
========================== ==============================================================

A SQLite URL takes one option, ``?busy_timeout=10``: how many seconds a call waits for another
process's lock on the database (default 5).

Two more keys of ``[storage]`` set how runs share threads with other processes (see
:mod:`pai.core._leases`), for a runtime that reads configuration; ``create_agent_runtime`` and
``create_pai`` take the same names, which win:

``run_lease_ttl = 30``     seconds a run's lease on its thread lasts unless renewed (every
                           third of it); a run that stalls longer loses its thread to another
``busy_thread_wait = 60``  seconds a run waits for a thread another run holds, before
                           :class:`~pai.core.ThreadBusyError`

Other schemes come from plugins, through the ``pai_storage_backends`` hook: a distribution returns
:class:`StorageRegistration` records, and ``[storage] url = "postgresql://..."`` then opens its
backend, without any change to pai-core. A backend's tests run
:class:`pai.core.testing.StorageConformance`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qsl, unquote, urlsplit

from pai.core._config import PaiConfig, describe_source, did_you_mean, source_folder
from pai.core._errors import ConfigError
from pai.core._plugins import Plugins, get_plugins
from pai.core._secrets import mask_url
from pai.core._storage import Storage
from pai.core._storage_registry import StorageRegistration, StorageURL

RUN_LEASE_TTL: Final = 30.0
"""The default of ``run_lease_ttl``, in seconds."""
BUSY_THREAD_WAIT: Final = 60.0
"""The default of ``busy_thread_wait``, in seconds."""

RUN_KEYS = ("run_lease_ttl", "busy_thread_wait")
"""The keys of ``[storage]`` that set how runs share threads, not which storage."""
STORAGE_KEYS = ("url", *RUN_KEYS)
"""The keys a ``[storage]`` table may hold."""


def _sqlite(url: StorageURL) -> Storage:
    from pai.core._storage_sqlite import SqliteStorage

    if url.netloc:
        raise ConfigError(
            f"storage URL {url.url!r} ({url.source}) has a host part {url.netloc!r}; a SQLite "
            "URL has none: write sqlite:///relative/path.db, sqlite:////absolute/path.db or "
            "sqlite:// for an in-process database"
        )
    unknown = sorted(set(url.query) - {"busy_timeout"})
    if unknown:
        raise ConfigError(
            f"storage URL {url.url!r} ({url.source}) has the option {unknown[0]!r}, which SQLite "
            "storage does not take; the one option is busy_timeout (seconds to wait for another "
            "process's lock), e.g. sqlite:///threads.db?busy_timeout=10"
        )
    busy_timeout = 5.0
    if "busy_timeout" in url.query:
        raw = url.query["busy_timeout"]
        try:
            busy_timeout = float(raw)
        except ValueError:
            busy_timeout = -1.0
        if not busy_timeout >= 0:  # also refuses nan
            raise ConfigError(
                f"storage URL {url.url!r} ({url.source}) has busy_timeout={raw!r}; write a "
                "number of seconds >= 0, e.g. busy_timeout=10"
            ) from None
    if url.path in ("", ":memory:"):
        return SqliteStorage(":memory:", busy_timeout=busy_timeout)
    path = Path(url.path)
    if not path.is_absolute():
        path = url.base / path
    if not path.parent.is_dir():
        raise ConfigError(
            f"storage URL {url.url!r} ({url.source}) names the database {str(path)!r}, whose "
            f"folder {str(path.parent)!r} does not exist; create the folder or fix the path"
        )
    if path.is_dir():
        raise ConfigError(
            f"storage URL {url.url!r} ({url.source}) names {str(path)!r}, which is a folder; "
            "name a database file in it, e.g. sqlite:///"
            + (Path(url.path) / "threads.db").as_posix()
        )
    return SqliteStorage(path, busy_timeout=busy_timeout)


def _memory(url: StorageURL) -> Storage:
    from pai.core._storage_memory import InMemoryStorage

    if url.netloc or url.path or url.query:
        raise ConfigError(
            f"storage URL {url.url!r} ({url.source}) has a location or options, but memory:// "
            "storage takes neither; write memory://"
        )
    return InMemoryStorage()


BUILTIN_BACKENDS: Mapping[str, StorageRegistration] = {
    "sqlite": StorageRegistration(
        scheme="sqlite",
        factory=_sqlite,
        description="SQLite: a file database (kept across processes) or an in-process one",
        distribution="pai-core",
    ),
    "memory": StorageRegistration(
        scheme="memory",
        factory=_memory,
        description="process memory, gone when the process ends (tests, throwaway runs)",
        distribution="pai-core",
    ),
}


def _parse(url: str, *, base: Path, source: str) -> StorageURL:
    split = urlsplit(url)
    if not split.scheme or "://" not in url:
        raise ConfigError(
            f"storage URL {mask_url(url)!r} ({source}) has no scheme; write it as <scheme>://..., e.g. "
            "sqlite:///threads.db or memory://"
        )
    path = unquote(split.path)
    return StorageURL(
        url=url,
        scheme=split.scheme.lower(),
        netloc=split.netloc,
        path=path[1:] if path.startswith("/") else path,
        query=dict(parse_qsl(split.query)),
        base=base,
        source=source,
    )


_KNOWN_BACKENDS: Final = {"postgresql": "pai-storage-postgres", "postgres": "pai-storage-postgres"}
"""Schemes this project publishes a backend for: scheme -> the distribution to install."""


def _install_hint(scheme: str) -> str:
    distribution = _KNOWN_BACKENDS.get(scheme)
    return f"pip install {distribution} for it; " if distribution else ""


def open_storage(
    url: str,
    *,
    plugins: Plugins | None = None,
    base: Path | None = None,
    source: str = "code",
) -> Storage:
    """The storage a URL names: ``sqlite:///threads.db``, ``sqlite://``, ``memory://``, or any
    scheme a plugin registers through ``pai_storage_backends``.

    A relative SQLite path is taken from ``base`` (default: the working directory). Plugins
    (``plugins``, default :func:`~pai.core.ext.get_plugins`) are loaded only for a scheme that is not
    built in. An unknown scheme is a :class:`~pai.core.ConfigError` listing the installed ones.

    Example::

        storage = open_storage("sqlite:///threads.db")
        runtime = create_agent_runtime(agent=agent, storage=storage, scope_key=...)
    """
    if not isinstance(url, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ConfigError(
            f"the storage URL ({source}) must be a string such as 'sqlite:///threads.db', "
            f"got {url!r}"
        )
    parsed = _parse(url, base=Path.cwd() if base is None else base, source=source)
    registration = BUILTIN_BACKENDS.get(parsed.scheme)
    if registration is None:
        backends = (plugins if plugins is not None else get_plugins()).storage_backends()
        registration = backends.get(parsed.scheme)
        if registration is None:
            known = sorted({*BUILTIN_BACKENDS, *backends})
            hint = did_you_mean(parsed.scheme, known, show=lambda scheme: f"{scheme}://")
            raise ConfigError(
                f"storage URL {mask_url(url)!r} ({source}): no storage backend is installed for "
                f"the scheme {parsed.scheme!r}; {_install_hint(parsed.scheme)}{hint}installed schemes: "
                f"{', '.join(s + '://' for s in known)}. A backend for another scheme comes "
                "from a package whose plugin registers it (pai_storage_backends)"
            )
    try:
        return registration.factory(parsed)
    except ConfigError:
        raise
    except Exception as error:
        raise ConfigError(
            f"storage URL {mask_url(url)!r} ({source}): the {parsed.scheme}:// backend of "
            f"{registration.distribution or 'a plugin'} could not open it: "
            f"{type(error).__name__}: {error}; check the URL against that backend's "
            "documentation"
        ) from error


def storage_from_config(config: PaiConfig, *, plugins: Plugins | None = None) -> Storage | None:
    """The storage ``[storage]`` configures (``url = ...``), or ``None`` when there is none.

    Example::

        # pai.toml:  [storage]
        #            url = "sqlite:///threads.db"
        storage = storage_from_config(load_config())
    """
    table = config.data.get("storage")
    if table is None:
        return None
    origin = describe_source(config.sources.get(("storage", "url"), _table_source(config)))
    if not isinstance(table, Mapping):
        raise ConfigError(
            f"storage = {table!r} ({origin}) is not a table; write [storage] with "
            'url = "sqlite:///threads.db"'
        )
    section: Mapping[str, Any] = table  # pyright: ignore[reportUnknownVariableType]
    unknown = sorted(set(section) - set(STORAGE_KEYS))
    if unknown:
        key = unknown[0]
        where = describe_source(config.sources.get(("storage", key), _table_source(config)))
        raise ConfigError(
            f"unknown key storage.{key} ({where}); {did_you_mean(key, STORAGE_KEYS)}[storage] "
            f"takes: {', '.join(STORAGE_KEYS)}"
        )
    url = section.get("url")
    if url is None and any(key in section for key in RUN_KEYS):
        return None  # only how runs share threads: the default storage
    if url is None:
        raise ConfigError(
            f'[storage] ({origin}) has no url; add url = "sqlite:///threads.db" (or memory://), '
            "or remove the table to keep the default in-process SQLite database"
        )
    base = source_folder(config.sources.get(("storage", "url"))) or Path.cwd()
    return open_storage(url, plugins=plugins, base=base, source=f"storage.url, {origin}")


def check_run_option(value: object, key: str, where: str) -> float:
    """``value`` of option ``key`` (``run_lease_ttl`` or ``busy_thread_wait``) as seconds; a
    :class:`ConfigError` naming ``where`` it came from when it is not a valid number of them."""
    positive = key == "run_lease_ttl"
    seconds = -1.0
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    if not math.isfinite(seconds) or seconds < 0 or (positive and seconds == 0):
        bound = "> 0" if positive else ">= 0"
        example = "30" if positive else "60"
        raise ConfigError(
            f"{key} = {value!r} ({where}) is not a number of seconds {bound}; write one, e.g. "
            f"{key} = {example}"
        )
    return seconds


def run_options(config: PaiConfig | None) -> dict[str, float]:
    """The ``[storage]`` keys of :data:`RUN_KEYS` that ``config`` sets, validated."""
    table = None if config is None else config.data.get("storage")
    if not isinstance(table, Mapping):
        return {}
    section: Mapping[str, Any] = table  # pyright: ignore[reportUnknownVariableType]
    assert config is not None
    found: dict[str, float] = {}
    for key in RUN_KEYS:
        if key in section:
            origin = describe_source(config.sources.get(("storage", key), _table_source(config)))
            found[key] = check_run_option(section[key], key, f"storage.{key}, {origin}")
    return found


def _table_source(config: PaiConfig) -> str:
    below = sorted({src for key, src in config.sources.items() if key[:1] == ("storage",)})
    return below[0] if below else (str(config.files[0]) if config.files else "code")


__all__ = [
    "BUILTIN_BACKENDS",
    "BUSY_THREAD_WAIT",
    "RUN_KEYS",
    "RUN_LEASE_TTL",
    "STORAGE_KEYS",
    "check_run_option",
    "open_storage",
    "run_options",
    "storage_from_config",
]
