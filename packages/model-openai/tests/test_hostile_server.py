"""The model server as an attacker: what it can no longer make the host do.

Every test talks through the real ``openai`` SDK to the shipped test server playing a hostile
server over real HTTP on 127.0.0.1; a redirect's target is a second local server that must never
be reached.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator

import httpx2
import pytest
from pydantic import JsonValue

from pai.core import (
    ErrorMessage,
    ModelBadRequestError,
    ModelConfigurationError,
    ModelConnectionError,
    ModelOverloadedError,
    ModelRequest,
    ModelResponseError,
    ModelTimeoutError,
    Usage,
    UserMessage,
    define_agent,
)
from pai.core.ext import ToolCallFinished, collect_response
from pai.core.testing import create_test_runtime
from pai.model_openai import ModelRedirectError, OpenAIModel, OpenAIOptions
from pai.model_openai._plugin import build_model
from pai.model_openai.testing import (
    OpenAITestServer,
    bad_usage,
    endless_stream,
    error_answer,
    html_answer,
    huge_line,
    many_tool_calls,
    redirect_answer,
    text_answer,
    trickle_stream,
)

pytestmark = pytest.mark.anyio

SECRET_BODY = "the body of a page only this host can reach"


def ask() -> ModelRequest:
    return ModelRequest(instructions="", messages=[UserMessage(content="hi")], tools=(), step=1)


@pytest.fixture
async def model(openai_server: OpenAITestServer) -> AsyncIterator[OpenAIModel]:
    """No retries: each test's answer is served once."""
    async with OpenAIModel(
        "m", base_url=openai_server.base_url, api_key="k", max_retries=0
    ) as built:
        yield built


@pytest.fixture
def elsewhere() -> Iterator[OpenAITestServer]:
    """Another origin (another port of 127.0.0.1) with an answer of its own, recording every hit."""
    with OpenAITestServer([text_answer(SECRET_BODY)]) as server:
        yield server


# -- redirects ----------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_a_redirect_to_another_origin_is_refused_and_the_target_never_reached(
    openai_server: OpenAITestServer,
    model: OpenAIModel,
    elsewhere: OpenAITestServer,
    status: int,
) -> None:
    target = elsewhere.base_url + "/chat/completions"
    openai_server.add(redirect_answer(status, target))
    with pytest.raises(ModelRedirectError) as caught:
        await model.request(ask())
    error = caught.value
    assert isinstance(error, ModelConnectionError)
    assert elsewhere.hits == []  # no GET (303), no re-POST of the conversation (307/308)
    message = str(error)
    assert f"{openai_server.base_url}/chat/completions" in message
    assert f"another origin, {target}" in message
    assert f"HTTP {status}" in message
    assert "set base_url" in message
    assert SECRET_BODY not in message
    assert "API key" not in message
    assert (error.status_code, error.location) == (status, target)


async def test_a_redirect_masks_userinfo_and_query_values_of_both_urls(
    elsewhere: OpenAITestServer,
) -> None:
    port = elsewhere.base_url.split(":")[2].split("/")[0]
    location = f"http://admin:hunter2@127.0.0.1:{port}/steal?api_key=sk-live-123&x=1#frag"
    with OpenAITestServer([redirect_answer(303, location)]) as server:
        asked = server.base_url.replace("http://", "http://me:pw-in-url@")
        async with OpenAIModel("m", base_url=asked, api_key="k", max_retries=0) as model:
            with pytest.raises(ModelRedirectError) as caught:
                await model.request(ask())
    message = str(caught.value)
    for secret in ("hunter2", "sk-live-123", "pw-in-url", "frag"):
        assert secret not in message
    assert f"http://***@127.0.0.1:{port}/steal?api_key=***&x=***#***" in message
    assert elsewhere.hits == []


async def test_a_redirect_to_the_same_server_is_refused_too(
    openai_server: OpenAITestServer, model: OpenAIModel
) -> None:
    openai_server.add(redirect_answer(307, "/v1/chat/completions/"), text_answer("never"))
    with pytest.raises(ModelRedirectError, match="to the same server"):
        await model.request(ask())
    assert len(openai_server.hits) == 1


