"""PAI core: typed, lifecycle-managed capabilities for AI agents, and the runtime that binds them.

Operations (tools, commands) **declare** capabilities; agents **infer** their requirements; the
runtime **binds** them and checks the binding record when it is built; operations **consume** a
typed facade at ``ctx.capabilities``.

Every public name is importable from here (``from pai.core import create_pai``), but the module
that defines it is imported only when the name is first used, so ``import pai.core`` (and the
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
    from pai.core._config import did_you_mean as did_you_mean
    from pai.core._config import load_config as load_config
    from pai.core._config_binding import bindings_from_config as bindings_from_config
    from pai.core._config_binding import capability_binding as capability_binding
    from pai.core._context import RuntimeContextInput as RuntimeContextInput
    from pai.core._context import ToolEnabledInput as ToolEnabledInput
    from pai.core._context import ToolEntry as ToolEntry
    from pai.core._durability import DurabilityEngine as DurabilityEngine
    from pai.core._durability import DurableCall as DurableCall
    from pai.core._durability import DurableHost as DurableHost
    from pai.core._durability import DurableRunAdmin as DurableRunAdmin
    from pai.core._durability import DurableRunInfo as DurableRunInfo
    from pai.core._durability import DurableRunStatus as DurableRunStatus
    from pai.core._durability import RunSpec as RunSpec
    from pai.core._durability import Steps as Steps
    from pai.core._durability import UnknownDurableRunError as UnknownDurableRunError
    from pai.core._durability import current_durable_call as current_durable_call
    from pai.core._durability_config import durability_from_config as durability_from_config
    from pai.core._durability_registry import DurabilityRegistration as DurabilityRegistration
    from pai.core._durability_registry import DurabilitySettings as DurabilitySettings
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
    from pai.core._model import ModelEvent as ModelEvent
    from pai.core._model import ModelRequest as ModelRequest
    from pai.core._model import ModelResponse as ModelResponse
    from pai.core._model import ResponseFinished as ResponseFinished
    from pai.core._model import StreamingModel as StreamingModel
    from pai.core._model import TextDelta as TextDelta
    from pai.core._model import ToolCallArgumentsDelta as ToolCallArgumentsDelta
    from pai.core._model import ToolCallFinished as ToolCallFinished
    from pai.core._model import ToolCallStarted as ToolCallStarted
    from pai.core._model import ToolSpec as ToolSpec
    from pai.core._model import Usage as Usage
    from pai.core._model import UsageReported as UsageReported
    from pai.core._model import collect_response as collect_response
    from pai.core._model import response_events as response_events
    from pai.core._model import stream_model as stream_model
    from pai.core._model_config import model_from_config as model_from_config
    from pai.core._model_config import resolve_model as resolve_model
    from pai.core._model_registry import ModelRegistration as ModelRegistration
    from pai.core._model_retry import RetryAttempt as RetryAttempt
    from pai.core._model_retry import RetryPolicy as RetryPolicy
    from pai.core._model_retry import call_with_retries as call_with_retries
    from pai.core._model_retry import stream_with_retries as stream_with_retries
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
    from pai.core._plugins import CapabilityRegistration as CapabilityRegistration
    from pai.core._plugins import CapabilitySettings as CapabilitySettings
    from pai.core._plugins import CoreHookSpecs as CoreHookSpecs
    from pai.core._plugins import NoOptions as NoOptions
    from pai.core._plugins import PluginInfo as PluginInfo
    from pai.core._plugins import Plugins as Plugins
    from pai.core._plugins import get_plugins as get_plugins
    from pai.core._plugins import hookimpl as hookimpl
    from pai.core._plugins import hookspec as hookspec
    from pai.core._plugins import reset_plugins as reset_plugins
    from pai.core._probes import Probe as Probe
    from pai.core._realtime import InMemoryRunChannel as InMemoryRunChannel
    from pai.core._realtime import ProvidesRunChannel as ProvidesRunChannel
    from pai.core._realtime import RunChannel as RunChannel
    from pai.core._realtime import RunFrames as RunFrames
    from pai.core._realtime import RunInfo as RunInfo
    from pai.core._realtime import RunRefused as RunRefused
    from pai.core._realtime import run_channel_for as run_channel_for
    from pai.core._run_events import DelegatedRunEvent as DelegatedRunEvent
    from pai.core._run_events import RunEvent as RunEvent
    from pai.core._run_events import RunFinished as RunFinished
    from pai.core._run_events import ToolCallResult as ToolCallResult
    from pai.core._runtime import AgentRuntime as AgentRuntime
    from pai.core._scope import CapabilityScope as CapabilityScope
    from pai.core._scope import CapabilityScopeInput as CapabilityScopeInput
    from pai.core._scope import ScopeKind as ScopeKind
    from pai.core._scope import derive_instance_key as derive_instance_key
    from pai.core._scope import instance_key as instance_key
    from pai.core._storage import MAX_BLOB_BYTES as MAX_BLOB_BYTES
    from pai.core._storage import MAX_BLOB_KEY_LENGTH as MAX_BLOB_KEY_LENGTH
    from pai.core._storage import BlobStore as BlobStore
    from pai.core._storage import RunLease as RunLease
    from pai.core._storage import Storage as Storage
    from pai.core._storage import ThreadRecord as ThreadRecord
    from pai.core._storage_codec import decode_message as decode_message
    from pai.core._storage_codec import encode_message as encode_message
    from pai.core._storage_config import open_storage as open_storage
    from pai.core._storage_config import storage_from_config as storage_from_config
    from pai.core._storage_memory import InMemoryStorage as InMemoryStorage
    from pai.core._storage_registry import StorageRegistration as StorageRegistration
    from pai.core._storage_registry import StorageURL as StorageURL
    from pai.core._storage_sqlite import SqliteStorage as SqliteStorage

_SOURCES: dict[str, str] = {
    "AdminClient": "pai.core._admin",
    "RunResult": "pai.core._admin",
    "RunSpec": "pai.core._durability",
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
    "did_you_mean": "pai.core._config",
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
    "DurabilityEngine": "pai.core._durability",
    "DurabilityError": "pai.core._errors",
    "DurableCall": "pai.core._durability",
    "DurableHost": "pai.core._durability",
    "DurableRunAdmin": "pai.core._durability",
    "DurableRunInfo": "pai.core._durability",
    "DurableRunStatus": "pai.core._durability",
    "UnknownDurableRunError": "pai.core._durability",
    "current_durable_call": "pai.core._durability",
    "DurabilityRegistration": "pai.core._durability_registry",
    "DurabilitySettings": "pai.core._durability_registry",
    "DurableReplayError": "pai.core._errors",
    "PaiError": "pai.core._errors",
    "PluginError": "pai.core._errors",
    "RetryableModelError": "pai.core._errors",
    "RunLeaseLostError": "pai.core._errors",
    "RuntimeClosedError": "pai.core._errors",
    "RuntimeContextError": "pai.core._errors",
    "StepLimitExceededError": "pai.core._errors",
    "Steps": "pai.core._durability",
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
    "decode_message": "pai.core._storage_codec",
    "encode_message": "pai.core._storage_codec",
    "FinishReason": "pai.core._model",
    "Model": "pai.core._model",
    "ModelEvent": "pai.core._model",
    "ModelRequest": "pai.core._model",
    "ModelResponse": "pai.core._model",
    "ResponseFinished": "pai.core._model",
    "StreamingModel": "pai.core._model",
    "TextDelta": "pai.core._model",
    "ToolCallArgumentsDelta": "pai.core._model",
    "ToolCallFinished": "pai.core._model",
    "ToolCallStarted": "pai.core._model",
    "ToolSpec": "pai.core._model",
    "Usage": "pai.core._model",
    "UsageReported": "pai.core._model",
    "collect_response": "pai.core._model",
    "response_events": "pai.core._model",
    "stream_model": "pai.core._model",
    "model_from_config": "pai.core._model_config",
    "resolve_model": "pai.core._model_config",
    "ModelRegistration": "pai.core._model_registry",
    "RetryAttempt": "pai.core._model_retry",
    "RetryPolicy": "pai.core._model_retry",
    "call_with_retries": "pai.core._model_retry",
    "stream_with_retries": "pai.core._model_retry",
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
    "CapabilityRegistration": "pai.core._plugins",
    "CapabilitySettings": "pai.core._plugins",
    "CoreHookSpecs": "pai.core._plugins",
    "NoOptions": "pai.core._plugins",
    "PluginInfo": "pai.core._plugins",
    "Plugins": "pai.core._plugins",
    "get_plugins": "pai.core._plugins",
    "hookimpl": "pai.core._plugins",
    "hookspec": "pai.core._plugins",
    "reset_plugins": "pai.core._plugins",
    "Probe": "pai.core._probes",
    "DelegatedRunEvent": "pai.core._run_events",
    "RunEvent": "pai.core._run_events",
    "RunFinished": "pai.core._run_events",
    "ToolCallResult": "pai.core._run_events",
    "AgentRuntime": "pai.core._runtime",
    "CapabilityScope": "pai.core._scope",
    "CapabilityScopeInput": "pai.core._scope",
    "ScopeKind": "pai.core._scope",
    "derive_instance_key": "pai.core._scope",
    "instance_key": "pai.core._scope",
    "InMemoryRunChannel": "pai.core._realtime",
    "ProvidesRunChannel": "pai.core._realtime",
    "RunChannel": "pai.core._realtime",
    "RunFrames": "pai.core._realtime",
    "RunInfo": "pai.core._realtime",
    "RunRefused": "pai.core._realtime",
    "run_channel_for": "pai.core._realtime",
    "BlobStore": "pai.core._storage",
    "MAX_BLOB_BYTES": "pai.core._storage",
    "MAX_BLOB_KEY_LENGTH": "pai.core._storage",
    "RunLease": "pai.core._storage",
    "Storage": "pai.core._storage",
    "ThreadRecord": "pai.core._storage",
    "open_storage": "pai.core._storage_config",
    "storage_from_config": "pai.core._storage_config",
    "durability_from_config": "pai.core._durability_config",
    "InMemoryStorage": "pai.core._storage_memory",
    "StorageRegistration": "pai.core._storage_registry",
    "StorageURL": "pai.core._storage_registry",
    "SqliteStorage": "pai.core._storage_sqlite",
}
"""Where each public name is defined: imported from there on first use."""

__all__ = [  # noqa: RUF022 - plain sorted() order (test_lazy_imports checks it)
    "AcquireInput",
    "AdminClient",
    "Agent",
    "AgentEntry",
    "AgentRuntime",
    "AssistantMessage",
    "BlobStore",
    "Capabilities",
    "Capability",
    "CapabilityAcquireError",
    "CapabilityBinding",
    "CapabilityBindingError",
    "CapabilityConflictError",
    "CapabilityRegistration",
    "CapabilityScope",
    "CapabilityScopeInput",
    "CapabilitySettings",
    "Command",
    "CommandContext",
    "CommandInputError",
    "ConfigError",
    "CoreHookSpecs",
    "DefinitionError",
    "DelegateInput",
    "DelegatedRunEvent",
    "DisposeInput",
    "DuplicateRegistrationError",
    "DurabilityEngine",
    "DurabilityError",
    "DurabilityRegistration",
    "DurabilitySettings",
    "DurableCall",
    "DurableHost",
    "DurableReplayError",
    "DurableRunAdmin",
    "DurableRunInfo",
    "DurableRunStatus",
    "ErrorMessage",
    "FatalModelError",
    "FinishReason",
    "InMemoryRunChannel",
    "InMemoryStorage",
    "InstructionsInput",
    "InvalidThreadIdError",
    "MAX_BLOB_BYTES",
    "MAX_BLOB_KEY_LENGTH",
    "Message",
    "Model",
    "ModelAuthenticationError",
    "ModelBadRequestError",
    "ModelConfigurationError",
    "ModelConnectionError",
    "ModelError",
    "ModelEvent",
    "ModelNotFoundError",
    "ModelOverloadedError",
    "ModelRateLimitError",
    "ModelRegistration",
    "ModelRequest",
    "ModelResponse",
    "ModelResponseError",
    "ModelTimeoutError",
    "NoOptions",
    "OnRuntimeError",
    "Pai",
    "PaiConfig",
    "PaiError",
    "PluginError",
    "PluginInfo",
    "Plugins",
    "Probe",
    "ProvidesRunChannel",
    "Requirement",
    "ResponseFinished",
    "RetryAttempt",
    "RetryPolicy",
    "RetryableModelError",
    "RunChannel",
    "RunEvent",
    "RunFinished",
    "RunFrames",
    "RunInfo",
    "RunLease",
    "RunLeaseLostError",
    "RunRefused",
    "RunResult",
    "RunSpec",
    "RuntimeClosedError",
    "RuntimeContextError",
    "RuntimeContextInput",
    "RuntimeErrorEvent",
    "RuntimeErrorSource",
    "ScopeKind",
    "ScopeLabel",
    "SqliteStorage",
    "StepLimitExceededError",
    "Steps",
    "Storage",
    "StorageAccessError",
    "StorageCorruptError",
    "StorageError",
    "StorageFileError",
    "StorageRegistration",
    "StorageSchemaError",
    "StorageURL",
    "StreamingModel",
    "TextDelta",
    "ThreadBusyError",
    "ThreadDeletedError",
    "ThreadExistsError",
    "ThreadHandle",
    "ThreadNotFoundError",
    "ThreadRecord",
    "Tool",
    "ToolApproval",
    "ToolCall",
    "ToolCallArgumentsDelta",
    "ToolCallFinished",
    "ToolCallResult",
    "ToolCallStarted",
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
    "UsageReported",
    "UserError",
    "UserMessage",
    "bindings_from_config",
    "call_with_retries",
    "capability_binding",
    "collect_response",
    "create_agent_runtime",
    "create_capability_binding",
    "create_pai",
    "current_durable_call",
    "decode_message",
    "define_agent",
    "define_capability",
    "define_command",
    "define_tool",
    "derive_instance_key",
    "did_you_mean",
    "durability_from_config",
    "encode_message",
    "get_plugins",
    "hookimpl",
    "hookspec",
    "instance_key",
    "load_config",
    "message_adapter",
    "model_from_config",
    "open_storage",
    "reset_plugins",
    "resolve_model",
    "response_events",
    "run_channel_for",
    "storage_from_config",
    "stream_model",
    "stream_with_retries",
]


def _lazy_exports(
    package: str, names: collections.abc.Mapping[str, str]
) -> tuple[collections.abc.Callable[[str], object], collections.abc.Callable[[], list[str]]]:
    # Public as pai.core.lazy.lazy_exports. Defined here because pai.core uses it itself and
    # importing pai.core imports none of its modules.
    def __getattr__(name: str) -> object:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)  # later look-ups do not come here
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *names})

    return __getattr__, __dir__


if not TYPE_CHECKING:  # type checkers see the imports above, and no catch-all attribute
    __getattr__, __dir__ = _lazy_exports(__name__, _SOURCES)
