"""Sandbox paths: normalization for file operations and the rules for seed files."""

from __future__ import annotations

import posixpath
from collections.abc import Iterable

from pai.sandbox._errors import SandboxPathError, SeedPathError
from pai.sandbox._types import SeedFile

WORKSPACE = "/workspace"
"""The working directory of every sandbox, and the root of seed files."""

RESERVED = "/workspace/.pai"
"""Reserved for PAI's own bookkeeping; seed files may not go here."""


def resolve_path(path: str, *, base: str = WORKSPACE) -> str:
    """An absolute, normalized sandbox path; relative paths are taken from ``base``.

    Example::

        >>> resolve_path("src/../README.md")
        '/workspace/README.md'
    """
    if not isinstance(path, str) or not path:  # pyright: ignore[reportUnnecessaryIsInstance]
        raise SandboxPathError(f"a sandbox path must be a non-empty string, got {path!r}")
    if "\x00" in path:
        raise SandboxPathError(f"sandbox path {path!r} contains a NUL byte; remove it")
    joined = path if path.startswith("/") else posixpath.join(base, path)
    normalized = posixpath.normpath(joined)
    # normpath keeps a leading "//" (POSIX allows it to mean something else); we do not.
    return "/" + normalized.lstrip("/")


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder + "/")


def check_seed(files: Iterable[SeedFile]) -> tuple[SeedFile, ...]:
    """Validate seed files before any I/O; the paths come back normalized.

    Every path must be absolute, inside ``/workspace`` and outside ``/workspace/.pai``; a path may
    appear only once.
    """
    checked: list[SeedFile] = []
    seen: set[str] = set()
    for seed in files:
        if not isinstance(seed, SeedFile):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise SeedPathError(
                f"seed entries must be SeedFile(path, content), got {seed!r}; e.g. "
                "SeedFile('/workspace/README.md', '# hi')"
            )
        raw = seed.path
        if not isinstance(raw, str) or not raw or "\x00" in raw:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise SeedPathError(
                f"seed file path {raw!r} must be a non-empty string without NUL bytes, e.g. "
                "'/workspace/README.md'"
            )
        if not raw.startswith("/"):
            raise SeedPathError(
                f"seed file path {raw!r} is not absolute; write it as "
                f"{posixpath.join(WORKSPACE, raw)!r}"
            )
        if not isinstance(seed.content, bytes | str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise SeedPathError(
                f"seed file {raw!r} has content of type {type(seed.content).__name__}; "
                "give bytes or str"
            )
        path = resolve_path(raw)
        if path == WORKSPACE:
            raise SeedPathError(
                f"seed file path {raw!r} is the {WORKSPACE} folder itself; give a file path "
                f"inside it, e.g. {WORKSPACE + '/README.md'!r}"
            )
        if not _inside(path, WORKSPACE):
            raise SeedPathError(
                f"seed file path {raw!r} is outside {WORKSPACE}; seed files must go inside it"
            )
        if _inside(path, RESERVED):
            raise SeedPathError(
                f"seed file path {raw!r} is inside {RESERVED}, which PAI reserves; choose "
                "another folder under /workspace"
            )
        if path in seen:
            raise SeedPathError(f"seed file path {path!r} appears twice; keep one")
        seen.add(path)
        checked.append(SeedFile(path, seed.content, seed.executable))
    return tuple(checked)
