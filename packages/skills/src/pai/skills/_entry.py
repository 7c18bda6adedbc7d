"""Skill entries: what ``pai generate skills`` writes and ``define_skills()`` takes."""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeAlias, TypedDict

from typing_extensions import TypeVar

NameT = TypeVar("NameT", bound=str, default=str, covariant=True)
"""The type of a skill's name: a generated module's ``SkillName`` ``Literal``, or ``str``."""

NAME_PATTERN = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
"""A skill name: lowercase letters and digits in groups joined by single hyphens."""

MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_COMPATIBILITY = 500

SKILL_FILE = "SKILL.md"
"""The file holding a skill's frontmatter and instructions."""

MARKER = ".pai-skill"
"""The file recording which version of a skill a sandbox folder holds."""

SCRIPTS = "scripts/"


class TextData(TypedDict):
    """A text file's content: ``{"type": "text", "text": ...}``."""

    type: Literal["text"]
    text: str


class BinaryData(TypedDict):
    """A binary file's content, base64-encoded: ``{"type": "data", "data": ...}``."""

    type: Literal["data"]
    data: str


FileData: TypeAlias = TextData | BinaryData
"""A skill file's content: text, or base64 data for a binary file."""


class SkillFile(TypedDict):
    """One of a skill's files other than ``SKILL.md``: its path in the skill folder and content.

    Example::

        {"path": "references/forms.md", "data": {"type": "text", "text": "# Forms\\n"}}
    """

    path: str
    data: FileData


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class SkillEntry(Generic[NameT]):
    """One skill, as a generated module lists it.

    ``name`` equals the skill's folder name; ``description`` is the frontmatter description with
    whitespace collapsed (the skill's catalog line); ``body`` is ``SKILL.md`` without its
    frontmatter; ``files`` are the skill's other files, sorted by path; ``requires_sandbox`` is
    true when the frontmatter says ``pai-requires: sandbox`` under ``metadata``. ``license``,
    ``compatibility``, ``metadata`` and ``allowed_tools`` carry the optional frontmatter fields.

    Example::

        SkillEntry(
            name="release-notes",
            description="Write release notes from a list of merged changes.",
            body="# Release notes\\n\\nGroup the changes by area...\\n",
        )
    """

    name: NameT
    description: str
    body: str
    files: tuple[SkillFile, ...] = ()
    requires_sandbox: bool = False
    license: str | None = None
    compatibility: str | None = None
    metadata: Mapping[str, str] = field(default_factory=dict[str, str])
    allowed_tools: tuple[str, ...] = ()


def file_bytes(file: SkillFile) -> bytes:
    """The bytes of a skill file as it is written into a sandbox."""
    data = file["data"]
    if data["type"] == "text":
        return data["text"].encode()
    return base64.b64decode(data["data"])


def is_binary(file: SkillFile) -> bool:
    return file["data"]["type"] == "data"


def copies_files(entry: SkillEntry[str]) -> bool:
    """Whether loading ``entry`` copies its folder into the sandbox: a sandbox skill with a
    ``scripts/`` folder or a binary file."""
    return entry.requires_sandbox and any(
        file["path"].startswith(SCRIPTS) or is_binary(file) for file in entry.files
    )


def skill_version(entry: SkillEntry[str]) -> str:
    """A content hash of the files a sandbox copy holds (paths, modes and bytes)."""
    digest = hashlib.sha256()
    digest.update(entry.name.encode())
    for file in sorted(entry.files, key=lambda f: f["path"]):
        content = file_bytes(file)
        executable = b"x" if file["path"].startswith(SCRIPTS) else b"-"
        digest.update(b"\0%s\0%s\0%d\0" % (file["path"].encode(), executable, len(content)))
        digest.update(content)
    return digest.hexdigest()
