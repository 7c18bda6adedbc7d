"""PAI model provider on the OpenAI Chat Completions API, through the official ``openai`` SDK.

:class:`OpenAIModel` implements the core's streaming model protocol for OpenAI and any
OpenAI-compatible server (``base_url``). :mod:`pai.model_openai.testing` ships a local
OpenAI-compatible server to test agents offline through the real SDK.

Importing this package does not import the ``openai`` SDK: building a model does.
"""

from typing import TYPE_CHECKING

from pai.model_openai._errors import ModelRedirectError as ModelRedirectError
from pai.model_openai._errors import map_openai_error as map_openai_error
from pai.model_openai._errors import parse_retry_after as parse_retry_after
from pai.model_openai._plugin import OpenAIOptions as OpenAIOptions

if TYPE_CHECKING:
    from pai.model_openai._model import OpenAIModel as OpenAIModel


def __getattr__(name: str) -> object:
    # OpenAIModel's module is small, but keep the package import as light as the plugin's.
    if name == "OpenAIModel":
        from pai.model_openai._model import OpenAIModel

        globals()[name] = OpenAIModel
        return OpenAIModel
    raise AttributeError(f"module 'pai.model_openai' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), "OpenAIModel"])


__all__ = [
    "ModelRedirectError",
    "OpenAIModel",
    "OpenAIOptions",
    "map_openai_error",
    "parse_retry_after",
]
