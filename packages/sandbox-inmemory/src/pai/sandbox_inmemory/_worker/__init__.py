"""A worker process: runs one shell command at a time for the provider, over the host's files.

Started by the host as ``python -I -c <bootstrap> <sys.path> <package folder> <memory budget>`` (see ``_pool.py``); speaks
frames (``_protocol.py``) on the pipes it inherited as stdin and stdout. It keeps nothing between
commands: each ``run`` request builds a fresh interpreter over a :class:`RemoteFs`, whose every
operation is a request back to the host, where the instance's files live.

This package is the worker side, and the host imports none of it: this module is the process's
entry point (:func:`main`); ``_shell`` and ``_scripts`` are the interpreter, ``_commands`` the
command registry and its fixes (with ``_coreutils``, ``_semantics``, ``_texttools`` over
``_awk``, ``_sed``, ``_grep`` and ``_jq``, ``_posix`` and ``_zones``). What it shares with the
host is in ``pai.sandbox_inmemory._protocol`` and ``pai.sandbox_inmemory._confine``.

Before it says it is ready, the worker closes itself off from the host, in this order:

1. imports just-bash and applies the fixes in ``_commands.py`` (each command's own module is
   imported on its first use, read-only from the Python installation, which the hook allows);
2. sets its process environment to :data:`WORKER_ENVIRONMENT` only (``TZ=UTC0``, ``LC_ALL=C``:
   the host's variables are never visible, and the C library never looks up a time zone or a
   locale by a name a command chose; the shell's own variables live in the interpreter) and
   changes to ``/``;
3. loads the C extensions whose shared libraries live outside the Python installation
   (``_hashlib``, ``_lzma``, ``_bz2``, ``zlib``, ...), then confines itself with the kernel where
   it can (``_confine.py``: a Landlock ruleset allowing only reads under the Python
   installation, and a seccomp filter refusing ``socket(2)``, so that C code below the audit
   hook cannot open a host file or a socket either);
4. limits itself: address space to its size after the above plus the memory budget plus a
   fixed headroom (``RLIMIT_AS``), no file writes (``RLIMIT_FSIZE=0``), few descriptors
   (``RLIMIT_NOFILE``), no child processes (``RLIMIT_NPROC=0`` where it applies), no core dumps;
5. installs an audit hook (:func:`make_audit_hook`) that refuses opening any real file except
   read-only under the Python installation (lazy imports), and refuses processes, sockets, ctypes,
   ``sqlite3`` connections other than ``:memory:`` and extension loading, file-system changes,
   changes to its environment, temporary files and further limit changes.

It then checks the kernel's part: a SQLite ``ATTACH`` of ``/dev/null`` (C code opening a host
file, which the audit hook does not see) must fail; the result is in the ``ready`` message.
"""

from __future__ import annotations

import asyncio
import os
import resource
import signal
import sys
import threading
import time
import types
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from pai.sandbox_inmemory._protocol import WORKER_ENVIRONMENT

if TYPE_CHECKING:
    from just_bash.types import Command

    from pai.sandbox_inmemory._worker._shell import Channel, RemoteFs

MiB = 1024 * 1024

_PRELOADED = ("_hashlib", "_lzma", "_bz2", "zlib", "binascii", "_sqlite3", "_uuid", "pyexpat")
"""C extensions loaded before the kernel confinement: their shared libraries (libcrypto, liblzma,
libz, ...) may live outside the Python installation, where the confined worker cannot read."""

WORKING_HEADROOM = 32 * MiB
"""Address space a worker may use beyond its measured baseline and the memory budget: room for
the interpreter's own work (parsing, small buffers), so that a small budget still runs commands."""

