"""PAI model provider on the OpenAI Chat Completions API, through the official ``openai`` SDK.

:class:`OpenAIModel` implements the core's streaming model protocol for OpenAI and any
OpenAI-compatible server (``base_url``). :mod:`pai.model_openai.testing` ships a local
OpenAI-compatible server to test agents offline through the real SDK.

Importing this package does not import the ``openai`` SDK: building a model does.
"""

from typing import TYPE_CHECKING

from pai.core.ext import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from pai.model_openai._errors import ModelRedirectError as ModelRedirectError
    from pai.model_openai._errors import map_openai_error as map_openai_error
    from pai.model_openai._errors import parse_retry_after as parse_retry_after
    from pai.model_openai._model import OpenAIModel as OpenAIModel
    from pai.model_openai._options import OpenAIOptions as OpenAIOptions

_SOURCES: dict[str, str] = {
    "ModelRedirectError": "pai.model_openai._errors",
    "map_openai_error": "pai.model_openai._errors",
    "parse_retry_after": "pai.model_openai._errors",
    "OpenAIModel": "pai.model_openai._model",
    "OpenAIOptions": "pai.model_openai._options",
}
"""The module that defines each public name: imported when the name is first used, so loading
the plugin (``pai --help``) imports no pydantic."""

if not TYPE_CHECKING:  # type checkers see the imports above, and no catch-all attribute
    __getattr__, __dir__ = _lazy_exports(__name__, _SOURCES)


__all__ = [
    "ModelRedirectError",
    "OpenAIModel",
    "OpenAIOptions",
    "map_openai_error",
    "parse_retry_after",
]
