"""Fixtures for the local provider's tests: a private state folder per test session, and a
skip (or, under ``PAI_REQUIRE_BWRAP=1``, a failure) where this machine cannot run bwrap."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from pai.sandbox import SandboxError


def _unavailable() -> str | None:
    from pai.sandbox_local import LocalSandboxProvider

    provider = LocalSandboxProvider(state_dir="/nonexistent-pai-probe")
    try:
        asyncio.run(provider.probe())
    except SandboxError as error:
        return str(error)
    return None


_REASON = _unavailable()


@pytest.fixture(autouse=True)
def _bwrap_works() -> None:
    if _REASON is None:
        return
    if os.environ.get("PAI_REQUIRE_BWRAP") == "1":
        pytest.fail(f"bwrap cannot make a sandbox here (and PAI_REQUIRE_BWRAP=1): {_REASON}")
    pytest.skip(f"bwrap cannot make a sandbox here: {_REASON}")


@pytest.fixture
def state_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Short: the supervisor's socket lives in it, and a Unix socket path holds 107 bytes.
    return tmp_path_factory.mktemp("sbx")


@pytest.fixture
def anyio_backend() -> str:
    """asyncio only: each test starts bwrap sandboxes (slow); the conformance suite covers trio."""
    return "asyncio"
