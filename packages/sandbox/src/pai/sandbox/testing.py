"""The provider conformance suite: what every sandbox provider must do, checked on its real backend.

Subclass :class:`SandboxProviderConformance` in your provider package's tests and implement
:meth:`~SandboxProviderConformance.create_provider`; pytest then runs every check through the
:class:`~pai.sandbox.Sandbox` facade and your provider. What a backend cannot do (declared in its
:class:`~pai.sandbox.provider.ProviderFeatures`) is skipped with the reason.

Example::

    from pai.sandbox.testing import SandboxProviderConformance

    class TestDockerProvider(SandboxProviderConformance):
        def create_provider(self):
            return DockerSandboxProvider(image="pai-test:latest", namespace="pai-tests")

        async def remove_behind_our_back(self, provider, key):
            docker.from_env().containers.get(name_for(key)).remove(force=True)

Tests run on asyncio and (when trio is installed) on trio; override the ``anyio_backend`` fixture
for an asyncio-only SDK. Requires pytest (``pai-sandbox[testing]``). pai-sandbox's pytest plugin
(entry point ``pai-sandbox``) rewrites this module's asserts, so a failed check shows the values
that differed. The contract the checks hold a provider to is written out in
:mod:`pai.sandbox.provider`; some checks go below the facade (``instance_of``) where the facade
would hide a provider's mistake (bytes it decodes, a read limit it checks again).

:class:`RecordingProvider` wraps any provider and records each call that reaches it (a
:class:`ProviderCall`), for tests and benchmarks that count round trips.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import struct
import time
import tracemalloc
import uuid
from collections.abc import AsyncIterator, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import anyio
import pytest

from pai.core.testing import durable_call
from pai.sandbox._errors import (
    SandboxDirectoryNotEmptyError,
    SandboxError,
    SandboxFileExistsError,
    SandboxFileNotFoundError,
    SandboxFileTooLargeError,
    SandboxInputError,
    SandboxIsADirectoryError,
    SandboxNotADirectoryError,
    SandboxReplayError,
)
from pai.sandbox._provider import (
    ProbingSandboxProvider,
    SandboxInstance,
    SandboxProvider,
    probe_provider,
)
from pai.sandbox._receipts import INTERRUPTED_EXIT_CODE, RECEIPTS, command_digest, receipt_name
from pai.sandbox._recording import ProviderCall as ProviderCall
from pai.sandbox._recording import RecordingInstance as RecordingInstance
from pai.sandbox._recording import RecordingProvider as RecordingProvider
from pai.sandbox._sandbox import DEFAULT_READ_LIMIT, Sandbox
from pai.sandbox._session import SandboxSessionManager
from pai.sandbox._types import CommandResult, FileWrite, SeedFile

_BACKENDS = ["asyncio", "trio"] if importlib.util.find_spec("trio") else ["asyncio"]

TEN_MIB = 10 * 1024 * 1024

#: The contract: a timed-out call returns within ``timeout + 1`` s. The suite allows 0.5 s more,
#: because the machines tests run on are often slow and shared; a provider that needs more than
#: this is late.
TIMEOUT_RETURN_ALLOWANCE = 1.5

#: Exit code of a command killed at its timeout (as GNU and busybox ``timeout`` report it).
TIMEOUT_EXIT_CODE = 124

#: Commands a timeout must kill whole, each leaving a CPU-burning loop behind a long sleep:
#: started in the background by a shell that cleared its environment (so no inherited marker
#: survives), double-forked (its parent exits at once, so it is reparented), and all of that at
#: once in a session of its own (nothing the command started is related to it any more), and
#: that again wearing a forged run marker (``PAI_RUN``, the name the Docker and E2B providers
#: mark a command's processes with), which must not pass it off as another command's.
RUNAWAY_COMMANDS: dict[str, str] = {
    "env-clearing-background": "env -i sh -c 'while :; do :; done' & sleep 1000",
    "double-forked": "sh -c '(while :; do :; done) &'; sleep 1000",
    "orphaned-new-session-no-env": "(setsid env -i sh -c 'while :; do :; done' &); sleep 1000",
    "orphaned-forged-marker": (
        "(setsid env -i PAI_RUN=forged sh -c 'while :; do :; done' &); sleep 1000"
    ),
}

#: File names a backend must keep exactly (some protocols quote or escape them): a double
#: quote, a line feed, a carriage return, both, a backslash, and all of them at once.
AWKWARD_NAMES: dict[str, str] = {
    "double-quote": 'say "hi".txt',
    "line-feed": "two\nlines.txt",
    "carriage-return": "carriage\rreturn.txt",
    "crlf": "crlf\r\n.txt",
    "backslash": "back\\slash.txt",
    "all-of-them": 'a"b\\c\rd\ne%22f.txt',
}

#: Prints the command line of every process in the sandbox, one a line (arguments separated by
#: NUL bytes), without naming what it looks for, so it never finds itself.
LIST_PROCESSES = 'for f in /proc/[0-9]*/cmdline; do cat "$f"; echo; done 2>/dev/null; true'

#: Bad ``run_command`` arguments: (id, keyword arguments, the argument the error must name).
BAD_RUN_ARGUMENTS: list[tuple[str, dict[str, Any], str]] = [
    ("timeout-str", {"command": "true", "timeout": "5"}, "timeout"),
    ("timeout-negative", {"command": "true", "timeout": -1}, "timeout"),
    ("timeout-nan", {"command": "true", "timeout": float("nan")}, "timeout"),
    ("command-bytes", {"command": b"echo hi"}, "command"),
    ("command-list", {"command": ["echo", "hi"]}, "command"),
    ("env-int-value", {"command": "env", "env": {"PORT": 8080}}, "PORT"),
    ("env-bytes-name", {"command": "env", "env": {b"NAME": "x"}}, "env"),
    ("env-list", {"command": "env", "env": ["A=1"]}, "env"),
    ("stdin-str", {"command": "cat", "stdin": "text"}, "stdin"),
    ("stdin-int", {"command": "cat", "stdin": 1}, "stdin"),
    ("cwd-int", {"command": "pwd", "cwd": 5}, "cwd"),
]

#: Bad facade options: (id, keyword arguments, the option the error must name).
BAD_SANDBOX_OPTIONS: list[tuple[str, dict[str, Any], str]] = [
    ("read_limit-zero", {"read_limit": 0}, "read_limit"),
    ("read_limit-negative", {"read_limit": -1}, "read_limit"),
    ("read_limit-str", {"read_limit": "64"}, "read_limit"),
    ("output_limit-negative", {"output_limit": -1}, "output_limit"),
    ("default_timeout-str", {"default_timeout": "5"}, "default_timeout"),
]


def _host_folder(folder: Path, write: dict[str, str] | None = None) -> dict[str, str]:
    """Write ``write`` into the host ``folder``, then return what the folder holds."""
    for name, text in (write or {}).items():
        (folder / name).write_text(text)
    return {path.name: path.read_text() for path in folder.iterdir()}


def _needs_receipts(provider: SandboxProvider) -> None:
    """Skip a test of durable-run receipts on a provider that keeps none."""
    if not provider.features.durable:
        pytest.skip(
            f"provider {provider.name!r} keeps no receipts of commands (features.durable is "
            "False): durable runs refuse its commands unless durable_commands='at-least-once'"
        )


def _needs_processes(provider: SandboxProvider, why: str) -> None:
    """Skip a test that needs commands to be OS processes, saying why it does not apply."""
    if not provider.features.processes:
        pytest.skip(
            f"provider {provider.name!r} does not run commands as OS processes "
            f"(features.processes is False): {why}"
        )


class SandboxProviderConformance:
    """Subclass and implement :meth:`create_provider` (and, if you can, the other hooks)."""

    #: Seconds a timeout test lets a command run before it must be killed.
    timeout_seconds: ClassVar[float] = 0.5
    #: How many commands the concurrency test runs at once on one instance.
    concurrent_commands: ClassVar[int] = 20
    #: Doublings of a one-byte shell string in the memory test: 30 is 1 GiB, which no sandbox's
    #: memory bound should let a command hold (lower it only for a backend whose bound is larger).
    memory_doublings: ClassVar[int] = 30
    #: Seconds the memory test gives the command: it must fail (or be killed) by then.
    memory_timeout_seconds: ClassVar[float] = 30
    #: Host threads a provider may add while a hundred commands run at once on one instance (a
    #: generous constant: a provider bounding them per instance, as it must, stays far below).
    max_command_threads: ClassVar[int] = 32
    #: Seconds a file operation or destroy may take in a sandbox whose /bin/sh hangs (a
    #: provider whose file helpers have a deadline answers by then, with a result or an error).
    tampered_operation_seconds: ClassVar[float] = 40

    pytestmark: ClassVar[list[pytest.MarkDecorator]] = [pytest.mark.anyio]

    # Kept (not pai.core.testing.pytest_plugin): users' suites subclass this class and rely on it
    # to run every test on each backend without a fixture of their own.
    @pytest.fixture(params=_BACKENDS)
    def anyio_backend(self, request: pytest.FixtureRequest) -> str:
        return str(request.param)

    # -- hooks --------------------------------------------------------------------------------

    def create_provider(self) -> SandboxProvider:
        """A new provider object over your real backend (called once per test, and again by the
        rediscovery test to stand for another process)."""
        raise NotImplementedError("implement create_provider() in your conformance subclass")

    async def remove_behind_our_back(self, provider: SandboxProvider, key: str) -> None:
        """Make the instance for ``key`` vanish the way it would in production (expiry, an
        operator's ``docker rm``). The default destroys it through the provider, which the
        session manager does not see; override it to use the backend directly."""
        await provider.destroy(key)

    # -- fixtures -----------------------------------------------------------------------------

    @pytest.fixture
    async def provider(self, anyio_backend: str) -> AsyncIterator[SandboxProvider]:
        provider = self.create_provider()
        self._keys: list[str] = []
        try:
            yield provider
        finally:
            with anyio.CancelScope(shield=True):
                for key in self._keys:
                    await provider.destroy(key)
                await provider.aclose()

    def new_key(self) -> str:
        """A fresh instance key, destroyed after the test."""
        key = f"pai-conformance-{uuid.uuid4().hex}"
        self._keys.append(key)
        return key

    def sandbox(
        self,
        provider: SandboxProvider,
        *,
        key: str | None = None,
        seed: Iterable[SeedFile] = (),
        output_limit: int = 1024 * 1024,
        read_limit: int = DEFAULT_READ_LIMIT,
        default_timeout: float | None = 60,
        owner_created_at: datetime | None = None,
    ) -> Sandbox:
        """A facade over ``provider`` for a fresh key (or ``key``), with these options, in a
        session of its own (as a new process would have); ``owner_created_at`` is when the
        key's thread was created."""
        manager = SandboxSessionManager(provider, seed=seed)
        return Sandbox(
            manager.handle(
                key if key is not None else self.new_key(), owner_created_at=owner_created_at
            ),
            default_timeout=default_timeout,
            output_limit=output_limit,
            read_limit=read_limit,
        )

    async def provisioned(self, provider: SandboxProvider, **options: Any) -> Sandbox:
        """A sandbox whose instance exists already, so timings leave its creation out."""
        sandbox = self.sandbox(provider, **options)
        await sandbox.run_command("true")
        return sandbox

    async def instance_of(self, provider: SandboxProvider, sandbox: Sandbox) -> SandboxInstance:
        """The provider's instance behind ``sandbox``, to check the contract below the facade."""
        await sandbox.run_command("true")
        instance = await provider.find(sandbox.key)
        assert instance is not None, f"find({sandbox.key!r}) gave None for a live instance"
        return instance

    # -- probe --------------------------------------------------------------------------------

    async def test_probe_when_present_succeeds_on_a_working_backend(
        self, provider: SandboxProvider
    ) -> None:
        if getattr(provider, "probe", None) is None:
            pytest.skip(f"provider {provider.name!r} has no probe() (it is optional)")
        assert isinstance(provider, ProbingSandboxProvider)
        # The backend this suite runs on works, so the probe must say so; twice, as it changes
        # nothing. A provider under test is never a reason for it to fail.
        assert await probe_provider(provider) is True
        assert await probe_provider(provider) is True
        sandbox = self.sandbox(provider)  # and the provider still works afterwards
        assert (await sandbox.run_command("echo ok")).stdout == "ok\n"

    # -- commands -----------------------------------------------------------------------------

    async def test_echo_prints_to_stdout_with_exit_code_zero(
        self, provider: SandboxProvider
    ) -> None:
        result = await self.sandbox(provider).run_command("echo hi")
        assert (result.stdout, result.stderr, result.exit_code) == ("hi\n", "", 0)
        assert (result.timed_out, result.truncated, result.environment_reset) == (False,) * 3

    @pytest.mark.parametrize(("command", "code"), [("true", 0), ("false", 1), ("exit 3", 3)])
    async def test_exit_codes_are_results_not_exceptions(
        self, provider: SandboxProvider, command: str, code: int
    ) -> None:
        assert (await self.sandbox(provider).run_command(command)).exit_code == code

    async def test_stdout_and_stderr_are_kept_apart(self, provider: SandboxProvider) -> None:
        result = await self.sandbox(provider).run_command("echo out; echo err >&2; echo out2")
        assert result.stdout == "out\nout2\n"
        assert result.stderr == "err\n"

    async def test_commands_run_in_the_workspace_by_default(
        self, provider: SandboxProvider
    ) -> None:
        assert (await self.sandbox(provider).run_command("pwd")).stdout == "/workspace\n"

    async def test_cwd_is_resolved_against_the_workspace(self, provider: SandboxProvider) -> None:
        sandbox = self.sandbox(provider)
        await sandbox.make_dir("sub/dir", parents=True)
        assert (await sandbox.run_command("pwd", cwd="sub/dir")).stdout == "/workspace/sub/dir\n"

    async def test_env_adds_variables(self, provider: SandboxProvider) -> None:
        result = await self.sandbox(provider).run_command(
            'echo "$GREETING"', env={"GREETING": "hello  world"}
        )
        assert result.stdout == "hello  world\n"

    async def test_stdin_is_fed_to_the_command(self, provider: SandboxProvider) -> None:
        sandbox = self.sandbox(provider)
        assert (await sandbox.run_command("cat", stdin=b"line 1\nline 2\n")).stdout == (
            "line 1\nline 2\n"
        )
        assert (await sandbox.run_command("wc -l", stdin=b"a\nb\nc\n")).stdout.strip() == "3"

    async def test_shell_quoting_and_expansion(self, provider: SandboxProvider) -> None:
        result = await self.sandbox(provider).run_command(
            """echo 'single $HOME' "double $((1 + 2))" a\\ b"""
        )
        assert result.stdout == "single $HOME double 3 a b\n"

    async def test_pipes_redirects_and_conditionals(self, provider: SandboxProvider) -> None:
        sandbox = self.sandbox(provider)
        result = await sandbox.run_command(
            "printf 'b\\na\\nc\\n' | sort | head -n 2 > sorted.txt && cat sorted.txt"
            " && false || echo recovered"
        )
        assert result.stdout == "a\nb\nrecovered\n"
        assert await sandbox.read_text("sorted.txt") == "a\nb\n"

    async def test_output_callbacks_see_the_output(self, provider: SandboxProvider) -> None:
        out: list[str] = []
        err: list[str] = []
        result = await self.sandbox(provider).run_command(
            "echo one; echo two >&2; echo three", on_stdout=out.append, on_stderr=err.append
        )
        assert "".join(out) == result.stdout == "one\nthree\n"
        assert "".join(err) == result.stderr == "two\n"

    async def test_timeout_kills_the_command_and_nothing_keeps_running(
        self, provider: SandboxProvider
    ) -> None:
        sandbox = await self.provisioned(provider)  # the duration must not include creation
        result = await sandbox.run_command(
            "while true; do echo tick >> /workspace/ticks; sleep 0.05; done",
            timeout=self.timeout_seconds,
        )
        assert result.timed_out
        assert result.exit_code == TIMEOUT_EXIT_CODE
        # The contract says timeout + 1 s; TIMEOUT_RETURN_ALLOWANCE adds 0.5 s for slow machines.
        assert result.duration <= self.timeout_seconds + TIMEOUT_RETURN_ALLOWANCE
        ticks = await sandbox.read_file("/workspace/ticks")
        # A bounded wait to show that something has stopped: if the loop survived its timeout,
        # it would append several more ticks in this time.
        await anyio.sleep(self.timeout_seconds)
        assert await sandbox.read_file("/workspace/ticks") == ticks, (
            "the command kept running after its timeout"
        )

    async def test_output_flood_is_capped_and_flagged(self, provider: SandboxProvider) -> None:
        limit = 64 * 1024
        result = await self.sandbox(provider, output_limit=limit).run_command("seq 1 200000")
        assert result.exit_code == 0
        assert result.truncated
        assert len(result.stdout.encode()) <= limit
        assert result.stdout.startswith("1\n2\n3\n")

    async def test_invalid_utf8_output_is_replaced_not_fatal(
        self, provider: SandboxProvider
    ) -> None:
        sandbox = self.sandbox(provider)
        await sandbox.write_file("bad.bin", b"ok\xff\xfe!\n")
        result = await sandbox.run_command("cat bad.bin")
        assert result.exit_code == 0
        assert result.stdout == "ok\ufffd\ufffd!\n"

    async def test_twenty_concurrent_commands_on_one_instance(
        self, provider: SandboxProvider
    ) -> None:
        sandbox = self.sandbox(provider)
        results: dict[int, str] = {}

        async def one(i: int) -> None:
            results[i] = (await sandbox.run_command(f"echo {i}")).stdout

        async with anyio.create_task_group() as tg:
            for i in range(self.concurrent_commands):
                tg.start_soon(one, i)
        assert results == {i: f"{i}\n" for i in range(self.concurrent_commands)}
        assert sum(1 for info in await provider.list_instances() if info.key == sandbox.key) == 1

    async def test_a_hundred_concurrent_commands_use_a_bounded_number_of_host_threads(
        self, provider: SandboxProvider
    ) -> None:
        import threading

        def threads() -> int:
            # Not counted: the threads asyncio itself starts to wait for child processes (one
            # per live process, before Python 3.12), which an in-process test backend (the E2B
            # emulator) makes; they are not the provider's.
            return sum(
                1
                for thread in threading.enumerate()
                if not thread.name.startswith("asyncio-waitpid")
            )

        sandbox = await self.provisioned(provider)
        before = peak = threads()
        results: dict[int, str] = {}
        wrong: dict[int, str] = {}

        async def one(i: int) -> None:
            done = await sandbox.run_command(f"sleep 0.1; echo {i}")
            results[i] = done.stdout
            if done.stdout != f"{i}\n":
                wrong[i] = f"exit {done.exit_code}, stdout {done.stdout!r}, stderr {done.stderr!r}"

        async def watch() -> None:
            nonlocal peak
            while True:
                peak = max(peak, threads())
                await anyio.sleep(0.002)

        async with anyio.create_task_group() as outer:
            outer.start_soon(watch)
            async with anyio.create_task_group() as group:
                for i in range(100):
                    group.start_soon(one, i)
            outer.cancel_scope.cancel()
        assert not wrong, (
            f"{len(wrong)} of 100 commands went wrong: {dict(list(wrong.items())[:5])}"
        )
        assert results == {i: f"{i}\n" for i in range(100)}
        # A thread per command would let one tenant's burst take the host's threads.
        assert peak - before <= self.max_command_threads, (
            f"{peak - before} host threads more while 100 commands ran on one instance"
        )

    async def test_a_timed_out_command_exits_with_124_within_a_second_of_its_timeout(
        self, provider: SandboxProvider
    ) -> None:
        sandbox = await self.provisioned(provider)
        started = time.monotonic()
        result = await sandbox.run_command("sleep 30", timeout=1)
        elapsed = time.monotonic() - started
        assert (result.timed_out, result.exit_code) == (True, TIMEOUT_EXIT_CODE)
        # The contract says timeout + 1 s; TIMEOUT_RETURN_ALLOWANCE adds 0.5 s for slow machines.
        assert elapsed <= 1 + TIMEOUT_RETURN_ALLOWANCE, f"returned after {elapsed:.2f} s"

    async def test_a_background_job_whose_output_goes_elsewhere_does_not_hold_the_command(
        self, provider: SandboxProvider
    ) -> None:
        # As in bash: the command ends when its shell does and its output pipes close; a job
        # left running with its streams sent elsewhere holds neither (a provider that leaks a
        # descriptor of its own into commands, or waits for every process, fails here).
        _needs_processes(
            provider,
            "a job cannot outlive its command line there, which ends when its jobs have "
            "(a documented difference from bash)",
        )
        sandbox = await self.provisioned(provider)
        result = await sandbox.run_command(
            "sleep 5 > /dev/null 2>&1 < /dev/null & echo started", timeout=4
        )
        assert (result.exit_code, result.stdout, result.timed_out) == (0, "started\n", False), (
            result
        )
        assert result.duration < 2, f"the command took {result.duration:.2f} s: {result!r}"

    @pytest.mark.parametrize("command", list(RUNAWAY_COMMANDS.values()), ids=list(RUNAWAY_COMMANDS))
    async def test_a_timeout_returns_in_time_for_a_command_that_left_a_runaway_process(
        self, provider: SandboxProvider, command: str
    ) -> None:
        sandbox = await self.provisioned(provider)
        started = time.monotonic()
        result = await sandbox.run_command(command, timeout=1)
        elapsed = time.monotonic() - started
        assert (result.timed_out, result.exit_code) == (True, TIMEOUT_EXIT_CODE)
        # The contract says timeout + 1 s; TIMEOUT_RETURN_ALLOWANCE adds 0.5 s for slow machines.
        assert elapsed <= 1 + TIMEOUT_RETURN_ALLOWANCE, f"returned after {elapsed:.2f} s"

    @pytest.mark.parametrize("command", list(RUNAWAY_COMMANDS.values()), ids=list(RUNAWAY_COMMANDS))
    async def test_a_timeout_leaves_no_process_of_the_command_running(
        self, provider: SandboxProvider, command: str
    ) -> None:
        _needs_processes(
            provider,
            "so there are no processes to look for; the timeout tests above still hold it to "
            "timed_out, exit 124 and the deadline",
        )
        sandbox = await self.provisioned(provider)
        before = await sandbox.run_command(LIST_PROCESSES)
        assert "\0" in before.stdout, f"cannot list processes in /proc/*/cmdline: {before!r}"
        result = await sandbox.run_command(command, timeout=1)
        assert result.timed_out
        running = (await sandbox.run_command(LIST_PROCESSES)).stdout
        survivors = [
            command.replace("\0", " ").strip()
            for command in running.splitlines()
            if "while :; do :; done" in command or "sleep\x001000" in command
        ]
        assert survivors == [], "processes the timed-out command started are still running"

    @pytest.mark.parametrize(
        ("command", "exit_code"),
        [("kill -KILL $$", 137), ("kill -TERM $$", 143)],
        ids=["SIGKILL", "SIGTERM"],
    )
    async def test_a_command_killed_by_a_signal_exits_with_128_plus_the_signal(
        self, provider: SandboxProvider, command: str, exit_code: int
    ) -> None:
        # The exit code a shell reports for a child a signal killed (as `sh -c 'kill -9 $$'`
        # does under any shell): a result, not an error, and never a negative number.
        sandbox = self.sandbox(provider)
        result = await sandbox.run_command(f"echo before; {command}; echo after")
        assert (result.exit_code, result.timed_out) == (exit_code, False)
        assert result.stdout == "before\n"

    async def test_stdin_none_gives_the_command_an_immediate_end_of_file(
        self, provider: SandboxProvider
    ) -> None:
        sandbox = await self.provisioned(provider)
        result = await sandbox.run_command("cat; wc -c; echo done", timeout=10)
        assert (result.timed_out, result.exit_code) == (False, 0)
        assert result.stdout.split() == ["0", "done"]

    async def test_printf_writes_the_raw_byte_it_is_given(self, provider: SandboxProvider) -> None:
        sandbox = self.sandbox(provider)
        result = await sandbox.run_command("printf '\\377' > ff.bin")
        assert result.exit_code == 0, result.stderr
        assert await sandbox.read_file("ff.bin") == b"\xff"

    async def test_stdin_bytes_reach_the_command_unchanged(self, provider: SandboxProvider) -> None:
        sandbox = self.sandbox(provider)
        data = bytes(range(256))
        result = await sandbox.run_command("cat > stdin.bin", stdin=data)
        assert result.exit_code == 0, result.stderr
        assert await sandbox.read_file("stdin.bin") == data

    async def test_command_output_reaches_the_result_byte_for_byte(
        self, provider: SandboxProvider
    ) -> None:
        # Below the facade, which decodes text: the instance's result carries the bytes.
        instance = await self.instance_of(provider, self.sandbox(provider))
        data = bytes(range(256))
        raw = await instance.run(
            "cat", cwd="/workspace", env={}, stdin=data, timeout=30, output_limit=1024 * 1024
        )
        assert (raw.exit_code, raw.stdout, raw.truncated) == (0, data, False)

    async def test_a_long_pipeline_is_not_silently_truncated(
        self, provider: SandboxProvider
    ) -> None:
        result = await self.sandbox(provider).run_command("seq 1 200000 | wc -l")
        assert (result.exit_code, result.stdout.strip(), result.stderr) == (0, "200000", "")

    @pytest.mark.parametrize("cwd", ["missing/folder", "a-file.txt"], ids=["missing", "a-file"])
    async def test_a_cwd_that_is_not_a_folder_is_a_result_with_a_non_zero_exit(
        self, provider: SandboxProvider, cwd: str
    ) -> None:
        sandbox = self.sandbox(provider)
        await sandbox.write_file("a-file.txt", "not a folder")
        result = await sandbox.run_command("echo ran", cwd=cwd)
        assert result.exit_code != 0
        assert result.stdout == ""
        assert result.stderr.strip() != "", "the failure says nothing on stderr"

    async def test_a_hundred_concurrent_appends_leave_a_hundred_lines(
        self, provider: SandboxProvider
    ) -> None:
        sandbox = await self.provisioned(provider)
        failed: list[tuple[int, str]] = []

        async def append(i: int) -> None:
            result = await sandbox.run_command(f"echo {i} >> /workspace/log")
            if result.exit_code != 0:
                failed.append((i, result.stderr))

        async with anyio.create_task_group() as tg:
            for i in range(100):
                tg.start_soon(append, i)
        assert failed == []
        lines = (await sandbox.read_text("log")).splitlines()
        assert sorted(lines, key=int) == [str(i) for i in range(100)]

    @pytest.mark.parametrize(
        ("arguments", "named"),
        [(arguments, named) for _, arguments, named in BAD_RUN_ARGUMENTS],
        ids=[case for case, _, _ in BAD_RUN_ARGUMENTS],
    )
    async def test_bad_argument_types_are_refused_before_the_provider_is_called(
        self, provider: SandboxProvider, arguments: dict[str, Any], named: str
    ) -> None:
        sandbox = self.sandbox(provider)
        with pytest.raises(SandboxInputError) as refused:
            await sandbox.run_command(**arguments)
        assert named in str(refused.value)
        assert await provider.find(sandbox.key) is None, "an instance was created anyway"

    @pytest.mark.parametrize(
        ("options", "named"),
        [(options, named) for _, options, named in BAD_SANDBOX_OPTIONS],
        ids=[case for case, _, _ in BAD_SANDBOX_OPTIONS],
    )
    async def test_bad_sandbox_options_are_refused_naming_the_option(
        self, provider: SandboxProvider, options: dict[str, Any], named: str
    ) -> None:
        with pytest.raises(SandboxInputError) as refused:
            self.sandbox(provider, **options)
        assert named in str(refused.value)

    # -- files --------------------------------------------------------------------------------

    async def test_binary_content_round_trips_exactly(self, provider: SandboxProvider) -> None:
        sandbox = self.sandbox(provider)
        data = bytes(range(256)) * 4
        await sandbox.write_file("all-bytes.bin", data)
        assert await sandbox.read_file("all-bytes.bin") == data
        assert (await sandbox.run_command("wc -c < all-bytes.bin")).stdout.strip() == "1024"

    async def test_a_ten_mib_file_round_trips(self, provider: SandboxProvider) -> None:
        sandbox = self.sandbox(provider)
        data = os.urandom(TEN_MIB)
        await sandbox.write_file("/workspace/big.bin", data)
        assert await sandbox.read_file("/workspace/big.bin") == data
        assert (await sandbox.run_command("wc -c < big.bin")).stdout.strip() == str(TEN_MIB)

    async def test_batch_writes_apply_in_order_and_create_folders(
        self, provider: SandboxProvider
    ) -> None:
        sandbox = self.sandbox(provider)
        await sandbox.write_files(
            [
                FileWrite("a/b/c.txt", b"first"),
                FileWrite("a/other.txt", b"other"),
                FileWrite("a/b/c.txt", b"second"),
            ]
        )
        assert await sandbox.read_text("a/b/c.txt") == "second"
        assert await sandbox.read_text("/workspace/a/other.txt") == "other"

    async def test_a_batch_writing_one_path_twice_keeps_the_last_content_and_mode(
        self, provider: SandboxProvider
    ) -> None:
        # The last write adds executable bits: whether a write over an existing file also takes
        # bits away differs between providers (Docker and E2B keep the file's bits).
        sandbox = self.sandbox(provider)
        await sandbox.write_files(
            [
                FileWrite("/workspace/twice.sh", b"first"),
                FileWrite("/workspace/between.txt", b"between"),
                FileWrite("/workspace/twice.sh", b"last", 0o755),
            ]
        )
        assert await sandbox.read_text("twice.sh") == "last"
        assert await sandbox.read_text("between.txt") == "between"
        mode = await sandbox.run_command("stat -c %a twice.sh")
        assert mode.stdout == "755\n", "twice.sh should end with the last write's mode"

    async def test_write_files_takes_a_mapping_of_text_and_bytes(
        self, provider: SandboxProvider
    ) -> None:
        sandbox = self.sandbox(provider)
        await sandbox.write_files({"t.txt": "text ✓", "b.bin": b"\x00\x01"})
        assert await sandbox.read_text("t.txt") == "text ✓"
        assert await sandbox.read_file("b.bin") == b"\x00\x01"

    async def test_executable_files_can_be_run(self, provider: SandboxProvider) -> None:
        sandbox = self.sandbox(provider)
        await sandbox.write_file(
            "bin/hello.sh", "#!/bin/sh\necho hello from script\n", executable=True
        )
        assert (await sandbox.run_command("sh bin/hello.sh")).stdout == "hello from script\n"

    async def test_list_dir_reports_name_path_type_and_size(
        self, provider: SandboxProvider
    ) -> None:
        sandbox = self.sandbox(provider)
        await sandbox.write_files({"d/file.txt": "12345", "d/sub/inner.txt": "x"})
        entries = await sandbox.list_dir("d")
        assert [(e.name, e.path, e.type) for e in entries] == [
            ("file.txt", "/workspace/d/file.txt", "file"),
            ("sub", "/workspace/d/sub", "directory"),
        ]
        assert entries[0].size == 5

    async def test_exists_tells_files_folders_and_nothing_apart(
        self, provider: SandboxProvider
    ) -> None:
        sandbox = self.sandbox(provider)
        await sandbox.write_file("here.txt", "x")
        assert await sandbox.exists("here.txt")
        assert await sandbox.exists("/workspace")
        assert not await sandbox.exists("missing.txt")

    async def test_make_dir_semantics(self, provider: SandboxProvider) -> None:
        sandbox = self.sandbox(provider)
        await sandbox.make_dir("one")
        assert (await sandbox.list_dir("one")) == []
        with pytest.raises(SandboxFileExistsError):
            await sandbox.make_dir("one")
        await sandbox.make_dir("one", parents=True)  # an existing folder is fine with parents
        with pytest.raises(SandboxFileNotFoundError):
            await sandbox.make_dir("missing/child")
        await sandbox.make_dir("missing/child", parents=True)
        assert await sandbox.exists("missing/child")

    async def test_remove_semantics(self, provider: SandboxProvider) -> None:
        sandbox = self.sandbox(provider)
        await sandbox.write_files({"gone.txt": "x", "tree/a/b.txt": "y"})
        await sandbox.remove("gone.txt")
        assert not await sandbox.exists("gone.txt")
        with pytest.raises(SandboxDirectoryNotEmptyError):
            await sandbox.remove("tree")
        await sandbox.remove("tree", recursive=True)
        assert not await sandbox.exists("tree")
        with pytest.raises(SandboxFileNotFoundError):
            await sandbox.remove("gone.txt")

    async def test_file_errors_are_specific_and_name_the_path(
        self, provider: SandboxProvider
    ) -> None:
        sandbox = self.sandbox(provider)
        await sandbox.write_file("f.txt", "x")
        await sandbox.make_dir("folder")
        with pytest.raises(SandboxFileNotFoundError) as missing:
            await sandbox.read_file("nope.txt")
        assert isinstance(missing.value, FileNotFoundError)
        assert missing.value.filename == "/workspace/nope.txt"
        assert "/workspace/nope.txt" in str(missing.value)
        with pytest.raises(SandboxIsADirectoryError):
            await sandbox.read_file("folder")
        with pytest.raises(SandboxNotADirectoryError):
            await sandbox.list_dir("f.txt")
        with pytest.raises(SandboxFileNotFoundError):
            await sandbox.list_dir("nowhere")

    @pytest.mark.parametrize(
        "name",
        list(AWKWARD_NAMES.values()),
        ids=list(AWKWARD_NAMES),
    )
    async def test_a_file_name_with_quotes_or_line_breaks_is_kept_exactly(
        self, provider: SandboxProvider, name: str
    ) -> None:
        sandbox = self.sandbox(provider)
        # In a batch with other files, and alone: a backend may send the two differently.
        await sandbox.write_files({f"d/{name}": "in a batch", "d/plain.txt": "plain"})
        await sandbox.write_file(f"alone/{name}", "alone")
        assert [e.name for e in await sandbox.list_dir("d")] == sorted([name, "plain.txt"])
        assert [(e.name, e.path) for e in await sandbox.list_dir("alone")] == [
            (name, f"/workspace/alone/{name}")
        ]
        assert await sandbox.read_text(f"d/{name}") == "in a batch"
        assert await sandbox.read_text(f"alone/{name}") == "alone"
        # The shell sees the same name (printed NUL-terminated, so a line break stays one).
        listed = await sandbox.run_command("for f in d/* alone/*; do printf '%s\\0' \"$f\"; done")
        assert sorted(listed.stdout.split("\0")[:-1]) == sorted(
            [f"d/{name}", "d/plain.txt", f"alone/{name}"]
        )
        assert await sandbox.exists(f"d/{name}")
        await sandbox.remove(f"d/{name}")
        assert not await sandbox.exists(f"d/{name}")
        assert [e.name for e in await sandbox.list_dir("d")] == ["plain.txt"]

    # -- files: writes never destroy ------------------------------------------------------------

    async def test_writing_a_file_over_a_folder_raises_and_keeps_the_folder(
        self, provider: SandboxProvider
    ) -> None:
        sandbox = self.sandbox(provider)
        await sandbox.write_file("src/keep.txt", "kept")
        with pytest.raises(SandboxIsADirectoryError) as refused:
            await sandbox.write_file("src", "x")
        assert refused.value.filename == "/workspace/src"
        assert [(e.name, e.type) for e in await sandbox.list_dir("src")] == [("keep.txt", "file")]
        assert await sandbox.read_text("src/keep.txt") == "kept"

    async def test_a_shell_redirection_never_replaces_a_folder_or_makes_one(
        self, provider: SandboxProvider
    ) -> None:
        # A shell writes through the kernel's rules, as the file API does: `> folder` fails and
        # keeps the folder, `> missing/f` fails and makes nothing, and the line goes on.
        sandbox = self.sandbox(provider)
        await sandbox.write_file("src/keep.txt", "kept")
        result = await sandbox.run_command(
            "echo x > src; echo over=$?; echo y > nowhere/f.txt; echo below=$?; echo end"
        )
        assert result.exit_code == 0, result.stderr
        lines = result.stdout.splitlines()
        assert lines[-1] == "end"
        assert [line.split("=")[0] for line in lines[:2]] == ["over", "below"]
        assert all(line.split("=")[1] != "0" for line in lines[:2]), result.stdout
        assert result.stderr.strip() != "", "the failures say nothing on stderr"
        assert [(e.name, e.type) for e in await sandbox.list_dir("src")] == [("keep.txt", "file")]
        assert not await sandbox.exists("nowhere")

    async def test_writing_the_workspace_itself_raises_and_the_sandbox_keeps_working(
        self, provider: SandboxProvider
    ) -> None:
        sandbox = self.sandbox(provider)
        await sandbox.write_file("before.txt", "before\n")
        with pytest.raises(SandboxIsADirectoryError):
            await sandbox.write_file("/workspace", "x")
        result = await sandbox.run_command("pwd && cat before.txt && echo later > later.txt")
        assert (result.exit_code, result.stdout) == (0, "/workspace\nbefore\n"), result.stderr
        await sandbox.write_file("written.txt", "written")
        assert await sandbox.read_text("written.txt") == "written"
        assert await sandbox.read_text("later.txt") == "later\n"

    @pytest.mark.parametrize("path", ["f.txt/inner.txt", "f.txt/deeper/inner.txt"])
    async def test_writing_through_a_file_raises_not_a_directory(
        self, provider: SandboxProvider, path: str
    ) -> None:
        sandbox = self.sandbox(provider)
        await sandbox.write_file("f.txt", "a file")
        with pytest.raises(SandboxNotADirectoryError):
            await sandbox.write_file(path, "x")
        assert await sandbox.read_text("f.txt") == "a file"

    async def test_a_failing_batch_write_keeps_the_data_that_was_there(
        self, provider: SandboxProvider
    ) -> None:
        sandbox = self.sandbox(provider)
        await sandbox.write_files({"data/a.txt": "a", "data/b.txt": "b", "old.txt": "old"})
        with pytest.raises(SandboxIsADirectoryError):
            await sandbox.write_files([FileWrite("new.txt", b"new"), FileWrite("data", b"x")])
        assert await sandbox.read_text("data/a.txt") == "a"
        assert await sandbox.read_text("data/b.txt") == "b"
        assert await sandbox.read_text("old.txt") == "old"

    # -- files: symlinks (followed inside the sandbox) -------------------------------------------

    async def link(self, sandbox: Sandbox, target: str, name: str) -> None:
        """Make the symlink ``name`` -> ``target`` with ``ln -s`` (paths relative to /workspace)."""
        made = await sandbox.run_command(f"ln -s {target} {name}")
        assert made.exit_code == 0, f"ln -s {target} {name} failed: {made.stderr}"

    async def test_reading_through_a_symlink_reads_its_target(
        self, provider: SandboxProvider
    ) -> None:
        sandbox = self.sandbox(provider)
        await sandbox.write_file("target.txt", "the target")
        await self.link(sandbox, "target.txt", "link.txt")
        assert await sandbox.read_text("link.txt") == "the target"

    async def test_a_path_through_a_symlinked_folder_reaches_the_folder(
        self, provider: SandboxProvider
    ) -> None:
        sandbox = self.sandbox(provider)
        await sandbox.write_file("real/inner.txt", "inner")
        await self.link(sandbox, "real", "alias")
        assert await sandbox.read_text("alias/inner.txt") == "inner"
        await sandbox.write_file("alias/new.txt", "new")
        assert await sandbox.read_text("real/new.txt") == "new"

    async def test_writing_through_a_symlink_changes_its_target_and_keeps_the_link(
        self, provider: SandboxProvider
    ) -> None:
        sandbox = self.sandbox(provider)
        await sandbox.write_file("target.txt", "old")
        await self.link(sandbox, "target.txt", "link.txt")
        await sandbox.write_file("link.txt", "new")
        assert await sandbox.read_text("target.txt") == "new"
        assert (await sandbox.run_command("readlink link.txt")).stdout == "target.txt\n"

    async def test_exists_follows_symlinks_and_a_dangling_one_does_not_exist(
        self, provider: SandboxProvider
    ) -> None:
        sandbox = self.sandbox(provider)
        await sandbox.write_file("target.txt", "x")
        await self.link(sandbox, "target.txt", "good")
        await self.link(sandbox, "missing.txt", "dangling")
        assert await sandbox.exists("good")
        assert not await sandbox.exists("dangling")

    async def test_list_dir_reports_a_symlink_as_itself(self, provider: SandboxProvider) -> None:
        sandbox = self.sandbox(provider)
        await sandbox.write_file("d/target.txt", "x")
        await self.link(sandbox, "target.txt", "d/link")
        await self.link(sandbox, "missing.txt", "d/dangling")
        entries = await sandbox.list_dir("d")
        assert [(e.name, e.path, e.type) for e in entries] == [
            ("dangling", "/workspace/d/dangling", "symlink"),
            ("link", "/workspace/d/link", "symlink"),
            ("target.txt", "/workspace/d/target.txt", "file"),
        ]

    async def test_remove_of_a_symlink_removes_the_link_and_keeps_the_target(
        self, provider: SandboxProvider
    ) -> None:
        sandbox = self.sandbox(provider)
        await sandbox.write_file("target.txt", "kept")
        await self.link(sandbox, "target.txt", "link.txt")
        await sandbox.remove("link.txt")
        assert [e.name for e in await sandbox.list_dir(".")] == ["target.txt"]
        assert await sandbox.read_text("target.txt") == "kept"

    @pytest.mark.parametrize("recursive", [False, True], ids=["plain", "recursive"])
    async def test_remove_of_a_symlink_to_a_folder_keeps_the_folder_and_its_contents(
        self, provider: SandboxProvider, recursive: bool
    ) -> None:
        sandbox = self.sandbox(provider)
        await sandbox.write_file("real/inner.txt", "kept")
        await self.link(sandbox, "real", "alias")
        await sandbox.remove("alias", recursive=recursive)
        assert [e.name for e in await sandbox.list_dir(".")] == ["real"]
        assert await sandbox.read_text("real/inner.txt") == "kept"

    async def test_a_dangling_symlink_is_an_entry_though_nothing_is_behind_it(
        self, provider: SandboxProvider
    ) -> None:
        sandbox = self.sandbox(provider)
        await sandbox.make_dir("d")
        await self.link(sandbox, "missing", "d/dangling")
        assert not await sandbox.exists("d/dangling")
        assert [(e.name, e.type) for e in await sandbox.list_dir("d")] == [("dangling", "symlink")]
        with pytest.raises(SandboxFileNotFoundError):
            await sandbox.read_file("d/dangling")
        with pytest.raises(SandboxFileExistsError):
            await sandbox.make_dir("d/dangling")
        await sandbox.remove("d/dangling")
        assert await sandbox.list_dir("d") == []
        assert not await sandbox.exists("missing")

    async def test_a_symlink_to_a_folder_is_listed_as_a_link_and_leads_to_the_folder(
        self, provider: SandboxProvider
    ) -> None:
        sandbox = self.sandbox(provider)
        await sandbox.write_file("d/real/inner.txt", "inner")
        await self.link(sandbox, "real", "d/alias")
        assert [(e.name, e.type) for e in await sandbox.list_dir("d")] == [
            ("alias", "symlink"),
            ("real", "directory"),
        ]
        assert await sandbox.exists("d/alias")
        assert [e.name for e in await sandbox.list_dir("d/alias")] == ["inner.txt"]
        with pytest.raises(SandboxIsADirectoryError):
            await sandbox.read_file("d/alias")
        with pytest.raises(SandboxFileExistsError):
            await sandbox.make_dir("d/alias")

    async def test_a_symlink_to_a_host_path_never_reaches_the_host_file(
        self, provider: SandboxProvider, tmp_path: Path
    ) -> None:
        secret = f"host-secret-{uuid.uuid4().hex}"
        host_file = tmp_path / "secret.txt"
        before = _host_folder(tmp_path, write={"secret.txt": secret})
        sandbox = self.sandbox(provider)
        await self.link(sandbox, str(host_file), "escape")
        seen = await sandbox.run_command(f"cat escape; cat {host_file}")
        assert secret not in seen.stdout + seen.stderr
        # The host path does not exist in the sandbox (the expected outcome), or is the
        # sandbox's own file of that name: either way, never the host's.
        with contextlib.suppress(SandboxFileNotFoundError):
            assert secret.encode() not in await sandbox.read_file("escape")
        with contextlib.suppress(SandboxFileNotFoundError, SandboxNotADirectoryError):
            await sandbox.write_file("escape", "written from the sandbox")
        assert _host_folder(tmp_path) == before == {"secret.txt": secret}

    async def test_a_command_cannot_read_write_or_list_host_paths(
        self, provider: SandboxProvider, tmp_path: Path
    ) -> None:
        secret = f"host-secret-{uuid.uuid4().hex}"
        before = _host_folder(tmp_path, write={"secret.txt": secret})
        sandbox = self.sandbox(provider)
        seen = await sandbox.run_command(
            f"cat {tmp_path}/secret.txt; ls {tmp_path}; echo pwned > {tmp_path}/created.txt; "
            f"mkdir -p {tmp_path}/made; rm -f {tmp_path}/secret.txt"
        )
        assert secret not in seen.stdout + seen.stderr
        assert "secret.txt" not in seen.stdout  # the host folder's listing is not visible
        # Whatever the command made, it made inside the sandbox: the host folder is as it was.
        assert _host_folder(tmp_path) == before == {"secret.txt": secret}

    async def test_the_hosts_environment_is_invisible_to_commands(
        self, provider: SandboxProvider, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        secret = f"host-env-{uuid.uuid4().hex}"
        monkeypatch.setenv("PAI_CONFORMANCE_HOST_SECRET", secret)
        sandbox = self.sandbox(provider)
        seen = await sandbox.run_command("env; printenv PAI_CONFORMANCE_HOST_SECRET; set")
        assert secret not in seen.stdout + seen.stderr

    async def test_tz_naming_a_host_file_shows_nothing_of_it(
        self, provider: SandboxProvider, tmp_path: Path
    ) -> None:
        # C libraries open the file TZ names (glibc, musl): a sandbox's TZ naming a host path
        # must never read that host file. The planted zone's abbreviation and offset are markers.
        marker, offset = f"Q{uuid.uuid4().hex[:4].upper()}", 3 * 3600 + 17 * 60
        header = b"TZif2" + bytes(15) + struct.pack(">6l", 0, 0, 0, 0, 1, len(marker) + 1)
        body = struct.pack(">lBB", offset, 0, 0) + marker.encode() + b"\0"
        host_zone = tmp_path / "zone"
        host_zone.write_bytes(header + body + header + body + f"\n<{marker}>-3:17\n".encode())
        sandbox = self.sandbox(provider)
        seen = await sandbox.run_command(
            f"date; date +'%Z %z'; TZ=:{host_zone} date +'%Z %z'; "
            f"printf '%(%Z %z)T\\n' -1; TZ={host_zone} awk 'BEGIN {{ print 1 }}'",
            env={"TZ": str(host_zone)},
            timeout=30,
        )
        assert not seen.timed_out
        assert marker not in seen.stdout + seen.stderr
        assert "+0317" not in seen.stdout

    async def test_a_chain_of_900_symlinks_fails_in_bounded_time_and_holds_no_one_up(
        self, provider: SandboxProvider
    ) -> None:
        # Resolving a path follows at most 40 links, as the kernel does (ELOOP after): walking a
        # long chain ends at once with a failure, and another sandbox's command meanwhile is
        # not held up by path resolution done on its behalf.
        chained, other = await self.provisioned(provider), await self.provisioned(provider)
        made = await chained.run_command(
            "mkdir -p chain/target && cd chain && ln -s target l1 && "
            "for i in $(seq 1 899); do ln -s l$i l$((i + 1)); done && echo made",
            timeout=120,
        )
        assert made.stdout == "made\n", made.stderr
        assert (await chained.run_command("test -d chain/l40")).exit_code == 0
        walks, answers = [0.0], [0.0]

        async def walk() -> None:
            started = time.monotonic()
            result = await chained.run_command(
                "for i in $(seq 1 20); do test -d chain/l900 && exit 3; done; test -d chain/l900/.",
                timeout=60,
            )
            walks[0] = time.monotonic() - started
            assert result.exit_code == 1, result.stdout + result.stderr
            assert not result.timed_out

        async def answer() -> None:
            await anyio.sleep(0.05)
            started = time.monotonic()
            result = await other.run_command("echo other", timeout=60)
            answers[0] = time.monotonic() - started
            assert result.stdout == "other\n"

        async with anyio.create_task_group() as group:
            group.start_soon(walk)
            group.start_soon(answer)
        assert walks[0] < 10, f"20 walks of a 900-link chain took {walks[0]:.1f} s"
        assert answers[0] < 5, f"another sandbox's echo took {answers[0]:.1f} s meanwhile"

    async def test_instances_share_nothing_and_commands_keep_no_shell_state(
        self, provider: SandboxProvider
    ) -> None:
        # Two sandboxes taking turns (on a provider that runs commands in shared workers, the
        # same worker may serve both): neither sees the other's files, and nothing of a
        # command's shell (variables, functions, cwd, umask) outlives it.
        first, second = self.sandbox(provider), self.sandbox(provider)
        for turn in range(3):
            planted = await first.run_command(
                f"echo planted{turn} > /workspace/mine; export LEAK=first{turn}; "
                "leak() { echo leaked; }; umask 077; cd /tmp"
            )
            assert planted.exit_code == 0, planted.stderr
            looked = await second.run_command(
                'cat /workspace/mine; echo "var=${LEAK:-unset}"; leak; pwd; umask'
            )
            assert "planted" not in looked.stdout + looked.stderr
            assert "var=unset\n" in looked.stdout
            assert "leaked" not in looked.stdout
            assert "/workspace\n" in looked.stdout
            assert "0077" not in looked.stdout
            again = await first.run_command('echo "var=${LEAK:-unset}"; pwd; cat mine')
            assert again.stdout == f"var=unset\n/workspace\nplanted{turn}\n"
        assert not await second.exists("mine")

    async def test_a_command_holding_a_gibibyte_fails_and_the_sandbox_keeps_working(
        self, provider: SandboxProvider
    ) -> None:
        sandbox = await self.provisioned(provider)
        hog = await sandbox.run_command(
            f"x=a; i=0; while [ $i -lt {self.memory_doublings} ]; do x=$x$x; i=$((i+1)); done; "
            'echo "held ${#x} bytes"',
            timeout=self.memory_timeout_seconds,
        )
        # Refused by the sandbox's memory bound (or, at worst, killed at its timeout): never
        # done, since the host would have paid for it.
        assert hog.exit_code != 0, f"the command held the memory: {hog.stdout!r}"
        assert "held" not in hog.stdout
        after = await sandbox.run_command("echo alive")
        assert (after.exit_code, after.stdout) == (0, "alive\n")

    # -- a sandbox that replaced its own shell ------------------------------------------------------

    async def test_a_sandbox_that_replaced_its_shell_still_times_out_and_answers_in_bounded_time(
        self, provider: SandboxProvider
    ) -> None:
        sandbox = await self.provisioned(provider)
        await sandbox.write_file("kept.txt", "kept")
        # First a harmless probe: a sandbox whose /bin is the host's must never get further.
        probe = f".pai-conformance-{uuid.uuid4().hex}"
        touched = await sandbox.run_command(f"touch /bin/{probe}", timeout=30)
        on_host = Path("/bin") / probe
        if on_host.exists():
            on_host.unlink()
            pytest.fail("a file a command wrote to /bin appeared in the host's /bin")
        if touched.exit_code != 0:
            pytest.skip(
                f"provider {provider.name!r}: a command cannot write /bin, so it cannot replace "
                f"its /bin/sh ({touched.stderr.strip() or touched.exit_code})"
            )
        # A copy of the real shell runs the fake, which hangs whatever it is asked to run.
        replaced = await sandbox.run_command(
            f"rm -f /bin/{probe}; mkdir -p tamper && cp /bin/sh tamper/sh && "
            "printf '#!%s\\nexec sleep 2147483647\\n' \"$PWD/tamper/sh\" > tamper/fake && "
            "chmod 755 tamper/fake && cp tamper/fake /bin/sh.pai-new && "
            "mv -f /bin/sh.pai-new /bin/sh",
            timeout=30,
        )
        if replaced.exit_code != 0:
            pytest.skip(
                f"provider {provider.name!r}: a command cannot replace its /bin/sh "
                f"({replaced.stderr.strip() or replaced.exit_code})"
            )
        started = time.monotonic()
        result = await sandbox.run_command("echo hi", timeout=2)
        elapsed = time.monotonic() - started
        # A provider whose shell is not /bin/sh runs it; any other must time it out in time.
        assert result.timed_out or (result.exit_code, result.stdout) == (0, "hi\n"), result
        assert elapsed <= 2 + TIMEOUT_RETURN_ALLOWANCE, f"returned after {elapsed:.2f} s"
        bound = self.tampered_operation_seconds
        operations: dict[str, Any] = {
            "read_file": lambda: sandbox.read_text("kept.txt"),
            "write_file": lambda: sandbox.write_file("new.txt", "new"),
            "list_dir": lambda: sandbox.list_dir("."),
            "exists": lambda: sandbox.exists("kept.txt"),
            "make_dir": lambda: sandbox.make_dir("folder"),
            "remove": lambda: sandbox.remove("new.txt"),
            "destroy": lambda: provider.destroy(sandbox.key),
        }
        for name, operation in operations.items():
            started = time.monotonic()
            with contextlib.suppress(SandboxError):  # an error is an answer; a hang is not
                with anyio.fail_after(bound + 5):
                    await operation()
            elapsed = time.monotonic() - started
            assert elapsed <= bound, f"{name} took {elapsed:.2f} s in a sandbox whose sh hangs"

    # -- files: bounded reads ---------------------------------------------------------------------

    async def test_a_file_at_the_read_limit_reads_whole(self, provider: SandboxProvider) -> None:
        sandbox = self.sandbox(provider, read_limit=1024)
        data = os.urandom(1024)
        await sandbox.write_file("at-limit.bin", data)
        assert await sandbox.read_file("at-limit.bin") == data

    async def test_a_file_over_the_read_limit_raises_naming_size_and_limit(
        self, provider: SandboxProvider
    ) -> None:
        sandbox = self.sandbox(provider, read_limit=1024)
        await sandbox.write_file("over.bin", b"x" * 1025)
        with pytest.raises(SandboxFileTooLargeError) as too_large:
            await sandbox.read_file("over.bin")
        error = too_large.value
        assert (error.path, error.size, error.limit) == ("/workspace/over.bin", 1025, 1024)
        assert "read_limit" in str(error)

    async def test_the_instance_itself_refuses_a_file_over_max_bytes(
        self, provider: SandboxProvider
    ) -> None:
        # Below the facade (which checks again): the provider must check, not the facade for it.
        sandbox = self.sandbox(provider)
        await sandbox.write_file("over.bin", b"x" * 1025)
        instance = await self.instance_of(provider, sandbox)
        with pytest.raises(SandboxFileTooLargeError) as too_large:
            await instance.read_file("/workspace/over.bin", max_bytes=1024)
        error = too_large.value
        assert (error.path, error.size, error.limit) == ("/workspace/over.bin", 1025, 1024)

    async def test_a_file_over_the_read_limit_is_refused_before_it_is_transferred(
        self, provider: SandboxProvider
    ) -> None:
        size, limit = 16 * 1024 * 1024, 1024 * 1024
        sandbox = self.sandbox(provider, read_limit=limit)
        await sandbox.write_file("huge.bin", bytes(size))
        started_here = not tracemalloc.is_tracing()
        if started_here:
            tracemalloc.start()
        try:
            tracemalloc.reset_peak()
            with pytest.raises(SandboxFileTooLargeError):
                await sandbox.read_file("huge.bin")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            if started_here:
                tracemalloc.stop()
        # Whoever transferred the file first would have held all 16 MiB on the host.
        assert peak < size // 2, f"the host allocated {peak} bytes to refuse a {size}-byte file"

    # -- lifecycle ----------------------------------------------------------------------------

    async def test_seed_files_are_written_on_creation(self, provider: SandboxProvider) -> None:
        sandbox = self.sandbox(
            provider,
            seed=[
                SeedFile("/workspace/README.md", "# seeded\n"),
                SeedFile("/workspace/bin/run.sh", "#!/bin/sh\necho run\n", executable=True),
            ],
        )
        assert await sandbox.read_text("README.md") == "# seeded\n"
        assert (await sandbox.run_command("sh bin/run.sh")).stdout == "run\n"

    async def test_reset_wipes_state_and_reapplies_the_seed(
        self, provider: SandboxProvider
    ) -> None:
        sandbox = self.sandbox(provider, seed=[SeedFile("/workspace/seed.txt", "seed")])
        await sandbox.write_file("scratch.txt", "temporary")
        await sandbox.write_file("seed.txt", "changed")
        await sandbox.reset()
        assert not await sandbox.exists("scratch.txt")
        assert await sandbox.read_text("seed.txt") == "seed"

    async def test_a_vanished_instance_comes_back_with_its_seed_and_says_so(
        self, provider: SandboxProvider
    ) -> None:
        sandbox = self.sandbox(provider, seed=[SeedFile("/workspace/seed.txt", "seed\n")])
        await sandbox.write_file("scratch.txt", "lost when the instance vanishes")
        await self.remove_behind_our_back(provider, sandbox.key)
        result = await sandbox.run_command("cat seed.txt; ls")
        assert result.environment_reset
        assert result.stdout.startswith("seed\n")
        assert "scratch.txt" not in result.stdout
        assert sandbox.environment_resets == 1
        again = await sandbox.run_command("true")
        assert not again.environment_reset

    async def test_a_vanished_instance_is_repaired_by_file_operations_too(
        self, provider: SandboxProvider
    ) -> None:
        sandbox = self.sandbox(provider, seed=[SeedFile("/workspace/seed.txt", "seed")])
        await sandbox.run_command("true")
        await self.remove_behind_our_back(provider, sandbox.key)
        assert await sandbox.read_text("seed.txt") == "seed"
        assert sandbox.environment_resets == 1

    async def test_a_thread_older_than_the_session_whose_instance_is_gone_is_told_so(
        self, provider: SandboxProvider
    ) -> None:
        # A thread made and used in an earlier session (another process, as far as the provider
        # can tell), whose instance went meanwhile: the first result of the next session says so.
        thread_created_at = datetime.now(UTC)
        seed = [SeedFile("/workspace/seed.txt", "seed\n")]
        earlier = self.sandbox(provider, seed=seed)
        await earlier.write_file("scratch.txt", "lost with the instance")
        await self.remove_behind_our_back(provider, earlier.key)
        later = self.sandbox(
            provider, key=earlier.key, seed=seed, owner_created_at=thread_created_at
        )
        result = await later.run_command("cat seed.txt; ls")
        assert result.environment_reset
        assert result.stdout.startswith("seed\n")
        assert "scratch.txt" not in result.stdout
        assert later.environment_resets == 1
        assert not (await later.run_command("true")).environment_reset

    async def test_a_thread_older_than_the_session_gets_its_instance_back_as_it_was(
        self, provider: SandboxProvider
    ) -> None:
        thread_created_at = datetime.now(UTC)
        earlier = self.sandbox(provider)
        await earlier.write_file("kept.txt", "kept")
        # Another process where the backend allows it; else this one, in a new session.
        other = self.create_provider() if provider.features.cross_process else provider
        try:
            later = self.sandbox(other, key=earlier.key, owner_created_at=thread_created_at)
            result = await later.run_command("cat kept.txt")
            assert (result.stdout, result.environment_reset) == ("kept", False)
            assert later.environment_resets == 0
        finally:
            if other is not provider:
                await other.aclose()

    async def test_a_thread_newer_than_the_session_starts_without_a_reset(
        self, provider: SandboxProvider
    ) -> None:
        manager = SandboxSessionManager(provider)
        sandbox = Sandbox(
            manager.handle(self.new_key(), owner_created_at=datetime.now(UTC)),
            default_timeout=60,
        )
        result = await sandbox.run_command("true")
        assert (result.exit_code, result.environment_reset) == (0, False)
        assert sandbox.environment_resets == 0

    async def test_find_by_key_from_a_fresh_provider_object(
        self, provider: SandboxProvider
    ) -> None:
        if not provider.features.cross_process:
            pytest.skip(
                f"provider {provider.name!r} keeps instances in this process only "
                "(features.cross_process is False)"
            )
        sandbox = self.sandbox(provider)
        await sandbox.write_file("marker.txt", "found me")
        other = self.create_provider()
        try:
            instance = await other.find(sandbox.key)
            assert instance is not None, "a fresh provider object did not find the instance by key"
            assert instance.key == sandbox.key
            assert await instance.read_file("/workspace/marker.txt", max_bytes=1024) == b"found me"
        finally:
            await other.aclose()

    async def test_find_returns_none_for_an_unknown_key(self, provider: SandboxProvider) -> None:
        assert await provider.find(self.new_key()) is None

    async def test_list_instances_shows_live_instances_only(
        self, provider: SandboxProvider
    ) -> None:
        sandbox = self.sandbox(provider)
        await sandbox.run_command("true")
        listed = {info.key: info for info in await provider.list_instances()}
        assert sandbox.key in listed
        assert listed[sandbox.key].provider == provider.name
        await provider.destroy(sandbox.key)
        assert sandbox.key not in {info.key for info in await provider.list_instances()}

    async def test_destroy_is_idempotent(self, provider: SandboxProvider) -> None:
        sandbox = self.sandbox(provider)
        await sandbox.run_command("true")
        await provider.destroy(sandbox.key)
        await provider.destroy(sandbox.key)
        await provider.destroy(self.new_key())  # never created
        assert await provider.find(sandbox.key) is None

    async def test_create_replaces_an_existing_instance_for_the_key(
        self, provider: SandboxProvider
    ) -> None:
        key = self.new_key()
        first = await provider.create(key)
        await first.write_files([FileWrite("/workspace/old.txt", b"old")])
        second = await provider.create(key)
        assert second.instance_id != first.instance_id
        assert not await second.exists("/workspace/old.txt")
        assert [i.key for i in await provider.list_instances()].count(key) == 1

    # -- durable runs: receipts ---------------------------------------------------------------

    async def test_a_durable_command_replayed_under_its_key_runs_once(
        self, provider: SandboxProvider
    ) -> None:
        _needs_receipts(provider)
        sandbox = self.sandbox(provider)
        with durable_call("run/1/0"):
            first = await sandbox.run_command("echo line >> log.txt; echo appended")
        with durable_call("run/1/0"):  # the replay: the same call id, so the same key
            again = await sandbox.run_command("echo line >> log.txt; echo appended")
        assert await sandbox.read_text("log.txt") == "line\n"
        assert (first.exit_code, first.stdout) == (0, "appended\n")
        assert (again.exit_code, again.stdout, again.stderr) == (0, "appended\n", "")

    async def test_a_receipt_carries_the_exit_code_and_the_output(
        self, provider: SandboxProvider
    ) -> None:
        _needs_receipts(provider)
        sandbox = self.sandbox(provider)
        command = "echo out; echo err >&2\nexit 3"
        with durable_call("run/2/0"):
            first = await sandbox.run_command(command)
        assert (first.exit_code, first.stdout, first.stderr) == (3, "out\n", "err\n")
        name = receipt_name("run/2/0/sandbox.command/0")
        receipt = json.loads(await sandbox.read_text(f"{RECEIPTS}/{name}.json"))
        assert (receipt["exit_code"], receipt["stdout"], receipt["stderr"]) == (
            3,
            "out\n",
            "err\n",
        )
        assert (receipt["timed_out"], receipt["truncated"]) == (False, False)
        assert receipt["digest"] == command_digest(command, "/workspace", {}, None)
        with durable_call("run/2/0"):
            again = await sandbox.run_command(command)
        assert (again.exit_code, again.stdout, again.stderr) == (3, "out\n", "err\n")

    async def test_a_durable_command_keeps_here_documents_and_exit(
        self, provider: SandboxProvider
    ) -> None:
        _needs_receipts(provider)
        sandbox = self.sandbox(provider)
        with durable_call("run/3/0"):
            result = await sandbox.run_command(
                "cat <<'EOF'\nkept $HOME\nEOF\nread -r x; echo \"got $x\"\nexit 4\necho never",
                stdin=b"input\n",
            )
        assert (result.exit_code, result.stdout) == (4, "kept $HOME\ngot input\n")

    async def test_a_different_command_under_a_recorded_key_is_refused(
        self, provider: SandboxProvider
    ) -> None:
        _needs_receipts(provider)
        sandbox = self.sandbox(provider)
        with durable_call("run/4/0"):
            await sandbox.run_command("echo one >> log.txt")
        with durable_call("run/4/0"), pytest.raises(SandboxReplayError) as raised:
            await sandbox.run_command("echo two >> log.txt")
        assert "run/4/0/sandbox.command/0" in str(raised.value)
        assert "different command" in str(raised.value)
        assert await sandbox.read_text("log.txt") == "one\n"

    async def test_a_claimed_command_whose_process_is_gone_is_interrupted_not_rerun(
        self, provider: SandboxProvider
    ) -> None:
        _needs_receipts(provider)
        sandbox = self.sandbox(provider)
        gone = (await sandbox.run_command("sh -c 'echo $$'")).stdout.strip()
        assert gone.isdigit()
        claim = f"{RECEIPTS}/{receipt_name('run/5/0/sandbox.command/0')}.claim"
        await sandbox.write_files({f"{claim}/pid": f"{gone}\n", f"{claim}/deadline": "\n"})
        for _ in range(2):  # the second answer is the receipt the first wrote
            with durable_call("run/5/0"):
                result = await sandbox.run_command("echo ran >> log.txt")
            assert result.exit_code == INTERRUPTED_EXIT_CODE
            assert "interrupted" in result.stderr
        assert not await sandbox.exists("log.txt")

    async def test_a_command_still_running_is_waited_for_by_a_second_worker(
        self, provider: SandboxProvider
    ) -> None:
        _needs_receipts(provider)
        first = self.sandbox(provider)
        command = "sleep 1; echo line >> log.txt; echo finished"
        claim = f"{RECEIPTS}/{receipt_name('run/6/0/sandbox.command/0')}.claim"
        results: list[CommandResult] = []
        seen: list[str] = []

        async def original() -> None:
            with durable_call("run/6/0"):
                results.append(await first.run_command(command))

        async with anyio.create_task_group() as group:
            group.start_soon(original)
            with anyio.fail_after(30):
                while not await first.exists(f"{claim}/pid"):  # noqa: ASYNC110  (a sandbox, no event)
                    await anyio.sleep(0.02)
            # Another worker (a session of its own) replays the call while it runs.
            second = self.sandbox(provider, key=first.key)
            with durable_call("run/6/0"):
                results.append(await second.run_command(command, on_stdout=seen.append))
        # The first worker's answer and the second's, in whichever order they came.
        assert [(r.exit_code, r.stdout) for r in results] == [(0, "finished\n")] * 2
        # The second worker's callback got the command's output, nothing of the re-attach.
        assert "".join(seen) == "finished\n"
        assert await first.read_text("log.txt") == "line\n"

    async def test_a_durable_command_that_timed_out_is_recorded_as_timed_out(
        self, provider: SandboxProvider
    ) -> None:
        _needs_receipts(provider)
        sandbox = self.sandbox(provider)
        for _ in range(2):  # the second answer is the receipt: the command is not run again
            with durable_call("run/7/0"):
                result = await sandbox.run_command(
                    "echo line >> log.txt; sleep 30", timeout=self.timeout_seconds
                )
            assert (result.exit_code, result.timed_out) == (TIMEOUT_EXIT_CODE, True)
        assert await sandbox.read_text("log.txt") == "line\n"

    async def test_outside_durable_runs_a_command_leaves_no_receipt(
        self, provider: SandboxProvider
    ) -> None:
        sandbox = self.sandbox(provider)
        await sandbox.run_command("echo plain")
        assert not await sandbox.exists(RECEIPTS)


__all__ = [
    "AWKWARD_NAMES",
    "BAD_RUN_ARGUMENTS",
    "BAD_SANDBOX_OPTIONS",
    "LIST_PROCESSES",
    "RUNAWAY_COMMANDS",
    "TEN_MIB",
    "TIMEOUT_EXIT_CODE",
    "TIMEOUT_RETURN_ALLOWANCE",
    "ProviderCall",
    "RecordingInstance",
    "RecordingProvider",
    "SandboxProviderConformance",
]
