"""Paths as envd sees them, mapped onto a sandbox folder without ever leaving it."""

from __future__ import annotations

import os
import posixpath
import stat
from pathlib import Path

from pai.sandbox_e2b.testing._machine import User


class PathError(Exception):
    """A path envd refuses to expand; the message is envd's."""


class LinkLoopError(Exception):
    """Too many symbolic links (or a loop) on the way; the message names the path."""


def go_clean(path: str) -> str:
    """``path`` as Go's ``filepath.Clean`` makes it (``//`` at the start collapses too)."""
    cleaned = posixpath.normpath(path) if path else "."
    if cleaned.startswith("//"):
        cleaned = "/" + cleaned.lstrip("/")
    return cleaned


def go_base(path: str) -> str:
    """Go's ``filepath.Base``: the last element, trailing slashes ignored (``/`` for ``/``)."""
    if not path:
        return "."
    stripped = path.rstrip("/")
    if not stripped:
        return "/"
    return stripped.rsplit("/", 1)[-1]


def expand_and_resolve(path: str, user: User) -> str:
    """The path envd works on for ``path`` as ``user`` (envd's ``ExpandAndResolve``): ``~``
    is the user's home, a relative path is taken from it and cleaned, and an absolute path is
    used exactly as given. Raises :class:`PathError` with envd's message for ``~name``."""
    if path.startswith("~"):
        if len(path) > 1 and path[1] not in "/\\":
            raise PathError(
                f"failed to expand path '{path}' for user '{user.name}': "
                "cannot expand user-specific home dir"
            )
        path = go_clean(user.home + "/" + path[1:])
    if path.startswith("/"):
        return path
    return go_clean(user.home + "/" + path)


def resolve_in_root(root: Path, path: str, *, follow_last: bool = True) -> tuple[Path, str]:
    """The host path of the absolute sandbox ``path`` under ``root``, and its sandbox
    spelling, following symbolic links as the sandbox sees them (an absolute target is inside
    the sandbox, ``..`` stops at its root; the last element only when ``follow_last``). Never
    leaves ``root``. Raises :class:`LinkLoopError` past 40 links."""
    pending = [part for part in path.split("/") if part not in ("", ".")]
    done: list[str] = []
    hops = 0
    while pending:
        part = pending.pop(0)
        if part == "..":
            if done:
                done.pop()
            continue
        candidate = root.joinpath(*done, part)
        if (pending or follow_last) and candidate.is_symlink():
            hops += 1
            if hops > 40:
                raise LinkLoopError(f"too many levels of symbolic links: {path}")
            target = os.readlink(str(candidate))
            if target.startswith("/"):
                done = []
            pending = [p for p in target.split("/") if p not in ("", ".")] + pending
            continue
        done.append(part)
    return root.joinpath(*done), "/" + "/".join(done)


def eval_symlinks(root: Path, path: str) -> str | None:
    """Go's ``filepath.EvalSymlinks`` inside the sandbox: the fully resolved, clean path, or
    ``None`` when it does not exist (a dangling link, a missing element)."""
    try:
        host, shown = resolve_in_root(root, path)
    except LinkLoopError:
        return None
    if not os.path.lexists(host):
        return None
    return shown


def opened_inside(root: Path, descriptor: int) -> bool:
    """Whether the open file ``descriptor`` lies under ``root`` (as the kernel sees it now)."""
    try:
        opened = os.readlink(f"/proc/self/fd/{descriptor}")
    except OSError:
        return False
    top = os.path.realpath(root)
    return opened == top or opened.startswith(top.rstrip("/") + "/")


def go_mode_string(mode: int) -> str:
    """``mode`` written as Go's ``FileMode.String`` writes it (``drwxr-xr-x``, ``Lrwxrwxrwx``,
    ``dtrwxrwxrwx``, ``Dcrw-rw-rw-``), as envd's ``permissions`` field carries it."""
    kind = stat.S_IFMT(mode)
    flags = (
        ("d", kind == stat.S_IFDIR),
        ("L", kind == stat.S_IFLNK),
        ("D", kind in (stat.S_IFBLK, stat.S_IFCHR)),
        ("p", kind == stat.S_IFIFO),
        ("S", kind == stat.S_IFSOCK),
        ("u", bool(mode & stat.S_ISUID)),
        ("g", bool(mode & stat.S_ISGID)),
        ("c", kind == stat.S_IFCHR),
        ("t", bool(mode & stat.S_ISVTX)),
    )
    letters = "".join(letter for letter, present in flags if present) or "-"
    permissions = "".join(
        char if mode & (1 << (8 - index)) else "-" for index, char in enumerate("rwxrwxrwx")
    )
    return letters + permissions
