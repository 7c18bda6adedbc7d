"""Test helpers: run a tool directly, build a test runtime, script a model; conformance suites.

The conformance suites are pytest test classes (install ``pai-core[testing]``):
:class:`StorageConformance` for storage backends, :class:`RunChannelConformance` for run channels
and :class:`CapabilityBindingConformance` for capability bindings. They are imported on first
use, so importing this package does not import pytest.

:func:`assert_one_public_home` checks a distribution's public surface (each package's
``tests/test_exports.py`` calls it), and :mod:`pai.core.testing.pytest_plugin` provides the
``anyio_backend`` fixture.
"""

from typing import TYPE_CHECKING

from pai.core._plugins import reset_plugins as reset_plugins
from pai.core.ext import lazy_exports as _lazy_exports
from pai.core.testing._durable import JournalEngine as JournalEngine
from pai.core.testing._durable import SimulatedCrash as SimulatedCrash
from pai.core.testing._durable import durable_call as durable_call
from pai.core.testing._exports import assert_one_public_home as assert_one_public_home
from pai.core.testing._models import FunctionModel as FunctionModel
from pai.core.testing._models import ScriptedModel as ScriptedModel
from pai.core.testing._models import ScriptedStream as ScriptedStream
from pai.core.testing._models import ScriptExhaustedError as ScriptExhaustedError
from pai.core.testing._models import ScriptStep as ScriptStep
from pai.core.testing._models import chunks as chunks
from pai.core.testing._models import events as events
from pai.core.testing._models import text as text
from pai.core.testing._models import tool_call as tool_call
from pai.core.testing._models import tool_calls as tool_calls
from pai.core.testing._run_tool import ToolRunResult as ToolRunResult
from pai.core.testing._run_tool import run_tool as run_tool
from pai.core.testing._test_runtime import create_test_runtime as create_test_runtime

if TYPE_CHECKING:
    from pai.core.testing._conformance import (
        CapabilityBindingConformance as CapabilityBindingConformance,
    )
    from pai.core.testing._realtime_conformance import (
        RunChannelConformance as RunChannelConformance,
    )
    from pai.core.testing._storage_conformance import StorageConformance as StorageConformance

_SUITES = {
    "CapabilityBindingConformance": "pai.core.testing._conformance",
    "RunChannelConformance": "pai.core.testing._realtime_conformance",
    "StorageConformance": "pai.core.testing._storage_conformance",
}


if not TYPE_CHECKING:  # the suites need pytest: imported only when asked for
    __getattr__, __dir__ = _lazy_exports(__name__, _SUITES)


__all__ = [
    "CapabilityBindingConformance",
    "FunctionModel",
    "JournalEngine",
    "RunChannelConformance",
    "ScriptExhaustedError",
    "ScriptStep",
    "ScriptedModel",
    "ScriptedStream",
    "SimulatedCrash",
    "StorageConformance",
    "ToolRunResult",
    "assert_one_public_home",
    "chunks",
    "create_test_runtime",
    "durable_call",
    "events",
    "reset_plugins",
    "run_tool",
    "text",
    "tool_call",
    "tool_calls",
]
