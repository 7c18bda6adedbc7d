"""PAI core: typed, lifecycle-managed capabilities for AI agents, and the runtime that binds them.

Operations (tools, commands) **declare** capabilities; agents **infer** their requirements; the
runtime **binds** them and checks the binding record when it is built; operations **consume** a
typed facade at ``ctx.capabilities``.

Everything an application writes is importable from here (``from pai.core import create_pai``);
what only an extension (a plugin, model adapter, storage backend, durability engine) needs is in
:mod:`pai.core.ext`, and test helpers are in :mod:`pai.core.testing`. The module that defines
a name is imported only when the name is first used, so ``import pai.core`` (and the
``pai`` command line, which imports it) does not pay for pydantic models it never touches.
"""

import collections.abc
import importlib
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pai.core._admin import AdminClient as AdminClient
    from pai.core._admin import RunResult as RunResult
    from pai.core._admin import ThreadHandle as ThreadHandle
    from pai.core._agent import Agent as Agent
    from pai.core._agent import InstructionsInput as InstructionsInput
    from pai.core._agent import Requirement as Requirement
    from pai.core._agent import define_agent as define_agent
    from pai.core._assembly import create_agent_runtime as create_agent_runtime
    from pai.core._binding import AcquireInput as AcquireInput
    from pai.core._binding import CapabilityBinding as CapabilityBinding
    from pai.core._binding import DisposeInput as DisposeInput
    from pai.core._binding import ScopeLabel as ScopeLabel
    from pai.core._binding import create_capability_binding as create_capability_binding
    from pai.core._capability import Capability as Capability
    from pai.core._capability import define_capability as define_capability
    from pai.core._config import PaiConfig as PaiConfig
    from pai.core._config import load_config as load_config
    from pai.core._config_binding import bindings_from_config as bindings_from_config
    from pai.core._config_binding import capability_binding as capability_binding
    from pai.core._context import RuntimeContextInput as RuntimeContextInput
    from pai.core._context import ToolEnabledInput as ToolEnabledInput
    from pai.core._context import ToolEntry as ToolEntry
    from pai.core._durability import DurableCall as DurableCall
    from pai.core._durability import UnknownDurableRunError as UnknownDurableRunError
    from pai.core._durability import current_durable_call as current_durable_call
    from pai.core._durability_config import durability_from_config as durability_from_config
    from pai.core._errors import CapabilityAcquireError as CapabilityAcquireError
    from pai.core._errors import CapabilityBindingError as CapabilityBindingError
    from pai.core._errors import CapabilityConflictError as CapabilityConflictError
    from pai.core._errors import CommandInputError as CommandInputError
    from pai.core._errors import ConfigError as ConfigError
    from pai.core._errors import DefinitionError as DefinitionError
    from pai.core._errors import DuplicateRegistrationError as DuplicateRegistrationError
    from pai.core._errors import DurabilityError as DurabilityError
    from pai.core._errors import DurableReplayError as DurableReplayError
    from pai.core._errors import FatalModelError as FatalModelError
    from pai.core._errors import InvalidThreadIdError as InvalidThreadIdError
    from pai.core._errors import ModelAuthenticationError as ModelAuthenticationError
    from pai.core._errors import ModelBadRequestError as ModelBadRequestError
    from pai.core._errors import ModelConfigurationError as ModelConfigurationError
    from pai.core._errors import ModelConnectionError as ModelConnectionError
    from pai.core._errors import ModelError as ModelError
    from pai.core._errors import ModelNotFoundError as ModelNotFoundError
    from pai.core._errors import ModelOverloadedError as ModelOverloadedError
    from pai.core._errors import ModelRateLimitError as ModelRateLimitError
    from pai.core._errors import ModelResponseError as ModelResponseError
    from pai.core._errors import ModelTimeoutError as ModelTimeoutError
    from pai.core._errors import PaiError as PaiError
    from pai.core._errors import PluginError as PluginError
    from pai.core._errors import RetryableModelError as RetryableModelError
    from pai.core._errors import RunLeaseLostError as RunLeaseLostError
    from pai.core._errors import RuntimeClosedError as RuntimeClosedError
    from pai.core._errors import RuntimeContextError as RuntimeContextError
    from pai.core._errors import StepLimitExceededError as StepLimitExceededError
    from pai.core._errors import StorageAccessError as StorageAccessError
    from pai.core._errors import StorageCorruptError as StorageCorruptError
    from pai.core._errors import StorageError as StorageError
    from pai.core._errors import StorageFileError as StorageFileError
    from pai.core._errors import StorageSchemaError as StorageSchemaError
    from pai.core._errors import ThreadBusyError as ThreadBusyError
    from pai.core._errors import ThreadDeletedError as ThreadDeletedError
    from pai.core._errors import ThreadExistsError as ThreadExistsError
    from pai.core._errors import ThreadNotFoundError as ThreadNotFoundError
    from pai.core._errors import ToolCapabilitiesError as ToolCapabilitiesError
    from pai.core._errors import UndeclaredCapabilityError as UndeclaredCapabilityError
    from pai.core._errors import UnknownAgentError as UnknownAgentError
    from pai.core._errors import UnknownCommandError as UnknownCommandError
    from pai.core._errors import UserError as UserError
    from pai.core._execution import DelegateInput as DelegateInput
    from pai.core._lifecycle import OnRuntimeError as OnRuntimeError
    from pai.core._lifecycle import RuntimeErrorEvent as RuntimeErrorEvent
    from pai.core._lifecycle import RuntimeErrorSource as RuntimeErrorSource
    from pai.core._messages import AssistantMessage as AssistantMessage
    from pai.core._messages import ErrorMessage as ErrorMessage
    from pai.core._messages import Message as Message
    from pai.core._messages import ToolCall as ToolCall
    from pai.core._messages import ToolResultMessage as ToolResultMessage
    from pai.core._messages import UserMessage as UserMessage
    from pai.core._messages import message_adapter as message_adapter
    from pai.core._model import FinishReason as FinishReason
    from pai.core._model import Model as Model
    from pai.core._model import ModelRequest as ModelRequest
    from pai.core._model import ModelResponse as ModelResponse
    from pai.core._model import ToolSpec as ToolSpec
    from pai.core._model import Usage as Usage
    from pai.core._model_config import model_from_config as model_from_config
    from pai.core._model_config import resolve_model as resolve_model
    from pai.core._model_retry import RetryPolicy as RetryPolicy
    from pai.core._operations import Capabilities as Capabilities
    from pai.core._operations import Command as Command
    from pai.core._operations import CommandContext as CommandContext
    from pai.core._operations import Tool as Tool
    from pai.core._operations import ToolApproval as ToolApproval
    from pai.core._operations import ToolContext as ToolContext
    from pai.core._operations import define_command as define_command
    from pai.core._operations import define_tool as define_tool
    from pai.core._pai import AgentEntry as AgentEntry
    from pai.core._pai import Pai as Pai
    from pai.core._pai import create_pai as create_pai
    from pai.core._run_events import DelegatedRunEvent as DelegatedRunEvent
    from pai.core._run_events import RunEvent as RunEvent
    from pai.core._run_events import RunFinished as RunFinished
    from pai.core._run_events import ToolCallResult as ToolCallResult
    from pai.core._runtime import AgentRuntime as AgentRuntime
    from pai.core._scope import CapabilityScope as CapabilityScope
    from pai.core._scope import CapabilityScopeInput as CapabilityScopeInput
    from pai.core._scope import ScopeKind as ScopeKind
    from pai.core._scope import instance_key as instance_key
    from pai.core._storage_config import open_storage as open_storage
    from pai.core._storage_config import storage_from_config as storage_from_config
    from pai.core._storage_memory import InMemoryStorage as InMemoryStorage
    from pai.core._storage_sqlite import SqliteStorage as SqliteStorage

