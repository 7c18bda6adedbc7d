"""``define_skills()``: the catalog for an agent's instructions and the skill tool that serves it."""

from __future__ import annotations

import inspect
import posixpath
import types
import typing
import weakref
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeAlias, cast, overload

import anyio
import typing_extensions
from typing_extensions import TypeVar

if TYPE_CHECKING:
    # PEP 747: what a type checker accepts as a type (``Plan | None``, ``dict[str, Any]``, a
    # TypedDict). Only for checkers, so any typing_extensions works at run time.
    from typing_extensions import TypeForm

from pai.core import Tool, ToolContext, ToolEnabledInput, ToolEntry, define_tool
from pai.sandbox import Sandbox, SeedFile
from pai.sandbox import sandbox as sandbox_token
from pai.sandbox.provider import FileWrite
from pai.skills._copy import CopyPlan, ensure_copy, is_relative_path, marker_bytes
from pai.skills._entry import (
    MARKER,
    NAME_PATTERN,
    SCRIPTS,
    SKILL_FILE,
    NameT,
    SkillEntry,
    SkillFile,
    copies_files,
    file_bytes,
    is_binary,
    skill_version,
)
from pai.skills._errors import DuplicateSkillError, SkillDefinitionError
from pai.skills._output import (
    SkillToolInput,
    SkillToolNotFound,
    SkillToolOk,
    SkillToolUnavailable,
    output_text,
)

ContextT = TypeVar("ContextT", default=Any)
"""The type of the agent's runtime context as ``define_skills`` sees it (``context_schema``)."""

ContextT_co = TypeVar("ContextT_co", covariant=True, default=Any)

DEFAULT_SANDBOX_DIR = "/workspace/.skills"
"""Where sandbox skills are copied by default: ``<sandbox_dir>/<name>/``."""

TOOL_ID = "pai.skills.skill"
"""The skill tool's id."""

TOOL_NAME = "skill"
"""The skill tool's name as the model sees it (its key in ``tools``)."""

TOOL_DESCRIPTION = (
    "Load a skill by name: its instructions (path SKILL.md, the default) or one of its files "
    "(path as the instructions list it). The skills you can load are listed under 'Skills' in "
    "your instructions."
)

GUIDANCE = (
    "Skills hold instructions for specific tasks. When a task matches a skill's description, "
    f"load the skill with the {TOOL_NAME} tool before you start, and follow it."
)


# Not frozen: one is made per skill per request, and a frozen dataclass costs ten times as much to
# build. Treat them as values.
@dataclass(slots=True)
class SkillAvailableInput(Generic[ContextT, NameT]):
    """What ``available`` receives: this request's runtime context and one skill."""

    runtime_context: ContextT
    skill: SkillEntry[NameT]


@dataclass(slots=True)
class SandboxInput(Generic[ContextT]):
    """What a ``sandbox`` function receives: this request's runtime context."""

    runtime_context: ContextT


class HasRuntimeContext(Protocol[ContextT_co]):
    """Anything carrying a request's runtime context: the agent's ``InstructionsInput``, a
    ``ToolEnabledInput``, or your own value."""

    @property
    def runtime_context(self) -> ContextT_co: ...


AvailableFn: TypeAlias = Callable[[SkillAvailableInput[ContextT, NameT]], "bool | Awaitable[bool]"]
"""``available=``: whether a skill is offered for this request (sync or async)."""

SandboxFn: TypeAlias = Callable[[SandboxInput[ContextT]], "bool | Awaitable[bool]"]
"""``sandbox=`` as a function: whether this request has a sandbox (sync or async)."""


async def _settle(value: object, what: str) -> bool:
    """The bool a predicate returned, awaited if it returned an awaitable."""
    if inspect.isawaitable(value):
        value = await value
    if not isinstance(value, bool):
        raise SkillDefinitionError(
            f"{what} must return a bool, got {value!r}; return True or False"
        )
    return value


def _is_type_form(value: object) -> bool:
    """Whether ``value`` is a type as annotations write it: a class (TypedDicts included),
    ``X | None``, ``Optional[X]``, ``Union[...]``, ``dict[str, Any]``, ``Literal[...]``,
    ``Annotated[...]``, ``Any``, a ``NewType``, a type alias or a forward reference (a string).
    ``context_schema`` only types the context, so anything a type checker takes is accepted."""
    if value is None or value is Any or isinstance(value, type | str):
        return True
    if isinstance(value, types.UnionType | types.GenericAlias | typing.TypeVar | typing.NewType):
        return True
    if typing.get_origin(value) is not None:  # typing's Union, Optional, List[int], Literal, ...
        return True
    alias_type = getattr(typing, "TypeAliasType", None)  # `type X = ...`, Python 3.12+
    if alias_type is not None and isinstance(value, alias_type):
        return True
    return isinstance(value, typing_extensions.TypeAliasType)


