"""The Sandbox facade: paths, command arguments, decoding and caps, repair after a vanish."""

from __future__ import annotations

import errno
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
from fakes import FakeProvider, Reply

from pai.sandbox import (
    DEFAULT_OUTPUT_LIMIT,
    DEFAULT_READ_LIMIT,
    DEFAULT_TIMEOUT,
    Sandbox,
    SandboxFileNotFoundError,
    SandboxFileTooLargeError,
    SandboxInputError,
    SandboxPathError,
    SandboxVanishedError,
    SeedFile,
    create_sandbox,
    create_sandbox_session_manager,
    resolve_path,
)
from pai.sandbox.provider import FileWrite

pytestmark = pytest.mark.anyio

KEY = "pai1.thread.sandbox.acme.t-1"
SEED = (SeedFile("/workspace/seed.txt", "seed\n"),)


def make_sandbox(provider: FakeProvider, **options: Any) -> Sandbox:
    seed = options.pop("seed", ())
    sessions = create_sandbox_session_manager(provider=provider, seed=seed)
    return create_sandbox(sessions.handle(KEY), **options)


async def provisioned(provider: FakeProvider, **options: Any) -> Sandbox:
    """A sandbox whose instance exists, with the provider's log cleared."""
    sandbox = make_sandbox(provider, **options)
    await sandbox.exists(".")
    provider.log.clear()
    return sandbox


# -- paths -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "resolved"),
    [
        ("notes.txt", "/workspace/notes.txt"),
        ("a/../b", "/workspace/b"),
        ("./a/./b/", "/workspace/a/b"),
        (".", "/workspace"),
        ("/workspace/x/../y", "/workspace/y"),
        ("//x", "/x"),
        ("///x//y", "/x/y"),
        ("/tmp/out", "/tmp/out"),
        ("../../etc", "/etc"),
    ],
)
def test_paths_resolve_against_the_workspace_and_are_normalized(given: str, resolved: str) -> None:
    assert resolve_path(given) == resolved


async def test_file_operations_receive_resolved_paths(provider: FakeProvider) -> None:
    sandbox = await provisioned(provider)
    instance_id = provider.live[KEY].instance_id
    await sandbox.write_file("a/../b.txt", "x")
    await sandbox.read_file("//workspace/b.txt")
    await sandbox.make_dir("d/./e", parents=True)
    await sandbox.list_dir("d/")
    await sandbox.exists("d/e/..")
    await sandbox.remove("d", recursive=True)
    assert provider.log == [
        ("write_files", instance_id, ("/workspace/b.txt",)),
        ("read_file", instance_id, "/workspace/b.txt"),
        ("make_dir", instance_id, "/workspace/d/e", True),
        ("list_dir", instance_id, "/workspace/d"),
        ("exists", instance_id, "/workspace/d"),
        ("remove", instance_id, "/workspace/d", True),
    ]


OPERATIONS: dict[str, Callable[[Sandbox, Any], Awaitable[object]]] = {
    "read_file": lambda s, p: s.read_file(p),
    "read_text": lambda s, p: s.read_text(p),
    "write_file": lambda s, p: s.write_file(p, "x"),
    "write_files": lambda s, p: s.write_files({"ok.txt": "x", p: "x"}),
    "write_files FileWrite": lambda s, p: s.write_files([FileWrite(p, b"x")]),
    "list_dir": lambda s, p: s.list_dir(p),
    "remove": lambda s, p: s.remove(p),
    "make_dir": lambda s, p: s.make_dir(p),
    "exists": lambda s, p: s.exists(p),
    "run_command cwd": lambda s, p: s.run_command("true", cwd=p),
}


BAD_PATHS = {"empty": "", "nul": "a\x00b", "int": 42, "none": None}
BAD_PATH_CASES = [
    pytest.param(operation, bad, id=f"{operation}-{name}")
    for operation in OPERATIONS
    for name, bad in BAD_PATHS.items()
    # None is the default cwd; a cwd of another type is a SandboxInputError (tested below).
    if not (operation == "run_command cwd" and not isinstance(bad, str))
]


@pytest.mark.parametrize(("operation", "bad"), BAD_PATH_CASES)
async def test_bad_paths_raise_before_any_provider_call(
    provider: FakeProvider, operation: str, bad: object
) -> None:
    sandbox = make_sandbox(provider)
    with pytest.raises(SandboxPathError):
        await OPERATIONS[operation](sandbox, bad)
    assert provider.log == []


