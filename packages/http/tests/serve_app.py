"""A create_pai app for the `pai serve` tests (imported by name, as users' apps are)."""

from http_helpers import build_app

pai, _ = build_app()


def make_app() -> object:
    return build_app()[0]


def authenticate(request: object) -> str:
    return "acme"
