"""For extension authors: what a plugin, model adapter, storage backend, durability engine or
realtime channel needs from pai-core, and nothing an application writes.

An application imports from :mod:`pai.core`; a package that extends PAI imports the seams it
implements from here (and the errors it raises from :mod:`pai.core`):

- plugins: the hook markers :data:`hookimpl` / :data:`hookspec`, :class:`CoreHookSpecs`, the
  registrations a hook returns and :func:`get_plugins` to look them up;
- models: :class:`ModelRegistration` and the streaming protocol (:class:`StreamingModel`,
  :data:`ModelEvent` and its events, :func:`stream_model`, the retry helpers);
- storage: :class:`Storage`, :class:`BlobStore`, :class:`ThreadRecord`, :class:`RunLease`, the
  message codec and :class:`StorageRegistration`;
- durability: :class:`DurabilityEngine`, :class:`DurableHost`, :class:`RunSpec`, :class:`Steps`,
  the admin view of runs and :class:`DurabilityRegistration`;
- realtime: :class:`RunChannel` and the types it exchanges;
- helpers: :class:`Probe`, :func:`derive_instance_key`, :func:`did_you_mean` and
  :func:`lazy_exports`.

Like :mod:`pai.core`, each name is imported from its defining module only when first used.
A package's ``__init__`` does the same with :func:`lazy_exports`::

    from typing import TYPE_CHECKING

    from pai.core.ext import lazy_exports

    if TYPE_CHECKING:
        from mypkg._model import MyModel as MyModel

    _SOURCES = {"MyModel": "mypkg._model"}

    if not TYPE_CHECKING:  # type checkers see the imports above, and no catch-all attribute
        __getattr__, __dir__ = lazy_exports(__name__, _SOURCES)

    __all__ = ["MyModel"]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

# Defined in pai.core itself, which uses it and must import none of its own modules.
from pai.core import _lazy_exports  # pyright: ignore[reportPrivateUsage]

if TYPE_CHECKING:
    from pai.core._config import did_you_mean as did_you_mean
    from pai.core._durability import DurabilityEngine as DurabilityEngine
    from pai.core._durability import DurableHost as DurableHost
    from pai.core._durability import DurableRunAdmin as DurableRunAdmin
    from pai.core._durability import DurableRunInfo as DurableRunInfo
    from pai.core._durability import DurableRunStatus as DurableRunStatus
    from pai.core._durability import RunSpec as RunSpec
    from pai.core._durability import Steps as Steps
    from pai.core._durability import durable_call_id as durable_call_id
    from pai.core._durability_registry import DurabilityRegistration as DurabilityRegistration
    from pai.core._durability_registry import DurabilitySettings as DurabilitySettings
    from pai.core._model import ModelEvent as ModelEvent
    from pai.core._model import ResponseFinished as ResponseFinished
    from pai.core._model import StreamingModel as StreamingModel
    from pai.core._model import TextDelta as TextDelta
    from pai.core._model import ToolCallArgumentsDelta as ToolCallArgumentsDelta
    from pai.core._model import ToolCallFinished as ToolCallFinished
    from pai.core._model import ToolCallStarted as ToolCallStarted
    from pai.core._model import UsageReported as UsageReported
    from pai.core._model import collect_response as collect_response
    from pai.core._model import response_events as response_events
    from pai.core._model import stream_model as stream_model
    from pai.core._model_registry import ModelRegistration as ModelRegistration
    from pai.core._model_retry import RetryAttempt as RetryAttempt
    from pai.core._model_retry import call_with_retries as call_with_retries
    from pai.core._model_retry import stream_with_retries as stream_with_retries
    from pai.core._plugins import CapabilityRegistration as CapabilityRegistration
    from pai.core._plugins import CapabilitySettings as CapabilitySettings
    from pai.core._plugins import CoreHookSpecs as CoreHookSpecs
    from pai.core._plugins import NoOptions as NoOptions
    from pai.core._plugins import PluginInfo as PluginInfo
    from pai.core._plugins import Plugins as Plugins
    from pai.core._plugins import get_plugins as get_plugins
    from pai.core._plugins import hookimpl as hookimpl
    from pai.core._plugins import hookspec as hookspec
    from pai.core._probes import Probe as Probe
    from pai.core._realtime import InMemoryRunChannel as InMemoryRunChannel
    from pai.core._realtime import ProvidesRunChannel as ProvidesRunChannel
    from pai.core._realtime import RunChannel as RunChannel
    from pai.core._realtime import RunFrames as RunFrames
    from pai.core._realtime import RunInfo as RunInfo
    from pai.core._realtime import RunRefused as RunRefused
    from pai.core._realtime import run_channel_for as run_channel_for
    from pai.core._scope import derive_instance_key as derive_instance_key
    from pai.core._storage import MAX_BLOB_BYTES as MAX_BLOB_BYTES
    from pai.core._storage import MAX_BLOB_KEY_LENGTH as MAX_BLOB_KEY_LENGTH
    from pai.core._storage import BlobStore as BlobStore
    from pai.core._storage import RunLease as RunLease
    from pai.core._storage import Storage as Storage
    from pai.core._storage import ThreadRecord as ThreadRecord
    from pai.core._storage_codec import decode_message as decode_message
    from pai.core._storage_codec import encode_message as encode_message
    from pai.core._storage_registry import StorageRegistration as StorageRegistration
    from pai.core._storage_registry import StorageURL as StorageURL


def lazy_exports(
    package: str, names: Mapping[str, str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """A module ``__getattr__`` and ``__dir__`` for ``package``.

    ``names`` maps each public name to the module that defines it. The ``__getattr__`` imports
    that module on the name's first use and caches the value in the package, so later look-ups
    do not call it; an unknown name raises :class:`AttributeError` (so ``from package import
    name`` raises :class:`ImportError`). The ``__dir__`` lists the package's public names
    (``names`` and what the package defines itself), so ``dir(package)`` is its ``__all__``.
    """
    return _lazy_exports(package, names)


_SOURCES: dict[str, str] = {
    "BlobStore": "pai.core._storage",
    "CapabilityRegistration": "pai.core._plugins",
    "CapabilitySettings": "pai.core._plugins",
    "CoreHookSpecs": "pai.core._plugins",
    "DurabilityEngine": "pai.core._durability",
    "DurabilityRegistration": "pai.core._durability_registry",
    "DurabilitySettings": "pai.core._durability_registry",
    "DurableHost": "pai.core._durability",
    "DurableRunAdmin": "pai.core._durability",
    "DurableRunInfo": "pai.core._durability",
    "DurableRunStatus": "pai.core._durability",
    "InMemoryRunChannel": "pai.core._realtime",
    "MAX_BLOB_BYTES": "pai.core._storage",
    "MAX_BLOB_KEY_LENGTH": "pai.core._storage",
    "ModelEvent": "pai.core._model",
    "ModelRegistration": "pai.core._model_registry",
    "NoOptions": "pai.core._plugins",
    "PluginInfo": "pai.core._plugins",
    "Plugins": "pai.core._plugins",
    "Probe": "pai.core._probes",
    "ProvidesRunChannel": "pai.core._realtime",
    "ResponseFinished": "pai.core._model",
    "RetryAttempt": "pai.core._model_retry",
    "RunChannel": "pai.core._realtime",
    "RunFrames": "pai.core._realtime",
    "RunInfo": "pai.core._realtime",
    "RunLease": "pai.core._storage",
    "RunRefused": "pai.core._realtime",
    "RunSpec": "pai.core._durability",
    "Steps": "pai.core._durability",
    "Storage": "pai.core._storage",
    "StorageRegistration": "pai.core._storage_registry",
    "StorageURL": "pai.core._storage_registry",
    "StreamingModel": "pai.core._model",
    "TextDelta": "pai.core._model",
    "ThreadRecord": "pai.core._storage",
    "ToolCallArgumentsDelta": "pai.core._model",
    "ToolCallFinished": "pai.core._model",
    "ToolCallStarted": "pai.core._model",
    "UsageReported": "pai.core._model",
    "call_with_retries": "pai.core._model_retry",
    "collect_response": "pai.core._model",
    "decode_message": "pai.core._storage_codec",
    "derive_instance_key": "pai.core._scope",
    "did_you_mean": "pai.core._config",
    "durable_call_id": "pai.core._durability",
    "encode_message": "pai.core._storage_codec",
    "get_plugins": "pai.core._plugins",
    "hookimpl": "pai.core._plugins",
    "hookspec": "pai.core._plugins",
    "response_events": "pai.core._model",
    "run_channel_for": "pai.core._realtime",
    "stream_model": "pai.core._model",
    "stream_with_retries": "pai.core._model_retry",
}
"""Where each public name is defined: imported from there on first use."""

__all__ = [  # noqa: RUF022 - plain sorted() order
    "BlobStore",
    "CapabilityRegistration",
    "CapabilitySettings",
    "CoreHookSpecs",
    "DurabilityEngine",
    "DurabilityRegistration",
    "DurabilitySettings",
    "DurableHost",
    "DurableRunAdmin",
    "DurableRunInfo",
    "DurableRunStatus",
    "InMemoryRunChannel",
    "MAX_BLOB_BYTES",
    "MAX_BLOB_KEY_LENGTH",
    "ModelEvent",
    "ModelRegistration",
    "NoOptions",
    "PluginInfo",
    "Plugins",
    "Probe",
    "ProvidesRunChannel",
    "ResponseFinished",
    "RetryAttempt",
    "RunChannel",
    "RunFrames",
    "RunInfo",
    "RunLease",
    "RunRefused",
    "RunSpec",
    "Steps",
    "Storage",
    "StorageRegistration",
    "StorageURL",
    "StreamingModel",
    "TextDelta",
    "ThreadRecord",
    "ToolCallArgumentsDelta",
    "ToolCallFinished",
    "ToolCallStarted",
    "UsageReported",
    "call_with_retries",
    "collect_response",
    "decode_message",
    "derive_instance_key",
    "did_you_mean",
    "durable_call_id",
    "encode_message",
    "get_plugins",
    "hookimpl",
    "hookspec",
    "lazy_exports",
    "response_events",
    "run_channel_for",
    "stream_model",
    "stream_with_retries",
]

if not TYPE_CHECKING:  # type checkers see the imports above, and no catch-all attribute
    __getattr__, __dir__ = lazy_exports(__name__, _SOURCES)