def test_a_nul_path_error_names_the_problem() -> None:
    with pytest.raises(SandboxPathError, match="NUL"):
        resolve_path("a\x00b")


# -- run_command arguments ---------------------------------------------------------------------


async def test_run_command_defaults(provider: FakeProvider) -> None:
    sandbox = make_sandbox(provider)
    await sandbox.run_command("echo hi")
    (run,) = provider.runs
    assert run.command == "echo hi"
    assert run.cwd == "/workspace"
    assert run.env == {}
    assert run.stdin is None
    assert run.timeout == DEFAULT_TIMEOUT
    assert run.output_limit == DEFAULT_OUTPUT_LIMIT


@pytest.mark.parametrize(
    ("cwd", "expected"),
    [
        ("src", "/workspace/src"),
        ("src/../build", "/workspace/build"),
        ("/tmp", "/tmp"),
        ("/workspace/", "/workspace"),
    ],
)
async def test_cwd_is_resolved_against_the_workspace(
    provider: FakeProvider, cwd: str, expected: str
) -> None:
    await make_sandbox(provider).run_command("pwd", cwd=cwd)
    assert provider.runs[0].cwd == expected


async def test_env_is_passed_through(provider: FakeProvider) -> None:
    await make_sandbox(provider).run_command("env", env={"A": "1", "_B2": "two words", "E": ""})
    assert provider.runs[0].env == {"A": "1", "_B2": "two words", "E": ""}


@pytest.mark.parametrize("name", ["1ABC", "A-B", "A=B", "", "A B", "Ä"])
async def test_invalid_env_names_are_refused_naming_the_variable(
    provider: FakeProvider, name: str
) -> None:
    with pytest.raises(SandboxInputError) as refused:
        await make_sandbox(provider).run_command("env", env={"OK": "1", name: "x"})
    assert repr(name) in str(refused.value)
    assert provider.log == []


async def test_env_values_with_nul_bytes_are_refused_naming_the_variable(
    provider: FakeProvider,
) -> None:
    with pytest.raises(SandboxInputError, match="SECRET"):
        await make_sandbox(provider).run_command("env", env={"SECRET": "a\x00b"})
    assert provider.log == []


async def test_non_string_env_values_are_refused(provider: FakeProvider) -> None:
    with pytest.raises(SandboxInputError, match="PORT"):
        await make_sandbox(provider).run_command("env", env={"PORT": 8080})  # type: ignore[dict-item]
    assert provider.log == []


@pytest.mark.parametrize(
    ("stdin", "expected"),
    [(b"\xff\x00raw", b"\xff\x00raw"), (b"", b""), (bytearray(b"ab"), b"ab")],
    ids=["bytes", "empty", "bytearray"],
)
async def test_stdin_bytes_are_passed_unchanged(
    provider: FakeProvider, stdin: bytes, expected: bytes
) -> None:
    await make_sandbox(provider).run_command("cat", stdin=stdin)
    assert provider.runs[0].stdin == expected
    assert type(provider.runs[0].stdin) is bytes


async def test_text_stdin_is_refused_with_how_to_encode_it(provider: FakeProvider) -> None:
    with pytest.raises(SandboxInputError, match=r"stdin must be bytes.*\.encode\(\)"):
        await make_sandbox(provider).run_command("cat", stdin="héllo\n")  # type: ignore[arg-type]
    assert provider.log == []


async def test_stdin_of_another_type_is_refused(provider: FakeProvider) -> None:
    with pytest.raises(SandboxInputError, match="stdin must be bytes or None"):
        await make_sandbox(provider).run_command("cat", stdin=123)  # type: ignore[arg-type]
    assert provider.log == []


async def test_an_explicit_timeout_is_passed(provider: FakeProvider) -> None:
    await make_sandbox(provider).run_command("sleep 1", timeout=2.5)
    assert provider.runs[0].timeout == 2.5


async def test_the_sandbox_default_timeout_is_used_when_none_is_given(
    provider: FakeProvider,
) -> None:
    await make_sandbox(provider, default_timeout=7).run_command("true", timeout=None)
    assert provider.runs[0].timeout == 7


async def test_a_default_timeout_of_none_means_no_timeout(provider: FakeProvider) -> None:
    await make_sandbox(provider, default_timeout=None).run_command("true")
    assert provider.runs[0].timeout is None


