"""The chat page: a self-contained page (no CDN, no build step; its three files ship in the
wheel) at ``/``, speaking the same public routes as any client."""

from __future__ import annotations

from importlib import resources

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

_TYPES = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
}
_HEADERS = {
    # Only this page's own files, and fetches to this server: no inline script, no other origin.
    "content-security-policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-cache",
}


def _asset(name: str) -> bytes:
    return resources.files("pai.http").joinpath("_page", name).read_bytes()


def page_routes() -> list[Route]:
    """``GET /`` (the page) and ``GET /assets/{name}`` (its script and style sheet)."""
    files = {name: _asset(name) for name in _TYPES}

    async def index(request: Request) -> Response:
        return Response(files["index.html"], media_type=_TYPES["index.html"], headers=_HEADERS)

    async def asset(request: Request) -> Response:
        name = str(request.path_params["name"])
        if name not in files or name == "index.html":
            return Response(b"not found", status_code=404, media_type="text/plain")
        return Response(files[name], media_type=_TYPES[name], headers=_HEADERS)

    return [Route("/", index, methods=["GET"]), Route("/assets/{name}", asset, methods=["GET"])]


__all__ = ["page_routes"]