async def test_a_redirect_is_not_retried(openai_server: OpenAITestServer) -> None:
    # Retries on: a connection error would be tried again, a redirect is refused every time.
    openai_server.add(redirect_answer(307, "/v1/elsewhere"), text_answer("never"))
    async with OpenAIModel("m", base_url=openai_server.base_url, api_key="k") as model:
        with pytest.raises(ModelRedirectError):
            await model.request(ask())
    assert len(openai_server.hits) == 1


async def test_a_redirect_is_recorded_in_the_thread_as_a_redirect(
    openai_server: OpenAITestServer, model: OpenAIModel, elsewhere: OpenAITestServer
) -> None:
    openai_server.add(redirect_answer(303, elsewhere.base_url + "/anything"))
    agent = define_agent(name="a", instructions="be brief")
    async with create_test_runtime(agent=agent, model=model) as runtime:
        thread = await runtime.admin(identity=None).create_thread()
        with pytest.raises(ModelRedirectError):
            await thread.send("hi")
        messages = await thread.messages()
    [stored] = [m for m in messages if isinstance(m, ErrorMessage)]
    assert stored.error_type == "ModelRedirectError"
    assert "redirects are never followed" in stored.message
    assert SECRET_BODY not in stored.message
    assert "no route" not in stored.message
    assert elsewhere.hits == []


# -- time ---------------------------------------------------------------------------------------


async def test_the_timeout_bounds_the_whole_answer_of_a_server_trickling_bytes(
    openai_server: OpenAITestServer,
) -> None:
    # About 700 bytes, one every 50 ms: each read is in time, the answer would take ~35 s.
    openai_server.add(trickle_stream("Hello", " there", interval=0.05))
    async with OpenAIModel(
        "m", base_url=openai_server.base_url, api_key="k", timeout=1, max_retries=0
    ) as model:
        started = time.monotonic()
        with pytest.raises(ModelTimeoutError, match=r"did not end within timeout=1 s"):
            await model.request(ask())
        elapsed = time.monotonic() - started
    assert elapsed < 5, f"timeout=1 took {elapsed:.1f} s"
    assert await openai_server.streams_closed()


async def test_a_trickled_answer_that_ends_in_time_is_an_answer(
    openai_server: OpenAITestServer, model: OpenAIModel
) -> None:
    openai_server.add(trickle_stream("slow ", "but fine", interval=0, step=7))
    assert (await model.request(ask())).content == "slow but fine"


# -- size ---------------------------------------------------------------------------------------


async def test_an_endless_stream_stops_at_max_answer_bytes(
    openai_server: OpenAITestServer,
) -> None:
    openai_server.add(endless_stream("la " * 100))
    async with OpenAIModel(
        "m", base_url=openai_server.base_url, api_key="k", max_answer_bytes=1 << 20
    ) as model:
        with pytest.raises(ModelResponseError, match=r"passed 1048576 bytes, the max_answer_bytes"):
            await model.request(ask())
    assert await openai_server.streams_closed()


async def test_an_endless_stream_of_text_stops_at_max_answer_chars(
    openai_server: OpenAITestServer,
) -> None:
    openai_server.add(endless_stream("la " * 100))
    async with OpenAIModel(
        "m", base_url=openai_server.base_url, api_key="k", max_answer_chars=50_000
    ) as model:
        with pytest.raises(
            ModelResponseError, match=r"passed 50000 characters .* max_answer_chars"
        ):
            await collect_response(model.stream(ask()))
    assert await openai_server.streams_closed()


async def test_an_endless_stream_stops_by_default(
    openai_server: OpenAITestServer, model: OpenAIModel
) -> None:
    openai_server.add(endless_stream("la " * 1000))
    with pytest.raises(ModelResponseError, match="max_answer_chars"):
        await model.request(ask())


async def test_a_huge_line_without_a_newline_stops_at_the_line_cap(
    openai_server: OpenAITestServer, model: OpenAIModel
) -> None:
    openai_server.add(huge_line(16 << 20))
    with pytest.raises(
        ModelResponseError, match=r"one line of the event stream .* max_answer_bytes"
    ):
        await model.request(ask())


