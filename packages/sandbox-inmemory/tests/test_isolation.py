"""The in-memory provider keeps commands away from the host, and its limits hold.

Every known escape runs against a real provider (real worker processes) and the host's files are
compared before and after; timeouts, the host's event loop, memory, concurrency and byte fidelity
are checked on asyncio and on trio.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import time
from pathlib import Path

import anyio
import pytest
from inmemory_helpers import MakeProvider

from pai.sandbox.provider import FileWrite, RawCommandResult
from pai.sandbox_inmemory import (
    EXIT_OUT_OF_MEMORY,
    EXIT_TIMEOUT,
    InMemorySandboxInstance,
    InMemorySandboxProvider,
    SandboxMemoryBudgetError,
)

pytestmark = pytest.mark.anyio


MiB = 1024 * 1024
SECRET = "hunter2-host-secret"

# The contract is timeout + 1 s; these tests allow 2.5 s for timeout=1 because the machines that
# run them are shared and slow. What they prove is that the command did not run on to its end.
TIMEOUT_BOUND = 2.5


async def run(
    instance: InMemorySandboxInstance,
    command: str,
    *,
    timeout: float | None = 30.0,
    stdin: bytes | None = None,
) -> RawCommandResult:
    return await instance.run(
        command, cwd="/workspace", env={}, stdin=stdin, timeout=timeout, output_limit=4 * MiB
    )


def _snapshot(root: Path) -> dict[str, tuple[int, int, str]]:
    """Every path under ``root`` with its size, mtime (ns) and content hash."""
    seen: dict[str, tuple[int, int, str]] = {}
    for path in sorted(root.rglob("*")):
        info = path.stat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
        seen[str(path.relative_to(root))] = (info.st_size, info.st_mtime_ns, digest)
    return seen


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A host folder with a secret file and a secret database, and a secret host variable."""
    (tmp_path / "secret.txt").write_text(f"{SECRET}\n")
    connection = sqlite3.connect(tmp_path / "secret.db")
    connection.execute("CREATE TABLE s (x TEXT)")
    connection.execute("INSERT INTO s VALUES (?)", (SECRET,))
    connection.commit()
    connection.close()
    monkeypatch.setenv("PAI_TEST_HOST_SECRET", SECRET)
    return tmp_path


async def _assert_no_escape(
    instance: InMemorySandboxInstance, host: Path, commands: list[str]
) -> None:
    before = _snapshot(host)
    for command in commands:
        result = await run(instance, command)
        output = result.stdout + result.stderr
        assert SECRET.encode() not in output, f"{command!r} read the host secret: {output!r}"
    assert _snapshot(host) == before, "a command read-wrote, created or changed a host file"


# -- no host access ---------------------------------------------------------------------------------


async def test_sqlite3_cannot_attach_open_read_or_import_host_databases(
    instance: InMemorySandboxInstance, host: Path
) -> None:
    db, new = host / "secret.db", host / "created.db"
    await _assert_no_escape(
        instance,
        host,
        [
            f"sqlite3 :memory: \"ATTACH DATABASE '{db}' AS h; SELECT * FROM h.s;\"",
            f"sqlite3 :memory: \"ATTACH DATABASE '{new}' AS n; CREATE TABLE n.t (x);\"",
            f"sqlite3 :memory: \"ATTACH 'file:{db}?mode=ro' AS h; SELECT * FROM h.s;\"",
            f"sqlite3 :memory: \"VACUUM INTO '{new}'\"",
            f"sqlite3 :memory: '.open {db}'",
            f"sqlite3 :memory: '.read {host / 'secret.txt'}'",
            f"sqlite3 :memory: '.import {host / 'secret.txt'} t'",
            f"sqlite3 :memory: \"SELECT load_extension('{host / 'ext.so'}')\"",
            f"sqlite3 {db} 'SELECT * FROM s'",  # the path is a sandbox path: a new, empty db
            "sqlite3 :memory: 'PRAGMA temp_store_directory = \"/tmp\"'",
        ],
    )
    assert not (host / "created.db").exists()


async def test_sqlite3_refusals_say_what_is_not_allowed(instance: InMemorySandboxInstance) -> None:
    attach = await run(instance, "sqlite3 :memory: \"ATTACH '/tmp/x.db' AS x\"")
    assert attach.exit_code != 0
    assert b"ATTACH" in attach.stderr
    assert b"not allowed" in attach.stderr
    dot = await run(instance, "sqlite3 :memory: '.open /tmp/x.db'")
    assert dot.exit_code != 0
    assert b".open is not supported" in dot.stderr


