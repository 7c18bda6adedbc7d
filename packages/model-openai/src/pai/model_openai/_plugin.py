"""pai-model-openai as a plugin: the ``openai`` model provider, for ``"openai:gpt-4.1-mini"``.

Kept light: it imports neither the ``openai`` SDK nor the model class until a model is built.
:func:`model_registrations` returns the record its ``pai_models`` hook publishes, so
``define_agent(model="openai:gpt-4.1-mini")`` and ``[model] provider = "openai"`` find it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from pai.core import ModelRegistration, hookimpl
from pai.model_openai._chat import (
    DEFAULT_MAX_ANSWER_BYTES,
    DEFAULT_MAX_ANSWER_CHARS,
    DEFAULT_MAX_TOOL_CALLS,
)

if TYPE_CHECKING:
    from pai.core import Model

__all__ = [
    "API_KEY_ENV_NAME",
    "OpenAIOptions",
    "build_model",
    "check_api_key_env",
    "model_registrations",
    "pai_models",
]

API_KEY_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""What an environment variable's name (``api_key_env``) looks like."""


class OpenAIOptions(BaseModel):
    """``[model.openai]``: how to reach the server and what to send with every request.

    The API key itself never goes in a file: it comes from ``OPENAI_API_KEY``, or from the
    variable ``api_key_env`` names.
    """

    model_config: ClassVar[ConfigDict] = ConfigDict(extra="forbid", frozen=True)

    base_url: str | None = None
    api_key_env: str | None = Field(
        default=None,
        description="the environment variable holding the API key (default: OPENAI_API_KEY); "
        "never the key itself",
    )
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

    @field_validator("api_key_env")
    @classmethod
    def _a_variable_name(cls, value: str | None) -> str | None:
        if value is None:
            return value
        return check_api_key_env(value)


def check_api_key_env(value: str) -> str:
    """``value`` when it is an environment variable's name; a :class:`ValueError` that never
    quotes it otherwise (a key pasted where its variable's name belongs is a secret)."""
    if API_KEY_ENV_NAME.fullmatch(value) and not _looks_like_a_key(value):
        return value
    what = "looks like an API key" if _looks_like_a_key(value) else "is not a variable name"
    raise ValueError(
        "api_key_env names the environment variable that holds the API key (letters, digits "
        f"and _, not starting with a digit), such as OPENAI_API_KEY; this value {what} (it is "
        "not shown: it may be the key itself). Put the key in the variable (export "
        'OPENAI_API_KEY=...) and write api_key_env = "OPENAI_API_KEY"'
    )


def _looks_like_a_key(value: str) -> bool:
    """``sk-...``/``sk_...``, or a long mix of upper- and lower-case letters and digits (a
    variable's name is words, usually upper-case)."""
    if value.lower().startswith(("sk-", "sk_")):
        return True
    return (
        len(value) >= 24
        and any(ch.isupper() for ch in value)
        and any(ch.islower() for ch in value)
        and sum(ch.isdigit() for ch in value) >= 2
    )


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
