"""The shipped test server: a real OpenAI-compatible endpoint on 127.0.0.1, usable from sync code."""

from __future__ import annotations

import openai
import pytest

from pai.core import Usage
from pai.model_openai.testing import (
    OpenAITestServer,
    RecordedRequest,
    ScriptedAnswer,
    error_answer,
    function_call,
    text_answer,
    tool_calls_answer,
)

HI = [{"role": "user", "content": "hi"}]


def client(server: OpenAITestServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)


def test_it_listens_on_loopback_only_on_a_free_port() -> None:
    with OpenAITestServer() as one, OpenAITestServer() as two:
        assert one.base_url.startswith("http://127.0.0.1:")
        assert one.base_url != two.base_url


def test_a_sync_client_gets_a_whole_answer_with_usage() -> None:
    with OpenAITestServer([text_answer("Hel", "lo", usage=Usage(4, 2))]) as server:
        completion = client(server).chat.completions.create(model="m", messages=HI)  # type: ignore[arg-type]
    assert completion.choices[0].message.content == "Hello"
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (4, 2)


def test_a_whole_answer_can_hold_parallel_tool_calls() -> None:
    answer = tool_calls_answer(
        function_call("a", {"x": 1}, id="c1"), function_call("b", {"y": 2}, id="c2")
    )
    with OpenAITestServer([answer]) as server:
        completion = client(server).chat.completions.create(model="m", messages=HI)  # type: ignore[arg-type]
    calls = completion.choices[0].message.tool_calls or []
    assert [(c.id, c.function.name, c.function.arguments) for c in calls] == [  # type: ignore[union-attr]
        ("c1", "a", '{"x": 1}'),
        ("c2", "b", '{"y": 2}'),
    ]
    assert completion.choices[0].finish_reason == "tool_calls"


def test_the_usage_chunk_is_sent_only_when_asked_for() -> None:
    with OpenAITestServer([text_answer("a"), text_answer("b")]) as server:
        sdk = client(server)
        plain = list(sdk.chat.completions.create(model="m", messages=HI, stream=True))  # type: ignore[arg-type]
        counted = list(
            sdk.chat.completions.create(
                model="m",
                messages=HI,  # type: ignore[arg-type]
                stream=True,
                stream_options={"include_usage": True},
            )
        )
    assert [c.usage for c in plain if c.usage is not None] == []
    assert [c.usage is not None for c in counted][-1] is True


def test_every_request_is_recorded_with_its_headers_and_body() -> None:
    with OpenAITestServer([text_answer("ok")]) as server:
        client(server).chat.completions.create(model="m", messages=HI, temperature=0.5)  # type: ignore[arg-type]
    (recorded,) = server.requests
    assert (recorded.method, recorded.path, recorded.model) == ("POST", "/v1/chat/completions", "m")
    assert recorded.messages == HI
    assert recorded.body["temperature"] == 0.5
    assert recorded.headers["authorization"] == "Bearer k"


def test_an_error_answer_has_openais_error_shape_and_headers() -> None:
    server = OpenAITestServer([error_answer(429, "slow down", retry_after=2)])
    with server, pytest.raises(openai.RateLimitError) as caught:
        client(server).chat.completions.create(model="m", messages=HI)  # type: ignore[arg-type]
    assert caught.value.response.headers["retry-after"] == "2"
    assert caught.value.body == {
        "message": "slow down",
        "type": "rate_limit_error",
        "param": None,
        "code": None,
    }


def test_a_request_past_the_script_is_refused_with_a_message_saying_so() -> None:
    with OpenAITestServer([text_answer("only")]) as server:
        sdk = client(server)
        sdk.chat.completions.create(model="m", messages=HI)  # type: ignore[arg-type]
        with pytest.raises(
            openai.BadRequestError,
            match=r"script is exhausted: request #2 arrived and all 1 scripted",
        ):
            sdk.chat.completions.create(model="m", messages=HI)  # type: ignore[arg-type]
    assert server.remaining == 0


def test_an_answer_can_be_a_function_of_the_request() -> None:
    def echo(request: RecordedRequest) -> ScriptedAnswer:
        return text_answer(f"you said {request.messages[-1]['content']}")

    with OpenAITestServer([echo]) as server:
        completion = client(server).chat.completions.create(model="m", messages=HI)  # type: ignore[arg-type]
    assert completion.choices[0].message.content == "you said hi"


def test_other_paths_are_not_found() -> None:
    with OpenAITestServer() as server, pytest.raises(openai.NotFoundError):
        client(server).models.list()


def test_base_url_before_start_says_to_use_it_as_a_context_manager() -> None:
    with pytest.raises(RuntimeError, match="context manager"):
        _ = OpenAITestServer().base_url


def test_an_answer_function_that_raises_is_reported_to_the_client() -> None:
    def broken(request: RecordedRequest) -> ScriptedAnswer:
        raise KeyError("no such fixture")

    with (
        OpenAITestServer([broken]) as server,
        pytest.raises(openai.BadRequestError, match="raised KeyError"),
    ):
        client(server).chat.completions.create(model="m", messages=HI)  # type: ignore[arg-type]