async def test_sqlite3_databases_are_files_of_the_sandbox(
    instance: InMemorySandboxInstance,
) -> None:
    created = await run(instance, "sqlite3 app.db 'CREATE TABLE t (x); INSERT INTO t VALUES (41)'")
    assert created.exit_code == 0, created.stderr
    assert (await run(instance, "sqlite3 app.db 'SELECT x + 1 FROM t'")).stdout == b"42\n"
    data = await instance.read_file("/workspace/app.db", max_bytes=MiB)
    assert data.startswith(b"SQLite format 3\x00")


@pytest.mark.parametrize(
    "template",
    [
        "cat {f}",
        "head {f}",
        "tail {f}",
        "grep -r hunter {d}",
        "rg hunter {d}",
        "sed -n p {f}",
        "awk '{{print}}' {f}",
        "sort {f}",
        "wc {f}",
        "od -c {f}",
        "base64 {f}",
        "md5sum {f}",
        "strings {f}",
        "tac {f}",
        "cut -c1-20 {f}",
        "nl {f}",
        "rev {f}",
        "diff {f} /dev/null",
        "jq -R . {f}",
        "cat < {f}",
        "x=$(< {f}); echo $x",
        "source {f}",
        "stat {f}",
        "ls -la {d}",
        "find {d}",
        "du -a {d}",
        "file {f}",
        "tree {d}",
        "cp {f} copy.txt; cat copy.txt",
        "tar -cf a.tar {f}; tar -tvf a.tar",
        "gzip -c {f} | zcat",
        "zcat {d}/secret.txt.gz",
    ],
)
async def test_file_reading_commands_see_only_the_sandbox(
    instance: InMemorySandboxInstance, host: Path, template: str
) -> None:
    command = template.format(f=host / "secret.txt", d=host)
    await _assert_no_escape(instance, host, [command])


async def test_writing_commands_cannot_create_host_files(
    instance: InMemorySandboxInstance, host: Path
) -> None:
    target = host / "planted.txt"
    await _assert_no_escape(
        instance,
        host,
        [
            f"echo x > {target}",
            f"mkdir -p {host}/dir && touch {host}/dir/f",
            f"tar -xf /dev/null -C {host}",
            f"cp /bin/sh {target}; mv {host}/secret.txt {host}/moved",
            f"rm -rf {host}",
            f"ln -s /etc/passwd {target}",
        ],
    )
    assert not target.exists()


async def test_the_host_environment_is_invisible(
    instance: InMemorySandboxInstance, host: Path
) -> None:
    await _assert_no_escape(
        instance,
        host,
        ["env", "printenv", "printenv PAI_TEST_HOST_SECRET", "echo $PAI_TEST_HOST_SECRET", "set"],
    )


async def test_shell_arithmetic_never_evaluates_python(instance: InMemorySandboxInstance) -> None:
    # just-bash falls back to Python's eval for arithmetic it cannot parse; the fallback here
    # accepts integers and operators only.
    result = await run(instance, "a=(zero one); echo ${a[().__class__.__base__]}; echo done")
    assert b"object" not in result.stdout
    assert result.stdout.endswith(b"done\n")


def test_the_workers_audit_hook_refuses_host_access() -> None:
    from pai.sandbox_inmemory._worker import HostAccessRefused, make_audit_hook

    hook = make_audit_hook(("/opt/python",))
    hook("open", ("/opt/python/lib/json/__init__.py", "r", os.O_RDONLY))  # lazy imports work
    for event, args in [
        ("open", ("/etc/passwd", "r", os.O_RDONLY)),
        ("open", ("/opt/python/lib/x.py", "w", os.O_WRONLY | os.O_CREAT)),
        ("open", ("/opt/python/../../etc/passwd", "r", os.O_RDONLY)),
        ("subprocess.Popen", ("/bin/sh", ["sh"], None, None)),
        ("os.system", (b"id",)),
        ("os.fork", ()),
        ("socket.connect", (None, ("127.0.0.1", 80))),
        ("ctypes.dlopen", ("libc.so.6",)),
        ("sqlite3.connect", ("/tmp/x.db",)),
        ("sqlite3.load_extension", (None, "/tmp/x.so")),
        ("os.remove", ("/tmp/x", -1)),
        ("shutil.rmtree", ("/tmp", None)),
        ("resource.setrlimit", (0, (1, 1))),
        ("os.putenv", ("TZ", "/etc/localtime")),
        ("os.unsetenv", ("TZ",)),
    ]:
        with pytest.raises(HostAccessRefused):
            hook(event, args)
    hook("sqlite3.connect", (":memory:",))


