"""The instance's operations where envd answers differently from other backends: a batch naming
one path twice, file names envd reads from a multipart header, names that are not UTF-8, and the
exit code of a command a signal killed.

asyncio only: the e2b SDK is asyncio-only.
"""

from __future__ import annotations

from typing import Any

import pytest
from e2b.envd.process import process_pb

from pai.sandbox import Sandbox, SandboxInputError, SandboxNotADirectoryError, SandboxProviderError
from pai.sandbox.provider import FileWrite
from pai.sandbox_e2b import E2BSandboxProvider
from pai.sandbox_e2b._instance import _exit_code
from pai.sandbox_e2b.testing import E2BEmulator

pytestmark = pytest.mark.anyio


@pytest.fixture
async def sandbox(sandbox: Sandbox) -> Sandbox:
    """The shared fixture's sandbox, made in E2B before the test (a command ran in it)."""
    await sandbox.run_command("true")
    return sandbox


async def uploads(emulator: E2BEmulator, provider: E2BSandboxProvider, sandbox: Sandbox) -> int:
    """How many uploads (``POST /files``) the sandbox's envd has received."""
    instance = await provider.find(sandbox.key)
    assert instance is not None
    requests = emulator.requests(instance.instance_id)
    return sum(1 for r in requests if (r.method, r.path) == ("POST", "/files"))


# -- a batch naming one path twice -------------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "last"), [(0o755, 0o644), (0o644, 0o755)], ids=["plain-last", "executable-last"]
)
async def test_a_batch_naming_a_path_twice_ends_with_the_last_content_and_mode(
    sandbox: Sandbox, first: int, last: int
) -> None:
    # envd refuses one upload naming a path twice (400); the last write must win all the same.
    await sandbox.write_files(
        [
            FileWrite("/workspace/twice.sh", b"first", first),
            FileWrite("/workspace/other.txt", b"other"),
            FileWrite("/workspace/twice.sh", b"last", last),
        ]
    )
    assert await sandbox.read_text("twice.sh") == "last"
    assert await sandbox.read_text("other.txt") == "other"
    assert (await sandbox.run_command("stat -c %a twice.sh")).stdout == f"{last:o}\n"


async def test_a_repeated_path_costs_one_more_upload_and_no_more(
    emulator: E2BEmulator, provider: E2BSandboxProvider, sandbox: Sandbox
) -> None:
    before = await uploads(emulator, provider, sandbox)
    await sandbox.write_files(
        [
            FileWrite("/workspace/a.txt", b"1"),
            FileWrite("/workspace/b.txt", b"1"),
            FileWrite("/workspace/a.txt", b"2"),
            FileWrite("/workspace/c.txt", b"2"),
            FileWrite("/workspace/./a.txt", b"3"),  # the same path to envd
        ]
    )
    assert await uploads(emulator, provider, sandbox) - before == 3
    assert [await sandbox.read_text(n) for n in ("a.txt", "b.txt", "c.txt")] == ["3", "1", "2"]


async def test_a_batch_with_a_repeated_path_stops_at_a_failing_entry_as_if_written_in_order(
    sandbox: Sandbox,
) -> None:
    # In order, as on every provider: the entry after the failing one is not written, though it
    # names a path written before it.
    await sandbox.write_file("x.txt", "before")
    with pytest.raises(SandboxNotADirectoryError):
        await sandbox.write_files(
            [
                FileWrite("/workspace/x.txt", b"one"),
                FileWrite("/workspace/x.txt/inner.txt", b"no"),
                FileWrite("/workspace/x.txt", b"two"),
            ]
        )
    assert await sandbox.read_text("x.txt") == "one"


# -- file names envd reads from a multipart header ----------------------------------------------

AWKWARD = ['say "hi".txt', "two\nlines.txt", "carriage\rreturn.txt", 'a"b\\c\rd\ne%22f\x01.txt']


@pytest.mark.parametrize("name", AWKWARD, ids=["quote", "lf", "cr", "all"])
async def test_a_name_the_sdk_would_alter_in_a_batch_is_written_as_itself(
    emulator: E2BEmulator, provider: E2BSandboxProvider, sandbox: Sandbox, name: str
) -> None:
    await sandbox.write_files({"d/plain.txt": "plain", f"d/{name}": "awkward", "d/z.txt": "z"})
    instance = await provider.find(sandbox.key)
    assert instance is not None
    (emulated,) = [s for s in emulator.sandboxes() if s.sandbox_id == instance.instance_id]
    on_disk = sorted(p.name for p in (emulated.root / "workspace" / "d").iterdir())
    assert on_disk == sorted([name, "plain.txt", "z.txt"])
    assert await sandbox.read_text(f"d/{name}") == "awkward"


