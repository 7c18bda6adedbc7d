"""The ``anyio_backend`` pytest fixture: every ``@pytest.mark.anyio`` test on asyncio and trio.

Load it in a test suite with ``addopts = ["-p", "pai.core.testing.pytest_plugin"]`` under
``[tool.pytest.ini_options]``, or import the fixture into a ``conftest.py`` (``from
pai.core.testing.pytest_plugin import anyio_backend as anyio_backend``), which works in a conftest
below the root, where pytest refuses ``pytest_plugins``. It is not registered as an entry point,
so it is loaded only where asked for.

Trio runs only where it is installed; a suite (or module) that must run on asyncio alone defines
its own ``anyio_backend`` fixture, which overrides this one.
"""

from __future__ import annotations

import importlib.util

import pytest

__all__ = ["anyio_backend"]

_BACKENDS = ["asyncio", *(["trio"] if importlib.util.find_spec("trio") is not None else [])]


@pytest.fixture(params=_BACKENDS, ids=_BACKENDS)
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """The anyio backend a test runs on: ``"asyncio"``, then ``"trio"`` when trio is installed."""
    return request.param
