"""Helpers for the pai-sandbox-inmemory tests."""

from __future__ import annotations

from collections.abc import Callable

from pai.sandbox_inmemory import InMemorySandboxProvider

MakeProvider = Callable[..., InMemorySandboxProvider]
"""The ``make_provider`` fixture (conftest): providers with options, closed after the test."""

__all__ = ["MakeProvider"]