@pytest.mark.parametrize("timeout", [0, -1, -0.5, float("nan"), float("inf")])
async def test_non_positive_or_infinite_timeouts_are_refused(
    provider: FakeProvider, timeout: float
) -> None:
    with pytest.raises(SandboxInputError, match="timeout must be positive"):
        await make_sandbox(provider).run_command("true", timeout=timeout)
    assert provider.log == []


@pytest.mark.parametrize("timeout", ["5", b"5", True, [5]], ids=["str", "bytes", "bool", "list"])
async def test_a_timeout_that_is_not_a_number_is_refused_naming_it(
    provider: FakeProvider, timeout: object
) -> None:
    with pytest.raises(SandboxInputError, match="timeout must be a number of seconds or None"):
        await make_sandbox(provider).run_command("true", timeout=timeout)  # type: ignore[arg-type]
    assert provider.log == []


async def test_an_integer_timeout_is_accepted(provider: FakeProvider) -> None:
    await make_sandbox(provider).run_command("true", timeout=3)
    assert provider.runs[0].timeout == 3


@pytest.mark.parametrize("cwd", [42, b"/workspace", ["src"]], ids=["int", "bytes", "list"])
async def test_a_cwd_that_is_not_a_str_is_refused_naming_it(
    provider: FakeProvider, cwd: object
) -> None:
    with pytest.raises(SandboxInputError, match="cwd must be a str path or None"):
        await make_sandbox(provider).run_command("pwd", cwd=cwd)  # type: ignore[arg-type]
    assert provider.log == []


@pytest.mark.parametrize("env", [["A=1"], "A=1", 5], ids=["list", "str", "int"])
async def test_an_env_that_is_not_a_mapping_is_refused_naming_it(
    provider: FakeProvider, env: object
) -> None:
    with pytest.raises(SandboxInputError, match="env must be a mapping"):
        await make_sandbox(provider).run_command("env", env=env)  # type: ignore[arg-type]
    assert provider.log == []


async def test_a_non_string_env_name_is_refused(provider: FakeProvider) -> None:
    with pytest.raises(SandboxInputError, match="env: variable name 1 "):
        await make_sandbox(provider).run_command("env", env={1: "x"})  # type: ignore[dict-item]
    assert provider.log == []


@pytest.mark.parametrize("name", ["on_stdout", "on_stderr"])
async def test_an_output_callback_that_cannot_be_called_is_refused(
    provider: FakeProvider, name: str
) -> None:
    with pytest.raises(SandboxInputError, match=name):
        # A str where a callable belongs, on purpose.
        await make_sandbox(provider).run_command("true", **{name: "print"})  # pyright: ignore[reportArgumentType]
    assert provider.log == []


async def test_the_output_limit_is_passed(provider: FakeProvider) -> None:
    await make_sandbox(provider, output_limit=10).run_command("true")
    assert provider.runs[0].output_limit == 10


INVALID_OPTIONS: dict[str, tuple[str, object]] = {
    "output_limit=0": ("output_limit", 0),
    "output_limit<0": ("output_limit", -1),
    "output_limit=str": ("output_limit", "1024"),
    "output_limit=float": ("output_limit", 1024.0),
    "output_limit=bool": ("output_limit", True),
    "read_limit=0": ("read_limit", 0),
    "read_limit<0": ("read_limit", -5),
    "read_limit=str": ("read_limit", "64MiB"),
    "read_limit=None": ("read_limit", None),
    "default_timeout=0": ("default_timeout", 0),
    "default_timeout<0": ("default_timeout", -3),
    "default_timeout=str": ("default_timeout", "5"),
}


@pytest.mark.parametrize(
    ("option", "value"), list(INVALID_OPTIONS.values()), ids=list(INVALID_OPTIONS)
)
def test_invalid_sandbox_options_are_refused_naming_the_option(
    provider: FakeProvider, option: str, value: object
) -> None:
    with pytest.raises(SandboxInputError, match=f"^{option} must be"):
        make_sandbox(provider, **{option: value})
    assert provider.log == []


