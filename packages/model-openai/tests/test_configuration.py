"""Building an OpenAIModel: where the key and the URL come from, and clear errors for bad options."""

from __future__ import annotations

import pytest

from pai.core import ModelConfigurationError, ModelRequest, RetryPolicy, UserError, UserMessage
from pai.core.ext import ModelRegistration
from pai.model_openai import OpenAIModel, OpenAIOptions
from pai.model_openai._plugin import build_model, model_registrations
from pai.model_openai.testing import OpenAITestServer, text_answer


@pytest.fixture(autouse=True)
def no_openai_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests start without the variables the SDK reads."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def test_without_a_key_the_error_names_openai_api_key_and_the_fixes() -> None:
    with pytest.raises(ModelConfigurationError) as caught:
        OpenAIModel("gpt-4.1-mini")
    message = str(caught.value)
    assert "OPENAI_API_KEY is not set" in message
    assert "api_key=" in message
    assert "api_key_env=" in message
    assert isinstance(caught.value, UserError)


def test_the_key_comes_from_openai_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    assert OpenAIModel("m")._api_key == "from-env"


def test_api_key_env_names_another_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATEWAY_KEY", "gateway")
    monkeypatch.setenv("OPENAI_API_KEY", "not this one")
    model = OpenAIModel("m", api_key_env="GATEWAY_KEY")
    assert model._api_key == "gateway"


def test_a_missing_api_key_env_variable_is_named_in_the_error() -> None:
    with pytest.raises(ModelConfigurationError, match="GATEWAY_KEY is not set"):
        OpenAIModel("m", api_key_env="GATEWAY_KEY")


def test_an_empty_key_variable_is_an_error_saying_it_is_empty(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "")
    with pytest.raises(ModelConfigurationError, match="OPENAI_API_KEY is empty"):
        OpenAIModel("m")


@pytest.mark.parametrize(
    ("options", "complaint"),
    [
        ({"api_key": "k", "api_key_env": "X"}, "either api_key or api_key_env"),
        ({"api_key": ""}, "the API key is empty"),
        ({"api_key": "k", "timeout": 0}, r"timeout=0\)"),
        ({"api_key": "k", "connect_timeout": -1}, r"connect_timeout=-1\)"),
        ({"api_key": "k", "max_retries": -1}, r"max_retries=-1\)"),
        ({"api_key": "k", "max_retries": 1, "retry": RetryPolicy()}, "either max_retries"),
    ],
)
def test_bad_options_are_configuration_errors_naming_the_option(
    options: dict[str, object], complaint: str
) -> None:
    with pytest.raises(ModelConfigurationError, match=complaint):
        OpenAIModel("m", **options)  # type: ignore[arg-type]


def test_an_empty_model_name_is_a_configuration_error() -> None:
    with pytest.raises(ModelConfigurationError, match="non-empty str"):
        OpenAIModel(" ", api_key="k")


def test_max_retries_is_a_shortcut_for_the_number_of_attempts() -> None:
    assert OpenAIModel("m", api_key="k", max_retries=4).retry.max_attempts == 5


def test_the_repr_shows_the_model_and_url_but_never_the_key() -> None:
    model = OpenAIModel("m", api_key="sk-secret", base_url="http://127.0.0.1:1/v1")
    assert repr(model) == "OpenAIModel('m', base_url='http://127.0.0.1:1/v1')"


@pytest.mark.anyio
async def test_openai_base_url_is_honoured_as_the_sdk_honours_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with OpenAITestServer([text_answer("via env")]) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "env-key")
        async with OpenAIModel("m") as model:
            assert model.base_url == server.base_url
            answer = await model.request(_ask())
    assert answer.content == "via env"
    assert server.requests[0].headers["authorization"] == "Bearer env-key"


# -- the plugin's registration ----------------------------------------------------------------


def test_the_plugin_registers_the_openai_provider_with_strict_options() -> None:
    (registration,) = model_registrations()
    assert isinstance(registration, ModelRegistration)
    assert (registration.name, registration.options) == ("openai", OpenAIOptions)
    assert registration.install_hint == "pip install pai-model-openai"


def test_an_unknown_option_is_an_error_naming_the_key() -> None:
    with pytest.raises(ValueError, match="base_ur"):
        OpenAIOptions.model_validate({"base_ur": "http://127.0.0.1:8000/v1"})


def test_the_factory_builds_the_named_model_from_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCAL_KEY", "k")
    options = OpenAIOptions(base_url="http://127.0.0.1:8000/v1", api_key_env="LOCAL_KEY")
    model = build_model("qwen2.5", options.model_copy(update={"max_retries": 0}))
    assert isinstance(model, OpenAIModel)
    assert (model.name, model.base_url, model.retry.max_attempts) == (
        "qwen2.5",
        "http://127.0.0.1:8000/v1",
        1,
    )


def _ask() -> ModelRequest:
    return ModelRequest(instructions="", messages=[UserMessage(content="hi")], tools=[], step=1)
