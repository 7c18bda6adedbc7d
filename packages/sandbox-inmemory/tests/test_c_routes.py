"""C code below the audit hook never opens a host file a command names.

glibc opens a time-zone file for ``TZ``, locale files for ``LANG``/``LC_*``/``LOCPATH``, gconv
modules for ``GCONV_PATH`` and terminfo for ``TERMINFO``; the audit hook does not see those opens.
Each route is tried with planted host files (a TZif file with a marker abbreviation) and FIFOs
(an open would hang the command until its timeout): nothing planted may show in the output and
every command must end promptly. Then the kernel's part is checked on its own: with Landlock in
place, C code in a worker cannot open a host file at all.
"""

from __future__ import annotations

import math
import os
import sqlite3
import struct
import time
from pathlib import Path

import pytest

from pai.sandbox.provider import FileWrite
from pai.sandbox_inmemory import InMemorySandboxInstance, InMemorySandboxProvider
from pai.sandbox_inmemory._worker import host_file_opens

pytestmark = pytest.mark.anyio

MARKER = "PWNZ"
"""The abbreviation of the planted zone (offset +03:17): seen in output = the host file was read."""


def _tzif(posix: str, abbreviation: str = MARKER, offset: int = 3 * 3600 + 17 * 60) -> bytes:
    header = b"TZif2" + bytes(15) + struct.pack(">6l", 0, 0, 0, 0, 1, len(abbreviation) + 1)
    body = struct.pack(">lBB", offset, 0, 0) + abbreviation.encode() + b"\0"
    return header + body + header + body + b"\n" + posix.encode() + b"\n"


@pytest.fixture
def planted(tmp_path: Path) -> dict[str, str]:
    """Host paths a command might make C code open: a TZif file, a FIFO, and folders of
    FIFOs where glibc looks for locales, gconv modules and terminfo entries."""
    zone = tmp_path / "zone"
    zone.write_bytes(_tzif(f"<{MARKER}>-3:17"))
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    locales = tmp_path / "locales"
    for name in ("xx_XX.UTF-8", "xx_XX.utf8", "xx_XX"):
        (locales / name).mkdir(parents=True)
        for category in ("LC_CTYPE", "LC_TIME", "LC_COLLATE", "LC_MESSAGES", "LC_NUMERIC"):
            os.mkfifo(locales / name / category)
    os.mkfifo(locales / "locale-archive")
    gconv = tmp_path / "gconv"
    gconv.mkdir()
    os.mkfifo(gconv / "gconv-modules")
    terminfo = tmp_path / "terminfo"
    (terminfo / "x").mkdir(parents=True)
    os.mkfifo(terminfo / "x" / "xterm")
    return {
        "zone": str(zone),
        "fifo": str(fifo),
        "locales": str(locales),
        "gconv": str(gconv),
        "terminfo": str(terminfo),
    }


async def _run(instance: InMemorySandboxInstance, script: str, env: dict[str, str]) -> str:
    started = time.monotonic()
    result = await instance.run(
        script, cwd="/workspace", env=env, stdin=None, timeout=20, output_limit=1 << 20
    )
    elapsed = time.monotonic() - started
    assert not result.timed_out, f"{script!r} hung (a FIFO was opened?): {result.stderr!r}"
    assert elapsed < 5, f"{script!r} took {elapsed:.1f} s"
    return (result.stdout + result.stderr).decode("utf-8", "replace")


TIME_COMMANDS = (
    "printf '%(%z %Z %c)T\\n' 1780000000",
    "printf '%(%Z)T\\n'",
    "date; date +%Z%z",
    "awk 'BEGIN { print strftime(\"%Z %z\", 0) }'",
    'echo 0 | jq -r \'strftime("%Z"), strflocaltime("%Z %z")\'',
    "ls -l /workspace; stat /workspace; tar -cvf /tmp/t.tar /workspace; tar -tvf /tmp/t.tar",
)


