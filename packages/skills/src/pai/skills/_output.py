"""The skill tool's input, its outputs, and the text the model reads for each."""

from __future__ import annotations

import difflib
import posixpath
from html import escape
from typing import Annotated, ClassVar, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field

from pai.skills._entry import SKILL_FILE


class SkillToolInput(BaseModel):
    """What the model passes to the skill tool: a skill's name and, optionally, one of its files."""

    model_config: ClassVar[ConfigDict] = ConfigDict(extra="forbid")

    name: str = Field(description="The skill's name, as the catalog lists it.")
    path: str = Field(
        default=SKILL_FILE,
        description="A file of the skill; SKILL.md (the default) gives its instructions.",
    )


class _Output(BaseModel):
    """The base of the skill tool's outputs: frozen, no extra fields."""

    model_config: ClassVar[ConfigDict] = ConfigDict(frozen=True, extra="forbid")


class SkillToolOk(_Output):
    """A skill's instructions or one of its files.

    ``text`` is ``SKILL.md`` without its frontmatter (``files`` then lists the skill's other files)
    or the file's text; a binary file has ``binary=True`` and empty text. ``sandbox_path`` is the
    skill's folder in the sandbox when loading copied it there; ``environment_reset`` says the
    sandbox had been re-created (files written earlier are gone) and the skill was copied again.
    """

    status: Literal["ok"] = "ok"
    name: str
    path: str
    text: str
    files: tuple[str, ...] | None = None
    binary: Literal[True] | None = None
    sandbox_path: str | None = None
    environment_reset: Literal[True] | None = None


class SkillToolNotFound(_Output):
    """No offered skill of that name (``available``: the offered names), or no such file in the
    skill (``path`` set; ``available``: the skill's files)."""

    status: Literal["not_found"] = "not_found"
    name: str
    path: str | None = None
    available: tuple[str, ...]


class SkillToolUnavailable(_Output):
    """The skill needs a sandbox, and this request has none."""

    status: Literal["unavailable"] = "unavailable"
    name: str


SkillToolOutput: TypeAlias = Annotated[
    SkillToolOk | SkillToolNotFound | SkillToolUnavailable, Field(discriminator="status")
]
"""What the skill tool answers: ok, not_found or unavailable (``status`` tells them apart)."""


def _attribute(value: str) -> str:
    return escape(value, quote=True)


def _did_you_mean(wrong: str, choices: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(wrong, choices, n=1) or [
        choice for choice in choices if choice.lower() == wrong.lower()
    ]
    return f" Did you mean {close[0]!r}?" if close else ""


def _did_you_mean_path(wrong: str, files: tuple[str, ...]) -> str:
    # The tool matches paths exactly; suggest what a normalized path names, else a close one.
    normalized = posixpath.normpath(wrong).lstrip("/") if wrong else wrong
    if normalized in files:
        return f" Did you mean {normalized!r}?"
    return _did_you_mean(wrong, files)


def _names(values: tuple[str, ...]) -> str:
    return ", ".join(values) if values else "none"


def output_text(output: SkillToolOk | SkillToolNotFound | SkillToolUnavailable) -> str:
    """The text the model reads for one result (what the thread saves as the tool result)."""
    if isinstance(output, SkillToolNotFound):
        if output.path is None:
            return (
                f"No skill named {output.name!r} is available. Available skills: "
                f"{_names(output.available)}.{_did_you_mean(output.name, output.available)}"
            )
        return (
            f"The skill {output.name!r} has no file {output.path!r}. Its files: "
            f"{_names(output.available)}.{_did_you_mean_path(output.path, output.available)}"
        )
    if isinstance(output, SkillToolUnavailable):
        return (
            f"The skill {output.name!r} needs a sandbox, and this conversation has none, so it "
            "cannot be used here."
        )
    notes: list[str] = []
    if output.environment_reset:
        notes.append(
            "The sandbox was re-created: files written there earlier are gone. This skill's "
            "files were copied into it again."
        )
    if output.sandbox_path is not None:
        notes.append(
            f"This skill's folder in the sandbox is {output.sandbox_path} (run its scripts from "
            "there)."
        )
    name = _attribute(output.name)
    if output.files is not None:
        parts = [f'<skill_content name="{name}">', output.text.rstrip("\n")]
        if output.files:
            parts.append("")
            parts.append(
                f"Files of this skill (read one with the skill tool, name {output.name!r} and "
                "its path):"
            )
            parts.extend(f"- {path}" for path in output.files)
        if notes:
            parts.append("")
            parts.extend(notes)
        parts.append("</skill_content>")
        return "\n".join(parts)
    path = _attribute(output.path)
    if output.binary:
        body = (
            "This is a binary file; use it from the sandbox, not as text. It is at "
            f"{output.sandbox_path}/{output.path} in the sandbox."
            if output.sandbox_path is not None
            # Only sandbox skills are copied: this file is in no sandbox the model can reach.
            else "This is a binary file, which cannot be shown as text."
        )
        parts = [f'<skill_file name="{name}" path="{path}" binary="true">', body]
    else:
        parts = [f'<skill_file name="{name}" path="{path}">', output.text.rstrip("\n")]
    if notes:
        parts.append("")
        parts.extend(notes)
    parts.append("</skill_file>")
    return "\n".join(parts)
