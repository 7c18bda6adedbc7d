"""``[model.openai]``: the ``openai`` model provider's options model.

Kept apart from :mod:`pai.model_openai._plugin` so that loading the plugin (``pai --help``)
imports no pydantic; the ``pai_models`` hook imports it when it is called.
"""

from __future__ import annotations

import re
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from pai.model_openai._chat import (
    DEFAULT_MAX_ANSWER_BYTES,
    DEFAULT_MAX_ANSWER_CHARS,
    DEFAULT_MAX_TOOL_CALLS,
)

__all__ = ["API_KEY_ENV_NAME", "OpenAIOptions", "check_api_key_env"]

API_KEY_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""What an environment variable's name (``api_key_env``) looks like."""


class OpenAIOptions(BaseModel):
    """``[model.openai]``: how to reach the server and what to send with every request.

    The API key itself never goes in a file: it comes from ``OPENAI_API_KEY``, or from the
    variable ``api_key_env`` names.
    """

    model_config: ClassVar[ConfigDict] = ConfigDict(extra="forbid", frozen=True)

    base_url: str | None = None
    """The API's base URL, for an OpenAI-compatible server; unset: the openai SDK's default
    (``OPENAI_BASE_URL``, else OpenAI's own)."""
    api_key_env: str | None = Field(
        default=None,
        description="the environment variable holding the API key (default: OPENAI_API_KEY); "
        "never the key itself",
    )
    timeout: float = Field(default=120.0, gt=0)
    """Seconds for the whole answer, from sending the request to its last byte, however the
    server paces its bytes."""
    connect_timeout: float = Field(default=10.0, gt=0)
    """Seconds for connecting to the server."""
    max_retries: int = Field(default=2, ge=0)
    """Retries of a request that failed in a way worth retrying (rate limit, overload,
    connection, timeout); 0: none."""
    temperature: float | None = None
    """Sent with every request; unset: not sent (the server's default)."""
    max_tokens: int | None = Field(default=None, gt=0)
    """The most tokens one answer may have, sent with every request; unset: not sent."""
    parallel_tool_calls: bool | None = None
    """Whether the model may ask for several tool calls in one answer; unset: not sent."""
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
