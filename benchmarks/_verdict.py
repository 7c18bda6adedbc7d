"""How a benchmark says whether a figure met its target (the scripts run from this folder, so
Python finds this module beside them)."""

from __future__ import annotations


def verdict(ratio: float, target: float) -> str:
    """``(target <= 1.5x: met)``, or ``MISSED``, for a ratio against its baseline."""
    return f"(target <= {target}x: {'met' if ratio <= target else 'MISSED'})"


def share_verdict(share: float, target: float) -> str:
    """``(target <= 10%: met)``, or ``MISSED``, for a share of the time (0.10 is 10%)."""
    return f"(target <= {target * 100:.0f}%: {'met' if share <= target else 'MISSED'})"
