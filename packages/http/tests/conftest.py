"""The fixtures of the pai-http tests (the helpers they use are in http_helpers.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from http_helpers import Served, build_app, serve

from pai.http import HttpLimits


@pytest.fixture
def make_server() -> Iterator[Callable[..., Served]]:
    stops: list[Iterator[str]] = []

    def make(limits: HttpLimits | None = None, **options: Any) -> Served:
        pai, app = build_app(limits, **options)
        running = serve(app)
        url = next(running)
        stops.append(running)
        return Served(url, pai)

    yield make
    for running in stops:
        next(running, None)


@pytest.fixture
def server(make_server: Callable[..., Served]) -> Served:
    return make_server(HttpLimits(reattach_grace=0.5))
