"""Agent Skills for PAI agents.

Folders of ``SKILL.md`` (the Agent Skills format) become a typed Python module with
``pai generate skills``; :func:`define_skills` turns its entries into a catalog for the agent's
instructions and the skill tool that serves them, copying sandbox skills into the agent's sandbox
when they are loaded.

Example::

    from pai.skills import define_skills
    from myapp.skills_generated import skills as generated

    skills = define_skills(skills=generated)
    agent = define_agent(
        name="clerk", model=model, instructions=skills.instructions, tools={**skills.tools}
    )

Importing the package is cheap: each name's module (and YAML, for the generator) is imported
when the name is first used.
"""

from typing import TYPE_CHECKING

from pai.core.ext import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from pai.skills._define import DEFAULT_SANDBOX_DIR as DEFAULT_SANDBOX_DIR
    from pai.skills._define import TOOL_ID as TOOL_ID
    from pai.skills._define import AvailableFn as AvailableFn
    from pai.skills._define import HasRuntimeContext as HasRuntimeContext
    from pai.skills._define import SandboxFn as SandboxFn
    from pai.skills._define import SandboxInput as SandboxInput
    from pai.skills._define import SkillAvailableInput as SkillAvailableInput
    from pai.skills._define import Skills as Skills
    from pai.skills._define import define_skills as define_skills
    from pai.skills._entry import MARKER as MARKER
    from pai.skills._entry import BinaryData as BinaryData
    from pai.skills._entry import FileData as FileData
    from pai.skills._entry import SkillEntry as SkillEntry
    from pai.skills._entry import SkillFile as SkillFile
    from pai.skills._entry import TextData as TextData
    from pai.skills._errors import DuplicateSkillError as DuplicateSkillError
    from pai.skills._errors import SkillCopyError as SkillCopyError
    from pai.skills._errors import SkillDefinitionError as SkillDefinitionError
    from pai.skills._errors import SkillProblem as SkillProblem
    from pai.skills._errors import SkillSourceError as SkillSourceError
    from pai.skills._generate import GeneratedModule as GeneratedModule
    from pai.skills._generate import generate_module as generate_module
    from pai.skills._output import SkillToolInput as SkillToolInput
    from pai.skills._output import SkillToolNotFound as SkillToolNotFound
    from pai.skills._output import SkillToolOk as SkillToolOk
    from pai.skills._output import SkillToolOutput as SkillToolOutput
    from pai.skills._output import SkillToolUnavailable as SkillToolUnavailable

_SOURCES: dict[str, str] = {
    "DEFAULT_SANDBOX_DIR": "pai.skills._define",
    "TOOL_ID": "pai.skills._define",
    "AvailableFn": "pai.skills._define",
    "HasRuntimeContext": "pai.skills._define",
    "SandboxFn": "pai.skills._define",
    "SandboxInput": "pai.skills._define",
    "SkillAvailableInput": "pai.skills._define",
    "Skills": "pai.skills._define",
    "define_skills": "pai.skills._define",
    "MARKER": "pai.skills._entry",
    "BinaryData": "pai.skills._entry",
    "FileData": "pai.skills._entry",
    "SkillEntry": "pai.skills._entry",
    "SkillFile": "pai.skills._entry",
    "TextData": "pai.skills._entry",
    "DuplicateSkillError": "pai.skills._errors",
    "SkillCopyError": "pai.skills._errors",
    "SkillDefinitionError": "pai.skills._errors",
    "SkillProblem": "pai.skills._errors",
    "SkillSourceError": "pai.skills._errors",
    "GeneratedModule": "pai.skills._generate",
    "generate_module": "pai.skills._generate",
    "SkillToolInput": "pai.skills._output",
    "SkillToolNotFound": "pai.skills._output",
    "SkillToolOk": "pai.skills._output",
    "SkillToolOutput": "pai.skills._output",
    "SkillToolUnavailable": "pai.skills._output",
}
"""Where each public name is defined: imported from there on first use."""

__all__ = [
    "DEFAULT_SANDBOX_DIR",
    "MARKER",
    "TOOL_ID",
    "AvailableFn",
    "BinaryData",
    "DuplicateSkillError",
    "FileData",
    "GeneratedModule",
    "HasRuntimeContext",
    "SandboxFn",
    "SandboxInput",
    "SkillAvailableInput",
    "SkillCopyError",
    "SkillDefinitionError",
    "SkillEntry",
    "SkillFile",
    "SkillProblem",
    "SkillSourceError",
    "SkillToolInput",
    "SkillToolNotFound",
    "SkillToolOk",
    "SkillToolOutput",
    "SkillToolUnavailable",
    "Skills",
    "TextData",
    "define_skills",
    "generate_module",
]


if not TYPE_CHECKING:  # type checkers see the imports above, and no catch-all attribute
    __getattr__, __dir__ = _lazy_exports(__name__, _SOURCES)
