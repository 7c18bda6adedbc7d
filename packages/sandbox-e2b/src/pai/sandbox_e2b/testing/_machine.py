"""One sandbox's "VM": a set of Linux namespaces on this machine, shared by all its commands.

A sandbox's first command starts its machine: ``unshare`` makes a user namespace (the
emulator's own user is ``root`` in it), a mount namespace (the sandbox folder with the host's
userland bound read-only, its own ``/proc`` and an ``/etc/passwd`` naming ``root`` and
``user``), a PID namespace and, unless the sandbox may reach the internet, a network namespace.
Its PID 1 reaps orphans, as a VM's init does, and holds two idle processes chrooted into the
sandbox: one as ``root`` and one in a nested user namespace that maps the same host user to
uid 1000 (``user``). Every command enters the namespaces of the holder of the user it runs as
(``nsenter``), so a process it backgrounds outlives it, ``ps`` shows every process of the
sandbox, and a signal reaches exactly the process it names.

Killing the machine kills its PID 1, and the kernel then kills every process of the sandbox;
``setpriv --pdeathsig`` (where it exists) does the same should the emulator die.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "opt")

#: The address space each process of a sandbox may take (KiB): the 512 MB of memory an E2B
#: sandbox reports, so a command that tries to hold more fails instead of the host paying for it.
MEMORY_LIMIT_KIB = 512 * 1024

#: ``PATH`` of every command, as envd's own.
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True, slots=True)
class User:
    """A user of the sandbox, as envd looks it up."""

    name: str
    uid: int
    gid: int
    home: str


#: The users every sandbox has (those of E2B's base template envd runs commands as).
USERS: Mapping[str, User] = {
    "root": User("root", 0, 0, "/root"),
    "user": User("user", 1000, 1000, "/home/user"),
}

#: Whom envd runs commands and file operations as when a request names no one.
DEFAULT_USER = USERS["user"]


class MachineError(Exception):
    """The sandbox's namespaces could not be made or entered; the message says why."""


# Run by unshare inside the new namespaces (as PID 1): $1 the sandbox root, $2 the folder of its
# passwd and group files; then the reaper and its arguments. Binds the host's userland read-only
# (best effort), gives the sandbox its own /proc (of its PID namespace) and its users.
_SETUP = rf"""
r=$1; ids=$2; shift 2
for d in usr bin sbin lib lib32 lib64 libx32 etc opt; do
  if [ -d "/$d" ] && [ ! -L "/$d" ] && [ -d "$r/$d" ] && [ ! -L "$r/$d" ]; then
    mount --rbind "/$d" "$r/$d" && mount -o remount,bind,ro "$r/$d" 2>/dev/null
  fi
done
if [ -d "$r/etc" ] && [ ! -L "$r/etc" ]; then
  for f in passwd group; do
    if [ -f "$r/etc/$f" ]; then mount --bind "$ids/$f" "$r/etc/$f" || exit 126; fi
  done
fi
mount --rbind /dev "$r/dev" || exit 126
mount -t proc proc "$r/proc" || exit 126
ulimit -v {MEMORY_LIMIT_KIB} || exit 126
exec "$@"
"""

# PID 1 of a sandbox. Makes the two holders (root's; user's, in a nested user namespace that
# maps this namespace's root to 1000, which only the holder itself may write), prints their PIDs, then reaps whatever the kernel re-parents
# to it until it is killed. It stays outside the chroot: the host's interpreter may live
# anywhere.
_REAPER = r"""
import ctypes, os, signal, sys
root = sys.argv[1]
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
libc = ctypes.CDLL(None, use_errno=True)

def holder(uid):
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(ready_r)
        if uid:
            if libc.unshare(0x10000000) != 0:
                os._exit(1)
            for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} 0 1"), ("gid_map", f"{uid} 0 1")):
                with open(f"/proc/self/{name}", "w") as f:
                    f.write(text + "\n")
        os.chroot(root)
        os.chdir("/")
        os.write(ready_w, b".")
        os.close(ready_w)
        while True:
            signal.pause()
    os.close(ready_w)
    if os.read(ready_r, 1) != b".":
        sys.exit("a holder did not start")
    os.close(ready_r)
    return pid

print(holder(0), holder(1000), flush=True)
os.close(1)
while True:
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass
    signal.sigtimedwait({signal.SIGCHLD}, 60)
"""