@pytest.mark.parametrize("key", ["zone", "fifo"])
async def test_tz_naming_a_host_file_is_never_opened(
    instance: InMemorySandboxInstance, planted: dict[str, str], key: str
) -> None:
    path = planted[key]
    for script in TIME_COMMANDS:
        for env, line in (
            ({"TZ": path}, script),  # the sandbox's env
            ({}, f"TZ={path} {script}"),  # a prefix assignment
            ({}, f"export TZ=:{path}; {script}"),  # exported, in glibc's ":file" form
            ({"TZDIR": str(Path(path).parent), "TZ": Path(path).name}, script),
        ):
            output = await _run(instance, line, env)
            assert MARKER not in output, (line, output)
            assert "+0317" not in output, (line, output)


async def test_locale_gconv_and_terminfo_variables_never_reach_the_c_library(
    instance: InMemorySandboxInstance, planted: dict[str, str]
) -> None:
    env = {
        "LANG": "xx_XX.UTF-8",
        "LC_ALL": "xx_XX.UTF-8",
        "LC_TIME": "xx_XX.UTF-8",
        "LC_CTYPE": "xx_XX.UTF-8",
        "LOCPATH": planted["locales"],
        "GCONV_PATH": planted["gconv"],
        "TERM": "xterm",
        "TERMINFO": planted["terminfo"],
        "TERMINFO_DIRS": planted["terminfo"],
        "TZ": planted["fifo"],
    }
    exported = "".join(f"export {name}={value}; " for name, value in env.items())
    for script in (
        *TIME_COMMANDS,
        "printf 'b\\na\\n' | sort; echo Ä | tr a-z A-Z; echo x | grep -i X; clear",
        "printf '%d %s\\n' 1 x; seq 3 | sort -n -r; echo é | wc -m; echo x | iconv -f utf-8",
        "echo '{}' | yq .; echo '<p>é</p>' | html-to-markdown; sqlite3 :memory: 'select 1'",
    ):
        await _run(instance, script, env)
        await _run(instance, exported + script, {})


async def test_tz_names_zone_files_of_the_sandbox_itself(
    instance: InMemorySandboxInstance,
) -> None:
    await instance.write_files(
        [FileWrite(path="/workspace/zones/Test/Zone", content=_tzif("<PLUS2>-2", "PLUS2", 7200))]
    )
    output = await _run(
        instance,
        "mkdir -p /usr/share/zoneinfo && cp -r zones/Test /usr/share/zoneinfo/ && "
        "TZ=Test/Zone printf '%(%H:%M %z %Z)T\\n' 0 && "
        "TZ=/workspace/zones/Test/Zone printf '%(%Z)T\\n' 0 && "
        "TZ=JST-9 printf '%(%H %Z)T\\n' 0 && TZ=EST5EDT printf '%(%z %Z)T\\n' 1780000000 && "
        "printf '%(%Z)T\\n' 0",
        {},
    )
    assert output == "02:00 +0200 PLUS2\nPLUS2\n09 JST\n-0400 EDT\nUTC\n"


async def test_the_kernel_refuses_a_workers_c_code_a_host_file(
    provider: InMemorySandboxProvider, instance: InMemorySandboxInstance, tmp_path: Path
) -> None:
    """With Landlock, SQLite (C, below the audit hook) in a worker cannot open a planted host
    database that the same code opens in this process."""
    database = tmp_path / "host.db"
    with sqlite3.connect(database) as connection:
        connection.execute("CREATE TABLE secret (x)")
    connection.close()
    assert host_file_opens(str(database))  # the probe does reach the file where unconfined
    isolation = provider.isolation
    if isolation.kernel is None:
        pytest.skip(f"no kernel confinement here: {isolation.reason}")
    assert isolation.reported
    assert isolation.landlock_abi >= 1
    assert isolation.sockets  # the seccomp filter came with it
    lease = await provider._runtime.pool.lease(math.inf)
    assert lease is not None
    try:
        assert await lease.worker.probe(str(database)) is False
        assert await lease.worker.probe(str(planted_fifo(tmp_path))) is False
    finally:
        await lease.release(reusable=True)
    result = await instance.run(
        "echo still works", cwd="/workspace", env={}, stdin=None, timeout=20, output_limit=99
    )
    assert result.stdout == b"still works\n"


def planted_fifo(folder: Path) -> Path:
    fifo = folder / "probe-fifo"
    os.mkfifo(fifo)
    return fifo


