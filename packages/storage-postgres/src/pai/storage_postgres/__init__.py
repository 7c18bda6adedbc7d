"""PAI thread storage on PostgreSQL: threads shared by every runtime process on one database.

Select it as any storage, by URL: ``[storage] url = "postgresql://app@127.0.0.1:5432/app"`` in
``pai.toml``, ``PAI_STORAGE__URL``, or in code::

    from pai.storage_postgres import PostgresStorage

    storage = PostgresStorage("postgresql://app@127.0.0.1:5432/app", schema="tenant1")

See the package README for the options, migrations, and what two processes running the same
thread do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pai.core.ext import lazy_exports

# Names resolve on first use: plugin discovery imports this package (for its entry-point module,
# ``_plugin``), and must not pay for importing psycopg until a PostgreSQL URL is opened.
if TYPE_CHECKING:
    from pai.storage_postgres._channel import PostgresRunChannel as PostgresRunChannel
    from pai.storage_postgres._errors import ConnectionLostError as ConnectionLostError
    from pai.storage_postgres._options import OPTION_NAMES as OPTION_NAMES
    from pai.storage_postgres._options import PostgresOptions as PostgresOptions
    from pai.storage_postgres._options import mask_url as mask_url
    from pai.storage_postgres._schema import LATEST_VERSION as LATEST_VERSION
    from pai.storage_postgres._schema import SchemaStatus as SchemaStatus
    from pai.storage_postgres._storage import PostgresStorage as PostgresStorage

_SOURCES = {
    "ConnectionLostError": "pai.storage_postgres._errors",
    "LATEST_VERSION": "pai.storage_postgres._schema",
    "OPTION_NAMES": "pai.storage_postgres._options",
    "PostgresOptions": "pai.storage_postgres._options",
    "PostgresRunChannel": "pai.storage_postgres._channel",
    "PostgresStorage": "pai.storage_postgres._storage",
    "SchemaStatus": "pai.storage_postgres._schema",
    "mask_url": "pai.storage_postgres._options",
}

if not TYPE_CHECKING:  # type checkers see the imports above, and no catch-all attribute
    __getattr__, __dir__ = lazy_exports(__name__, _SOURCES)

__all__ = [
    "LATEST_VERSION",
    "OPTION_NAMES",
    "ConnectionLostError",
    "PostgresOptions",
    "PostgresRunChannel",
    "PostgresStorage",
    "SchemaStatus",
    "mask_url",
]