_REFUSED_PREFIXES = (
    "subprocess.",
    "os.exec",
    "os.spawn",
    "os.posix_spawn",
    "os.fork",
    "os.forkpty",
    "os.system",
    "os.startfile",
    "os.kill",
    "os.killpg",
    "pty.",
    "socket.",
    "ctypes.",
    "shutil.",
    "tempfile.",
    "glob.",
    "urllib.",
    "http.",
    "ftplib.",
    "smtplib.",
    "imaplib.",
    "poplib.",
    "nntplib.",
    "telnetlib.",
    "webbrowser.",
    "resource.",
    "mmap.",
    "fcntl.",
    "msvcrt.",
    "winreg.",
    "_winapi.",
    "signal.",
    "sqlite3.enable_load_extension",
    "sqlite3.load_extension",
)
_REFUSED_EVENTS = frozenset(
    {
        "os.remove",
        "os.unlink",
        "os.rename",
        "os.replace",
        "os.rmdir",
        "os.mkdir",
        "os.mkfifo",
        "os.mknod",
        "os.chmod",
        "os.chown",
        "os.chflags",
        "os.lchflags",
        "os.lchmod",
        "os.lchown",
        "os.link",
        "os.symlink",
        "os.truncate",
        "os.utime",
        "os.chdir",
        "os.chroot",
        "os.putenv",
        "os.unsetenv",
        "os.setxattr",
        "os.removexattr",
        "os.listxattr",
        "os.getxattr",
        "os.add_dll_directory",
        "sys.addaudithook",
        "sys.setprofile",
        "sys.settrace",
    }
)


class HostAccessRefused(PermissionError):
    """What the audit hook raises: the sandbox's shell tried to reach the host."""


def _read_only(mode: object, flags: object) -> bool:
    if isinstance(mode, str) and any(c in mode for c in "wax+"):
        return False
    writing = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    return not (isinstance(flags, int) and flags & writing)


def make_audit_hook(readable_roots: tuple[str, ...]) -> Any:  # an audit hook
    """The worker's audit hook. It raises ``HostAccessRefused`` for the events of
    ``_REFUSED_EVENTS`` and ``_REFUSED_PREFIXES``, and for the events of ``allowed_when`` unless
    their arguments are allowed (read-only opens and folder listings under ``readable_roots``,
    ``:memory:`` databases); every other event passes."""

    def readable(path: object) -> bool:
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str):
            return False
        real = os.path.realpath(path)
        return any(real == root or real.startswith(root + os.sep) for root in readable_roots)

    def read_only_open(args: tuple[Any, ...]) -> bool:
        path, mode, flags = (*args, None, None, None)[:3]
        return _read_only(mode, flags) and readable(path)

    def installation_listing(args: tuple[Any, ...]) -> bool:  # imports list its folders
        return bool(args) and readable(args[0])

    def memory_database(args: tuple[Any, ...]) -> bool:
        return not args or args[0] in (":memory:", b":memory:")

    allowed_when: dict[str, Callable[[tuple[Any, ...]], bool]] = {
        "open": read_only_open,
        "os.listdir": installation_listing,
        "os.scandir": installation_listing,
        "sqlite3.connect": memory_database,
    }

    # Events that pass whatever their arguments, learnt as they come: the hook runs for every
    # event of every command (asyncio's own among them), and most are of a few kinds.
    passing: set[str] = set()

    def _audit(event: str, args: tuple[Any, ...]) -> None:
        if event in passing:
            return
        allowed = allowed_when.get(event)
        if allowed is not None:
            if allowed(args):
                return
        elif event not in _REFUSED_EVENTS and not event.startswith(_REFUSED_PREFIXES):
            if len(passing) < 4096:  # CPython raises a few hundred kinds of event
                passing.add(event)
            return
        what = f"({args[0]!r})" if args and isinstance(args[0], str | bytes) else ""
        raise HostAccessRefused(
            f"pai-sandbox-inmemory: {event}{what} is not allowed: a command cannot reach the "
            "host (its files, processes or network); use the sandbox's own files, e.g. under "
            "/workspace"
        )

    return _audit