def test_the_limits_default_to_one_mib_of_output_and_sixty_four_mib_of_reads(
    provider: FakeProvider,
) -> None:
    sandbox = make_sandbox(provider)
    assert (sandbox.output_limit, sandbox.read_limit) == (DEFAULT_OUTPUT_LIMIT, DEFAULT_READ_LIMIT)
    assert (DEFAULT_OUTPUT_LIMIT, DEFAULT_READ_LIMIT) == (1024 * 1024, 64 * 1024 * 1024)


@pytest.mark.parametrize("command", ["", "   ", "\n\t", None, 3])
async def test_a_non_empty_command_is_required(provider: FakeProvider, command: object) -> None:
    with pytest.raises(SandboxInputError, match="command"):
        await make_sandbox(provider).run_command(command)  # type: ignore[arg-type]
    assert provider.log == []


# -- results -----------------------------------------------------------------------------------


async def test_results_carry_exit_code_streams_and_flags(provider: FakeProvider) -> None:
    provider.reply(Reply(stdout=b"out\n", stderr=b"err\n", exit_code=3, timed_out=True))
    result = await make_sandbox(provider).run_command("fails")
    assert (result.stdout, result.stderr, result.exit_code) == ("out\n", "err\n", 3)
    assert result.timed_out
    assert not result.truncated
    assert not result.environment_reset
    assert not result.ok
    assert result.duration >= 0


async def test_a_non_zero_exit_is_a_result_not_an_exception(provider: FakeProvider) -> None:
    provider.reply(Reply(exit_code=1))
    result = await make_sandbox(provider).run_command("false")
    assert result.exit_code == 1
    assert not result.ok


async def test_output_is_decoded_as_utf8_with_replacement(provider: FakeProvider) -> None:
    provider.reply(Reply(stdout="café ".encode() + b"\xff\xfe!", stderr=b"\xc3("))
    result = await make_sandbox(provider).run_command("cat bad.bin")
    assert result.stdout == "café \ufffd\ufffd!"
    assert result.stderr == "\ufffd("


async def test_the_provider_truncated_flag_is_kept(provider: FakeProvider) -> None:
    provider.reply(Reply(stdout=b"abc", truncated=True))
    result = await make_sandbox(provider, output_limit=10).run_command("seq 1 1000000")
    assert result.stdout == "abc"
    assert result.truncated


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
async def test_the_facade_recaps_output_a_provider_failed_to_cap(
    provider: FakeProvider, stream: str
) -> None:
    flood = b"0123456789"
    provider.reply(Reply(stdout=flood) if stream == "stdout" else Reply(stderr=flood))
    result = await make_sandbox(provider, output_limit=4).run_command("flood")
    assert getattr(result, stream) == "0123"
    assert result.truncated


async def test_output_exactly_at_the_limit_is_not_truncated(provider: FakeProvider) -> None:
    provider.reply(Reply(stdout=b"0123"))
    result = await make_sandbox(provider, output_limit=4).run_command("printf 0123")
    assert result.stdout == "0123"
    assert not result.truncated


async def test_callbacks_get_whole_characters_when_chunks_split_them(
    provider: FakeProvider,
) -> None:
    text = "café €😀\n"
    data = text.encode()
    provider.reply(
        Reply(
            stdout=[data[i : i + 1] for i in range(len(data))],  # one byte at a time
            stderr=[data[:4], data[4:9], data[9:]],
        )
    )
    out: list[str] = []
    err: list[str] = []
    result = await make_sandbox(provider).run_command(
        "print", on_stdout=out.append, on_stderr=err.append
    )
    assert "".join(out) == result.stdout == text
    assert "".join(err) == result.stderr == text
    assert all("\ufffd" not in piece for piece in out + err)


async def test_callbacks_and_result_agree_when_output_ends_mid_character(
    provider: FakeProvider,
) -> None:
    # A provider capped the stream inside "€" (e2 82 ac): the result shows a replacement
    # character for the cut-off bytes, and so must the text the callback received.
    provider.reply(Reply(stdout=[b"price: ", b"\xe2\x82"], truncated=True))
    out: list[str] = []
    result = await make_sandbox(provider).run_command("flood", on_stdout=out.append)
    assert result.stdout == "price: \ufffd"
    assert "".join(out) == result.stdout


async def test_invalid_bytes_reach_callbacks_as_replacement_characters(
    provider: FakeProvider,
) -> None:
    provider.reply(Reply(stdout=[b"ok\xff", b"\xfe!\n"]))
    out: list[str] = []
    result = await make_sandbox(provider).run_command("cat bad.bin", on_stdout=out.append)
    assert "".join(out) == result.stdout == "ok\ufffd\ufffd!\n"


