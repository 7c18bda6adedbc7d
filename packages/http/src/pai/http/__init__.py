"""Serve a PAI app over HTTP (the ``pai-http`` distribution): ``create_asgi_app(pai, ...)``
gives an ASGI app with the AG-UI and AI SDK UI message streams, the thread routes, health checks
and an OpenAPI document. See the package README.
"""

from pai.http._app import Authenticate, create_asgi_app
from pai.http._errors import BadRequestError, Forbidden, HttpError, Unauthenticated
from pai.http._files import (
    Attachments,
    FilesStore,
    FolderFilesStore,
    Stager,
    StoredFile,
    sandbox_stager,
)
from pai.http._limits import HttpLimits

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