def _check_sandbox_dir(sandbox_dir: object) -> str:
    if not isinstance(sandbox_dir, str) or not sandbox_dir or "\x00" in sandbox_dir:
        raise SkillDefinitionError(
            f"sandbox_dir must be an absolute folder path, got {sandbox_dir!r}; e.g. "
            f"sandbox_dir={DEFAULT_SANDBOX_DIR!r}"
        )
    if not sandbox_dir.startswith("/"):
        raise SkillDefinitionError(
            f"sandbox_dir {sandbox_dir!r} is not absolute; write it as "
            f"{posixpath.join('/workspace', sandbox_dir)!r}"
        )
    normalized = "/" + posixpath.normpath(sandbox_dir).lstrip("/")
    if normalized == "/":
        raise SkillDefinitionError(
            f"sandbox_dir {sandbox_dir!r} is the root folder; give a folder for the skills, "
            f"e.g. {DEFAULT_SANDBOX_DIR!r}"
        )
    return normalized


def _check_files(name: str, entry: SkillEntry[Any]) -> None:
    seen: set[str] = set()
    for file in entry.files:
        path = cast(object, file.get("path"))  # hand-written entries are not checked statically
        if not is_relative_path(path):
            raise SkillDefinitionError(
                f"skill {name!r} has a file path {path!r}; file paths are relative to the skill "
                "folder, normalized, without '..' (regenerate with `pai generate skills`)"
            )
        if path in (SKILL_FILE, MARKER):
            raise SkillDefinitionError(
                f"skill {name!r} lists a file {path!r} among its files; {SKILL_FILE} is the "
                f"body and {MARKER} the sandbox marker, so neither can be a file of the skill"
            )
        if path in seen:
            raise SkillDefinitionError(f"skill {name!r} lists the file {path!r} twice")
        seen.add(path)


def _check_entries(skills: object) -> list[SkillEntry[Any]]:
    if isinstance(skills, str | bytes) or not isinstance(skills, Iterable):
        raise SkillDefinitionError(
            f"skills must be the skills of a generated module (a tuple of SkillEntry), got "
            f"{skills!r}; e.g. define_skills(skills=generated.skills)"
        )
    entries: list[SkillEntry[Any]] = []
    for item in cast("Iterable[object]", skills):
        if not isinstance(item, SkillEntry):
            raise SkillDefinitionError(
                f"skills must hold SkillEntry values (from `pai generate skills`), got {item!r}"
            )
        entry = cast("SkillEntry[Any]", item)
        name: object = entry.name
        if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name) or len(name) > 64:
            raise SkillDefinitionError(
                f"skill name {name!r} is not valid: use lowercase letters, digits and single "
                "hyphens, at most 64 characters (regenerate with `pai generate skills`)"
            )
        _check_files(name, entry)
        entries.append(entry)
    seen: dict[str, int] = {}
    for entry in entries:
        seen[entry.name] = seen.get(entry.name, 0) + 1
    duplicated = sorted(name for name, count in seen.items() if count > 1)
    if duplicated:
        raise DuplicateSkillError(
            f"skill name(s) {duplicated} appear more than once in skills; names must be unique "
            "across merged modules, so rename one skill folder and regenerate"
        )
    return entries


def _copy_plan(entry: SkillEntry[Any], sandbox_dir: str) -> CopyPlan:
    folder = f"{sandbox_dir}/{entry.name}"
    paths = tuple(file["path"] for file in entry.files)
    marker = marker_bytes(entry.name, skill_version(entry), sorted(paths))
    writes = [
        FileWrite(
            f"{folder}/{file['path']}",
            file_bytes(file),
            0o755 if file["path"].startswith(SCRIPTS) else 0o644,
        )
        for file in entry.files
    ]
    writes.append(FileWrite(f"{folder}/{MARKER}", marker))
    return CopyPlan(
        name=entry.name,
        sandbox_dir=sandbox_dir,
        folder=folder,
        marker_path=f"{folder}/{MARKER}",
        marker=marker,
        paths=paths,
        writes=tuple(writes),
    )


def _clean_path(path: str) -> str:
    while path.startswith("./"):
        path = path[2:]
    return path


