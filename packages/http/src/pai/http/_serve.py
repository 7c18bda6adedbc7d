"""``pai serve MODULE:ATTR``: serve a ``create_pai(...)`` app with uvicorn.

Settings come from the command line, else ``[serve]`` in pai.toml (``PAI_SERVE__PORT=...``),
else the defaults. Safe by default: it binds 127.0.0.1; binding another address needs an
``auth = "MODULE:FUNCTION"`` authenticate function, or ``--insecure-no-auth`` said out loud.
Without ``auth`` (on loopback) every request is the one local identity ``"local"``.

Only click and the standard library are imported here: ``pai --help`` stays fast. uvicorn builds
the app in each worker from :func:`app_factory`, which reads the settings this command put in the
environment (``--workers`` and ``--reload`` need an import string, not an app object).
"""

from __future__ import annotations

import inspect
import ipaddress
import json
import os
from collections.abc import Mapping
from typing import Any

import click

from pai.core import UserError

SERVE_KEYS = ("host", "port", "workers", "auth", "cors_origins", "chat_page", "target")
"""The keys of the ``[serve]`` table."""

_ENV = "PAI_HTTP_SERVE_SETTINGS"
LOCAL_IDENTITY = "local"


class ServeError(UserError):
    """A setting of ``pai serve`` is wrong: the message says which, where, and what to write."""


_EXAMPLE = "`pai serve myapp.server:pai` for the create_pai(...) app `pai` in myapp/server.py"


def _did_you_mean(value: str, choices: tuple[str, ...]) -> str:
    from pai.core.ext import did_you_mean

    return did_you_mean(value, choices)


def serve_settings(config: Any) -> dict[str, Any]:
    """``[serve]`` from the configuration, checked: unknown keys and wrong types are errors
    naming the key and where it was set."""
    from pai.core import ConfigError

    table = config.data.get("serve")
    if table is None:
        return {}
    if not isinstance(table, Mapping):
        raise ConfigError(
            f"serve = {table!r} ({config.origin('serve')}) is not a table; write [serve] with "
            "target = ..., port = ..."
        )
    section: Mapping[str, Any] = table  # pyright: ignore[reportUnknownVariableType]
    for key in sorted(section):
        if key not in SERVE_KEYS:
            raise ConfigError(
                f"unknown key serve.{key} ({config.origin('serve', key)}); "
                f"{_did_you_mean(key, SERVE_KEYS)}[serve] takes: {', '.join(SERVE_KEYS)}"
            )
    expected: dict[str, tuple[type, ...]] = {
        "host": (str,),
        "port": (int,),
        "workers": (int,),
        "auth": (str,),
        "cors_origins": (list,),
        "chat_page": (bool,),
        "target": (str,),
    }
    for key, value in section.items():
        if not isinstance(value, expected[key]) or (
            isinstance(value, bool) and bool not in expected[key]
        ):
            raise ConfigError(
                f"serve.{key} = {value!r} ({config.origin('serve', key)}) must be "
                f"{' or '.join(t.__name__ for t in expected[key])}"
            )
    return dict(section)


def _import(target: str) -> object:
    from pai.core.cli import import_target

    return import_target(target, command="pai serve", example=_EXAMPLE)


async def load_app(target: str) -> Any:
    """The ``create_pai`` app ``target`` names: the app itself, or a function (sync or async,
    no arguments) returning one."""
    from pai.core import Pai

    found = _import(target)
    if isinstance(found, Pai):
        return found
    if callable(found) and not isinstance(found, type):
        made: object = found()
        if inspect.isawaitable(made):
            made = await made
        if isinstance(made, Pai):
            return made
        raise ServeError(
            f"target {target!r} returned a {type(made).__name__}, not a create_pai(...) app"
        )
    raise ServeError(
        f"target {target!r} is a {type(found).__name__}, not a create_pai(...) app or a function "
        "returning one"
    )


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_shared_storage(target: str) -> None:
    """More than one worker needs a storage the workers share (each worker process would have
    its own in-memory or ``:memory:`` SQLite store, and a thread would exist in one of them),
    and a run channel they share (a client resuming or cancelling a run reaches any worker)."""
    import anyio

    from pai.core import InMemoryStorage, SqliteStorage
    from pai.core.ext import ProvidesRunChannel

    async def storage_of() -> object:
        app = await load_app(target)
        async with app:
            return app.storage

    storage = anyio.run(storage_of)
    if isinstance(storage, InMemoryStorage) or (
        isinstance(storage, SqliteStorage) and storage.path in (":memory:", "")
    ):
        raise ServeError(
            f"--workers > 1 needs a storage the worker processes share, and {target!r} keeps its "
            "threads in this process only (in memory): each worker would have threads of its "
            "own. Give the app PostgreSQL storage ([storage] url in pai.toml), or run one worker"
        )
    if not isinstance(storage, ProvidesRunChannel):
        raise ServeError(
            f"--workers > 1 needs runs the worker processes share, and {target!r} uses "
            f"{type(storage).__name__}, which carries no run between processes: a client that "
            "resumes or cancels a run could reach a worker that does not know it. Give the app "
            'PostgreSQL storage ([storage] url = "postgresql://..." in pai.toml), or run one '
            "worker"
        )