async def test_a_huge_line_stops_at_a_smaller_max_answer_bytes(
    openai_server: OpenAITestServer,
) -> None:
    openai_server.add(huge_line(4 << 20))
    async with OpenAIModel(
        "m", base_url=openai_server.base_url, api_key="k", max_answer_bytes=100_000
    ) as model:
        with pytest.raises(ModelResponseError, match=r"passed 100000 bytes.*max_answer_bytes"):
            await model.request(ask())


async def test_a_huge_error_message_is_clipped_with_a_marker(
    openai_server: OpenAITestServer, model: OpenAIModel
) -> None:
    openai_server.add(error_answer(500, "x" * 100_000))
    with pytest.raises(ModelOverloadedError) as caught:
        await model.request(ask())
    message = str(caught.value)
    assert len(message) < 2500
    assert "[98000 more characters cut]" in message


async def test_control_characters_of_a_server_message_are_escaped(
    openai_server: OpenAITestServer, model: OpenAIModel
) -> None:
    openai_server.add(error_answer(400, "\x1b]0;owned\x07\x1b[2Jred"))
    with pytest.raises(ModelBadRequestError) as caught:
        await model.request(ask())
    message = str(caught.value)
    assert "\x1b" not in message
    assert "\x07" not in message
    assert "\\x1b]0;owned\\x07\\x1b[2Jred" in message


async def test_an_answer_with_more_tool_calls_than_max_tool_calls_is_refused(
    openai_server: OpenAITestServer, model: OpenAIModel
) -> None:
    openai_server.add(many_tool_calls(1025))
    with pytest.raises(ModelResponseError, match=r"more than 1024 tool calls.*max_tool_calls"):
        await model.request(ask())


async def test_many_tool_calls_under_the_cap_are_all_read(
    openai_server: OpenAITestServer,
) -> None:
    openai_server.add(many_tool_calls(200, "read", {"path": "/a"}))
    async with OpenAIModel("m", base_url=openai_server.base_url, api_key="k") as model:
        events = [e async for e in model.stream(ask())]
    finished = [e.call for e in events if isinstance(e, ToolCallFinished)]
    assert [c.id for c in finished] == [f"call_{i}" for i in range(200)]
    assert all(c.arguments == {"path": "/a"} for c in finished)


# -- what the server says -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "field", "shown"),
    [
        (None, "prompt_tokens", "prompt_tokens=None"),
        (-1_000_000, "prompt_tokens", "prompt_tokens=-1000000"),
        (1e300, "completion_tokens", "completion_tokens=1e+300"),
        (10**13, "completion_tokens", "completion_tokens=10000000000000"),
        (2.5, "prompt_tokens", "prompt_tokens=2.5"),
    ],
)
async def test_usage_that_is_not_a_whole_number_of_tokens_is_a_response_error(
    openai_server: OpenAITestServer,
    model: OpenAIModel,
    value: JsonValue,
    field: str,
    shown: str,
) -> None:
    openai_server.add(bad_usage(value, "hi", field=field))  # type: ignore[arg-type]
    with pytest.raises(ModelResponseError, match="not a whole number of tokens") as caught:
        await model.request(ask())
    assert shown in str(caught.value)
    assert model.usage == Usage()


@pytest.mark.parametrize("value", ["lots", 7, ["a"]])
async def test_a_usage_that_is_no_object_is_a_response_error(
    openai_server: OpenAITestServer, model: OpenAIModel, value: JsonValue
) -> None:
    openai_server.add(bad_usage(value, "hi", field="usage"))
    with pytest.raises(ModelResponseError):
        await model.request(ask())
    assert model.usage == Usage()


async def test_a_web_page_where_the_api_should_be_says_so(
    openai_server: OpenAITestServer, model: OpenAIModel
) -> None:
    openai_server.add(html_answer())
    with pytest.raises(ModelResponseError) as caught:
        await model.request(ask())
    assert str(caught.value) == (
        f"OpenAI model 'm': the server at {openai_server.base_url}/chat/completions answered "
        "text/html, not an event stream; is base_url the /v1 root of an OpenAI-compatible API?"
    )


