"""The provider conformance suite: what every sandbox provider must do, checked on its real backend.

Subclass :class:`SandboxProviderConformance` in your provider package's tests and implement
:meth:`~SandboxProviderConformance.create_provider`; pytest then runs every check through the
:class:`~pai.sandbox.Sandbox` facade and your provider. What a backend cannot do (declared in its
:class:`~pai.sandbox.ProviderFeatures`) is skipped with the reason.

Example::

    from pai.sandbox.testing import SandboxProviderConformance

    class TestDockerProvider(SandboxProviderConformance):
        def create_provider(self):
            return DockerSandboxProvider(image="pai-test:latest", namespace="pai-tests")

        async def remove_behind_our_back(self, provider, key):
            docker.from_env().containers.get(name_for(key)).remove(force=True)

Tests run on asyncio and (when trio is installed) on trio; override the ``anyio_backend`` fixture
for an asyncio-only SDK. Requires pytest (``pai-sandbox[testing]``).
"""

from __future__ import annotations

import importlib.util
import os
import uuid
from collections.abc import AsyncIterator, Iterable
from typing import ClassVar

import anyio
import pytest

from pai.sandbox._errors import (
    SandboxDirectoryNotEmptyError,
    SandboxFileExistsError,
    SandboxFileNotFoundError,
    SandboxIsADirectoryError,
    SandboxNotADirectoryError,
)
from pai.sandbox._provider import SandboxProvider
from pai.sandbox._sandbox import Sandbox
from pai.sandbox._session import SandboxSessionManager
from pai.sandbox._types import FileWrite, SeedFile

_BACKENDS = ["asyncio", "trio"] if importlib.util.find_spec("trio") else ["asyncio"]

TEN_MIB = 10 * 1024 * 1024


class SandboxProviderConformance:
    """Subclass and implement :meth:`create_provider` (and, if you can, the other hooks)."""

    #: Seconds a timeout test lets a command run before it must be killed.
    timeout_seconds: ClassVar[float] = 0.5
    #: How many commands the concurrency test runs at once on one instance.
    concurrent_commands: ClassVar[int] = 20

    pytestmark: ClassVar[list[pytest.MarkDecorator]] = [pytest.mark.anyio]

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
    ) -> Sandbox:
        manager = SandboxSessionManager(provider, seed=seed)
        return Sandbox(
            manager.handle(key if key is not None else self.new_key()),
            default_timeout=60,
            output_limit=output_limit,
        )

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
        sandbox = self.sandbox(provider)
        result = await sandbox.run_command(
            "while true; do echo tick >> /workspace/ticks; sleep 0.05; done",
            timeout=self.timeout_seconds,
        )
        assert result.timed_out
        assert result.exit_code != 0
        assert result.duration < self.timeout_seconds + 30
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