# -- files -------------------------------------------------------------------------------------


async def test_write_file_and_read_back(provider: FakeProvider) -> None:
    sandbox = make_sandbox(provider)
    await sandbox.write_file("notes/today.md", "# ✓\n")
    assert await sandbox.read_file("/workspace/notes/today.md") == "# ✓\n".encode()
    assert await sandbox.read_text("notes/today.md") == "# ✓\n"
    written = provider.live[KEY].file("/workspace/notes/today.md")
    assert written is not None
    assert written.mode == 0o644


async def test_write_file_executable_sets_mode_0755(provider: FakeProvider) -> None:
    sandbox = make_sandbox(provider)
    await sandbox.write_file("bin/run.sh", "#!/bin/sh\n", executable=True)
    written = provider.live[KEY].file("/workspace/bin/run.sh")
    assert written is not None
    assert written.mode == 0o755


async def test_read_text_replaces_undecodable_bytes_unless_strict(
    provider: FakeProvider,
) -> None:
    sandbox = make_sandbox(provider)
    await sandbox.write_file("bad.bin", b"a\xffb")
    assert await sandbox.read_text("bad.bin") == "a\ufffdb"
    with pytest.raises(UnicodeDecodeError):
        await sandbox.read_text("bad.bin", errors="strict")


async def test_write_files_takes_a_mapping_of_text_and_bytes(provider: FakeProvider) -> None:
    sandbox = make_sandbox(provider)
    await sandbox.write_files({"t.txt": "text ✓", "/workspace/b.bin": b"\x00\x01"})
    instance = provider.live[KEY]
    assert provider.log[-1] == (
        "write_files",
        instance.instance_id,
        ("/workspace/t.txt", "/workspace/b.bin"),
    )
    assert await sandbox.read_text("t.txt") == "text ✓"
    assert await sandbox.read_file("b.bin") == b"\x00\x01"


async def test_write_files_takes_file_writes_in_order_with_their_modes(
    provider: FakeProvider,
) -> None:
    sandbox = make_sandbox(provider)
    await sandbox.write_files(
        [
            FileWrite("a/run.sh", b"first", 0o755),
            FileWrite("/workspace/a/other.txt", b"other"),
            FileWrite("a/x/../run.sh", b"second", 0o700),
        ]
    )
    instance = provider.live[KEY]
    assert provider.log[-1] == (
        "write_files",
        instance.instance_id,
        ("/workspace/a/run.sh", "/workspace/a/other.txt", "/workspace/a/run.sh"),
    )
    run = instance.file("/workspace/a/run.sh")
    assert run is not None
    assert (run.content, run.mode) == (b"second", 0o700)


async def test_write_files_with_nothing_to_write_calls_nothing(
    provider: FakeProvider,
) -> None:
    sandbox = make_sandbox(provider)
    await sandbox.write_files({})
    await sandbox.write_files([])
    assert provider.log == []


@pytest.mark.parametrize(
    "files",
    [
        [("a.txt", b"x")],
        ["a.txt"],
        [FileWrite("ok.txt", b"x"), {"b.txt": b"y"}],
    ],
    ids=["tuple", "str", "dict-in-list"],
)
async def test_write_files_refuses_items_that_are_not_file_writes(
    provider: FakeProvider, files: list[object]
) -> None:
    with pytest.raises(SandboxInputError, match="FileWrite"):
        await make_sandbox(provider).write_files(files)  # type: ignore[arg-type]
    assert provider.log == []


@pytest.mark.parametrize(
    "files",
    [
        {"ok.txt": "fine", "a.txt": 1},
        {"a.txt": bytearray(b"x")},
        [FileWrite("a.txt", None)],  # type: ignore[arg-type]
    ],
    ids=["int", "bytearray", "FileWrite-None"],
)
async def test_write_files_refuses_content_that_is_not_bytes_or_str(
    provider: FakeProvider, files: object
) -> None:
    with pytest.raises(SandboxInputError, match=r"a\.txt"):
        await make_sandbox(provider).write_files(files)  # type: ignore[arg-type]
    assert provider.log == []