def _proc(pid: int, name: str) -> bytes:
    return Path(f"/proc/{pid}/{name}").read_bytes()


async def test_a_worker_runs_with_a_fixed_environment_and_hard_limits(
    instance: InMemorySandboxInstance, provider: InMemorySandboxProvider
) -> None:
    pids = provider.worker_pids()
    assert pids
    for pid in pids:
        assert _proc(pid, "environ") == b"TZ=UTC0\0LC_ALL=C\0"
        limits = _proc(pid, "limits").decode()
        file_size = next(line for line in limits.splitlines() if line.startswith("Max file size"))
        assert file_size.split()[3:5] == ["0", "0"]
        address = next(line for line in limits.splitlines() if "address space" in line)
        assert "unlimited" not in address


# One invocation of every registered command: none of them is broken by the worker's limits or
# its audit hook (lazy imports included). A new command needs a line here and in the audit table.
SAMPLES: dict[str, str] = {
    "alias": "alias ll='ls -l'; alias",
    "argv.py": "argv.py a b",
    "awk": "echo 1 2 | awk '{print $2}'",
    "base64": "echo hi | base64",
    "basename": "basename /a/b.txt",
    "bash": "bash -c 'echo in bash'",
    "cat": "cat f.txt",
    "chmod": "chmod 600 f.txt && stat -c %a f.txt",
    "clear": "clear",
    "column": "printf 'a b\\nc d\\n' | column -t",
    "comm": "comm f.txt f.txt",
    "cp": "cp f.txt g.txt && cat g.txt",
    "cut": "echo a:b | cut -d: -f2",
    "date": "date +%Y && TZ=Europe/Paris date +%H",
    "diff": "diff f.txt f.txt && echo same",
    "dirname": "dirname /a/b",
    "du": "du -s .",
    "echo": "echo hi",
    "egrep": "egrep hello f.txt",
    "env": "env X=1 sh -c 'echo $X'",
    "expand": "printf 'a\\tb\\n' | expand",
    "expr": "expr 1 + 2",
    "false": "false || echo ok",
    "fgrep": "fgrep hello f.txt",
    "file": "file f.txt",
    "find": "find . -name f.txt -exec cat {} \\;",
    "fold": "echo abcdef | fold -w 2",
    "grep": "grep hello f.txt",
    "gunzip": "gzip -k f.txt && gunzip -c f.txt.gz",
    "gzip": "gzip -c f.txt | wc -c",
    "head": "head -n1 f.txt",
    "help": "help | head -n 1",
    "history": "history",
    "hostname": "hostname",
    "html-to-markdown": "echo '<h1>T</h1>' | html-to-markdown",
    "id": "id -un",
    "join": "join f.txt f.txt",
    "jq": "echo '{\"a\":1}' | jq .a",
    "ln": "ln -s f.txt l && cat l",
    "ls": "ls",
    "md5sum": "md5sum f.txt",
    "mkdir": "mkdir -p d/e && ls d",
    "mktemp": "mktemp -d && mktemp -p .",
    "mv": "cp f.txt m && mv m n && cat n",
    "nl": "nl f.txt",
    "od": "od -c f.txt",
    "paste": "paste f.txt f.txt",
    "printenv": "printenv HOME",
    "printenv.py": "printenv.py HOME",
    "printf": "printf '%s %(%Y)T\\n' x -1",
    "pwd": "pwd",
    "read": "echo v | { read x; echo $x; }",
    "readlink": "ln -sf f.txt r && readlink r",
    "realpath": "realpath f.txt",
    "rev": "echo abc | rev",
    "rg": "rg hello",
    "rm": "touch z && rm z",
    "rmdir": "mkdir q && rmdir q",
    "sed": "sed s/hello/bye/ f.txt",
    "seq": "seq 3",
    "sh": "sh -c 'echo in sh'",
    "sha1sum": "sha1sum f.txt",
    "sha256sum": "sha256sum f.txt",
    "shuf": "seq 3 | shuf | sort",
    "sleep": "sleep 0.01",
    "sort": "sort f.txt",
    "split": "split -l 1 f.txt part && ls part*",
    "sqlite3": "sqlite3 :memory: 'select 1'",
    "stat": "stat f.txt",
    "strings": "strings f.txt",
    "tac": "tac f.txt",
    "tail": "tail -n1 f.txt",
    "tar": "tar -cJf b.txz f.txt && tar -tJf b.txz && tar -cjf c.tbz f.txt && tar -tjf c.tbz",
    "tee": "echo x | tee t.txt",
    "time": "time echo timed",
    "timeout": "timeout 1 echo in-time",
    "touch": "touch new",
    "tr": "echo abc | tr a-z A-Z",
    "tree": "tree",
    "true": "true",
    "unalias": "alias a=b; unalias a",
    "uname": "uname -a",
    "unexpand": "echo '        a' | unexpand",
    "uniq": "uniq f.txt",
    "wc": "wc -l f.txt",
    "which": "which ls",
    "whoami": "whoami",
    "xan": "printf 'a,b\\n1,2\\n' | xan headers",
    "xargs": "echo a b | xargs echo",
    "yq": "echo 'a: 1' | yq .a",
    "zcat": "gzip -c f.txt > z.gz && zcat z.gz",
}