async def test_isolation_is_stated_never_assumed(provider: InMemorySandboxProvider) -> None:
    from pai.sandbox_inmemory._confine import landlock_abi

    abi, reason = landlock_abi()
    isolation = provider.isolation
    assert isolation.landlock_abi == abi
    assert (isolation.kernel == "landlock") == bool(abi)
    assert isolation.reason
    if not abi:
        assert reason in isolation.reason


async def test_printf_never_sets_the_process_environment_nor_calls_tzset(
    planted: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Python layer alone (the kernel's aside): just-bash's printf, as the worker patches
    it, computes ``%(...)T`` without ``os.putenv`` or ``time.tzset`` (which made glibc open
    ``TZ``)."""
    from just_bash import Bash
    from just_bash.commands.printf import printf as printf_module

    from pai.sandbox_inmemory._worker import _commands

    def refused(*args: object) -> None:
        if not args or args[0] in ("TZ", b"TZ"):
            raise AssertionError(f"the C library's time zone was touched: {args!r}")

    _commands._zoned_printf(printf_module)
    monkeypatch.setattr(os, "putenv", refused)
    monkeypatch.setattr(os, "unsetenv", refused)
    monkeypatch.setattr(time, "tzset", refused)  # called without arguments: always refused
    bash = Bash(env={"TZ": planted["zone"]})
    result = await bash.exec("printf '%(%Z %z)T\\n' 0; TZ=JST-9 printf '%(%Z)T\\n' 0")
    assert result.stdout == "UTC +0000\nJST\n", result.stderr


CONFINED_PROBE = """
import json, os, socket, sqlite3, sys, time
from pai.sandbox_inmemory._confine import confine
from pai.sandbox_inmemory._worker import host_file_opens
roots = sorted({os.path.realpath(p) for p in (sys.prefix, sys.base_prefix)})
facts = confine(tuple(roots))
seen = {"facts": facts}
try:
    open(sys.argv[1], "rb").read()
    seen["open"] = "read"
except OSError as error:
    seen["open"] = error.errno
seen["attach"] = host_file_opens(sys.argv[1])
os.environ["TZ"] = sys.argv[2]
time.tzset()  # glibc opens the planted zone file, unless the kernel refuses it
seen["tz"] = time.strftime("%Z", time.localtime(0))
for family, kind in ((socket.AF_UNIX, socket.SOCK_STREAM), (socket.AF_INET, socket.SOCK_DGRAM)):
    try:
        socket.socket(family, kind).close()
        seen.setdefault("sockets", []).append("made")
    except OSError as error:
        seen.setdefault("sockets", []).append(error.errno)
a, b = socket.socketpair()  # the worker's own event loop needs this one
seen["socketpair"] = True
print(json.dumps(seen))
"""


def test_the_kernel_confinement_alone_refuses_host_files_and_sockets(
    planted: dict[str, str], tmp_path: Path
) -> None:
    """The kernel's layer without the audit hook: a process that applied the workers'
    confinement cannot read a host file (Python, SQLite, glibc's TZ loader) nor make a
    socket. The same probe in an unconfined process reads the file, so the test can fail."""
    import errno
    import json
    import subprocess
    import sys

    from pai.sandbox_inmemory._confine import landlock_abi

    database = tmp_path / "host.db"
    with sqlite3.connect(database) as connection:
        connection.execute("CREATE TABLE secret (x)")
    connection.close()
    if not landlock_abi()[0]:
        pytest.skip(f"no Landlock here: {landlock_abi()[1]}")
    env = {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run(
        [sys.executable, "-c", CONFINED_PROBE, str(database), planted["zone"]],
        env=env,
        capture_output=True,
        timeout=60,
        check=True,
    )
    seen = json.loads(done.stdout)
    assert seen["facts"]["kernel"] == "landlock"
    assert seen["open"] == errno.EACCES
    assert seen["attach"] is False
    assert seen["tz"] != MARKER
    assert seen["sockets"] == [errno.EPERM, errno.EPERM]
    assert seen["socketpair"] is True
    unconfined = CONFINED_PROBE.replace("facts = confine(tuple(roots))", "facts = {}")
    done = subprocess.run(
        [sys.executable, "-c", unconfined, str(database), planted["zone"]],
        env=env,
        capture_output=True,
        timeout=60,
        check=True,
    )
    seen = json.loads(done.stdout)
    assert seen["open"] == "read"
    assert seen["attach"] is True
    assert seen["tz"] == MARKER
