"""Errors of pai-skills, under pai-core's ``PaiError``.

    PaiError
    ├── UserError
    │   ├── DefinitionError
    │   │   └── SkillDefinitionError       (ValueError: define_skills() given something it cannot use)
    │   │       └── DuplicateSkillError          (two entries share one name)
    │   └── SkillSourceError               (ValueError: skill folders fail validation; .problems)
    └── SkillCopyError                     (RuntimeError: a symlink where a sandbox copy writes)

Every message says what was wrong, with the offending value, and what to do.
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from pai.core import DefinitionError, PaiError, UserError


class SkillCopyError(PaiError, RuntimeError):
    """A sandbox skill cannot be copied into the sandbox as it stands (a symlink where the
    skill's files go); the message names the path and how to clear it. The skill tool call
    fails with it, so the model reads it."""


class SkillDefinitionError(DefinitionError):
    """``define_skills()`` was given an option or an entry it cannot use."""


class DuplicateSkillError(SkillDefinitionError):
    """Two skill entries share one name (when merging generated modules, rename one folder)."""


def shown_path(path: str) -> str:
    """``path`` as one printable line: bytes that are not UTF-8 as ``\\xff``, control and
    bidirectional formatting characters as ``\\n`` or ``\\u202e``."""
    decoded = os.fsencode(path).decode("utf-8", "backslashreplace")
    return "".join(
        char.encode("unicode_escape").decode("ascii")
        if unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp")
        else char
        for char in decoded
    )


@dataclass(frozen=True, slots=True)
class SkillProblem:
    """One problem found in a skills folder: the file, the line (1-based, when there is one).

    ``file`` is the path as the file system gives it (a name that is not UTF-8 holds lone
    surrogates, as :func:`os.fsdecode` makes them); ``str()`` shows it printably.
    """

    file: str
    line: int | None
    message: str

    def __str__(self) -> str:
        file = shown_path(self.file)
        where = file if self.line is None else f"{file}:{self.line}"
        return f"{where}: {self.message}"


class SkillSourceError(UserError, ValueError):
    """A skills folder failed validation; ``problems`` lists every problem of every skill."""

    def __init__(self, problems: Sequence[SkillProblem]) -> None:
        self.problems: tuple[SkillProblem, ...] = tuple(problems)
        count = len(self.problems)
        lines = "\n".join(f"  {problem}" for problem in self.problems)
        super().__init__(
            f"{count} problem{'s' if count != 1 else ''} in the skills folder; fix "
            f"{'them' if count != 1 else 'it'} and run again (nothing was written):\n{lines}"
        )