class _Request(Generic[ContextT, NameT]):
    """One request's view of the skills: the ``sandbox`` function is asked at most once, and
    only when an available skill needs it (``available`` is asked each time a skill is
    checked)."""

    __slots__ = ("_has_sandbox", "_runtime_context", "_skills")

    def __init__(self, skills: Skills[NameT, ContextT], runtime_context: ContextT) -> None:
        self._skills = skills
        self._runtime_context = runtime_context
        self._has_sandbox: bool | None = None

    async def available(self, entry: SkillEntry[NameT]) -> bool:
        available = self._skills.available
        if available is None:
            return True
        value = available(SkillAvailableInput(self._runtime_context, entry))
        if value is True or value is False:
            return value
        return await _settle(value, f"available (for skill {entry.name!r})")

    async def has_sandbox(self) -> bool:
        if self._has_sandbox is None:
            option = self._skills.sandbox
            if option is None:
                self._has_sandbox = False
            elif option is True:
                self._has_sandbox = True
            else:
                value = option(SandboxInput(self._runtime_context))
                self._has_sandbox = (
                    value
                    if value is True or value is False
                    else await _settle(value, "the sandbox function")
                )
        return self._has_sandbox

    async def offers(self, entry: SkillEntry[NameT]) -> bool:
        if not await self.available(entry):
            return False
        return not entry.requires_sandbox or await self.has_sandbox()

    async def offered(self) -> list[SkillEntry[NameT]]:
        skills = self._skills
        if skills.available is None:
            # Nothing per skill to ask: the plain skills, and the sandbox ones if there is one.
            if not skills.needs_sandbox or not await self.has_sandbox():
                return list(skills.plain)
            return list(skills.skills)
        available = skills.available
        runtime_context = self._runtime_context
        offered: list[SkillEntry[NameT]] = []
        for entry in skills.skills:  # inlined: this loop runs on every step for every skill
            value = available(SkillAvailableInput(runtime_context, entry))
            if value is not True and (
                value is False or not await _settle(value, f"available (for skill {entry.name!r})")
            ):
                continue
            if entry.requires_sandbox and not await self.has_sandbox():
                continue
            offered.append(entry)
        return offered


def _catalog(lines: list[str]) -> str:
    if not lines:
        return ""
    return "\n".join(["## Skills", "", GUIDANCE, "", *lines])