async def test_every_command_runs_under_the_workers_restrictions(
    instance: InMemorySandboxInstance,
) -> None:
    from pai.sandbox_inmemory._worker._commands import COMMAND_AUDIT

    assert sorted(SAMPLES) == sorted(COMMAND_AUDIT)
    await run(instance, "echo hello > f.txt")
    failed: dict[str, bytes] = {}
    for name, command in SAMPLES.items():
        result = await run(instance, command)
        if result.exit_code != 0:
            failed[name] = result.stderr
    assert failed == {}


# -- timeouts and the host's event loop ---------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "while :; do :; done",
        "sqlite3 :memory: 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
        "SELECT count(*) FROM c'",
        "jq -n 'range(0;2000000)'",
        "x=abcdefgh; while :; do x=$x$x; x=${x:0:65536}; done",
    ],
    ids=["builtin-loop", "sqlite-recursive", "jq-range", "string-doubling"],
)
async def test_a_timeout_holds_whatever_the_command_does(
    instance: InMemorySandboxInstance, command: str
) -> None:
    started = time.monotonic()
    result = await run(instance, command, timeout=1)
    elapsed = time.monotonic() - started
    assert (result.timed_out, result.exit_code) == (True, EXIT_TIMEOUT)
    assert elapsed < TIMEOUT_BOUND, f"returned after {elapsed:.2f} s"


async def test_a_huge_jq_range_ends_in_time_with_a_clear_result(
    instance: InMemorySandboxInstance,
) -> None:
    started = time.monotonic()
    result = await run(instance, "jq -n 'range(0;20000000)'", timeout=1)
    elapsed = time.monotonic() - started
    assert elapsed < TIMEOUT_BOUND, f"returned after {elapsed:.2f} s"
    # Either the timeout killed it, or it hit the memory budget first and says so.
    assert result.timed_out or b"memory_budget" in result.stderr, result.stderr
    assert result.exit_code != 0


async def test_the_host_loop_keeps_running_while_a_command_burns_cpu(
    instance: InMemorySandboxInstance,
) -> None:
    ticks = 0
    done = anyio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not done.is_set():
            await anyio.sleep(0.05)
            ticks += 1

    outcome: list[RawCommandResult] = []
    async with anyio.create_task_group() as group:
        group.start_soon(ticker)
        outcome.append(await run(instance, "while :; do :; done", timeout=1))
        done.set()
    (result,) = outcome
    assert result.timed_out
    assert ticks >= 5, f"the host loop ticked {ticks} times in a 1 s command"


async def test_files_written_before_a_timeout_kill_are_kept(
    instance: InMemorySandboxInstance,
) -> None:
    result = await run(instance, "echo kept > before.txt; while :; do :; done", timeout=1)
    assert result.timed_out
    assert await instance.read_file("/workspace/before.txt", max_bytes=MiB) == b"kept\n"
    assert (await run(instance, "cat before.txt")).stdout == b"kept\n"  # a new worker serves it


# -- memory -------------------------------------------------------------------------------------------


def _rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


@pytest.fixture
def small_provider(make_provider: MakeProvider) -> InMemorySandboxProvider:
    return make_provider(memory_budget=16 * MiB)


async def test_string_doubling_past_the_budget_fails_and_the_host_stays_small(
    small_provider: InMemorySandboxProvider,
) -> None:
    instance = await small_provider.create("k")
    await run(instance, "true")
    before, peak = _rss(), 0
    done = anyio.Event()

    async def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _rss())
            await anyio.sleep(0.01)

    outcome: list[RawCommandResult] = []
    async with anyio.create_task_group() as group:
        group.start_soon(sample)
        outcome.append(
            await run(instance, "x=0123456789abcdef; while :; do x=$x$x; done", timeout=30)
        )
        done.set()
    (result,) = outcome
    assert result.exit_code == EXIT_OUT_OF_MEMORY
    assert b"memory_budget" in result.stderr
    assert peak - before < 16 * MiB + 64 * MiB
    assert (await run(instance, "echo fine")).stdout == b"fine\n"  # a fresh worker took over


