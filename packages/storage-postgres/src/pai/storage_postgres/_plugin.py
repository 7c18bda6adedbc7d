"""pai-storage-postgres as a plugin: registers the ``postgresql://`` and ``postgres://`` storage
URL schemes. Nothing imports this module; loading it imports neither psycopg nor the storage
until a URL of these schemes is opened."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pai.core.ext import hookimpl

if TYPE_CHECKING:
    from pai.core.ext import Storage, StorageRegistration, StorageURL


def _open(url: StorageURL) -> Storage:
    from pai.storage_postgres._storage import PostgresStorage

    return PostgresStorage(url.url, source=url.source)


@hookimpl
def pai_storage_backends() -> list[StorageRegistration]:
    from pai.core.ext import StorageRegistration

    description = (
        "PostgreSQL (psycopg 3): threads shared by every process on the database; runs on one "
        "thread serialized across processes"
    )
    return [
        StorageRegistration(
            scheme=scheme,
            factory=_open,
            description=description,
            install_hint="pip install pai-storage-postgres",
        )
        for scheme in ("postgresql", "postgres")
    ]