# Runs (in bash where the sandbox has it: sh takes no file descriptor above 9) as the command's
# process, inside the sandbox: reports its PID (in the sandbox) on the file descriptor $1, bounds
# its memory, enters the working directory $2 and becomes the command.
_COMMAND = rf"""
printf '%s\n' "$$" >&"$1" && eval "exec $1>&-" || exit 126
ulimit -v {MEMORY_LIMIT_KIB} || exit 126
cd -- "$2" || exit 1
shift 2
exec "$@"
"""

# The same where the sandbox has no bash: the descriptor is written through /proc and stays open.
_COMMAND_SH = rf"""
printf '%s\n' "$$" > "/proc/self/fd/$1" || exit 126
ulimit -v {MEMORY_LIMIT_KIB} || exit 126
cd -- "$2" || exit 1
shift 2
exec "$@"
"""


def prepare_root(root: Path) -> None:
    """Make a fresh sandbox folder's skeleton: the host's top-level folders to bind, ``/dev``,
    ``/proc``, ``/root``, ``/home/user``, ``/tmp`` and ``/var/tmp``."""
    for name in _SYSTEM_DIRS:
        host = Path("/") / name
        mine = root / name
        if host.is_symlink():
            mine.symlink_to(os.readlink(host))
        elif host.is_dir():
            mine.mkdir()
    for name in ("dev", "proc", "home/user", "var/tmp"):
        (root / name).mkdir(parents=True, exist_ok=True)
    (root / "root").mkdir(mode=0o700, exist_ok=True)
    (root / "tmp").mkdir(mode=0o1777, exist_ok=True)
    os.chmod(root / "tmp", 0o1777)


