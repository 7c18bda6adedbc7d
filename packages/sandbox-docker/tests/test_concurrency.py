"""Two OS processes using one key for the first time at the same moment share one container."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import anyio
import anyio.to_thread
import pytest

from pai.sandbox_docker import DockerSandboxProvider

pytestmark = pytest.mark.anyio

# Each child connects, says "ready", waits for "go" on stdin, then makes its first use of the key
# and prints the container it got (or the error).
_CHILD = textwrap.dedent(
    """
    import sys, anyio
    from pai.sandbox import create_sandbox, create_sandbox_session_manager
    from pai.sandbox_docker import DockerSandboxProvider

    async def main():
        provider = DockerSandboxProvider(sys.argv[1], namespace=sys.argv[2])
        await provider.list_instances()  # connected before the start signal
        sessions = create_sandbox_session_manager(provider=provider)
        print("ready", flush=True)
        sys.stdin.readline()
        try:
            sandbox = create_sandbox(sessions.handle(sys.argv[3]))
            result = await sandbox.run_command("hostname")
            print("got", (await sessions.instance(sys.argv[3])).instance_id, result.stdout.strip())
        except Exception as error:
            print("error", type(error).__name__, error)
        await provider.aclose()

    anyio.run(main)
    """
)


def _race(image: str, namespace: str, key: str) -> list[str]:
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, image, namespace, key],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        for child in children:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "ready"
        for child in children:  # both released at once
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        return [child.communicate(timeout=120)[0].strip() for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()


@pytest.mark.parametrize("trial", range(3))
async def test_two_processes_first_using_one_key_at_once_get_the_same_container(
    namespace: str, test_image: str, trial: int
) -> None:
    key = f"race-{trial}"
    provider = DockerSandboxProvider(test_image, namespace=namespace)
    try:
        outputs = await anyio.to_thread.run_sync(lambda: _race(test_image, namespace, key))
        assert all(line.startswith("got ") for line in outputs), outputs
        ids = {line.split()[1] for line in outputs}
        assert len(ids) == 1, outputs
        hostnames = {line.split()[2] for line in outputs}
        assert hostnames == {next(iter(ids))[:12]}
        assert [info.instance_id for info in await provider.list_instances()] == list(ids)
    finally:
        await provider.destroy(key)
        await provider.aclose()