_SOURCES: dict[str, str] = {
    "AdminClient": "pai.core._admin",
    "RunResult": "pai.core._admin",
    "ThreadHandle": "pai.core._admin",
    "Agent": "pai.core._agent",
    "InstructionsInput": "pai.core._agent",
    "Requirement": "pai.core._agent",
    "define_agent": "pai.core._agent",
    "create_agent_runtime": "pai.core._assembly",
    "AcquireInput": "pai.core._binding",
    "CapabilityBinding": "pai.core._binding",
    "DisposeInput": "pai.core._binding",
    "ScopeLabel": "pai.core._binding",
    "create_capability_binding": "pai.core._binding",
    "Capability": "pai.core._capability",
    "define_capability": "pai.core._capability",
    "PaiConfig": "pai.core._config",
    "load_config": "pai.core._config",
    "bindings_from_config": "pai.core._config_binding",
    "capability_binding": "pai.core._config_binding",
    "RuntimeContextInput": "pai.core._context",
    "ToolEnabledInput": "pai.core._context",
    "ToolEntry": "pai.core._context",
    "CapabilityAcquireError": "pai.core._errors",
    "CapabilityBindingError": "pai.core._errors",
    "CapabilityConflictError": "pai.core._errors",
    "CommandInputError": "pai.core._errors",
    "ConfigError": "pai.core._errors",
    "DefinitionError": "pai.core._errors",
    "DuplicateRegistrationError": "pai.core._errors",
    "FatalModelError": "pai.core._errors",
    "InvalidThreadIdError": "pai.core._errors",
    "ModelAuthenticationError": "pai.core._errors",
    "ModelBadRequestError": "pai.core._errors",
    "ModelConfigurationError": "pai.core._errors",
    "ModelConnectionError": "pai.core._errors",
    "ModelError": "pai.core._errors",
    "ModelNotFoundError": "pai.core._errors",
    "ModelOverloadedError": "pai.core._errors",
    "ModelRateLimitError": "pai.core._errors",
    "ModelResponseError": "pai.core._errors",
    "ModelTimeoutError": "pai.core._errors",
    "DurabilityError": "pai.core._errors",
    "DurableCall": "pai.core._durability",
    "UnknownDurableRunError": "pai.core._durability",
    "current_durable_call": "pai.core._durability",
    "DurableReplayError": "pai.core._errors",
    "PaiError": "pai.core._errors",
    "PluginError": "pai.core._errors",
    "RetryableModelError": "pai.core._errors",
    "RunLeaseLostError": "pai.core._errors",
    "RuntimeClosedError": "pai.core._errors",
    "RuntimeContextError": "pai.core._errors",
    "StepLimitExceededError": "pai.core._errors",
    "StorageAccessError": "pai.core._errors",
    "StorageCorruptError": "pai.core._errors",
    "StorageError": "pai.core._errors",
    "StorageFileError": "pai.core._errors",
    "StorageSchemaError": "pai.core._errors",
    "ThreadBusyError": "pai.core._errors",
    "ThreadDeletedError": "pai.core._errors",
    "ThreadExistsError": "pai.core._errors",
    "ThreadNotFoundError": "pai.core._errors",
    "ToolCapabilitiesError": "pai.core._errors",
    "UndeclaredCapabilityError": "pai.core._errors",
    "UnknownAgentError": "pai.core._errors",
    "UnknownCommandError": "pai.core._errors",
    "UserError": "pai.core._errors",
    "DelegateInput": "pai.core._execution",
    "OnRuntimeError": "pai.core._lifecycle",
    "RuntimeErrorEvent": "pai.core._lifecycle",
    "RuntimeErrorSource": "pai.core._lifecycle",
    "AssistantMessage": "pai.core._messages",
    "ErrorMessage": "pai.core._messages",
    "Message": "pai.core._messages",
    "ToolCall": "pai.core._messages",
    "ToolResultMessage": "pai.core._messages",
    "UserMessage": "pai.core._messages",
    "message_adapter": "pai.core._messages",
    "FinishReason": "pai.core._model",
    "Model": "pai.core._model",
    "ModelRequest": "pai.core._model",
    "ModelResponse": "pai.core._model",
    "ToolSpec": "pai.core._model",
    "Usage": "pai.core._model",
    "model_from_config": "pai.core._model_config",
    "resolve_model": "pai.core._model_config",
    "RetryPolicy": "pai.core._model_retry",
    "Capabilities": "pai.core._operations",
    "Command": "pai.core._operations",
    "CommandContext": "pai.core._operations",
    "Tool": "pai.core._operations",
    "ToolApproval": "pai.core._operations",
    "ToolContext": "pai.core._operations",
    "define_command": "pai.core._operations",
    "define_tool": "pai.core._operations",
    "AgentEntry": "pai.core._pai",
    "Pai": "pai.core._pai",
    "create_pai": "pai.core._pai",
    "DelegatedRunEvent": "pai.core._run_events",
    "RunEvent": "pai.core._run_events",
    "RunFinished": "pai.core._run_events",
    "ToolCallResult": "pai.core._run_events",
    "AgentRuntime": "pai.core._runtime",
    "CapabilityScope": "pai.core._scope",
    "CapabilityScopeInput": "pai.core._scope",
    "ScopeKind": "pai.core._scope",
    "instance_key": "pai.core._scope",
    "open_storage": "pai.core._storage_config",
    "storage_from_config": "pai.core._storage_config",
    "durability_from_config": "pai.core._durability_config",
    "InMemoryStorage": "pai.core._storage_memory",
    "SqliteStorage": "pai.core._storage_sqlite",
}
"""Where each public name is defined: imported from there on first use."""