class Skills(Generic[NameT, ContextT]):
    """Skills for one agent: the catalog (:meth:`instructions`), the skill tool (:attr:`tools`)
    and the files sandbox skills copy (:attr:`sandbox_files`). Make one with
    :func:`define_skills`."""

    skills: tuple[SkillEntry[NameT], ...]
    """Every entry, in the order given."""
    available: AvailableFn[ContextT, NameT] | None
    sandbox: Literal[True] | SandboxFn[ContextT] | None
    plain: tuple[SkillEntry[NameT], ...]
    """The entries that do not need a sandbox."""
    needs_sandbox: bool
    """Whether any entry needs a sandbox."""
    sandbox_dir: str
    """Where sandbox skills are copied: ``<sandbox_dir>/<name>/``."""
    tool: Tool[SkillToolInput, SkillToolOk | SkillToolNotFound | SkillToolUnavailable]
    """The skill tool (id ``pai.skills.skill``)."""
    tools: Mapping[str, ToolEntry[Any]]
    """``{"skill": ToolEntry(tool=..., enabled=...)}``: spread it into the agent's tools."""
    sandbox_files: tuple[SeedFile, ...]
    """Every file loading a sandbox skill copies, as seed files for the sandbox binding."""

    def __init__(
        self,
        *,
        skills: Iterable[SkillEntry[NameT]],
        available: AvailableFn[ContextT, NameT] | None,
        sandbox: Literal[True] | SandboxFn[ContextT] | None,
        sandbox_dir: str,
    ) -> None:
        self.skills = tuple(cast("list[SkillEntry[NameT]]", _check_entries(skills)))
        self.available = available
        self.sandbox = sandbox
        self.sandbox_dir = sandbox_dir
        self._by_name: dict[str, SkillEntry[NameT]] = {entry.name: entry for entry in self.skills}
        self._files: dict[str, dict[str, SkillFile]] = {
            entry.name: {file["path"]: file for file in entry.files} for entry in self.skills
        }
        self._copies: dict[str, CopyPlan] = (
            {
                entry.name: _copy_plan(entry, sandbox_dir)
                for entry in self.skills
                if copies_files(entry)
            }
            if sandbox is not None
            else {}
        )
        self.plain: tuple[SkillEntry[NameT], ...] = tuple(
            entry for entry in self.skills if not entry.requires_sandbox
        )
        self.needs_sandbox = len(self.plain) != len(self.skills)
        self._lines: dict[str, str] = {
            entry.name: f"- {entry.name}: {entry.description}" for entry in self.skills
        }
        self._catalogs: dict[bool, str] = {
            False: _catalog([self._lines[entry.name] for entry in self.plain]),
            True: _catalog(list(self._lines.values())),
        }
        self.sandbox_files = tuple(
            SeedFile(write.path, write.content, executable=write.mode == 0o755)
            for copy in self._copies.values()
            for write in copy.writes
        )
        self.tool = define_tool(
            id=TOOL_ID,
            description=TOOL_DESCRIPTION,
            input_schema=SkillToolInput,
            execute=self._execute,
            capabilities={"sandbox": sandbox_token} if sandbox is not None else None,
            to_model_text=output_text,
        )
        self.tools = {TOOL_NAME: ToolEntry(tool=self.tool, enabled=self._enabled)}
        # One lock per (sandbox, skill folder) while a load checks or writes the copy; an entry
        # lives only as long as some load holds or waits for its lock.
        self._copying: weakref.WeakValueDictionary[tuple[str, str], anyio.Lock] = (
            weakref.WeakValueDictionary()
        )

    # -- the catalog ----------------------------------------------------------------------------

    async def offered(self, runtime_context: ContextT) -> tuple[SkillEntry[NameT], ...]:
        """The skills offered for a request with this runtime context, in order."""
        return tuple(await _Request(self, runtime_context).offered())

    async def instructions(self, input: HasRuntimeContext[ContextT] | None = None) -> str:
        """The catalog for this request: a ``## Skills`` heading, one line of guidance and
        ``- name: description`` for each offered skill; ``""`` when none is offered.

        Takes the agent's ``InstructionsInput`` (or anything with a ``runtime_context``);
        without an argument, or with one that has no ``runtime_context``, the runtime context is
        ``None``.

        Example::

            agent = define_agent(
                name="clerk",
                runtime_context=plan_of,
                instructions=lambda input: skills.instructions(input),
                tools={**skills.tools},
            )
        """
        # An input without a runtime_context (the agent computes none) is a request without one.
        runtime_context = cast("ContextT", getattr(input, "runtime_context", None))
        request = _Request(self, runtime_context)
        if self.available is None:
            return self._catalogs[self.needs_sandbox and await request.has_sandbox()]
        lines = self._lines
        return _catalog([lines[entry.name] for entry in await request.offered()])

    async def _enabled(self, check: ToolEnabledInput[Any]) -> bool:
        request = _Request(self, cast("ContextT", check.runtime_context))
        for entry in self.skills:
            if await request.offers(entry):
                return True
        return False

    # -- the tool -------------------------------------------------------------------------------

    async def _execute(
        self, ctx: ToolContext[SkillToolInput, Any]
    ) -> SkillToolOk | SkillToolNotFound | SkillToolUnavailable:
        name = ctx.input.name
        request = _Request(self, cast("ContextT", ctx.runtime_context))
        entry = self._by_name.get(name)
        if entry is None or not await request.available(entry):
            offered = tuple(e.name for e in await request.offered())
            return SkillToolNotFound(name=name, available=offered)
        if entry.requires_sandbox and not await request.has_sandbox():
            return SkillToolUnavailable(name=name)
        path = _clean_path(ctx.input.path)
        files = self._files[name]
        file = files.get(path)
        if path != SKILL_FILE and file is None:
            return SkillToolNotFound(name=name, path=path, available=(SKILL_FILE, *files))
        sandbox_path: str | None = None
        reset = False
        copy = self._copies.get(name)
        if copy is not None:
            reset = await self._ensure_copy(ctx.capabilities[sandbox_token], copy)
            sandbox_path = copy.folder
        if file is None:
            return SkillToolOk(
                name=name,
                path=SKILL_FILE,
                text=entry.body,
                files=tuple(files),
                sandbox_path=sandbox_path,
                environment_reset=True if reset else None,
            )
        data = file["data"]
        return SkillToolOk(
            name=name,
            path=path,
            text=data["text"] if data["type"] == "text" else "",
            binary=True if is_binary(file) else None,
            sandbox_path=sandbox_path,
            environment_reset=True if reset else None,
        )

    async def _ensure_copy(self, sandbox: Sandbox, copy: CopyPlan) -> bool:
        """Check the skill's copy in the sandbox; copy it when missing or stale, removing what
        an earlier version wrote and this one no longer has (see ``_copy``).

        Loads of one skill into one sandbox take turns (the model may load a skill and its files
        in one step), so the first copies and the others find the marker current. Returns
        whether the sandbox was re-created meanwhile (its earlier files are gone).
        """
        key = (sandbox.key, copy.folder)
        lock = self._copying.get(key)
        if lock is None:
            lock = self._copying[key] = anyio.Lock()
        async with lock:
            resets = sandbox.environment_resets
            await ensure_copy(sandbox, copy)
            return sandbox.environment_resets != resets

    def __repr__(self) -> str:
        return f"Skills({[entry.name for entry in self.skills]}, sandbox_dir={self.sandbox_dir!r})"


