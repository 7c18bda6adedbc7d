"""What confines the workers, as they report it: ``provider.isolation`` and the start-up log."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

__all__ = ["Isolation", "isolation_from_report", "log_isolation"]

logger = logging.getLogger("pai.sandbox_inmemory")


@dataclass(frozen=True, slots=True)
class Isolation:
    """How the provider's worker processes are confined (``provider.isolation``).

    ``kernel`` is ``"landlock"`` only when a worker applied a Landlock ruleset *and* checked it
    (C code opening a host file failed); otherwise ``None``, and ``reason`` says why. Without
    it, a worker is confined by the audit hook and resource limits alone (see the README).
    """

    kernel: str | None
    """``"landlock"``: the kernel refuses a worker every file access but reads under the Python
    installation. ``None``: no kernel confinement."""
    landlock_abi: int
    """The kernel's Landlock ABI version the worker used (0: none)."""
    network: bool
    """Whether the kernel also refuses TCP binds and connects (Landlock ABI 4 and later)."""
    signals: bool
    """Whether the kernel also refuses signals and abstract Unix sockets to processes outside
    the worker (Landlock ABI 6 and later)."""
    sockets: bool = False
    """Whether a seccomp filter makes ``socket(2)`` fail in a worker (UDP, raw and Unix-domain
    sockets included, which Landlock does not cover)."""
    reason: str = ""
    """A sentence saying what holds, or why there is no kernel confinement."""
    reported: bool = True
    """``False`` before any worker started: the kernel was probed from this process instead."""


def isolation_from_report(report: object, *, reported: bool = True) -> Isolation:
    """The :class:`Isolation` a worker's ``ready`` facts (``confinement``) describe."""
    facts: dict[str, Any] = report if isinstance(report, dict) else {}  # pyright: ignore[reportUnknownVariableType]
    abi = int(facts.get("abi") or 0)
    if facts.get("kernel") == "landlock" and (facts.get("verified") or not reported):
        network, signals = bool(facts.get("network")), bool(facts.get("signals"))
        sockets = bool(facts.get("sockets"))
        also = [
            *(["any socket (seccomp)"] if sockets else []),
            *(["TCP binds and connects"] if network and not sockets else []),
            *(["signals and abstract Unix sockets to other processes"] if signals else []),
        ]
        return Isolation(
            kernel="landlock",
            landlock_abi=abi,
            network=network,
            signals=signals,
            sockets=sockets,
            reason=(
                f"Landlock ABI {abi}: the kernel lets workers only read files under the Python "
                "installation" + (f", and refuses them {' and '.join(also)}" if also else "")
            ),
            reported=reported,
        )
    if facts.get("kernel") == "landlock":
        reason = "a worker applied Landlock, but C code could still open a host file: not relied on"
    else:
        reason = str(facts.get("reason") or "the worker reported no kernel confinement")
    return Isolation(
        kernel=None,
        landlock_abi=abi,
        network=False,
        signals=False,
        reason=f"no kernel confinement ({reason}); workers rely on the audit hook and rlimits",
        reported=reported,
    )


def expected_isolation() -> Isolation:
    """What a worker would report, probed from this process (before any worker started)."""
    from pai.sandbox_inmemory._confine import landlock_abi

    abi, reason = landlock_abi()
    if abi:
        facts: dict[str, object] = {
            "kernel": "landlock",
            "abi": abi,
            "network": abi >= 4,
            "signals": abi >= 6,
            "sockets": True,
        }
    else:
        facts = {"kernel": None, "reason": reason}
    return isolation_from_report(facts, reported=False)


def log_isolation(isolation: Isolation) -> None:
    """The start-up log line: info when the kernel confines workers, a warning when not."""
    if isolation.kernel is not None:
        logger.info("pai-sandbox-inmemory: workers confined: %s", isolation.reason)
    else:
        logger.warning("pai-sandbox-inmemory: %s", isolation.reason)