async def test_write_file_refuses_content_that_is_not_bytes_or_str(
    provider: FakeProvider,
) -> None:
    with pytest.raises(SandboxInputError, match="bytes or str"):
        await make_sandbox(provider).write_file("a.txt", 1)  # type: ignore[arg-type]
    assert provider.log == []


async def test_list_dir_defaults_to_the_workspace_and_sorts_by_name(
    provider: FakeProvider,
) -> None:
    sandbox = make_sandbox(provider)
    await sandbox.write_files({"b.txt": "12345", "a/inner.txt": "x"})
    entries = await sandbox.list_dir()
    assert [(e.name, e.path, e.type) for e in entries] == [
        ("a", "/workspace/a", "directory"),
        ("b.txt", "/workspace/b.txt", "file"),
    ]
    assert entries[1].size == 5


async def test_provider_file_errors_reach_the_caller_unchanged(
    provider: FakeProvider,
) -> None:
    sandbox = make_sandbox(provider)
    with pytest.raises(FileNotFoundError) as missing:
        await sandbox.read_file("nope.txt")
    assert isinstance(missing.value, SandboxFileNotFoundError)
    assert missing.value.filename == "/workspace/nope.txt"
    assert sandbox.environment_resets == 0


async def test_read_file_passes_the_read_limit_as_max_bytes(provider: FakeProvider) -> None:
    sandbox = make_sandbox(provider, read_limit=1234)
    await sandbox.write_file("f.bin", b"x" * 1234)
    assert await sandbox.read_file("f.bin") == b"x" * 1234
    assert provider.read_limits == [1234]


async def test_read_file_passes_the_default_read_limit(provider: FakeProvider) -> None:
    sandbox = make_sandbox(provider)
    await sandbox.write_file("f.txt", "x")
    await sandbox.read_text("f.txt")
    assert provider.read_limits == [DEFAULT_READ_LIMIT]


async def test_a_file_over_the_read_limit_raises_naming_size_limit_and_option(
    provider: FakeProvider,
) -> None:
    sandbox = make_sandbox(provider, read_limit=10)
    await sandbox.write_file("big.bin", b"x" * 11)
    with pytest.raises(SandboxFileTooLargeError) as too_large:
        await sandbox.read_file("big.bin")
    error = too_large.value
    assert (error.path, error.filename, error.size, error.limit) == (
        "/workspace/big.bin",
        "/workspace/big.bin",
        11,
        10,
    )
    assert error.errno == errno.EFBIG
    for part in ("'/workspace/big.bin'", "11 bytes", "10 bytes", "read_limit"):
        assert part in str(error)


async def test_a_provider_ignoring_max_bytes_still_cannot_return_more_than_the_limit(
    provider: FakeProvider,
) -> None:
    provider.ignores_read_limit = True
    sandbox = make_sandbox(provider, read_limit=10)
    await sandbox.write_file("big.bin", b"x" * 11)
    with pytest.raises(SandboxFileTooLargeError, match="11 bytes"):
        await sandbox.read_file("big.bin")


# -- repair after a vanish ---------------------------------------------------------------------


async def test_a_vanished_instance_is_replaced_and_the_command_retried_once(
    provider: FakeProvider,
) -> None:
    sandbox = make_sandbox(provider, seed=SEED)
    await sandbox.run_command("true")
    gone = provider.vanish(KEY)
    provider.reply(Reply(stdout=b"seed\n"))
    result = await sandbox.run_command("cat seed.txt", cwd="sub", env={"A": "1"}, stdin=b"in")
    replacement = provider.live[KEY]
    assert replacement is not gone
    assert result.environment_reset
    assert result.stdout == "seed\n"
    assert sandbox.environment_resets == 1
    # The failed attempt hit the vanished instance; the retry ran on the replacement with the
    # same arguments.
    assert ("run", gone.instance_id, "cat seed.txt") in provider.log
    retried = provider.runs[-1]
    assert retried.instance_id == replacement.instance_id
    assert (retried.cwd, retried.env, retried.stdin) == ("/workspace/sub", {"A": "1"}, b"in")
    assert len([r for r in provider.runs if r.command == "cat seed.txt"]) == 1
    seeded = replacement.file("/workspace/seed.txt")
    assert seeded is not None
    assert seeded.content == b"seed\n"
    assert provider.destroys == [KEY]
    again = await sandbox.run_command("true")
    assert not again.environment_reset
    assert sandbox.environment_resets == 1


