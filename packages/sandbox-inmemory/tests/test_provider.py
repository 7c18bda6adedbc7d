"""The in-memory provider's own behaviours, on asyncio and on trio.

The generic provider conformance suite (``pai.sandbox.testing``) runs against this provider too;
these tests cover what is specific to it (just-bash in worker processes, files in the host).
Isolation from the host, timeouts and memory have their own file, ``test_isolation.py``.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from pathlib import Path

import anyio
import pytest
from inmemory_helpers import MakeProvider

from pai.sandbox import (
    SandboxClosedError,
    SandboxDirectoryNotEmptyError,
    SandboxFileExistsError,
    SandboxFileNotFoundError,
    SandboxInputError,
    SandboxIsADirectoryError,
    SandboxNotADirectoryError,
    SandboxVanishedError,
    SeedFile,
    create_sandbox,
    create_sandbox_session_manager,
)
from pai.sandbox.provider import (
    FileWrite,
    ProviderFeatures,
    RawCommandResult,
    SandboxInstance,
    SandboxProvider,
)
from pai.sandbox_inmemory import (
    EXIT_INTERPRETER_ERROR,
    EXIT_TIMEOUT,
    ExecutionLimits,
    InMemorySandboxInstance,
    InMemorySandboxProvider,
    create_in_memory_sandbox_provider,
)

pytestmark = pytest.mark.anyio


MiB = 1024 * 1024
READ_LIMIT = 64 * MiB


async def run(
    instance: InMemorySandboxInstance,
    command: str,
    *,
    cwd: str = "/workspace",
    env: Mapping[str, str] | None = None,
    stdin: bytes | None = None,
    timeout: float | None = 10.0,
    output_limit: int = MiB,
) -> RawCommandResult:
    return await instance.run(
        command,
        cwd=cwd,
        env=env or {},
        stdin=stdin,
        timeout=timeout,
        output_limit=output_limit,
    )


async def file_size(instance: InMemorySandboxInstance, path: str) -> int:
    return len(await instance.read_file(path, max_bytes=READ_LIMIT))


# -- the provider as a whole -----------------------------------------------------------------------


async def test_implements_the_provider_protocol_with_name_and_features(
    provider: InMemorySandboxProvider,
) -> None:
    assert isinstance(provider, SandboxProvider)
    assert provider.name == "inmemory"
    assert provider.features == ProviderFeatures(
        cross_process=False, durable=False, processes=False
    )
    instance = await provider.create("k")
    assert isinstance(instance, SandboxInstance)
    assert instance.key == "k"


async def test_facade_runs_echo_hi(provider: InMemorySandboxProvider) -> None:
    sandbox = create_sandbox(create_sandbox_session_manager(provider=provider).handle("t"))
    result = await sandbox.run_command("echo hi")
    assert result.stdout == "hi\n"
    assert result.stderr == ""
    assert result.exit_code == 0
    assert result.ok


@pytest.mark.parametrize(
    ("command", "stdout"),
    [
        ("echo hello | tr a-z A-Z", "HELLO\n"),
        ("echo one > f.txt && echo two >> f.txt && cat f.txt", "one\ntwo\n"),
        ("false && echo no || echo yes", "yes\n"),
        ("for i in 1 2 3; do echo $i; done", "1\n2\n3\n"),
        ("i=0; while [ $i -lt 3 ]; do i=$((i+1)); done; echo $i", "3\n"),
        ("printf 'a\\nb\\nc\\n' | grep -v b", "a\nc\n"),
        ("echo hello world | sed 's/world/there/'", "hello there\n"),
        ("mkdir -p d/e && touch d/e/x && ls d/e", "x\n"),
        ("echo x > a; echo y > b; ls", "a\nb\n"),
        ('f() { echo "arg=$1"; }; f 42', "arg=42\n"),
        ("echo $(echo nested)", "nested\n"),
        ("cat <<'EOF'\nheredoc $x\nEOF", "heredoc $x\n"),
        ("echo err >&2; echo out", "out\n"),
    ],
)
async def test_facade_runs_shell_syntax_and_utilities(
    provider: InMemorySandboxProvider, command: str, stdout: str
) -> None:
    sandbox = create_sandbox(create_sandbox_session_manager(provider=provider).handle("t"))
    result = await sandbox.run_command(command)
    assert (result.stdout, result.exit_code) == (stdout, 0), result.stderr


async def test_workspace_exists_empty_and_is_the_default_cwd(
    provider: InMemorySandboxProvider,
) -> None:
    sandbox = create_sandbox(create_sandbox_session_manager(provider=provider).handle("t"))
    assert (await sandbox.run_command("pwd")).stdout == "/workspace\n"
    assert await sandbox.list_dir("/workspace") == []
    assert await sandbox.exists("/workspace")


async def test_no_host_filesystem_or_network(
    provider: InMemorySandboxProvider, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("host data\n")
    instance = await provider.create("k")
    assert (await run(instance, "ls /")).stdout == b"bin\ndev\nhome\ntmp\nusr\nworkspace\n"
    host_read = await run(instance, f"cat {secret}")
    assert host_read.exit_code != 0
    assert b"host data" not in host_read.stdout
    assert not await instance.exists(str(secret))
    with pytest.raises(SandboxFileNotFoundError):
        await instance.read_file("/etc/passwd", max_bytes=READ_LIMIT)
    assert (await run(instance, "curl http://127.0.0.1/")).exit_code == 127


async def test_results_and_errors_come_back_from_the_worker(
    provider: InMemorySandboxProvider,
) -> None:
    instance = await provider.create("k")
    assert (await run(instance, "echo hi")).stdout == b"hi\n"
    with pytest.raises(SandboxFileNotFoundError):
        await instance.read_file("/workspace/missing", max_bytes=READ_LIMIT)
    assert (await run(instance, "while true; do sleep 0.05; done", timeout=0.1)).timed_out


# -- commands ----------------------------------------------------------------------------------------


async def test_nonzero_exit_and_unknown_commands_are_results(
    provider: InMemorySandboxProvider,
) -> None:
    instance = await provider.create("k")
    assert (await run(instance, "echo before; exit 3")).exit_code == 3
    missing = await run(instance, "no-such-program")
    assert missing.exit_code == 127
    assert b"command not found" in missing.stderr
    syntax = await run(instance, "if then")
    assert syntax.exit_code == 2
    assert syntax.stderr


async def test_env_is_added_for_that_command_only(provider: InMemorySandboxProvider) -> None:
    instance = await provider.create("k")
    assert (await run(instance, 'echo "$GREETING"', env={"GREETING": "hello world"})).stdout == (
        b"hello world\n"
    )
    assert (await run(instance, 'echo "${GREETING:-unset}"')).stdout == b"unset\n"
    assert (await run(instance, 'echo "$HOME"')).stdout == b"/home/user\n"


async def test_each_command_gets_a_fresh_shell(provider: InMemorySandboxProvider) -> None:
    instance = await provider.create("k")
    await run(instance, "cd /tmp; x=1; export Y=2; f() { echo f; }")
    assert (await run(instance, 'pwd; echo "${x:-none} ${Y:-none}"')).stdout == (
        b"/workspace\nnone none\n"
    )
    assert (await run(instance, "f")).exit_code == 127


async def test_cwd_is_used_and_must_be_an_existing_folder(
    provider: InMemorySandboxProvider,
) -> None:
    instance = await provider.create("k")
    await instance.make_dir("/workspace/sub", parents=False)
    await instance.write_files([FileWrite("/workspace/file.txt", b"x")])
    assert (await run(instance, "pwd", cwd="/workspace/sub")).stdout == b"/workspace/sub\n"
    missing = await run(instance, "pwd", cwd="/workspace/missing")
    assert (missing.exit_code, missing.stdout) == (1, b"")
    assert b"/workspace/missing" in missing.stderr
    assert b"does not exist" in missing.stderr
    a_file = await run(instance, "pwd", cwd="/workspace/file.txt")
    assert (a_file.exit_code, a_file.stdout) == (1, b"")
    assert b"not a directory" in a_file.stderr


async def test_stdin_multiline_text_is_fed(provider: InMemorySandboxProvider) -> None:
    instance = await provider.create("k")
    result = await run(
        instance,
        'while IFS= read -r line; do echo "<$line>"; done',
        stdin=b"line one\nline two\n  indented\n",
    )
    assert result.stdout == b"<line one>\n<line two>\n<  indented>\n"


async def test_stdin_binary_passes_through_unchanged(provider: InMemorySandboxProvider) -> None:
    instance = await provider.create("k")
    data = bytes(range(256)) * 4  # no final newline: cat adds none
    assert (await run(instance, "cat", stdin=data)).stdout == data
    assert (await run(instance, "cat > copy.bin", stdin=data)).exit_code == 0
    assert await instance.read_file("/workspace/copy.bin", max_bytes=READ_LIMIT) == data


async def test_no_stdin_reads_as_empty(provider: InMemorySandboxProvider) -> None:
    instance = await provider.create("k")
    result = await run(instance, "cat; echo done")
    assert (result.stdout, result.exit_code) == (b"done\n", 0)


async def test_non_utf8_output_comes_back_as_the_same_bytes(
    provider: InMemorySandboxProvider,
) -> None:
    instance = await provider.create("k")
    await instance.write_files([FileWrite("/workspace/raw", b"\xff\xfe ok \x80\n")])
    assert (await run(instance, "cat raw")).stdout == b"\xff\xfe ok \x80\n"
    assert (await run(instance, "echo héllo")).stdout == "héllo\n".encode()


async def test_html_entities_stay_text(provider: InMemorySandboxProvider) -> None:
    instance = await provider.create("k")
    assert (await run(instance, "echo '&lt;b&gt;'")).stdout == b"&lt;b&gt;\n"


async def test_timeout_stops_the_command_and_nothing_runs_after(
    provider: InMemorySandboxProvider,
) -> None:
    instance = await provider.create("k")
    started = time.perf_counter()
    result = await run(
        instance, "while true; do echo x >> /workspace/tick; sleep 0.05; done", timeout=0.3
    )
    elapsed = time.perf_counter() - started
    assert result.timed_out
    assert result.exit_code == EXIT_TIMEOUT
    assert b"timed out" in result.stderr
    assert 0.3 <= elapsed < 3
    size = await file_size(instance, "/workspace/tick")
    assert size > 0  # it did run
    await anyio.sleep(0.3)  # bounded wait: a live loop would have appended ~6 more lines
    assert await file_size(instance, "/workspace/tick") == size


@pytest.mark.parametrize("timeout", [0.0, -1.0, float("nan")])
async def test_invalid_timeouts_are_refused(
    provider: InMemorySandboxProvider, timeout: float
) -> None:
    instance = await provider.create("k")
    with pytest.raises(SandboxInputError):
        await run(instance, "echo hi", timeout=timeout)


async def test_timeout_lands_in_a_loop_without_sleep(make_provider: MakeProvider) -> None:
    # No asyncio.sleep in the script: the provider's checkpoints (each command, each file write)
    # are what let the timeout land.
    limited = make_provider(
        limits=ExecutionLimits(max_loop_iterations=10_000_000, max_command_count=10_000_000)
    )
    instance = await limited.create("k")
    started = time.perf_counter()
    result = await run(instance, "while true; do echo x >> tick; done", timeout=0.2)
    assert result.timed_out
    assert time.perf_counter() - started < 3
    size = await file_size(instance, "/workspace/tick")
    await anyio.sleep(0.2)
    assert await file_size(instance, "/workspace/tick") == size


async def test_timeout_utility_inside_the_sandbox_works_on_any_host_loop(
    provider: InMemorySandboxProvider,
) -> None:
    instance = await provider.create("k")
    result = await run(instance, "timeout 0.1 sleep 5; echo $?; sleep 0.01; echo slept")
    assert result.stdout == b"124\nslept\n"


async def test_cancelling_the_caller_stops_the_command(provider: InMemorySandboxProvider) -> None:
    instance = await provider.create("k")
    await run(instance, "true")  # a worker is up: the cancellation lands in the command itself
    with anyio.move_on_after(0.3) as scope:
        await run(instance, "while true; do echo x >> tick; sleep 0.05; done", timeout=None)
    assert scope.cancelled_caught
    size = await file_size(instance, "/workspace/tick")
    await anyio.sleep(0.3)  # bounded wait: a live loop would have appended ~6 more lines
    assert await file_size(instance, "/workspace/tick") == size


async def test_execution_limit_is_a_result_not_an_exception(make_provider: MakeProvider) -> None:
    limited = make_provider(limits=ExecutionLimits(max_loop_iterations=50))
    instance = await limited.create("k")
    result = await run(instance, "while true; do :; done")
    assert result.exit_code == EXIT_INTERPRETER_ERROR
    assert b"too many iterations" in result.stderr
    assert not result.timed_out
    assert limited.limits.max_loop_iterations == 50


@pytest.mark.parametrize(
    "program",
    ["BEGIN { for (i = 0; i < 1000; i++) n++; print n }", "BEGIN { while (1) {} }"],
    ids=["counting-loop", "while-with-an-empty-body"],
)
async def test_an_awk_loop_past_its_limit_is_a_result_not_silence(
    make_provider: MakeProvider, program: str
) -> None:
    limited = make_provider(limits=ExecutionLimits(max_awk_iterations=100))
    instance = await limited.create("k")
    result = await run(instance, f"awk '{program}'")
    assert result.exit_code == EXIT_INTERPRETER_ERROR
    assert b"max_awk_iterations" in result.stderr
    assert (await run(instance, "echo still fine")).stdout == b"still fine\n"


@pytest.mark.parametrize(
    ("program", "expected"),
    [
        ('BEGIN { a["x"] = 1; a["y"] = 2; for (k in a) n++; print n }', b"2\n"),
        ("BEGIN { i = 0; while (i < 3) i++; print i }", b"3\n"),
        ("BEGIN { for (i = 0; i < 3; i++) {}; print i }", b"3\n"),
        ('BEGIN { while (i < 3) { s = s ")"; i++ }; print s }', b")))\n"),
    ],
    ids=["for-in", "while-without-braces", "for-with-empty-body", "paren-in-body"],
)
async def test_awk_loops_run_in_every_form(
    provider: InMemorySandboxProvider, program: str, expected: bytes
) -> None:
    instance = await provider.create("k")
    result = await run(instance, f"awk '{program}'")
    assert (result.exit_code, result.stdout) == (0, expected), result.stderr


async def test_byte_counts_of_non_utf8_content_are_exact(provider: InMemorySandboxProvider) -> None:
    instance = await provider.create("k")
    await instance.write_files([FileWrite("/workspace/raw", b"\xff\xfe\n")])
    assert (await run(instance, "wc -c < raw")).stdout == b"3\n"
    assert (await run(instance, "cat raw | wc -c")).stdout == b"3\n"


async def test_array_subscript_substitution_is_refused_without_patching_asyncio(
    provider: InMemorySandboxProvider,
) -> None:
    instance = await provider.create("k")
    for script in ("a=(1 2 3); echo ${a[$(echo 1)]}", "a=(1 2 3); a[$((1+1))]=x; echo ok"):
        result = await run(instance, script)
        assert result.exit_code == 2
        assert b"array subscript" in result.stderr
    assert asyncio.run.__module__ == "asyncio.runners"  # nest_asyncio did not patch asyncio
    assert (await run(instance, 'a=(1 2 3); i=$((1+1)); echo "${a[$i]}"')).stdout == b"3\n"
    assert (await run(instance, 'x="$(echo [$(echo in)])"; echo "$x"')).stdout == b"[in]\n"


async def test_output_is_capped_per_stream_with_truncated_and_callbacks(
    provider: InMemorySandboxProvider,
) -> None:
    instance = await provider.create("k")
    out_chunks: list[bytes] = []
    err_chunks: list[bytes] = []
    result = await instance.run(
        "echo 0123456789; echo err >&2",
        cwd="/workspace",
        env={},
        stdin=None,
        timeout=10,
        output_limit=8,
        on_stdout=out_chunks.append,
        on_stderr=err_chunks.append,
    )
    assert result.stdout == b"01234567"
    assert result.stderr == b"err\n"
    assert result.truncated
    assert out_chunks == [b"01234567"]
    assert err_chunks == [b"err\n"]
    small = await run(instance, "echo ok", output_limit=3)
    assert (small.stdout, small.truncated) == (b"ok\n", False)
    multibyte = await run(instance, "echo ééé", output_limit=3)
    assert (multibyte.stdout, multibyte.truncated) == ("ééé".encode()[:3], True)


async def test_facade_callbacks_get_text(provider: InMemorySandboxProvider) -> None:
    sandbox = create_sandbox(create_sandbox_session_manager(provider=provider).handle("t"))
    seen: list[str] = []
    result = await sandbox.run_command("echo streamed", on_stdout=seen.append)
    assert seen == ["streamed\n"] == [result.stdout]


async def test_concurrent_commands_on_one_instance_run_concurrently(
    provider: InMemorySandboxProvider,
) -> None:
    # Each command waits for the other's file: only possible if both run at the same time.
    instance = await provider.create("k")
    results: dict[str, RawCommandResult] = {}

    async def handshake(mine: str, theirs: str) -> None:
        results[mine] = await run(
            instance,
            f"touch {mine}; while [ ! -f {theirs} ]; do sleep 0.01; done; echo {mine}",
            timeout=10,
        )

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(handshake, "a", "b")
            group.start_soon(handshake, "b", "a")
    assert results["a"].stdout == b"a\n"
    assert results["b"].stdout == b"b\n"
    assert not results["a"].timed_out
    assert not results["b"].timed_out


async def test_instances_do_not_share_files(provider: InMemorySandboxProvider) -> None:
    one = await provider.create("one")
    two = await provider.create("two")
    await run(one, "echo mine > only-here.txt")
    assert await one.exists("/workspace/only-here.txt")
    assert not await two.exists("/workspace/only-here.txt")


# -- files -------------------------------------------------------------------------------------------


async def test_read_file_round_trips_every_byte_value(provider: InMemorySandboxProvider) -> None:
    instance = await provider.create("k")
    data = bytes(range(256))
    await instance.write_files([FileWrite("/workspace/all-bytes.bin", data)])
    assert await instance.read_file("/workspace/all-bytes.bin", max_bytes=READ_LIMIT) == data


async def test_read_file_of_ten_mebibytes(provider: InMemorySandboxProvider) -> None:
    instance = await provider.create("k")
    data = os.urandom(10 * MiB)
    await instance.write_files([FileWrite("/workspace/big.bin", data)])
    assert await instance.read_file("/workspace/big.bin", max_bytes=READ_LIMIT) == data
    assert (await instance.list_dir("/workspace"))[0].size == 10 * MiB


async def test_files_written_through_the_api_and_the_shell_are_the_same_files(
    provider: InMemorySandboxProvider,
) -> None:
    instance = await provider.create("k")
    await instance.write_files([FileWrite("/workspace/in.txt", b"from api\n")])
    assert (await run(instance, "cat in.txt; echo from shell > out.txt")).stdout == b"from api\n"
    assert await instance.read_file("/workspace/out.txt", max_bytes=READ_LIMIT) == b"from shell\n"


async def test_write_files_in_order_with_parents_and_modes(
    provider: InMemorySandboxProvider,
) -> None:
    instance = await provider.create("k")
    await instance.write_files(
        [
            FileWrite("/workspace/deep/er/file.txt", b"first"),
            FileWrite("/workspace/deep/er/file.txt", b"second"),
            FileWrite("/workspace/bin/run.sh", b"#!/bin/sh\necho ran $1\n", 0o755),
        ]
    )
    assert (
        await instance.read_file("/workspace/deep/er/file.txt", max_bytes=READ_LIMIT) == b"second"
    )
    modes = await run(instance, "stat -c '%a' deep/er/file.txt bin/run.sh")
    assert modes.stdout.split() == [b"644", b"755"]
    assert (await run(instance, "./bin/run.sh arg")).stdout == b"ran arg\n"


async def test_write_files_refuses_folders_and_paths_through_files(
    provider: InMemorySandboxProvider,
) -> None:
    instance = await provider.create("k")
    await instance.write_files([FileWrite("/workspace/file.txt", b"x")])
    with pytest.raises(SandboxIsADirectoryError) as onto_folder:
        await instance.write_files([FileWrite("/workspace", b"x")])
    assert onto_folder.value.filename == "/workspace"
    with pytest.raises(SandboxNotADirectoryError) as under_file:
        await instance.write_files([FileWrite("/workspace/file.txt/inner", b"x")])
    assert under_file.value.filename == "/workspace/file.txt/inner"
    assert await instance.read_file("/workspace/file.txt", max_bytes=READ_LIMIT) == b"x"


async def test_write_through_a_symlink_writes_its_target(
    provider: InMemorySandboxProvider,
) -> None:
    instance = await provider.create("k")
    await run(instance, "mkdir real && ln -s real link")
    await instance.write_files([FileWrite("/workspace/link/f.txt", b"via link")])
    assert await instance.read_file("/workspace/real/f.txt", max_bytes=READ_LIMIT) == b"via link"


async def test_read_file_errors_name_the_path(provider: InMemorySandboxProvider) -> None:
    instance = await provider.create("k")
    await instance.write_files([FileWrite("/workspace/file.txt", b"x")])
    with pytest.raises(SandboxFileNotFoundError) as missing:
        await instance.read_file("/workspace/missing.txt", max_bytes=READ_LIMIT)
    assert missing.value.filename == "/workspace/missing.txt"
    assert isinstance(missing.value, FileNotFoundError)
    with pytest.raises(SandboxIsADirectoryError) as folder:
        await instance.read_file("/workspace", max_bytes=READ_LIMIT)
    assert folder.value.filename == "/workspace"
    with pytest.raises(SandboxNotADirectoryError) as through_file:
        await instance.read_file("/workspace/file.txt/inner", max_bytes=READ_LIMIT)
    assert through_file.value.filename == "/workspace/file.txt/inner"


async def test_list_dir_is_sorted_with_types_and_sizes(provider: InMemorySandboxProvider) -> None:
    instance = await provider.create("k")
    await instance.write_files(
        [FileWrite("/workspace/b.txt", b"12345"), FileWrite("/workspace/a/inner.txt", b"")]
    )
    await run(instance, "ln -s b.txt c-link")
    entries = await instance.list_dir("/workspace")
    assert [(e.name, e.path, e.type) for e in entries] == [
        ("a", "/workspace/a", "directory"),
        ("b.txt", "/workspace/b.txt", "file"),
        ("c-link", "/workspace/c-link", "symlink"),
    ]
    assert entries[1].size == 5
    await run(instance, "ln -s a folder-link")
    through_link = await instance.list_dir("/workspace/folder-link")
    assert [(e.name, e.path) for e in through_link] == [
        ("inner.txt", "/workspace/folder-link/inner.txt")
    ]
    with pytest.raises(SandboxFileNotFoundError):
        await instance.list_dir("/workspace/missing")
    with pytest.raises(SandboxNotADirectoryError):
        await instance.list_dir("/workspace/b.txt")


async def test_remove_files_and_folders(provider: InMemorySandboxProvider) -> None:
    instance = await provider.create("k")
    await instance.write_files(
        [FileWrite("/workspace/f.txt", b"x"), FileWrite("/workspace/full/deep/x.txt", b"x")]
    )
    await instance.make_dir("/workspace/empty", parents=False)
    await instance.remove("/workspace/f.txt", recursive=False)
    await instance.remove("/workspace/empty", recursive=False)
    with pytest.raises(SandboxDirectoryNotEmptyError) as not_empty:
        await instance.remove("/workspace/full", recursive=False)
    assert not_empty.value.filename == "/workspace/full"
    assert await instance.exists("/workspace/full/deep/x.txt")
    await instance.remove("/workspace/full", recursive=True)
    assert await instance.list_dir("/workspace") == []
    with pytest.raises(SandboxFileNotFoundError):
        await instance.remove("/workspace/f.txt", recursive=True)
    with pytest.raises(SandboxInputError):
        await instance.remove("/", recursive=True)


async def test_remove_a_symlink_keeps_its_target(provider: InMemorySandboxProvider) -> None:
    instance = await provider.create("k")
    await instance.write_files([FileWrite("/workspace/target/keep.txt", b"x")])
    await run(instance, "ln -s target link")
    await instance.remove("/workspace/link", recursive=True)
    assert not await instance.exists("/workspace/link")
    assert await instance.read_file("/workspace/target/keep.txt", max_bytes=READ_LIMIT) == b"x"


async def test_make_dir_without_parents(provider: InMemorySandboxProvider) -> None:
    instance = await provider.create("k")
    await instance.write_files([FileWrite("/workspace/file.txt", b"x")])
    await instance.make_dir("/workspace/new", parents=False)
    assert (await instance.list_dir("/workspace"))[1].type == "directory"
    with pytest.raises(SandboxFileExistsError) as existing:
        await instance.make_dir("/workspace/new", parents=False)
    assert existing.value.filename == "/workspace/new"
    with pytest.raises(SandboxFileExistsError):
        await instance.make_dir("/workspace/file.txt", parents=False)
    with pytest.raises(SandboxFileNotFoundError) as missing_parent:
        await instance.make_dir("/workspace/no/such", parents=False)
    assert missing_parent.value.filename == "/workspace/no/such"
    with pytest.raises(SandboxNotADirectoryError):
        await instance.make_dir("/workspace/file.txt/sub", parents=False)


async def test_make_dir_with_parents(provider: InMemorySandboxProvider) -> None:
    instance = await provider.create("k")
    await instance.write_files([FileWrite("/workspace/file.txt", b"x")])
    await instance.make_dir("/workspace/a/b/c", parents=True)
    assert await instance.exists("/workspace/a/b/c")
    await instance.make_dir("/workspace/a/b/c", parents=True)  # an existing folder is fine
    await instance.make_dir("/workspace", parents=True)
    with pytest.raises(SandboxFileExistsError):
        await instance.make_dir("/workspace/file.txt", parents=True)
    with pytest.raises(SandboxNotADirectoryError):
        await instance.make_dir("/workspace/file.txt/sub", parents=True)


async def test_exists(provider: InMemorySandboxProvider) -> None:
    instance = await provider.create("k")
    await instance.write_files([FileWrite("/workspace/file.txt", b"x")])
    assert await instance.exists("/workspace/file.txt")
    assert await instance.exists("/workspace")
    assert not await instance.exists("/workspace/missing")
    assert not await instance.exists("/workspace/file.txt/inner")
    await run(instance, "ln -s nowhere dangling")
    assert not await instance.exists("/workspace/dangling")


# -- lifecycle ---------------------------------------------------------------------------------------


async def test_create_replaces_an_existing_instance(provider: InMemorySandboxProvider) -> None:
    first = await provider.create("k")
    await first.write_files([FileWrite("/workspace/old.txt", b"x")])
    second = await provider.create("k")
    assert second.instance_id != first.instance_id
    assert await second.list_dir("/workspace") == []
    with pytest.raises(SandboxVanishedError):
        await first.read_file("/workspace/old.txt", max_bytes=READ_LIMIT)
    assert [info.key for info in await provider.list_instances()] == ["k"]


async def test_find_returns_the_live_instance_or_none(provider: InMemorySandboxProvider) -> None:
    assert await provider.find("k") is None
    created = await provider.create("k")
    assert await provider.find("k") is created
    assert await provider.find("K") is None  # keys compare exactly
    await provider.destroy("k")
    assert await provider.find("k") is None


async def test_destroy_is_idempotent(provider: InMemorySandboxProvider) -> None:
    await provider.destroy("never-created")
    await provider.create("k")
    await provider.destroy("k")
    await provider.destroy("k")
    assert await provider.list_instances() == []


_OPERATIONS: dict[str, Callable[[InMemorySandboxInstance], Awaitable[object]]] = {
    "run": lambda i: run(i, "echo hi"),
    "read_file": lambda i: i.read_file("/workspace/f", max_bytes=READ_LIMIT),
    "write_files": lambda i: i.write_files([FileWrite("/workspace/f", b"x")]),
    "list_dir": lambda i: i.list_dir("/workspace"),
    "remove": lambda i: i.remove("/workspace/f", recursive=False),
    "make_dir": lambda i: i.make_dir("/workspace/d", parents=False),
    "exists": lambda i: i.exists("/workspace"),
}


@pytest.mark.parametrize("operation", sorted(_OPERATIONS))
async def test_a_destroyed_instance_raises_vanished_on_every_method(
    provider: InMemorySandboxProvider, operation: str
) -> None:
    instance = await provider.create("k")
    await provider.destroy("k")
    with pytest.raises(SandboxVanishedError):
        await _OPERATIONS[operation](instance)


async def test_destroy_stops_a_running_command(provider: InMemorySandboxProvider) -> None:
    instance = await provider.create("k")

    async def long_running() -> None:
        with pytest.raises(SandboxVanishedError):
            await run(instance, "touch started; while true; do sleep 0.05; done", timeout=None)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(long_running)
            # Wait, inside the sandbox, until the command is running; then destroy it.
            await run(instance, "while [ ! -f started ]; do sleep 0.01; done")
            await provider.destroy("k")


async def test_list_instances_reports_key_id_time_and_provider(
    provider: InMemorySandboxProvider,
) -> None:
    assert await provider.list_instances() == []
    one = await provider.create("one")
    two = await provider.create("two")
    infos = await provider.list_instances()
    assert [(i.key, i.instance_id, i.provider) for i in infos] == [
        ("one", one.instance_id, "inmemory"),
        ("two", two.instance_id, "inmemory"),
    ]
    assert all(isinstance(i.created_at, datetime) and i.created_at.tzinfo for i in infos)
    assert one.instance_id != two.instance_id


async def test_forget_makes_the_facade_recreate_with_the_seed(
    provider: InMemorySandboxProvider,
) -> None:
    sessions = create_sandbox_session_manager(
        provider=provider, seed=[SeedFile("/workspace/README.md", "# seeded\n")]
    )
    sandbox = create_sandbox(sessions.handle("t"))
    await sandbox.write_file("notes.txt", "mine")
    first = await provider.find("t")
    assert first is not None
    await provider.forget("t")
    result = await sandbox.run_command("ls; cat README.md")
    assert result.environment_reset
    assert result.stdout == "README.md\n# seeded\n"
    assert sandbox.environment_resets == 1
    second = await provider.find("t")
    assert second is not None
    assert second.instance_id != first.instance_id
    follow_up = await sandbox.run_command("echo again")
    assert not follow_up.environment_reset


async def test_aclose_keeps_instances_and_a_later_command_starts_workers_again() -> None:
    provider = create_in_memory_sandbox_provider()
    instance = await provider.create("k")
    await instance.write_files([FileWrite("/workspace/kept.txt", b"kept")])
    await provider.aclose()
    await provider.aclose()  # twice is fine
    assert await provider.find("k") is instance
    assert await instance.read_file("/workspace/kept.txt", max_bytes=READ_LIMIT) == b"kept"
    assert (await run(instance, "cat kept.txt")).stdout == b"kept"
    await provider.aclose()


async def test_aclose_stops_running_commands() -> None:
    provider = create_in_memory_sandbox_provider()
    instance = await provider.create("k")

    async def long_running() -> None:
        with pytest.raises(SandboxClosedError):
            await run(instance, "touch started; while true; do sleep 0.05; done", timeout=None)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(long_running)
            await run(instance, "while [ ! -f started ]; do sleep 0.01; done")
            await provider.aclose()


async def test_provider_is_an_async_context_manager() -> None:
    async with create_in_memory_sandbox_provider() as provider:
        instance = await provider.create("k")
        assert (await run(instance, "echo hi")).stdout == b"hi\n"


def test_a_provider_outlives_the_event_loops_that_used_it() -> None:
    provider = create_in_memory_sandbox_provider()

    async def write() -> None:
        instance = await provider.create("k")
        await instance.write_files([FileWrite("/workspace/kept.txt", b"kept\n")])

    async def read() -> bytes:
        instance = await provider.find("k")
        assert instance is not None
        return (await run(instance, "cat kept.txt")).stdout

    anyio.run(write, backend="asyncio")
    assert anyio.run(read, backend="trio") == b"kept\n"
    assert anyio.run(read, backend="asyncio") == b"kept\n"
    anyio.run(provider.aclose, backend="asyncio")


async def test_calls_from_another_threads_loop_reach_the_instance_safely(
    provider: InMemorySandboxProvider,
) -> None:
    instance = await provider.create("k")
    await run(instance, "echo home > where.txt")

    async def elsewhere() -> bytes:
        return (await run(instance, "cat where.txt; echo away >> where.txt")).stdout

    for backend in ("asyncio", "trio"):
        output = await anyio.to_thread.run_sync(lambda b=backend: anyio.run(elsewhere, backend=b))
        assert output.startswith(b"home\n")
    assert (await run(instance, "cat where.txt")).stdout == b"home\naway\naway\n"
