"""The E2B emulator as the real e2b SDK sees it: control plane, lifetimes, envd's answers.

asyncio only: the e2b SDK is asyncio-only.
"""

from __future__ import annotations

import itertools
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import anyio.to_thread
import pytest
from e2b import (
    AsyncSandbox,
    AuthenticationException,
    FileNotFoundException,
    SandboxNotFoundException,
    SandboxNotRunningException,
    SandboxQuery,
)
from e2b_helpers import options

from pai.sandbox_e2b import E2BSandboxProvider
from pai.sandbox_e2b.testing import E2BEmulator
from pai.sandbox_e2b.testing._paths import opened_inside

pytestmark = pytest.mark.anyio


async def test_listing_filters_by_metadata_and_pages_with_next_tokens(
    emulator: E2BEmulator,
) -> None:
    tag = {"suite": uuid.uuid4().hex, "odd chars": "a=b&c%d+e /é"}
    made = [
        await AsyncSandbox.create(metadata=tag, timeout=60, **options(emulator)) for _ in range(5)
    ]
    await AsyncSandbox.create(metadata={"suite": "other"}, timeout=60, **options(emulator))
    try:
        paginator = AsyncSandbox.list(
            query=SandboxQuery(metadata=tag), limit=2, **options(emulator)
        )
        pages: list[list[str]] = []
        while paginator.has_next:
            pages.append([s.sandbox_id for s in await paginator.next_items()])
            if not paginator.next_token:
                break
        assert [len(page) for page in pages] == [2, 2, 1]
        assert sorted(itertools.chain(*pages)) == sorted(s.sandbox_id for s in made)
    finally:
        for sandbox in made:
            await sandbox.kill()
        for held in emulator.find(suite="other"):
            emulator.remove(held.sandbox_id)


async def test_the_control_plane_wants_the_api_key(emulator: E2BEmulator) -> None:
    with pytest.raises(AuthenticationException):
        await AsyncSandbox.create(
            api_key="e2b_wrong", api_url=emulator.url, sandbox_url=emulator.url
        )


async def test_a_killed_sandbox_is_not_found_by_envd_nor_by_connect(
    emulator: E2BEmulator,
) -> None:
    sandbox = await AsyncSandbox.create(timeout=60, **options(emulator))
    assert await sandbox.kill()
    assert not await sandbox.kill()
    assert not await sandbox.is_running()
    with pytest.raises(SandboxNotRunningException):
        await sandbox.commands.run("true")
    with pytest.raises(SandboxNotFoundException):
        await AsyncSandbox.connect(sandbox.sandbox_id, **options(emulator))


async def test_set_timeout_sets_the_remaining_lifetime(
    emulator: E2BEmulator, raw: AsyncSandbox
) -> None:
    await raw.set_timeout(40)
    (held,) = [s for s in emulator.sandboxes() if s.sandbox_id == raw.sandbox_id]
    remaining = (held.end_at - datetime.now(UTC)).total_seconds()
    assert 30 < remaining <= 40


async def test_a_sandbox_whose_lifetime_ran_out_is_gone(
    emulator: E2BEmulator, raw: AsyncSandbox
) -> None:
    emulator.set_timeout(raw.sandbox_id, 0)
    assert not await raw.is_running()
    with pytest.raises(SandboxNotRunningException):
        await raw.files.read("/home/user")
    assert raw.sandbox_id not in [s.sandbox_id for s in emulator.sandboxes()]


async def test_a_pause_keeps_files_and_connect_resumes(
    emulator: E2BEmulator, raw: AsyncSandbox
) -> None:
    await raw.files.write("/home/user/kept.txt", b"kept")
    emulator.pause(raw.sandbox_id)
    assert not await raw.is_running()
    await AsyncSandbox.connect(raw.sandbox_id, timeout=60, **options(emulator))
    assert await raw.files.read("/home/user/kept.txt") == "kept"


async def test_commands_see_the_sandbox_filesystem_at_its_own_paths(raw: AsyncSandbox) -> None:
    await raw.files.write("/workspace/from-files.txt", b"written by the files API")
    result = await raw.commands.run("pwd; cat /workspace/from-files.txt", cwd="/workspace")
    assert result.stdout == "/workspace\nwritten by the files API"
    await raw.commands.run("echo from a command > /tmp/out.txt")
    assert await raw.files.read("/tmp/out.txt") == "from a command\n"


