"""The ``runtime`` option reaches the engine: gVisor (``runsc``) where the engine has it.

The provider moves files through the engine's archive API, so gVisor must be registered with
``--file-access=shared`` (see the README); with gVisor's default (exclusive) file access, files
written from outside stay invisible inside and this test fails, as it should."""

from __future__ import annotations

import os
from typing import Any

import pytest

from pai.sandbox import create_sandbox, create_sandbox_session_manager
from pai.sandbox_docker import DockerSandboxProvider

pytestmark = pytest.mark.anyio


async def test_commands_run_under_gvisor_with_runtime_runsc(
    namespace: str, test_image: str, docker_client: Any
) -> None:
    runtimes = sorted(docker_client.info().get("Runtimes") or {})
    if "runsc" not in runtimes:
        reason = (
            f"the Docker engine has no runsc runtime registered (it has {runtimes}); install "
            'gVisor (apt-get install runsc) and add it under "runtimes" in daemon.json '
            "(scripts/with-docker.sh does both for the engine it starts)"
        )
        if os.environ.get("PAI_REQUIRE_GVISOR") == "1":
            pytest.fail(f"{reason}; PAI_REQUIRE_GVISOR=1 makes this a failure, not a skip")
        pytest.skip(reason)
    provider = DockerSandboxProvider(test_image, namespace=namespace, runtime="runsc")
    sessions = create_sandbox_session_manager(provider=provider)
    sandbox = create_sandbox(sessions.handle("gvisor"))
    try:
        await sandbox.write_file("note.txt", "in gVisor")
        result = await sandbox.run_command("dmesg | head -1; cat note.txt")
        assert result.exit_code == 0, result.stderr
        assert "gVisor" in result.stdout
        assert result.stdout.endswith("in gVisor")
        await sandbox.run_command("echo made inside > inside.txt")
        assert await sandbox.read_text("inside.txt") == "made inside\n"
        timed = await sandbox.run_command("sleep 30", timeout=1)
        assert (timed.timed_out, timed.exit_code) == (True, 124)
    finally:
        await provider.destroy("gvisor")
        await sessions.aclose()
