"""A create_pai app for the `pai serve` tests (imported by name, as users' apps are)."""

from http_helpers import build_app

pai, _ = build_app()


def make_app() -> object:
    return build_app()[0]


def authenticate(request: object) -> str:
    return "acme"


def make_sqlite_app() -> object:
    """The app on a SQLite file: threads shared by processes, runs not."""
    import tempfile
    from pathlib import Path

    from pai.core import SqliteStorage

    folder = Path(tempfile.mkdtemp(prefix="pai-serve-test-"))
    return build_app(storage=SqliteStorage(folder / "threads.db"))[0]