# Two signatures, so that leaving context_schema out types the context from `available` (or as
# Any), while context_schema=None types it as None.
@overload
def define_skills(
    *,
    skills: Iterable[SkillEntry[NameT]],
    context_schema: TypeForm[ContextT],
    available: AvailableFn[ContextT, NameT] | None = None,
    sandbox: Literal[True] | SandboxFn[ContextT] | None = None,
    sandbox_dir: str = DEFAULT_SANDBOX_DIR,
) -> Skills[NameT, ContextT]: ...


@overload
def define_skills(
    *,
    skills: Iterable[SkillEntry[NameT]],
    available: AvailableFn[ContextT, NameT] | None = None,
    sandbox: Literal[True] | SandboxFn[ContextT] | None = None,
    sandbox_dir: str = DEFAULT_SANDBOX_DIR,
) -> Skills[NameT, ContextT]: ...


def define_skills(
    *,
    skills: Iterable[SkillEntry[NameT]],
    context_schema: object = None,
    available: AvailableFn[ContextT, NameT] | None = None,
    sandbox: Literal[True] | SandboxFn[ContextT] | None = None,
    sandbox_dir: str = DEFAULT_SANDBOX_DIR,
) -> Skills[NameT, ContextT]:
    """The catalog and the skill tool for the entries of generated modules.

    ``skills``: the ``skills`` of one or more generated modules (duplicate names raise).
    ``context_schema``: the type of the agent's runtime context as ``available``, ``sandbox``,
    :meth:`Skills.instructions` and the tool see it; it types the context, it does not parse it.
    Any type a checker takes: a class, a TypedDict, ``dict[str, Any]``, ``Plan | None``.
    ``available``: whether a skill is offered for a request (sync or async); applied to the
    catalog, to each model step and again inside the tool, so a skill that is not offered cannot
    be read by name. ``sandbox``: ``True`` when the agent always has a sandbox, or a function of
    the request; omitted (or ``False``), the tool is read-only and skills needing a sandbox are
    never offered. A ``bool`` variable is a type error: pass ``lambda _: flag``. Setting it makes
    the tool declare the sandbox capability and copy sandbox skills with ``scripts/`` or binary
    files to ``<sandbox_dir>/<name>/``.

    Example::

        from myapp.skills_generated import skills as generated

        skills = define_skills(
            skills=generated,
            context_schema=Plan,
            available=lambda input: input.skill.name != "matter-intake"
            or input.runtime_context.plan == "enterprise",
        )
        agent = define_agent(
            name="clerk",
            model=model,
            runtime_context=plan_of,
            instructions=skills.instructions,
            tools={**skills.tools},
        )
    """
    if available is not None and not callable(available):
        raise SkillDefinitionError(
            f"available must be a function of SkillAvailableInput returning a bool, got "
            f"{available!r}; e.g. available=lambda input: input.skill.name != 'beta'"
        )
    checked: Literal[True] | SandboxFn[ContextT] | None
    if sandbox is None or sandbox is False:
        checked = None
    elif sandbox is True or callable(sandbox):
        checked = sandbox
    else:
        raise SkillDefinitionError(
            f"sandbox must be True or a function of the request, got {sandbox!r}; pass a "
            "callable such as sandbox=lambda input: flag (or omit it for the read-only tool)"
        )
    if context_schema is not None and not _is_type_form(context_schema):
        raise SkillDefinitionError(
            f"context_schema must be a type, got {context_schema!r} (a "
            f"{type(context_schema).__name__} value); pass the type itself: a class (a pydantic "
            "model, a dataclass, a TypedDict), or a form such as Plan | None or dict[str, Any]"
        )
    return Skills(
        skills=skills,
        available=available,
        sandbox=checked,
        sandbox_dir=_check_sandbox_dir(sandbox_dir),
    )
