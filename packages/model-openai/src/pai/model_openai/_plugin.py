"""pai-model-openai as a plugin: the ``openai`` model provider, for ``"openai:gpt-4.1-mini"``.

Kept light: it imports neither the ``openai`` SDK nor the model class until a model is built.
:func:`model_registrations` returns the record its ``pai_models`` hook publishes, so
``define_agent(model="openai:gpt-4.1-mini")`` and ``[model] provider = "openai"`` find it.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from pai.core import Model, ModelRegistration, RetryPolicy, hookimpl
from pai.model_openai._chat import (
    DEFAULT_MAX_ANSWER_BYTES,
    DEFAULT_MAX_ANSWER_CHARS,
    DEFAULT_MAX_TOOL_CALLS,
)

__all__ = ["OpenAIOptions", "build_model", "model_registrations", "pai_models"]


class OpenAIOptions(BaseModel):
    """``[model.openai]``: how to reach the server and what to send with every request.

    The API key itself never goes in a file: it comes from ``OPENAI_API_KEY``, or from the
    variable ``api_key_env`` names.
    """

    model_config: ClassVar[ConfigDict] = ConfigDict(extra="forbid", frozen=True)

    base_url: str | None = None
    api_key_env: str | None = None
    timeout: float = Field(default=120.0, gt=0)
    connect_timeout: float = Field(default=10.0, gt=0)
    max_retries: int = Field(default=2, ge=0)
    temperature: float | None = None
    max_tokens: int | None = Field(default=None, gt=0)
    parallel_tool_calls: bool | None = None
    max_answer_bytes: int = Field(default=DEFAULT_MAX_ANSWER_BYTES, ge=1)
    """Bytes of one answer (lines of its event stream at most 4 MiB)."""
    max_answer_chars: int = Field(default=DEFAULT_MAX_ANSWER_CHARS, ge=1)
    """Characters of text and tool-call arguments (names and ids too) in one answer."""
    max_tool_calls: int = Field(default=DEFAULT_MAX_TOOL_CALLS, ge=1)
    """Tool calls one answer may start."""


def build_model(name: str, options: OpenAIOptions) -> Model:
    """The :class:`~pai.model_openai.OpenAIModel` called ``name``, configured by ``options``."""
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
