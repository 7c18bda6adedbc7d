"""The ``openai_server`` pytest fixture: a running :class:`OpenAITestServer` per test.

Enable it in a ``conftest.py`` with ``pytest_plugins = ["pai.model_openai.testing.pytest_plugin"]``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pai.model_openai.testing._server import OpenAITestServer

__all__ = ["openai_server"]


@pytest.fixture
def openai_server() -> Iterator[OpenAITestServer]:
    """A test server with an empty script, running for one test; add answers with ``.add()``.

    Example::

        def test_hello(openai_server: OpenAITestServer) -> None:
            openai_server.add(text_answer("hello"))
    """
    with OpenAITestServer() as server:
        yield server