async def test_files_over_the_budget_are_refused_naming_the_option(
    small_provider: InMemorySandboxProvider,
) -> None:
    instance = await small_provider.create("k")
    with pytest.raises(SandboxMemoryBudgetError) as refused:
        await instance.write_files([FileWrite("/workspace/big.bin", b"x" * 17 * MiB)])
    assert "memory_budget" in str(refused.value)
    assert refused.value.filename == "/workspace/big.bin"
    assert not await instance.exists("/workspace/big.bin")
    shell = await run(instance, "seq 1 3000000 > big.txt; echo $?")
    assert b"memory budget" in shell.stderr
    assert not await instance.exists("/workspace/big.txt")


# -- concurrency, bytes, silent limits ----------------------------------------------------------------


async def test_a_hundred_concurrent_appends_leave_a_hundred_lines(
    instance: InMemorySandboxInstance,
) -> None:
    async with anyio.create_task_group() as group:
        for i in range(100):
            group.start_soon(run, instance, f"echo {i} >> log")
    log = await instance.read_file("/workspace/log", max_bytes=MiB)
    assert sorted(log.split(), key=int) == [str(i).encode() for i in range(100)]


async def test_appending_to_a_file_never_changes_its_copies(
    instance: InMemorySandboxInstance,
) -> None:
    script = (
        "echo a >> f; echo b >> f; cp f copy; ln f hard; chmod 600 f; echo c >> f; "
        "echo d >> copy; cat copy hard f"
    )
    assert (await run(instance, script)).stdout == b"a\nb\nd\na\nb\na\nb\nc\n"


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("printf '\\377' > f", b"\xff"),
        ("printf '\\xff\\xfe' > f", b"\xff\xfe"),
        ("echo -n -e '\\xff\\0376' > f", b"\xff\xfe"),
        ("echo -n $'\\xff' > f", b"\xff"),
        ("printf '\\u00e9' > f", "é".encode()),
        ("printf 'caf\\303\\251' > f", "café".encode()),
    ],
)
async def test_byte_escapes_write_the_bytes_they_name(
    instance: InMemorySandboxInstance, command: str, expected: bytes
) -> None:
    result = await run(instance, command)
    assert result.exit_code == 0, result.stderr
    assert await instance.read_file("/workspace/f", max_bytes=MiB) == expected


@pytest.mark.parametrize(
    "command",
    [
        "gzip -c b.bin > z.gz && zcat z.gz > out",
        "cat b.bin | gzip | gunzip > out",
        "base64 b.bin | base64 -d > out",
        "tar -czf - b.bin > a.tgz && mkdir x && tar -xzf a.tgz -C x && cp x/b.bin out",
        "tar -cf - b.bin | tar -xf - -C /tmp && cat /tmp/b.bin > out",
    ],
)
async def test_binary_data_survives_compression_encoding_and_archives(
    instance: InMemorySandboxInstance, command: str
) -> None:
    data = bytes(range(256)) * 4
    await instance.write_files([FileWrite("/workspace/b.bin", data)])
    result = await run(instance, command)
    assert result.exit_code == 0, result.stderr
    assert await instance.read_file("/workspace/out", max_bytes=MiB) == data


async def test_stdin_bytes_reach_the_command_unchanged(instance: InMemorySandboxInstance) -> None:
    data = bytes(range(256)) * 3
    assert (await run(instance, "cat", stdin=data)).stdout == data
    assert (await run(instance, "cat > in.bin", stdin=data)).exit_code == 0
    assert await instance.read_file("/workspace/in.bin", max_bytes=MiB) == data


async def test_seq_past_a_hundred_thousand_numbers_is_complete(
    instance: InMemorySandboxInstance,
) -> None:
    result = await run(instance, "seq 1 300000 | wc -l; seq 5 2 300003 | tail -n 1")
    assert result.stdout == b"300000\n300003\n"


async def test_a_very_long_seq_is_complete_or_fails_with_a_limit_error(
    instance: InMemorySandboxInstance,
) -> None:
    result = await run(instance, "seq 1 10000000 | wc -l", timeout=120)
    if result.exit_code == 0:
        assert result.stdout == b"10000000\n"
    else:
        assert b"memory_budget" in result.stderr or result.timed_out


async def test_a_fractional_seq_past_the_cap_fails_clearly(
    instance: InMemorySandboxInstance,
) -> None:
    result = await run(instance, "seq 0 0.5 100000")
    assert result.exit_code != 0
    assert b"not supported" in result.stderr
