"""Storage backends as plugins register them: by URL scheme (see :mod:`pai.core._storage_config`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # Types only: registering plugins (and ``pai --help``) imports no pydantic.
    from pai.core._storage import Storage


@dataclass(frozen=True, slots=True)
class StorageURL:
    """A storage URL, split for a backend's factory.

    ``path`` is the URL's path with its leading ``/`` removed and percent-escapes decoded
    (``sqlite:///threads.db`` gives ``threads.db``); ``base`` is the folder a relative path is
    taken from (the configuration file's folder, or the working directory); ``query`` holds the
    ``?key=value`` options. ``source`` says where the URL came from, for error messages.
    """

    url: str
    scheme: str
    netloc: str
    path: str
    query: Mapping[str, str]
    base: Path
    source: str = "code"


@dataclass(frozen=True, slots=True)
class StorageRegistration:
    """A storage backend, as its plugin registers it, by URL scheme.

    Example::

        @hookimpl
        def pai_storage_backends() -> list[StorageRegistration]:
            return [
                StorageRegistration(
                    scheme="postgresql",
                    factory=lambda url: PostgresStorage(url.url),
                    description="Threads in PostgreSQL.",
                    install_hint="pip install pai-storage-postgres",
                )
            ]
    """

    scheme: str
    factory: Callable[[StorageURL], Storage]
    description: str = ""
    install_hint: str = ""
    distribution: str = field(default="")
    """Filled in by the plugin manager: the distribution whose plugin registered it."""


__all__ = ["StorageRegistration", "StorageURL"]
