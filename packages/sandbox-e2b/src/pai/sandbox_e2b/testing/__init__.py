"""Offline tests for code that uses E2B: an E2B emulator on 127.0.0.1, and a pytest fixture.

:class:`E2BEmulator` serves E2B's control plane and envd (commands, files) on a free port of
127.0.0.1, so the real ``e2b`` SDK, and the ``e2b`` sandbox provider, run against it with no
network and no account. It answers as strictly as E2B does (timeouts, templates, envd's
statuses, messages and entry fields, processes that outlive their command, the ``user`` and
``root`` users), and :attr:`E2BEmulator.faults` (:class:`EmulatorFaults`) makes it fail as E2B
fails. It is a TEST DOUBLE, NOT ISOLATION: a sandbox's processes are ordinary processes of the
user running the tests, in Linux namespaces of the sandbox's own (user, mount, PID and, unless
internet access is allowed, network), chrooted into a temporary folder, each bounded to 512 MiB
of address space. Never run untrusted code in it. Needs the ``testing`` extra (``pip install
'pai-sandbox-e2b[testing]'``) and pytest (this module defines the fixture).

Example (a ``conftest.py``)::

    from pai.sandbox_e2b.testing import e2b_emulator  # noqa: F401  (the fixture)

    async def test_my_tool(e2b_emulator):
        provider = E2BSandboxProvider(
            api_key=e2b_emulator.api_key,
            api_url=e2b_emulator.url,
            sandbox_url=e2b_emulator.url,
        )
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from pai.sandbox_e2b._errors import E2BEmulatorUnavailableError as _Unavailable
from pai.sandbox_e2b.testing._emulator import E2BEmulator as E2BEmulator
from pai.sandbox_e2b.testing._faults import EmulatorFaults as EmulatorFaults
from pai.sandbox_e2b.testing._state import EmulatedRequest as EmulatedRequest
from pai.sandbox_e2b.testing._state import EmulatedSandbox as EmulatedSandbox

REQUIRE_ENV = "PAI_REQUIRE_E2B_EMULATOR"
"""Set to ``1`` (CI does) to make tests fail, not skip, where the emulator cannot start."""


@pytest.fixture(scope="session")
def e2b_emulator() -> Iterator[E2BEmulator]:
    """One E2B emulator for the test session; skips (with the reason) where it cannot run,
    or fails when ``PAI_REQUIRE_E2B_EMULATOR=1``."""
    try:
        emulator = E2BEmulator().start()
    except _Unavailable as error:
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{error} ({REQUIRE_ENV}=1 makes this a failure, not a skip)")
        pytest.skip(str(error))
    try:
        yield emulator
    finally:
        emulator.stop()


__all__ = [
    "REQUIRE_ENV",
    "E2BEmulator",
    "EmulatedRequest",
    "EmulatedSandbox",
    "EmulatorFaults",
    "e2b_emulator",
]