def _vm_size(status: int | None) -> int:
    """The worker's address-space size read from ``status`` (its open ``/proc/self/status``),
    or 0 where ``/proc`` does not tell it (not Linux)."""
    if status is None:
        return 0
    try:
        text = os.pread(status, 1 << 16, 0)
    except OSError:
        return 0
    for line in text.splitlines():
        if line.startswith(b"VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


def _open_status() -> int | None:
    """``/proc/self/status``, opened before the kernel confinement (which would refuse it)."""
    try:
        return os.open("/proc/self/status", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None


def _highest_fd() -> int:
    for folder in ("/proc/self/fd", "/dev/fd"):
        try:
            return max(int(fd) for fd in os.listdir(folder))
        except (OSError, ValueError):
            continue
    return 64


def _preload() -> None:
    """Step 4's loading of C extensions (see :data:`_PRELOADED`)."""
    import importlib

    for name in _PRELOADED:
        try:
            importlib.import_module(name)
        except ImportError:
            continue


def host_file_opens(path: str) -> bool:
    """Whether C code below the audit hook can open ``path`` in this process: SQLite attaching
    it as a database (a connection with no authorizer). With the kernel confinement in place
    it cannot; without it, it can."""
    import sqlite3

    connection = sqlite3.connect(":memory:")
    try:
        connection.execute("ATTACH DATABASE ? AS probe", (path,))
        connection.execute("SELECT count(*) FROM probe.sqlite_master").fetchall()
    except sqlite3.Error:
        return False
    finally:
        connection.close()
    return True


def _close_off(budget: int) -> dict[str, Any]:
    """Steps 2-5 of the module docstring; returns what the host may want to know."""
    devnull = os.open(os.devnull, os.O_RDWR)
    sys.dont_write_bytecode = True
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write over RLIMIT_FSIZE fails, not kills
    os.environ.clear()
    os.environ.update(WORKER_ENVIRONMENT)
    time.tzset()
    os.chdir("/")
    roots = tuple(
        sorted(
            {
                os.path.realpath(p)
                for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)
            }
        )
    )
    _preload()
    status = _open_status()
    highest = _highest_fd()
    from pai.sandbox_inmemory._confine import confine

    confinement = confine(roots)  # raises when the kernel has Landlock but applying it failed
    sys.modules.pop("ctypes", None)  # refused from here on anyway
    baseline = _vm_size(status)
    if status is not None:
        os.close(status)
    limit = baseline + budget + WORKING_HEADROOM
    if baseline:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if hasattr(resource, "RLIMIT_NPROC"):
        resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (highest + 8, highest + 8))
    os.dup2(devnull, 2)  # nothing the worker prints can reach the host's terminal
    sys.addaudithook(make_audit_hook(roots))
    if confinement["kernel"] is not None:
        # The kernel's part, checked: C code (SQLite) opening a host file must fail.
        confinement["verified"] = not host_file_opens(os.devnull)
    return {"baseline": baseline, "limit": limit, "confinement": confinement}


def _exit_with_the_host(parent: int) -> None:
    """End this worker when the host process is gone, even in the middle of a runaway command
    (a thread: the main one may be busy in a loop that never reads the host's pipe)."""

    def watch() -> None:
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="host-watch", daemon=True).start()


def _cut(text: str, limit: int, encode: Any) -> tuple[bytes, bool]:
    if len(text) > limit:  # every character is at least one byte: the cut is certain
        return encode(text[:limit])[:limit], True
    data: bytes = encode(text)
    return (data[:limit], True) if len(data) > limit else (data, False)


def _no_network(*args: object, **kwargs: object) -> None:
    raise HostAccessRefused("pai-sandbox-inmemory: the in-memory shell has no network")