def write_support(folder: Path) -> None:
    """Write what every sandbox's machine uses from outside the sandbox: the ``passwd`` and
    ``group`` files it sees in ``/etc`` (the host's, with ``user`` (1000) in place of whatever
    the host has there) and its PID 1's program."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "init.py").write_text(_REAPER)
    for name, line in (
        ("passwd", "user:x:1000:1000::/home/user:/bin/bash\n"),
        ("group", "user:x:1000:\n"),
    ):
        try:
            host = Path("/etc", name).read_text(errors="replace").splitlines(keepends=True)
        except OSError:
            host = []
        kept = [
            entry
            for entry in host
            if entry.split(":")[0] != "user"
            and [*entry.split(":"), "", "", ""][2] != "1000"
            and entry.endswith("\n")
        ]
        if not any(entry.startswith("root:") for entry in kept):
            kept.insert(
                0, "root:x:0:0:root:/root:/bin/bash\n" if name == "passwd" else "root:x:0:\n"
            )
        (folder / name).write_text("".join([*kept, line]))


def remove_tree(path: Path) -> None:
    """Delete a sandbox folder, also where its commands took permissions away."""

    def retry(function: Callable[..., object], failed: str, *_: object) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(failed), 0o700)
            if not os.path.islink(failed):
                os.chmod(failed, 0o700)
            function(failed)

    handler: dict[str, Any] = (
        {"onexc": retry} if sys.version_info >= (3, 12) else {"onerror": retry}
    )
    shutil.rmtree(path, **handler)
    if path.exists():
        shutil.rmtree(path, ignore_errors=True)


def alive(pid: int) -> bool:
    """Whether ``pid`` is a running (not a zombie) process."""
    try:
        status = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return status[status.rfind(b")") + 2 : status.rfind(b")") + 3] not in (b"Z", b"X")


def _children(pid: int) -> list[int]:
    """The PIDs (on this host) of ``pid``'s children."""
    try:
        listed = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        return [int(child) for child in listed]
    except OSError:
        pass
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_bytes()
        except OSError:
            continue
        if int(stat[stat.rfind(b")") + 2 :].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def _namespace_pid(host_pid: int) -> int | None:
    """The PID ``host_pid`` has in its own (innermost) PID namespace."""
    try:
        status = Path(f"/proc/{host_pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("NSpid:"):
            return int(line.split()[-1])
    return None


@dataclass
class Spawned:
    """A command started in a machine."""

    proc: asyncio.subprocess.Process
    """``nsenter``, which ends as the command does (a command killed by a signal is re-raised
    on it, so its return code is minus the signal)."""
    pid: int
    """The command's PID in the sandbox (what envd reports)."""
    pidfd: int | None
    """A pidfd of the command's process (``None`` when it ended before it could be taken):
    signals reach it and nothing else, even after its PID is reused."""
    exited: asyncio.Future[int]
    """Done, with ``proc``'s return code, when the command's process ends, whoever still holds
    its output (:meth:`asyncio.subprocess.Process.wait` also waits for the pipes to close)."""
    transport: asyncio.SubprocessTransport

    def close_output(self) -> None:
        """Close this side of the command's stdout and stderr, as envd's ``cmd.Wait`` does: a
        process still writing to them then gets a broken pipe."""
        for descriptor in (1, 2):
            pipe = self.transport.get_pipe_transport(descriptor)
            if pipe is not None:
                pipe.close()

    def signal(self, number: int) -> bool:
        """Send signal ``number`` to the command's process (only it); whether it was there."""
        if self.pidfd is None:
            return False
        try:
            signal.pidfd_send_signal(self.pidfd, number)
        except OSError:
            return False
        return True

    def close(self) -> None:
        if self.pidfd is not None:
            with contextlib.suppress(OSError):
                os.close(self.pidfd)
            self.pidfd = None


class _Protocol(asyncio.subprocess.SubprocessStreamProtocol):
    """asyncio's protocol for a subprocess with pipes, which also tells when the process
    itself ended."""

    def __init__(self, exited: asyncio.Future[int], loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=2**16, loop=loop)
        self._exited = exited

    def process_exited(self) -> None:
        # Read before asyncio's own handling, which may let go of the transport.
        transport: Any = getattr(self, "_transport", None)
        code = transport.get_returncode() if transport is not None else None
        super().process_exited()
        if not self._exited.done():
            self._exited.set_result(code if isinstance(code, int) else -1)


class Machine:
    """One sandbox's namespaces (see the module documentation); started on first use."""

    def __init__(self, root: Path, support: Path, *, network: bool) -> None:
        self.root = root
        self.support = support
        self.network = network
        self._lock = asyncio.Lock()
        self._init: asyncio.subprocess.Process | None = None
        self._init_pidfd: int | None = None
        self._pid1 = 0
        self._holders: dict[str, int] = {}
        self._killed = False

    @property
    def pid1(self) -> int:
        """The host PID of the sandbox's PID 1 (0 before it started)."""
        return self._pid1

    async def start(self) -> None:
        """Make the namespaces (once; again after :meth:`kill` raises :class:`MachineError`)."""
        async with self._lock:
            if self._holders:
                return
            if self._killed:
                raise MachineError("the sandbox's machine was stopped")
            tools = _tools()
            if isinstance(tools, str):
                raise MachineError(tools)
            launcher, unshare, _ = tools
            init = await asyncio.create_subprocess_exec(
                *launcher,
                unshare,
                "--user",
                "--map-root-user",
                "--mount",
                "--pid",
                *(() if self.network else ("--net",)),
                "--fork",
                "--kill-child",
                "--",
                "/bin/sh",
                "-c",
                _SETUP,
                "pai-e2b-init",
                str(self.root),
                str(self.support),
                sys.executable,
                "-I",
                "-S",
                str(self.support / "init.py"),
                str(self.root),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env={"PATH": PATH, "LANG": "C.UTF-8"},
                start_new_session=True,
            )
            self._init = init
            with contextlib.suppress(OSError):
                self._init_pidfd = os.pidfd_open(init.pid)
            if self._killed:  # killed from another thread while it started
                self.kill()
                raise MachineError("the sandbox's machine was stopped")
            assert init.stdout is not None
            try:
                line = await asyncio.wait_for(init.stdout.readline(), 30)
            except TimeoutError:
                line = b""
            holders = line.split()
            if len(holders) != 2 or not all(h.isdigit() for h in holders):
                self.kill()
                detail = b""
                if init.stderr is not None:
                    with contextlib.suppress(TimeoutError):
                        detail = await asyncio.wait_for(init.stderr.read(4096), 5)
                raise MachineError(
                    "the sandbox's namespaces could not be made: "
                    + (detail.decode(errors="replace").strip() or "no reason given")
                )
            pid1 = next(iter(_children(init.pid)), 0)
            wanted = {int(holders[0]): "root", int(holders[1]): "user"}
            found: dict[str, int] = {}
            for child in _children(pid1):
                name = wanted.get(_namespace_pid(child) or -1)
                if name is not None:
                    found[name] = child
            if len(found) != 2:
                self.kill()
                raise MachineError("the sandbox's namespaces started without their holders")
            self._pid1 = pid1
            self._holders = found

    async def spawn(
        self,
        user: User,
        argv: Sequence[str],
        env: Mapping[str, str],
        cwd: str,
        *,
        stdin: bool,
    ) -> Spawned:
        """Run ``argv`` as ``user`` in the sandbox, in ``cwd`` (a sandbox path), with exactly
        the environment ``env``."""
        await self.start()
        tools = _tools()
        if isinstance(tools, str):
            raise MachineError(tools)
        launcher, _, nsenter = tools
        holder = self._holders.get(user.name)
        if holder is None:
            raise MachineError(f"the sandbox has no user {user.name!r}")
        report_r, report_w = os.pipe()
        try:
            loop = asyncio.get_running_loop()
            exited: asyncio.Future[int] = loop.create_future()
            transport, protocol = await loop.subprocess_exec(
                lambda: _Protocol(exited, loop),
                *launcher,
                nsenter,
                "--target",
                str(holder),
                "--user",
                "--mount",
                "--pid",
                *(() if self.network else ("--net",)),
                "--root",
                "--wd",
                "--setuid",
                str(user.uid),
                "--setgid",
                str(user.gid),
                "--",
                *self._wrapper(),
                str(report_w),
                cwd,
                *argv,
                stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=dict(env),
                pass_fds=(report_w,),
                start_new_session=True,
            )
            proc = asyncio.subprocess.Process(transport, protocol, loop)
        except BaseException:
            os.close(report_r)
            raise
        finally:
            os.close(report_w)
        try:
            reported = await _read_line(report_r)
        finally:
            os.close(report_r)
        if not reported.strip().isdigit():
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            _, errors = await proc.communicate()
            raise MachineError(
                "the command could not enter the sandbox (was it stopped?): "
                + (errors.decode(errors="replace").strip()[-500:] or "no reason given")
            )
        pid = int(reported)
        pidfd: int | None = None
        # A command that already ended is not there to be signalled; one still there is held by
        # a pidfd, so a signal never reaches a process that reused its PID.
        for child in _children(proc.pid):
            if _namespace_pid(child) == pid:
                with contextlib.suppress(OSError):
                    pidfd = os.pidfd_open(child)
                break
        return Spawned(proc, pid, pidfd, exited, transport)

    def _wrapper(self) -> list[str]:
        if Path("/bin/bash").exists():  # bound into the sandbox
            return ["/bin/bash", "-c", _COMMAND, "bash"]
        return ["/bin/sh", "-c", _COMMAND_SH, "sh"]

    def kill(self) -> None:
        """Kill every process of the sandbox (its PID 1, and so the kernel kills the rest).
        Safe from any thread; the machine cannot be started again."""
        self._killed = True
        pidfd, self._init_pidfd = self._init_pidfd, None
        if pidfd is not None:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.close(pidfd)
        elif self._init is not None and self._init.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._init.kill()

    def running(self) -> bool:
        """Whether any process of the sandbox may still run."""
        return bool(self._pid1) and alive(self._pid1)


def _wake(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)


async def _read_line(descriptor: int) -> bytes:
    """One line (at most 64 bytes) from a pipe, without blocking the event loop."""
    loop = asyncio.get_running_loop()
    os.set_blocking(descriptor, False)
    data = b""
    while not data.endswith(b"\n") and len(data) < 64:
        ready: asyncio.Future[None] = loop.create_future()
        loop.add_reader(descriptor, _wake, ready)
        try:
            await ready
        finally:
            loop.remove_reader(descriptor)
        try:
            chunk = os.read(descriptor, 64)
        except BlockingIOError:
            continue
        if not chunk:
            break
        data += chunk
    return data


_tools_lock = threading.Lock()
_tools_found: tuple[list[str], str, str] | str | None = None


def _tools() -> tuple[list[str], str, str] | str:
    """(launcher prefix, unshare, nsenter), or why they are missing."""
    global _tools_found
    with _tools_lock:
        if _tools_found is None:
            unshare = shutil.which("unshare")
            nsenter = shutil.which("nsenter")
            if unshare is None or nsenter is None:
                _tools_found = (
                    "the emulator needs the `unshare` and `nsenter` programs (util-linux)"
                )
            else:
                # Where it exists, setpriv makes the kernel kill a sandbox's processes should the
                # process running the emulator die without stopping it (a run killed -9).
                setpriv = shutil.which("setpriv")
                launcher = [setpriv, "--pdeathsig", "KILL", "--"] if setpriv else []
                _tools_found = (launcher + _default_signals(), unshare, nsenter)
        return _tools_found


def _default_signals() -> list[str]:
    """The prefix that starts a sandbox's processes with every signal at its default action, as
    envd's are (a service's): without it they inherit what this process ignores, and under
    ``nohup`` ``kill -HUP $$`` would do nothing. GNU env's ``--default-signal`` (coreutils 8.31
    and later); an empty prefix where there is none."""
    found = shutil.which("env")
    if found is None:
        return []
    try:
        probe = subprocess.run(
            [found, "--default-signal", "true"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    return [found, "--default-signal"] if probe.returncode == 0 else []


# -- can it run here? --------------------------------------------------------------------------------

_probe_result: str | None = None
_probe_lock = threading.Lock()


def namespaces_problem() -> str | None:
    """Why sandboxes cannot run here (``None`` when they can): checked once per process."""
    global _probe_result
    with _probe_lock:
        if _probe_result is None:
            outcome: list[str] = []
            # Its own thread and event loop: the caller may be inside a running loop.
            thread = threading.Thread(target=lambda: outcome.append(asyncio.run(_probe()) or ""))
            thread.start()
            thread.join()
            _probe_result = outcome[0] if outcome else "the namespace check did not finish"
        return _probe_result or None


async def _probe() -> str | None:
    tools = _tools()
    if isinstance(tools, str):
        return tools
    folder = Path(tempfile.mkdtemp(prefix="pai-e2b-probe-"))
    machine: Machine | None = None
    try:
        root = folder / "root"
        root.mkdir()
        prepare_root(root)
        write_support(folder / "support")
        machine = Machine(root, folder / "support", network=False)
        done = await machine.spawn(
            USERS["user"], ["/bin/sh", "-c", "id -u"], {"PATH": PATH}, "/", stdin=False
        )
        output, errors = await asyncio.wait_for(done.proc.communicate(), 30)
        done.close()
        if done.proc.returncode != 0 or output.strip() != b"1000":
            raise MachineError(errors.decode(errors="replace").strip() or "no reason given")
    except (MachineError, OSError, TimeoutError) as error:
        return (
            "this host does not let an unprivileged process create and enter user, mount and "
            f"PID namespaces (`unshare --user --map-root-user --mount --pid --net`, then "
            f"`nsenter`): {error}"
        )
    finally:
        if machine is not None:
            machine.kill()
            await _wait_gone(machine)
        remove_tree(folder)
    return None


async def _wait_gone(machine: Machine) -> None:
    for _ in range(500):
        if not machine.running():
            return
        await asyncio.sleep(0.01)
