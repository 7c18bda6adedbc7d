"""Attachments: the files binding. A file part of a user's message is checked (size, type,
name), kept in a :class:`FilesStore` (a folder on disk by default; the protocol is open for
S3-compatible stores), and staged into the thread's sandbox, so "analyse this CSV" works.

The model sees a note appended to the message naming each staged file's path in the sandbox;
the bytes themselves never enter the prompt.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
import unicodedata
import uuid
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import anyio

from pai.http._errors import HttpError
from pai.http._wire import Attachment

if TYPE_CHECKING:
    from pai.sandbox import SandboxService

DEFAULT_MEDIA_TYPES: tuple[str, ...] = (
    "text/*",
    "application/json",
    "application/pdf",
    "application/xml",
    "application/zip",
    "application/octet-stream",
    "image/png",
    "image/jpeg",
    "image/gif",
    "image/webp",
    "application/vnd.openxmlformats-officedocument.*",
)
"""The media types accepted by default (``*`` matches the rest of a type, as in ``text/*``)."""

_UNSAFE = re.compile(r"[\x00-\x1f\x7f/\\:*?\"<>|]+")


@dataclass(frozen=True, slots=True)
class StoredFile:
    """A stored attachment: ``id`` names it in its store; ``filename`` is the safe name it was
    kept (and staged) under; ``sha256`` is the digest of its bytes."""

    id: str
    filename: str
    media_type: str
    size: int
    sha256: str


class FilesStore(Protocol):
    """Where attachments are kept. Implementations check nothing the server has not checked
    already, but must keep each scope's files apart."""

    async def put(self, *, scope_key: str, thread_id: str, attachment: Attachment) -> StoredFile:
        """Keep ``attachment`` for the thread; the :class:`StoredFile` names it."""
        ...

    async def get(self, *, scope_key: str, thread_id: str, file_id: str) -> bytes:
        """The bytes of a stored file; :class:`FileNotFoundError` if the scope has no such file."""
        ...


Stager = Callable[[str, str, Sequence[tuple[StoredFile, bytes]]], Awaitable[Sequence[str]]]
"""``stage(scope_key, thread_id, files)`` puts the files where the agent can use them and returns
their paths there, in order (see :func:`sandbox_stager`)."""


@dataclass(frozen=True, slots=True)
class Attachments:
    """The files binding of :func:`~pai.http.create_asgi_app`: where attachments are kept, how
    they reach the agent, and what is accepted.

    ``max_bytes`` bounds one file, ``max_files`` the files of one message; ``media_types`` lists
    the accepted types (``text/*`` matches every text type). A file over a limit is refused with
    413, a type not listed with 415, before anything is stored.

    Example::

        sandboxes = create_sandbox_service(provider=provider)
        app = create_asgi_app(
            pai_app,
            authenticate=...,
            attachments=Attachments(
                store=FolderFilesStore("/var/lib/myapp/uploads"),
                stage=sandbox_stager(sandboxes),
            ),
        )
    """

    store: FilesStore
    stage: Stager | None = None
    max_bytes: int = 10 * 1024 * 1024
    max_files: int = 10
    media_types: Collection[str] = DEFAULT_MEDIA_TYPES

    def __post_init__(self) -> None:
        for name in ("max_bytes", "max_files"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"Attachments({name}=...) must be an int >= 1, got {value!r}")
        if isinstance(self.media_types, str):
            raise ValueError(
                f"Attachments(media_types=...) must be a collection of types, got the string "
                f"{self.media_types!r}; write ({self.media_types!r},)"
            )

    def check(self, files: Sequence[Attachment]) -> None:
        """Refuse the message's files if one is over a limit or of a type not accepted."""
        if len(files) > self.max_files:
            raise HttpError(
                413,
                "too_many_files",
                f"the message has {len(files)} files; at most {self.max_files} are accepted",
            )
        for index, file in enumerate(files):
            if len(file.data) > self.max_bytes:
                raise HttpError(
                    413,
                    "file_too_large",
                    f"file {index} ({safe_filename(file.filename)!r}) is {len(file.data):,} "
                    f"bytes; at most {self.max_bytes:,} are accepted",
                )
            if not media_type_accepted(file.media_type, self.media_types):
                raise HttpError(
                    415,
                    "unsupported_media_type",
                    f"file {index} ({safe_filename(file.filename)!r}) is of type "
                    f"{file.media_type[:100]!r}, which is not accepted; accepted: "
                    f"{', '.join(sorted(self.media_types))}",
                )

    async def receive(self, *, scope_key: str, thread_id: str, files: Sequence[Attachment]) -> str:
        """Check, store and stage the message's files; the note to append to its text (empty
        when there are none)."""
        if not files:
            return ""
        self.check(files)
        stored = [
            await self.store.put(scope_key=scope_key, thread_id=thread_id, attachment=file)
            for file in files
        ]
        if self.stage is None:
            return attachment_note(stored, None)
        paths = await self.stage(
            scope_key, thread_id, [(s, f.data) for s, f in zip(stored, files, strict=True)]
        )
        return attachment_note(stored, paths)


def media_type_accepted(media_type: str, accepted: Collection[str]) -> bool:
    """Whether ``media_type`` (parameters such as ``; charset=`` ignored) is in ``accepted``."""
    bare = media_type.split(";", 1)[0].strip().lower()
    if not re.fullmatch(r"[a-z0-9][a-z0-9!#$&^_.+-]*/[a-z0-9][a-z0-9!#$&^_.+-]*", bare):
        return False
    return any(fnmatch.fnmatchcase(bare, pattern.lower()) for pattern in accepted)


def safe_filename(name: str) -> str:
    """A name that is safe as one path segment anywhere: no folders, no control characters, no
    leading dots, at most 100 characters; ``"file"`` when nothing is left."""
    name = unicodedata.normalize("NFC", name).replace("\\", "/").rsplit("/", 1)[-1]
    name = _UNSAFE.sub("_", name).strip(" ._")
    if len(name) > 100:
        stem, dot, suffix = name.rpartition(".")
        name = (
            (stem[: 100 - len(suffix) - 1] + dot + suffix)
            if dot and len(suffix) < 16
            else name[:100]
        )
    return name or "file"


def attachment_note(stored: Sequence[StoredFile], paths: Sequence[str] | None) -> str:
    """The note appended to the user's message, one line per file."""
    lines = ["", "", "[Attached files:"]
    for index, file in enumerate(stored):
        where = f"{paths[index]} " if paths is not None else ""
        lines.append(f"- {where}({file.filename}, {file.media_type}, {file.size:,} bytes)")
    lines[-1] += "]"
    return "\n".join(lines)


class FolderFilesStore:
    """Attachments kept in a folder on disk: ``ROOT/<scope>/<thread>/<id>-<name>``, where scope
    and thread are digests (a scope key or thread id never becomes a path). Files are written
    whole (a temporary name, then renamed) with mode 0600."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self._root = Path(root)

    def _folder(self, scope_key: str, thread_id: str) -> Path:
        scope = hashlib.sha256(scope_key.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        thread = hashlib.sha256(thread_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        return self._root / scope / thread

    async def put(self, *, scope_key: str, thread_id: str, attachment: Attachment) -> StoredFile:
        file_id = uuid.uuid4().hex
        name = safe_filename(attachment.filename)
        stored = StoredFile(
            id=file_id,
            filename=name,
            media_type=attachment.media_type.split(";", 1)[0].strip().lower(),
            size=len(attachment.data),
            sha256=hashlib.sha256(attachment.data).hexdigest(),
        )
        folder = self._folder(scope_key, thread_id)
        target = folder / f"{file_id}-{name}"
        data = attachment.data

        def write() -> None:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            partial = folder / f".{file_id}.partial"
            descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                with os.fdopen(descriptor, "wb") as out:
                    out.write(data)
                os.replace(partial, target)
            except BaseException:
                partial.unlink(missing_ok=True)
                raise

        await anyio.to_thread.run_sync(write)
        return stored

    async def get(self, *, scope_key: str, thread_id: str, file_id: str) -> bytes:
        if not re.fullmatch(r"[0-9a-f]{32}", file_id):
            raise FileNotFoundError(file_id)
        folder = self._folder(scope_key, thread_id)

        def read() -> bytes:
            for entry in folder.glob(f"{file_id}-*"):
                return entry.read_bytes()
            raise FileNotFoundError(file_id)

        return await anyio.to_thread.run_sync(read)

    def __repr__(self) -> str:
        return f"FolderFilesStore({str(self._root)!r})"


def sandbox_stager(service: SandboxService, *, folder: str = "/workspace/uploads") -> Stager:
    """A :data:`Stager` that writes each file into the thread's sandbox under ``folder``: the
    sandbox the agent's operations in that thread get (``service`` is the one whose
    ``.binding`` the app registered). A name already there gets the file id's first characters
    added, so nothing is overwritten."""
    if not folder.startswith("/workspace/") or "/." in folder or folder.endswith("/"):
        raise ValueError(
            f"sandbox_stager(folder=...) must be a folder under /workspace, with no hidden parts "
            f"and no trailing slash, e.g. '/workspace/uploads'; got {folder!r}"
        )

    async def stage(
        scope_key: str, thread_id: str, files: Sequence[tuple[StoredFile, bytes]]
    ) -> Sequence[str]:
        sandbox = service.acquire(scope_key=scope_key, thread_id=thread_id)
        paths: list[str] = []
        writes: dict[str, bytes] = {}
        for stored, data in files:
            path = f"{folder}/{stored.filename}"
            if path in writes or await sandbox.exists(path):
                stem, dot, suffix = stored.filename.rpartition(".")
                tag = stored.id[:8]
                path = f"{folder}/{stem}-{tag}{dot}{suffix}" if dot else f"{path}-{tag}"
            writes[path] = data
            paths.append(path)
        await sandbox.write_files(writes)
        return paths

    return stage


__all__ = [
    "DEFAULT_MEDIA_TYPES",
    "Attachments",
    "FilesStore",
    "FolderFilesStore",
    "Stager",
    "StoredFile",
    "attachment_note",
    "safe_filename",
    "sandbox_stager",
]