async def test_plain_names_around_an_awkward_one_still_share_uploads(
    emulator: E2BEmulator, provider: E2BSandboxProvider, sandbox: Sandbox
) -> None:
    before = await uploads(emulator, provider, sandbox)
    await sandbox.write_files({"a.txt": "a", "b.txt": "b", 'q"uote.txt': "q", "c.txt": "c"})
    assert await uploads(emulator, provider, sandbox) - before == 3
    assert await sandbox.read_text('q"uote.txt') == "q"


# -- names that are not UTF-8 -------------------------------------------------------------------

NOT_UTF8 = "bad-\udcff.txt"  # a byte 0xff, decoded with surrogateescape


@pytest.mark.parametrize(
    "operation",
    ["write_file", "read_file", "list_dir", "exists", "remove", "make_dir", "cwd"],
)
async def test_a_path_that_is_not_utf8_is_refused_naming_it(
    sandbox: Sandbox, operation: str
) -> None:
    calls: dict[str, Any] = {
        "write_file": lambda: sandbox.write_file(NOT_UTF8, "x"),
        "read_file": lambda: sandbox.read_file(NOT_UTF8),
        "list_dir": lambda: sandbox.list_dir(NOT_UTF8),
        "exists": lambda: sandbox.exists(NOT_UTF8),
        "remove": lambda: sandbox.remove(NOT_UTF8),
        "make_dir": lambda: sandbox.make_dir(NOT_UTF8),
        "cwd": lambda: sandbox.run_command("pwd", cwd=NOT_UTF8),
    }
    with pytest.raises(SandboxInputError, match="UTF-8") as refused:
        await calls[operation]()
    assert "\\udcff" in str(refused.value)
    assert (await sandbox.run_command("echo still working")).stdout == "still working\n"


@pytest.mark.parametrize("where", ["command", "env"])
async def test_a_command_or_variable_that_is_not_utf8_is_refused(
    sandbox: Sandbox, where: str
) -> None:
    command, env = (f"echo {NOT_UTF8}", {}) if where == "command" else ("true", {"V": NOT_UTF8})
    with pytest.raises(SandboxInputError, match="UTF-8"):
        await sandbox.run_command(command, env=env)


# -- a command a signal killed ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("signal", "number"),
    [("HUP", 1), ("KILL", 9), ("USR1", 10), ("SEGV", 11), ("ALRM", 14), ("TERM", 15)],
)
async def test_a_command_killed_by_a_signal_exits_with_what_a_shell_reports(
    sandbox: Sandbox, signal: str, number: int
) -> None:
    # envd says exit code -1 and "signal: <Go's name>"; a shell says 128 + N.
    result = await sandbox.run_command(f"kill -{signal} $$")
    assert (result.exit_code, result.timed_out) == (128 + number, False)


def end_event(**fields: Any) -> Any:
    return process_pb.ProcessEvent.EndEvent(**fields)


@pytest.mark.parametrize(
    ("event", "code"),
    [
        ({"exit_code": 3, "exited": True, "status": "exit status 3"}, 3),
        ({"exit_code": -1, "status": "signal: killed", "error": "signal: killed"}, 137),
        ({"exit_code": -1, "status": "signal: segmentation fault (core dumped)"}, 139),
        ({"exit_code": -1, "status": "signal: signal 34"}, 162),  # Go has no word for it
        ({"exit_code": 143, "status": "terminated"}, 143),  # re-adopted after envd restarted
    ],
    ids=["exited", "killed", "core-dumped", "realtime", "re-adopted"],
)
def test_envd_end_events_map_to_a_shells_exit_codes(event: dict[str, Any], code: int) -> None:
    assert _exit_code(end_event(**event)) == code


def test_an_end_event_naming_no_signal_is_an_error_naming_the_status() -> None:
    with pytest.raises(SandboxProviderError, match="'stop signal: stopped'"):
        _exit_code(end_event(exit_code=-1, status="stop signal: stopped"))
