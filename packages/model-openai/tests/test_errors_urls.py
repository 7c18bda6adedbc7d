"""What a failed request says, against real servers on 127.0.0.1: the URL tried (secrets
masked), a refused key never echoed back, and the missing ``/v1`` a 404 usually means."""

from __future__ import annotations

import socket

import pytest

from pai.core import (
    ModelAuthenticationError,
    ModelConnectionError,
    ModelNotFoundError,
    ModelRequest,
    RetryPolicy,
    UserMessage,
)
from pai.model_openai import OpenAIModel
from pai.model_openai.testing import OpenAITestServer, error_answer, text_answer

pytestmark = pytest.mark.anyio

NO_RETRIES = RetryPolicy(max_attempts=1)
KEY = "sk-test-0123456789abcdef"


def ask() -> ModelRequest:
    return ModelRequest(instructions="", messages=[UserMessage(content="hi")], tools=[], step=1)


def closed_port() -> int:
    """A port of 127.0.0.1 nothing listens on (bound, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def test_an_unknown_model_is_named_with_the_url_that_answered(
    openai_server: OpenAITestServer,
) -> None:
    openai_server.add(
        error_answer(404, "The model `gpt-nope` does not exist", code="model_not_found")
    )
    async with OpenAIModel(
        "gpt-nope", base_url=openai_server.base_url, api_key=KEY, retry=NO_RETRIES
    ) as model:
        with pytest.raises(ModelNotFoundError) as caught:
            await model.request(ask())

    message = str(caught.value)
    assert "serves a model named 'gpt-nope'" in message
    assert (
        "(HTTP 404: The model `gpt-nope` does not exist; "
        f"from {openai_server.base_url}/chat/completions)"
    ) in message
    assert "/v1, under which" not in message  # the base URL has its /v1


async def test_a_refused_key_is_never_echoed_back(openai_server: OpenAITestServer) -> None:
    # A server that quotes the key it refused: the message keeps the reason, not the key.
    openai_server.add(error_answer(401, f"Incorrect API key provided: {KEY}."))
    async with OpenAIModel(
        "m", base_url=openai_server.base_url, api_key=KEY, retry=NO_RETRIES
    ) as model:
        with pytest.raises(ModelAuthenticationError) as caught:
            await model.request(ask())

    message = str(caught.value)
    assert KEY not in message
    assert "Incorrect API key provided: ***." in message
    assert "OPENAI_API_KEY" in message
    assert f"; from {openai_server.base_url}/chat/completions)" in message


async def test_a_closed_port_names_the_url_tried_and_what_to_check() -> None:
    base_url = f"http://127.0.0.1:{closed_port()}/v1"
    async with OpenAIModel("m", base_url=base_url, api_key=KEY, retry=NO_RETRIES) as model:
        with pytest.raises(ModelConnectionError) as caught:
            await model.request(ask())

    message = str(caught.value)
    assert f"the connection failed ({base_url}/chat/completions: " in message
    assert "check the base URL (base_url, or OPENAI_BASE_URL)" in message


async def test_a_url_with_a_password_is_masked_in_a_connection_error() -> None:
    base_url = f"http://alice:hunter22@127.0.0.1:{closed_port()}/v1"
    async with OpenAIModel("m", base_url=base_url, api_key=KEY, retry=NO_RETRIES) as model:
        with pytest.raises(ModelConnectionError) as caught:
            await model.request(ask())

    message = str(caught.value)
    assert "hunter22" not in message
    assert "alice" not in message
    assert "http://***@127.0.0.1:" in message


async def test_a_404_from_a_base_url_without_v1_suggests_adding_it(
    openai_server: OpenAITestServer,
) -> None:
    # The test server routes only /v1/chat/completions and /chat/completions: /api/... is a
    # 404, as a self-hosted server answers a base URL that lacks its /v1.
    root = openai_server.base_url.removesuffix("/v1")
    openai_server.add(text_answer("never served"))
    async with OpenAIModel("m", base_url=f"{root}/api", api_key=KEY, retry=NO_RETRIES) as model:
        with pytest.raises(ModelNotFoundError) as caught:
            await model.request(ask())

    message = str(caught.value)
    assert f"the base URL {root}/api has no /v1" in message
    assert f"try base_url = '{root}/api/v1'" in message
    assert f"(HTTP 404: no route POST /api/chat/completions; from {root}/api/chat/" in message
    assert openai_server.remaining == 1  # the answer was never asked for


async def test_following_the_v1_suggestion_works(openai_server: OpenAITestServer) -> None:
    root = openai_server.base_url.removesuffix("/v1")
    openai_server.add(text_answer("hello"))
    async with OpenAIModel("m", base_url=f"{root}/v1", api_key=KEY, retry=NO_RETRIES) as model:
        answer = await model.request(ask())
    assert answer.content == "hello"


def test_the_sdks_own_timeout_names_the_url_masked() -> None:
    # The SDK's connect timeout, mapped as the model maps it (a real one needs an address
    # that drops packets, which a test machine may not route).
    import httpx2
    import openai

    from pai.core import ModelTimeoutError
    from pai.model_openai import map_openai_error

    url = "http://alice:hunter22@127.0.0.1:9/v1/chat/completions?key=secret"
    error = map_openai_error(openai.APITimeoutError(request=httpx2.Request("POST", url)), "m")

    assert isinstance(error, ModelTimeoutError)
    assert "no answer from http://***@127.0.0.1:9/v1/chat/completions?key=*** within" in str(error)
    assert "hunter22" not in str(error)
    assert "secret" not in str(error)
