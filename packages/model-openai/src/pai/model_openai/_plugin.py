"""pai-model-openai as a plugin: the ``openai`` model provider, for ``"openai:gpt-4.1-mini"``.

Kept light: it imports neither the ``openai`` SDK nor the model class until a model is built.
:func:`model_registrations` returns the record its ``pai_models`` hook publishes, so
``define_agent(model="openai:gpt-4.1-mini")`` and ``[model] provider = "openai"`` find it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pai.core.ext import ModelRegistration, hookimpl

if TYPE_CHECKING:
    # Types only: loading this plugin (``pai --help``) imports no pydantic; the options model
    # is imported by the functions that use it.
    from pai.core import Model
    from pai.model_openai._options import API_KEY_ENV_NAME, OpenAIOptions, check_api_key_env

__all__ = [
    "API_KEY_ENV_NAME",
    "OpenAIOptions",
    "build_model",
    "check_api_key_env",
    "model_registrations",
    "pai_models",
]

_OPTIONS_NAMES = frozenset({"API_KEY_ENV_NAME", "OpenAIOptions", "check_api_key_env"})


def __getattr__(name: str) -> Any:
    # The options model and its helpers live in _options (pydantic): imported when asked for.
    if name in _OPTIONS_NAMES:
        from pai.model_openai import _options

        return getattr(_options, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def build_model(name: str, options: OpenAIOptions) -> Model:
    """The :class:`~pai.model_openai.OpenAIModel` called ``name``, configured by ``options``."""
    from pai.core import RetryPolicy
    from pai.model_openai._model import OpenAIModel

    return OpenAIModel(
        name,
        base_url=options.base_url,
        api_key_env=options.api_key_env,
        timeout=options.timeout,
        connect_timeout=options.connect_timeout,
        retry=RetryPolicy(max_attempts=options.max_retries + 1),
        temperature=options.temperature,
        max_tokens=options.max_tokens,
        parallel_tool_calls=options.parallel_tool_calls,
        max_answer_bytes=options.max_answer_bytes,
        max_answer_chars=options.max_answer_chars,
        max_tool_calls=options.max_tool_calls,
    )


def model_registrations() -> list[ModelRegistration]:
    """The model providers this distribution registers: ``openai``."""
    from pai.model_openai._options import OpenAIOptions

    return [
        ModelRegistration(
            name="openai",
            factory=build_model,
            options=OpenAIOptions,
            description=(
                "OpenAI Chat Completions through the openai SDK; any OpenAI-compatible server "
                "(vLLM, Ollama, llama.cpp, LM Studio) through base_url."
            ),
            install_hint="pip install pai-model-openai",
        )
    ]


@hookimpl
def pai_models() -> list[ModelRegistration]:
    """The ``pai_models`` hook: this distribution's model providers."""
    return model_registrations()