async def test_a_symlink_never_leads_the_files_api_out_of_the_sandbox(
    raw: AsyncSandbox, tmp_path: Path
) -> None:
    secret = tmp_path / "host-secret.txt"
    secret.write_text("host only")
    await raw.commands.run(f"ln -s {secret} /home/user/link; ln -s ../../../.. /home/user/up")
    with pytest.raises(FileNotFoundException):
        await raw.files.read("/home/user/link")
    with pytest.raises(FileNotFoundException):
        await raw.files.read(f"/home/user/up{secret}")


async def test_each_command_gets_the_environment_it_asked_for_and_not_the_hosts(
    raw: AsyncSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PAI_HOST_ONLY", "leak")
    result = await raw.commands.run(
        'echo "$GREETING|${PAI_HOST_ONLY:-none}|$HOME"', envs={"GREETING": "hi"}
    )
    assert result.stdout == "hi|none|/home/user\n"


async def test_an_emulator_started_with_async_with_serves_and_deletes_its_folders() -> None:
    async with E2BEmulator() as emulator:
        sandbox = await AsyncSandbox.create(timeout=60, **options(emulator))
        assert (await sandbox.commands.run("echo up")).stdout == "up\n"
        (held,) = emulator.sandboxes()
        root = held.root
        assert root.is_dir()
    assert not root.exists()
    assert not root.parent.exists()  # the emulator's own folder
    assert emulator.sandboxes() == []


async def test_stopping_does_not_wait_for_a_command_that_is_still_running() -> None:
    emulator = E2BEmulator().start()
    try:
        sandbox = await AsyncSandbox.create(timeout=60, **options(emulator))
        await sandbox.commands.run("sleep 1000", background=True, timeout=0)
    finally:
        started = time.monotonic()
        await anyio.to_thread.run_sync(emulator.stop)
    assert time.monotonic() - started < 5
    assert emulator.sandboxes() == []


async def test_answer_not_found_makes_envd_answer_502_that_many_times(
    emulator: E2BEmulator, raw: AsyncSandbox
) -> None:
    emulator.answer_not_found(raw.sandbox_id, times=2)
    for _ in range(2):
        with pytest.raises(SandboxNotRunningException):
            await raw.files.exists("/home/user")
    assert await raw.files.exists("/home/user")


async def test_the_request_log_shows_each_request_with_its_sandbox(
    emulator: E2BEmulator, raw: AsyncSandbox
) -> None:
    await raw.files.write("/home/user/logged.txt", b"x")
    await raw.set_timeout(50)
    seen = [(r.method, r.path) for r in emulator.requests(raw.sandbox_id)]
    assert ("POST", "/files") in seen
    assert ("POST", f"/sandboxes/{raw.sandbox_id}/timeout") in seen
    (timeout,) = [r for r in emulator.requests(raw.sandbox_id) if r.path.endswith("/timeout")]
    assert timeout.body == {"timeout": 50}


# bash opens a TCP connection for a redirection from /dev/tcp/HOST/PORT.
CONNECT = "exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"


async def test_commands_have_no_network_unless_internet_access_is_allowed(
    emulator: E2BEmulator,
) -> None:
    port = emulator.url.rsplit(":", 1)[1]
    results: dict[bool, tuple[int, str]] = {}
    for allowed in (False, True):
        provider = E2BSandboxProvider(
            api_key=emulator.api_key,
            api_url=emulator.url,
            sandbox_url=emulator.url,
            namespace=f"pai-test-{uuid.uuid4().hex[:12]}",
            allow_internet_access=allowed,
        )
        instance = await provider.create("net")
        try:
            done = await instance.run(
                CONNECT.format(port=port),
                cwd="/",
                env={},
                stdin=None,
                timeout=10,
                output_limit=1024,
            )
            results[allowed] = (done.exit_code, done.stdout.decode())
        finally:
            await provider.destroy("net")
    assert results[False][0] != 0
    assert results[True] == (0, "connected\n")


def test_a_file_opened_outside_the_sandbox_root_is_told_apart(tmp_path: Path) -> None:
    # What the file API checks after opening, so that a command swapping a folder for a link
    # to the host between the path's resolution and the open cannot reach the host.
    root = tmp_path / "root"
    (root / "inside").mkdir(parents=True)
    (root / "inside" / "f").write_text("sandbox")
    (tmp_path / "host.txt").write_text("host")
    with (root / "inside" / "f").open("rb") as inside, (tmp_path / "host.txt").open("rb") as out:
        assert opened_inside(root, inside.fileno())
        assert not opened_inside(root, out.fileno())
    sibling = tmp_path / "root-sibling.txt"
    sibling.write_text("next door")
    with sibling.open("rb") as next_door:
        assert not opened_inside(root, next_door.fileno())
