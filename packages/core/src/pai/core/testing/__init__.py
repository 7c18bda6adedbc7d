"""Test helpers: run a tool directly, build a test runtime, script a model.

The binding conformance suite lives in :mod:`pai.core.testing.conformance` (it needs pytest).
"""

from pai.core.testing._models import FunctionModel as FunctionModel
from pai.core.testing._models import ScriptedModel as ScriptedModel
from pai.core.testing._models import ScriptExhaustedError as ScriptExhaustedError
from pai.core.testing._models import text as text
from pai.core.testing._models import tool_call as tool_call
from pai.core.testing._models import tool_calls as tool_calls
from pai.core.testing._run_tool import ToolRunResult as ToolRunResult
from pai.core.testing._run_tool import run_tool as run_tool
from pai.core.testing._test_runtime import create_test_runtime as create_test_runtime

__all__ = [
    "FunctionModel",
    "ScriptExhaustedError",
    "ScriptedModel",
    "ToolRunResult",
    "create_test_runtime",
    "run_tool",
    "text",
    "tool_call",
    "tool_calls",
]
