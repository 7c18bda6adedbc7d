"""The fixtures of the pai-http tests (the helpers they use are in http_helpers.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from http_helpers import Served, build_app, serve

from pai.http import HttpLimits


@pytest.fixture
def make_server() -> Iterator[Callable[..., Served]]:
    """Start a server on the test app (``build_app``'s options); all stop after the test."""
    with contextlib.ExitStack() as servers:

        def make(limits: HttpLimits | None = None, **options: Any) -> Served:
            pai, app = build_app(limits, **options)
            return Served(servers.enter_context(serve(app)), pai)

        yield make


@pytest.fixture
def server(make_server: Callable[..., Served]) -> Served:
    return make_server(HttpLimits(reattach_grace=0.5))
