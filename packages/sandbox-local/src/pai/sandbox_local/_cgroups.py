"""One control group per local sandbox: the process and memory limits of all its processes.

A resource limit (``setrlimit``) counts one process's memory, and ``RLIMIT_NPROC`` counts the
processes of a host user, and none at all for the host's root, which the kernel exempts. Where
this process may make control groups (cgroup v2 delegated to it, or as root with cgroup v1's
``pids`` and ``memory`` hierarchies, as on many CI machines), every sandbox gets its own group
instead: ``pids.max`` bounds its processes together (a fork bomb stops there, and never reaches
the host or another sandbox) and ``memory.max`` (v1: ``memory.limit_in_bytes``) its memory.

:func:`place` finds what this machine allows, once; :class:`Group` makes, fills and removes one
sandbox's group. ``bwrap`` is put into the group before it runs (a shell writes its own process
id into ``cgroup.procs`` and then ``exec``s it), so no process of the sandbox ever runs outside.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True, slots=True)
class Place:
    """Where this process may make groups: ``parents`` by controller, and the cgroup version."""

    version: int
    parents: dict[str, Path]

    def describe(self) -> str:
        return f"cgroup v{self.version} ({', '.join(sorted(self.parents))})"


def _own_groups() -> dict[str, str]:
    """This process's group in each hierarchy, from ``/proc/self/cgroup`` (v2: key ``""``)."""
    groups: dict[str, str] = {}
    with contextlib.suppress(OSError), open("/proc/self/cgroup", encoding="utf-8") as file:
        for line in file:
            parts = line.rstrip("\n").split(":", 2)
            if len(parts) != 3:
                continue
            for controller in parts[1].split(","):
                groups[controller] = parts[2]
    return groups


def _writable(folder: Path) -> bool:
    return folder.is_dir() and os.access(folder, os.W_OK | os.X_OK)


@functools.cache
def place() -> Place | None:
    """Where sandboxes' groups can be made here, or ``None`` (resource limits only)."""
    groups = _own_groups()
    unified = ROOT / "cgroup.controllers"
    if unified.is_file():  # cgroup v2 mounted at /sys/fs/cgroup
        parent = ROOT / groups.get("", "/").lstrip("/")
        try:
            available = (parent / "cgroup.controllers").read_text().split()
        except OSError:
            return None
        if "pids" not in available or not _writable(parent):
            return None
        try:
            enabled = (parent / "cgroup.subtree_control").read_text().split()
            missing = [
                name for name in ("pids", "memory") if name in available and name not in enabled
            ]
            if missing:
                (parent / "cgroup.subtree_control").write_text(" ".join(f"+{m}" for m in missing))
        except OSError:  # a group holding processes cannot hand controllers down (v2's rule)
            return None
        return Place(2, {"pids": parent, "memory": parent})
    parents: dict[str, Path] = {}
    for controller in ("pids", "memory"):
        hierarchy = ROOT / controller
        if controller in groups and _writable(hierarchy):
            parent = hierarchy / groups[controller].lstrip("/")
            if _writable(parent):
                parents[controller] = parent
    if "pids" not in parents:
        return None
    return Place(1, parents)


class Group:
    """One sandbox's group (one folder per v1 hierarchy, or one v2 folder)."""

    def __init__(self, where: Place, name: str) -> None:
        self.where = where
        self.name = name
        self.folders = sorted({parent / name for parent in where.parents.values()})

    def make(self, *, processes: int | None, memory: int | None) -> None:
        """Make the group's folders and set its limits (an existing group is reused)."""
        for folder in self.folders:
            folder.mkdir(exist_ok=True)
        if self.where.version == 2:
            folder = self.folders[0]
            if processes is not None:
                (folder / "pids.max").write_text(str(processes))
            if memory is not None and (folder / "memory.max").exists():
                (folder / "memory.max").write_text(str(memory))
                with contextlib.suppress(OSError):
                    (folder / "memory.swap.max").write_text("0")
            return
        for controller, parent in self.where.parents.items():
            folder = parent / self.name
            if controller == "pids" and processes is not None:
                (folder / "pids.max").write_text(str(processes))
            elif controller == "memory" and memory is not None:
                (folder / "memory.limit_in_bytes").write_text(str(memory))

    @property
    def procs_files(self) -> list[str]:
        """The ``cgroup.procs`` files a process writes its id into to join the group."""
        return [str(folder / "cgroup.procs") for folder in self.folders]

    def pids(self) -> list[int]:
        found: set[int] = set()
        for folder in self.folders:
            with contextlib.suppress(OSError):
                found.update(int(line) for line in (folder / "cgroup.procs").read_text().split())
        return sorted(found)

    def kill(self) -> None:
        """Kill every process in the group, until none is left (bounded: a second or two)."""
        kill_file = self.folders[0] / "cgroup.kill"
        if self.where.version == 2 and kill_file.exists():
            with contextlib.suppress(OSError):
                kill_file.write_text("1")
        for _ in range(200):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.005)

    def remove(self) -> None:
        """Kill what is left and remove the group's folders."""
        self.kill()
        for folder in self.folders:
            for _ in range(100):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:  # the last processes are still exiting
                    time.sleep(0.01)


JOIN = 'IFS=:; for f in $PAI_CGROUP_PROCS; do echo $$ > "$f" || exit 125; done; exec "$@"'
"""A shell script that puts itself into the group (the ``cgroup.procs`` files named by
``PAI_CGROUP_PROCS``, colon-separated) and then becomes the command in its arguments."""


__all__ = ["JOIN", "Group", "Place", "place"]
