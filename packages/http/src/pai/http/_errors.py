"""The errors of pai-http: each becomes a JSON response with a status, a code and a message."""

from __future__ import annotations

from collections.abc import Mapping

from pai.core import PaiError


class HttpError(PaiError):
    """A refusal the server answers with ``status`` and the JSON body
    ``{"error": {"code": code, "message": message}}``. ``message`` is shown to the client: it
    never holds a traceback, a host path or a secret."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers: dict[str, str] = dict(headers or {})


class BadRequestError(HttpError):
    """The request is malformed: 400 (or 413/415/422 where more precise)."""

    def __init__(self, message: str, *, status: int = 400, code: str = "bad_request") -> None:
        super().__init__(status, code, message)


class Unauthenticated(HttpError):
    """Raise it from ``authenticate`` when the caller did not prove who they are: 401."""

    def __init__(self, message: str = "authentication required", *, scheme: str = "Bearer") -> None:
        super().__init__(401, "unauthenticated", message, headers={"WWW-Authenticate": scheme})


class Forbidden(HttpError):
    """Raise it from ``authenticate`` when the caller is known but may not use this app: 403."""

    def __init__(self, message: str = "forbidden") -> None:
        super().__init__(403, "forbidden", message)


__all__ = ["BadRequestError", "Forbidden", "HttpError", "Unauthenticated"]
