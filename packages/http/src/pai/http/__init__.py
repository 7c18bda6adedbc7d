"""Serve a PAI app over HTTP (the ``pai-http`` distribution): ``create_asgi_app(pai, ...)``
gives an ASGI app with the AG-UI and AI SDK UI message streams, the thread routes, health checks
and an OpenAPI document. See the package README.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pai.core.ext import lazy_exports

# Names resolve on first use: plugin discovery imports this package (for its entry-point module,
# ``_plugin``, which adds ``pai serve``), and ``pai --help`` must not import Starlette, uvicorn
# or pydantic.
if TYPE_CHECKING:
    from pai.http._app import Authenticate as Authenticate
    from pai.http._app import create_asgi_app as create_asgi_app
    from pai.http._errors import BadRequestError as BadRequestError
    from pai.http._errors import Forbidden as Forbidden
    from pai.http._errors import HttpError as HttpError
    from pai.http._errors import Unauthenticated as Unauthenticated
    from pai.http._files import Attachments as Attachments
    from pai.http._files import FilesStore as FilesStore
    from pai.http._files import FolderFilesStore as FolderFilesStore
    from pai.http._files import Stager as Stager
    from pai.http._files import StoredFile as StoredFile
    from pai.http._files import sandbox_stager as sandbox_stager
    from pai.http._limits import HttpLimits as HttpLimits

_SOURCES = {
    "Attachments": "pai.http._files",
    "Authenticate": "pai.http._app",
    "BadRequestError": "pai.http._errors",
    "FilesStore": "pai.http._files",
    "FolderFilesStore": "pai.http._files",
    "Forbidden": "pai.http._errors",
    "HttpError": "pai.http._errors",
    "HttpLimits": "pai.http._limits",
    "Stager": "pai.http._files",
    "StoredFile": "pai.http._files",
    "Unauthenticated": "pai.http._errors",
    "create_asgi_app": "pai.http._app",
    "sandbox_stager": "pai.http._files",
}

if not TYPE_CHECKING:  # type checkers see the imports above, and no catch-all attribute
    __getattr__, __dir__ = lazy_exports(__name__, _SOURCES)

__all__ = [
    "Attachments",
    "Authenticate",
    "BadRequestError",
    "FilesStore",
    "FolderFilesStore",
    "Forbidden",
    "HttpError",
    "HttpLimits",
    "Stager",
    "StoredFile",
    "Unauthenticated",
    "create_asgi_app",
    "sandbox_stager",
]