def app_factory() -> Any:
    """The ASGI app for uvicorn's ``--factory``: built in the worker from the settings
    ``pai serve`` left in the environment."""
    from starlette.applications import Starlette
    from starlette.routing import Mount

    from pai.http._app import create_asgi_app

    settings = json.loads(os.environ[_ENV])
    holder: dict[str, Any] = {}

    import contextlib
    from collections.abc import AsyncGenerator

    def local(request: Any) -> str:
        return LOCAL_IDENTITY

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncGenerator[None]:
        pai = await load_app(settings["target"])
        authenticate: Any = local
        if settings.get("auth"):
            authenticate = _import(settings["auth"])
            if not callable(authenticate):
                raise ServeError(f"auth {settings['auth']!r} is not a function")
        inner = create_asgi_app(
            pai,
            authenticate=authenticate,
            cors_origins=settings.get("cors_origins") or (),
            chat_page=settings.get("chat_page", True),
        )
        holder["app"] = inner
        async with pai, inner.router.lifespan_context(inner):
            yield

    async def dispatch(scope: Any, receive: Any, send: Any) -> None:
        await holder["app"](scope, receive, send)

    return Starlette(routes=[Mount("/", app=dispatch)], lifespan=lifespan)


@click.command("serve")
@click.argument("target", required=False)
@click.option("--host", default=None, help="Address to bind (default 127.0.0.1).")
@click.option("--port", type=int, default=None, help="Port (default 8000).")
@click.option("--workers", type=int, default=None, help="Worker processes (default 1).")
@click.option("--reload", is_flag=True, help="Restart when the code changes (development).")
@click.option("--auth", default=None, help="MODULE:FUNCTION authenticating each request.")
@click.option(
    "--insecure-no-auth",
    is_flag=True,
    help="Serve a non-loopback address with no authentication (every caller is 'local').",
)
@click.option("--no-page", is_flag=True, help="Do not serve the chat page at /.")
def serve_command(
    target: str | None,
    host: str | None,
    port: int | None,
    workers: int | None,
    reload: bool,
    auth: str | None,
    insecure_no_auth: bool,
    no_page: bool,
) -> None:
    """Serve a create_pai(...) app over HTTP: AG-UI, the AI SDK stream, the thread routes and a
    chat page at /.

    TARGET is MODULE:ATTR naming the app (or a function returning it), as for `pai chat`; else
    [serve] target in pai.toml.
    """
    from pai.core.cli import load_checked_config

    configured = serve_settings(load_checked_config())
    target = target or configured.get("target")
    if not target:
        raise ServeError(
            "no app to serve: name it as MODULE:ATTR, e.g. `pai serve myapp.server:pai` for the "
            "create_pai(...) app `pai` in myapp/server.py, or set [serve] target in pai.toml"
        )
    bind: str = host or configured.get("host") or "127.0.0.1"
    listen: int = port if port is not None else configured.get("port", 8000)
    processes: int = workers if workers is not None else configured.get("workers", 1)
    auth = auth or configured.get("auth")
    if not 0 < listen < 65536:
        raise ServeError(f"port {listen} is not a TCP port (1 to 65535)")
    if processes < 1:
        raise ServeError(f"workers = {processes} must be 1 or more")
    _import(target)  # a wrong target is this command's error, not a worker's
    if auth:
        _import(auth)
    if processes > 1:
        _check_shared_storage(target)
    if not _is_loopback(bind) and not auth and not insecure_no_auth:
        raise ServeError(
            f"refusing to serve {bind} without authentication: anyone who reaches it could run "
            "your agents. Pass --auth MODULE:FUNCTION (a function taking the request and "
            "returning the caller's identity), bind 127.0.0.1, or, knowingly, --insecure-no-auth"
        )
    settings: dict[str, Any] = {
        "target": target,
        "auth": auth,
        "cors_origins": configured.get("cors_origins") or [],
        "chat_page": not no_page and configured.get("chat_page", True),
    }
    os.environ[_ENV] = json.dumps(settings)
    import uvicorn

    click.echo(f"pai serve: {target} on http://{bind}:{listen}/ ({processes} worker(s))", err=True)
    uvicorn.run(
        "pai.http._serve:app_factory",
        factory=True,
        host=bind,
        port=listen,
        workers=processes if not reload else None,
        reload=reload,
        log_level="info",
    )


__all__ = ["SERVE_KEYS", "app_factory", "load_app", "serve_command", "serve_settings"]