async def test_output_callbacks_work_on_the_retried_command(provider: FakeProvider) -> None:
    sandbox = make_sandbox(provider)
    await sandbox.run_command("true")
    provider.vanish(KEY)
    provider.reply(Reply(stdout=[b"he", b"llo\n"]))
    out: list[str] = []
    result = await sandbox.run_command("echo hello", on_stdout=out.append)
    assert result.environment_reset
    assert "".join(out) == result.stdout == "hello\n"


FILE_OPERATIONS: dict[str, Callable[[Sandbox], Awaitable[object]]] = {
    "read_file": lambda s: s.read_file("seed.txt"),
    "read_text": lambda s: s.read_text("seed.txt"),
    "write_file": lambda s: s.write_file("new.txt", "x"),
    "write_files": lambda s: s.write_files({"new.txt": "x"}),
    "list_dir": lambda s: s.list_dir(),
    "exists": lambda s: s.exists("seed.txt"),
    "make_dir": lambda s: s.make_dir("made"),
    "remove": lambda s: s.remove("seed.txt"),
}


@pytest.mark.parametrize("operation", list(FILE_OPERATIONS))
async def test_file_operations_repair_a_vanished_instance_too(
    provider: FakeProvider, operation: str
) -> None:
    sandbox = make_sandbox(provider, seed=SEED)
    await sandbox.run_command("true")
    gone = provider.vanish(KEY)
    await FILE_OPERATIONS[operation](sandbox)
    assert provider.live[KEY] is not gone
    assert sandbox.environment_resets == 1
    assert provider.creates == [KEY, KEY]


async def test_reads_after_a_vanish_see_the_reapplied_seed(provider: FakeProvider) -> None:
    sandbox = make_sandbox(provider, seed=SEED)
    await sandbox.write_file("seed.txt", "changed")
    provider.vanish(KEY)
    assert await sandbox.read_text("seed.txt") == "seed\n"
    assert not await sandbox.exists("scratch.txt")


async def test_an_instance_vanishing_again_is_not_retried_forever(
    provider: FakeProvider,
) -> None:
    sandbox = make_sandbox(provider)
    await sandbox.run_command("true")
    provider.vanish(KEY)
    provider.born_vanished = True
    with pytest.raises(SandboxVanishedError):
        await sandbox.run_command("echo hi")
    assert [entry[0] for entry in provider.log].count("run") == 3  # first use, failure, one retry
    assert provider.creates == [KEY, KEY]


async def test_concurrent_commands_noticing_one_vanish_share_one_replacement(
    provider: FakeProvider,
) -> None:
    sandbox = make_sandbox(provider, seed=SEED)
    await sandbox.run_command("true")
    provider.vanish(KEY)
    results: list[bool] = []

    async def run() -> None:
        results.append((await sandbox.run_command("true")).environment_reset)

    async with anyio.create_task_group() as tg:
        for _ in range(10):
            tg.start_soon(run)
    assert results == [True] * 10
    assert provider.creates == [KEY, KEY]
    assert provider.destroys == [KEY]


# -- reset -------------------------------------------------------------------------------------


async def test_reset_replaces_the_instance_and_reapplies_the_seed(
    provider: FakeProvider,
) -> None:
    sandbox = make_sandbox(provider, seed=SEED)
    await sandbox.write_file("scratch.txt", "temporary")
    await sandbox.write_file("seed.txt", "changed")
    before = provider.live[KEY]
    await sandbox.reset()
    after = provider.live[KEY]
    assert after is not before
    assert provider.destroys == [KEY]
    assert not await sandbox.exists("scratch.txt")
    assert await sandbox.read_text("seed.txt") == "seed\n"
    assert sandbox.environment_resets == 0  # asked for, not noticed


async def test_reset_of_an_unused_sandbox_provisions_a_fresh_one(
    provider: FakeProvider,
) -> None:
    sandbox = make_sandbox(provider, seed=SEED)
    await sandbox.reset()
    assert provider.creates == [KEY]
    assert provider.live[KEY].file("/workspace/seed.txt") is not None


def test_key_workdir_and_repr(provider: FakeProvider) -> None:
    sandbox = make_sandbox(provider)
    assert sandbox.key == KEY
    assert sandbox.workdir == "/workspace"
    assert repr(sandbox) == f"Sandbox(key={KEY!r}, provider='recording')"
    assert provider.log == []