def main() -> None:
    """The worker's entry point (see the module docstring)."""
    _exit_with_the_host(os.getppid())
    read_fd, write_fd = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    budget = int(sys.argv[1])

    # just-bash imports its network layer (aiohttp) at import time; the shell here registers no
    # network command, so a stand-in saves the import (and keeps aiohttp out of the worker).
    network = types.ModuleType("just_bash.network")
    network.make_default_fetch = _no_network  # pyright: ignore[reportAttributeAccessIssue]
    sys.modules["just_bash.network"] = network

    from just_bash.types import CommandContext, ExecResult

    from pai.sandbox_inmemory._worker import _commands, _shell

    class _Binary:
        """A command whose stdin encodes back to the bytes it stands for."""

        def __init__(self, inner: Command) -> None:
            self.name = inner.name
            self._inner = inner

        async def execute(self, args: list[str], ctx: CommandContext) -> ExecResult:
            if ctx.stdin and type(ctx.stdin) is str:
                ctx.stdin = _shell.BinaryText(ctx.stdin)
            return await self._inner.execute(args, ctx)

    memory_message = (
        "pai-sandbox-inmemory: the command ran out of memory: it needed more than the sandbox's "
        f"memory budget of {budget} bytes ({budget / MiB:g} MiB, option memory_budget)\n"
    )
    loop = asyncio.new_event_loop()
    _commands.patch_just_bash(memory_message.strip())
    # Commands load on first use (quicker start): the audit hook lets imports read the Python
    # installation, and nothing else.
    commands: Mapping[str, Command] = _commands.command_registry(_Binary)
    channel = _shell.Channel(read_fd, write_fd)
    fs = _shell.RemoteFs(channel)
    facts = _close_off(budget)
    start_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    channel.send(["ready", facts])
    # One coroutine serves every command: the loop is entered once, not once per command (a
    # run_until_complete costs a task and the loop's start and stop, ~50 us of a 600 us round
    # trip). Waiting for the next request blocks the loop, which has nothing else to do.
    loop.run_until_complete(_serve(channel, fs, commands, memory_message, start_rss))


async def _serve(
    channel: Channel,
    fs: RemoteFs,
    commands: Mapping[str, Command],
    memory_message: str,
    start_rss: int,
) -> None:
    """Run each command the host sends, until it goes away or sends something else."""
    from just_bash import ExecutionLimits

    from pai.sandbox_inmemory._worker import _coreutils, _shell

    while True:
        try:
            request, payload = channel.receive()
        except _shell.HostGone:
            return
        if request[0] == "probe" and len(request) == 2 and isinstance(request[1], str):
            # The host checking the kernel's part (tests, diagnostics): can C code below the
            # audit hook open this host file? Only the host writes to this pipe.
            channel.send(["probed", host_file_opens(request[1])])
            continue
        if request[0] != "run" or len(request) < 2 or not isinstance(request[1], dict):
            return
        spec: dict[str, Any] = request[1]  # pyright: ignore[reportUnknownVariableType]
        limit = int(spec["output_limit"])
        limits = ExecutionLimits(**spec["limits"])
        hostname = _coreutils.use_hostname(spec.get("hostname"))
        try:
            result = await _shell.run_script(
                fs,
                commands,
                limits,
                str(spec["script"]),
                cwd=str(spec["cwd"]),
                env={"HOSTNAME": hostname, **{str(k): str(v) for k, v in spec["env"].items()}},
                stdin=payload if spec["stdin"] else None,
                memory_message=memory_message,
            )
            out, out_cut = _cut(result.stdout, limit, _shell.encode)
            err, err_cut = _cut(result.stderr, limit, _shell.encode)
            out_of_memory = result.out_of_memory
            exit_code = result.exit_code
        except _shell.HostGone:
            return
        except MemoryError:
            out, err, out_cut, err_cut = b"", memory_message.encode(), False, False
            out_of_memory, exit_code = True, _shell.EXIT_OUT_OF_MEMORY
        grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - start_rss
        done = {
            "exit_code": exit_code,
            "stdout": len(out),
            "truncated": out_cut or err_cut,
            "out_of_memory": out_of_memory,
            "retire": out_of_memory or grown > 64 * MiB,
        }
        try:
            channel.send(["done", done], out + err)
        except (BrokenPipeError, _shell.HostGone):
            return
        if done["retire"]:
            return


if __name__ == "__main__":
    main()