async def test_a_compressed_body_is_not_read(
    openai_server: OpenAITestServer, model: OpenAIModel
) -> None:
    openai_server.add(error_answer(500, "zip", headers={"content-encoding": "gzip"}))
    with pytest.raises(ModelResponseError, match="compressed with 'gzip' although asked for none"):
        await model.request(ask())
    assert openai_server.requests[0].headers["accept-encoding"] == "identity"


# -- options --------------------------------------------------------------------------------------


@pytest.mark.parametrize("option", ["max_answer_bytes", "max_answer_chars", "max_tool_calls"])
@pytest.mark.parametrize("value", [0, -1, 1.5, True, None])
def test_caps_must_be_positive_ints(option: str, value: object) -> None:
    with pytest.raises(ModelConfigurationError, match=f"{option} must be an int >= 1"):
        OpenAIModel("m", api_key="k", **{option: value})  # type: ignore[arg-type]


async def test_the_caps_can_be_configured(
    openai_server: OpenAITestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = OpenAIOptions(
        base_url=openai_server.base_url,
        max_retries=0,
        max_answer_bytes=3000,
        max_answer_chars=40,
        max_tool_calls=2,
    )
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    model = build_model("m", options)
    assert isinstance(model, OpenAIModel)
    openai_server.add(
        text_answer("more than forty characters, more than forty"),
        many_tool_calls(3),
        huge_line(10_000),
    )
    try:
        with pytest.raises(ModelResponseError, match="max_answer_chars"):
            await model.request(ask())
        with pytest.raises(ModelResponseError, match="max_tool_calls"):
            await model.request(ask())
        with pytest.raises(ModelResponseError, match=r"passed 3000 bytes.*max_answer_bytes"):
            await model.request(ask())
    finally:
        await model.aclose()


# -- the fixture itself, seen by a plain HTTP client ----------------------------------------------


async def test_the_redirect_answer_is_a_real_redirect(openai_server: OpenAITestServer) -> None:
    openai_server.add(redirect_answer(308, "http://127.0.0.1:9/elsewhere"))
    async with httpx2.AsyncClient(follow_redirects=False) as client:
        response = await client.post(openai_server.base_url + "/chat/completions", json={})
    assert (response.status_code, response.headers["location"]) == (
        308,
        "http://127.0.0.1:9/elsewhere",
    )


async def test_the_endless_stream_ends_when_the_client_goes_away(
    openai_server: OpenAITestServer,
) -> None:
    openai_server.add(endless_stream())
    received = 0
    async with (
        httpx2.AsyncClient() as client,
        client.stream(
            "POST", openai_server.base_url + "/chat/completions", json={"stream": True}
        ) as response,
    ):
        async for chunk in response.aiter_raw():
            received += len(chunk)
            if received > 1 << 20:
                break
    assert received > 1 << 20
    assert await openai_server.streams_closed()


async def test_the_endless_stream_is_bounded_on_the_server_too(
    openai_server: OpenAITestServer,
) -> None:
    openai_server.add(endless_stream(max_bytes=10_000))
    async with httpx2.AsyncClient() as client:
        response = await client.post(
            openai_server.base_url + "/chat/completions", json={"stream": True}
        )
    assert 10_000 <= len(response.content) < 11_000


async def test_the_trickle_is_paced(openai_server: OpenAITestServer) -> None:
    openai_server.add(trickle_stream("x", interval=0.01, step=100))
    reads = 0
    async with (
        httpx2.AsyncClient() as client,
        client.stream(
            "POST", openai_server.base_url + "/chat/completions", json={"stream": True}
        ) as response,
    ):
        async for chunk in response.aiter_raw():
            reads += 1
            assert len(chunk) <= 100
    assert reads > 3


async def test_many_tool_calls_sends_that_many(openai_server: OpenAITestServer) -> None:
    openai_server.add(many_tool_calls(50))
    async with httpx2.AsyncClient() as client:
        response = await client.post(openai_server.base_url + "/chat/completions", json={})
    calls = response.json()["choices"][0]["message"]["tool_calls"]
    assert len(calls) == 50
