"""Configuration: which implementation binds each capability, from files, environment and code.

THIS MODULE IS A SPECIFICATION STUB: the signatures below are the contract other modules code
against; the implementation is being written.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pai.core._agent import Requirement
from pai.core._binding import CapabilityBinding
from pai.core._errors import UserError
from pai.core._plugins import Plugins


class ConfigError(UserError, ValueError):
    """The configuration is malformed, names something not installed, or lacks a binding.

    Every message names the file (or variable), the key, and the fix.
    """


@dataclass(frozen=True, slots=True)
class PaiConfig:
    """The resolved configuration tree and where each value came from.

    ``data`` is the merged tree (``{"capabilities": {"sandbox": {"provider": "docker", ...}}}``);
    ``sources`` maps each leaf's key path to its origin: ``"<file path>"``, ``"env PAI_..."``,
    ``"code"`` or ``"default"``; ``files`` are the files read, nearest first.
    """

    data: Mapping[str, Any] = field(default_factory=dict[str, Any])
    sources: Mapping[tuple[str, ...], str] = field(default_factory=dict[tuple[str, ...], str])
    files: tuple[Path, ...] = ()

    def capability(self, capability_id: str) -> Mapping[str, Any] | None:
        """The section of one capability (``acme.vault`` is ``[capabilities.acme.vault]`` or
        ``[capabilities."acme.vault"]``), or ``None`` when the configuration has none."""
        raise NotImplementedError

    def flat(self) -> list[tuple[str, Any, str]]:
        """Every leaf as ``(dotted key, value, source)``, sorted by key (for ``pai config``)."""
        raise NotImplementedError


def load_config(
    start: Path | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> PaiConfig:
    """Read ``pai.toml`` or ``[tool.pai]`` of ``pyproject.toml``, searching from ``start`` (the
    working directory) upward; apply ``PAI_*`` environment overrides
    (``PAI_CAPABILITIES__SANDBOX__PROVIDER=docker``) and then ``overrides`` from code."""
    raise NotImplementedError


def bindings_from_config(
    requirements: Mapping[str, Requirement],
    *,
    config: PaiConfig | None = None,
    plugins: Plugins | None = None,
    bound: Collection[str] = (),
) -> dict[str, CapabilityBinding[object]]:
    """Bindings for every required capability id not in ``bound``, built by the capability
    packages plugins registered, from their configuration sections."""
    raise NotImplementedError


def capability_binding(
    capability_id: str, *, config: PaiConfig | None = None, plugins: Plugins | None = None
) -> CapabilityBinding[object]:
    """The binding configuration gives one capability (for tools such as the CLI)."""
    raise NotImplementedError