__all__ = [
    "AcquireInput",
    "AdminClient",
    "Agent",
    "AgentEntry",
    "AgentRuntime",
    "AssistantMessage",
    "Capabilities",
    "Capability",
    "CapabilityAcquireError",
    "CapabilityBinding",
    "CapabilityBindingError",
    "CapabilityConflictError",
    "CapabilityScope",
    "CapabilityScopeInput",
    "Command",
    "CommandContext",
    "CommandInputError",
    "ConfigError",
    "DefinitionError",
    "DelegateInput",
    "DelegatedRunEvent",
    "DisposeInput",
    "DuplicateRegistrationError",
    "DurabilityError",
    "DurableCall",
    "DurableReplayError",
    "ErrorMessage",
    "FatalModelError",
    "FinishReason",
    "InMemoryStorage",
    "InstructionsInput",
    "InvalidThreadIdError",
    "Message",
    "Model",
    "ModelAuthenticationError",
    "ModelBadRequestError",
    "ModelConfigurationError",
    "ModelConnectionError",
    "ModelError",
    "ModelNotFoundError",
    "ModelOverloadedError",
    "ModelRateLimitError",
    "ModelRequest",
    "ModelResponse",
    "ModelResponseError",
    "ModelTimeoutError",
    "OnRuntimeError",
    "Pai",
    "PaiConfig",
    "PaiError",
    "PluginError",
    "Requirement",
    "RetryPolicy",
    "RetryableModelError",
    "RunEvent",
    "RunFinished",
    "RunLeaseLostError",
    "RunResult",
    "RuntimeClosedError",
    "RuntimeContextError",
    "RuntimeContextInput",
    "RuntimeErrorEvent",
    "RuntimeErrorSource",
    "ScopeKind",
    "ScopeLabel",
    "SqliteStorage",
    "StepLimitExceededError",
    "StorageAccessError",
    "StorageCorruptError",
    "StorageError",
    "StorageFileError",
    "StorageSchemaError",
    "ThreadBusyError",
    "ThreadDeletedError",
    "ThreadExistsError",
    "ThreadHandle",
    "ThreadNotFoundError",
    "Tool",
    "ToolApproval",
    "ToolCall",
    "ToolCallResult",
    "ToolCapabilitiesError",
    "ToolContext",
    "ToolEnabledInput",
    "ToolEntry",
    "ToolResultMessage",
    "ToolSpec",
    "UndeclaredCapabilityError",
    "UnknownAgentError",
    "UnknownCommandError",
    "UnknownDurableRunError",
    "Usage",
    "UserError",
    "UserMessage",
    "bindings_from_config",
    "capability_binding",
    "create_agent_runtime",
    "create_capability_binding",
    "create_pai",
    "current_durable_call",
    "define_agent",
    "define_capability",
    "define_command",
    "define_tool",
    "durability_from_config",
    "instance_key",
    "load_config",
    "message_adapter",
    "model_from_config",
    "open_storage",
    "resolve_model",
    "storage_from_config",
]


def _lazy_exports(
    package: str, names: collections.abc.Mapping[str, str]
) -> tuple[collections.abc.Callable[[str], object], collections.abc.Callable[[], list[str]]]:
    # Public as pai.core.ext.lazy_exports. Defined here because pai.core uses it itself and
    # importing pai.core imports none of its modules.
    def __getattr__(name: str) -> object:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)  # later look-ups do not come here
        return value

    def __dir__() -> list[str]:
        # The public names only (what ``__all__`` lists), not the helpers the module imports.
        return sorted({*names, *getattr(sys.modules[package], "__all__", ())})

    return __getattr__, __dir__


if not TYPE_CHECKING:  # type checkers see the imports above, and no catch-all attribute
    __getattr__, __dir__ = _lazy_exports(__name__, _SOURCES)
