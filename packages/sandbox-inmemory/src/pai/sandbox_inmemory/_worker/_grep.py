"""``grep``, ``egrep`` and ``fgrep`` as GNU grep 3 behaves.

just-bash's grep printed one match per line for ``-o``, absolute paths for ``-r``, lost the
exit code 2 of a missing file and translated few POSIX constructs. This one: BRE/ERE/fixed and
Perl-style (Python's ``re``) patterns, ``-e``/``-f`` lists, ``-w``/``-x``/``-i``/``-v``,
``-o``/``-c``/``-l``/``-L``/``-q``/``-n``/``-b``/``-H``/``-h``/``-Z``/``-z``, context
(``-A``/``-B``/``-C``, ``--`` between groups), ``-m``, ``-r``/``-R`` with names as GNU prints
them (relative to the operand, none for ``grep -r x`` alone), ``--include``/``--exclude``/
``--exclude-dir``, binary files ("binary file matches"), and exit codes 0 (a line selected),
1 (none), 2 (an error, even when another file matched; ``-q`` with a match is 0). Directories
are listed in name order (GNU's order is the filesystem's).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal, cast

from just_bash.types import CommandContext, ExecResult, FsStat

from pai.sandbox_inmemory._worker._posix import (
    Matcher,
    RegexSyntaxError,
    UnsupportedHere,
    UsageError,
    build_matcher,
    exec_result,
    long_option,
    os_reason,
    read_text,
    unsupported,
)

__all__ = ["Grep"]


# -- grep -------------------------------------------------------------------------------------------------

_GREP_USAGE = (
    "Usage: grep [OPTION]... PATTERNS [FILE]...\nTry 'grep --help' for more information.\n"
)
_GREP_LONG: dict[str, bool | None] = {
    "extended-regexp": False,
    "fixed-strings": False,
    "basic-regexp": False,
    "perl-regexp": False,
    "regexp": True,
    "file": True,
    "ignore-case": False,
    "no-ignore-case": False,
    "word-regexp": False,
    "line-regexp": False,
    "null-data": False,
    "no-messages": False,
    "invert-match": False,
    "max-count": True,
    "byte-offset": False,
    "line-number": False,
    "no-line-number": False,
    "with-filename": False,
    "no-filename": False,
    "label": True,
    "only-matching": False,
    "quiet": False,
    "silent": False,
    "binary-files": True,
    "text": False,
    "directories": True,
    "devices": True,
    "recursive": False,
    "dereference-recursive": False,
    "include": True,
    "exclude": True,
    "exclude-dir": True,
    "files-without-match": False,
    "files-with-matches": False,
    "count": False,
    "null": False,
    "before-context": True,
    "after-context": True,
    "context": True,
    "group-separator": True,
    "no-group-separator": False,
    "color": None,
    "colour": None,
    "line-buffered": False,
    "binary": False,
    "initial-tab": False,
    "help": False,
    "version": False,
}
_GREP_SHORT_FLAGS = "EFGPiyvclLnhHoqsrRwxaIzZUbTV"
_GREP_SHORT_VALUES = "efmABCdD"
_GREP_LONG_TO_SHORT = {
    "extended-regexp": "E",
    "fixed-strings": "F",
    "basic-regexp": "G",
    "perl-regexp": "P",
    "regexp": "e",
    "file": "f",
    "ignore-case": "i",
    "word-regexp": "w",
    "line-regexp": "x",
    "null-data": "z",
    "no-messages": "s",
    "invert-match": "v",
    "max-count": "m",
    "byte-offset": "b",
    "line-number": "n",
    "with-filename": "H",
    "no-filename": "h",
    "only-matching": "o",
    "quiet": "q",
    "silent": "q",
    "text": "a",
    "directories": "d",
    "devices": "D",
    "recursive": "r",
    "dereference-recursive": "R",
    "files-without-match": "L",
    "files-with-matches": "l",
    "count": "c",
    "null": "Z",
    "before-context": "B",
    "after-context": "A",
    "context": "C",
    "binary": "U",
    "initial-tab": "T",
    "version": "V",
}


@dataclass
class _GrepOptions:
    mode: Literal["G", "E", "F", "P"] = "G"
    patterns: list[str] | None = None
    pattern_files: list[str] = field(default_factory=list[str])
    ignore_case: bool = False
    word: bool = False
    line: bool = False
    invert: bool = False
    count: bool = False
    list_matching: bool = False
    list_missing: bool = False
    number: bool = False
    byte_offset: bool = False
    with_filename: bool | None = None
    only: bool = False
    quiet: bool = False
    no_messages: bool = False
    recursive: bool = False
    dereference: bool = False
    text: bool = False
    skip_binary: bool = False
    null_data: bool = False
    null_names: bool = False
    max_count: int | None = None
    before: int = 0
    after: int = 0
    separator: str | None = "--"
    directories: str = "read"
    label: str = "(standard input)"
    includes: list[str] = field(default_factory=list[str])
    excludes: list[str] = field(default_factory=list[str])
    exclude_dirs: list[str] = field(default_factory=list[str])
    operands: list[str] = field(default_factory=list[str])


def _context_number(value: str) -> int:
    if not value.isdigit():
        raise UsageError(f"grep: {value}: invalid context length argument")
    return int(value)


def _grep_option(options: _GrepOptions, flag: str, value: str | None) -> None:
    if flag in "EFGP":
        options.mode = cast(Literal["G", "E", "F", "P"], flag)
    elif flag in "iy":
        options.ignore_case = True
    elif flag == "w":
        options.word = True
    elif flag == "x":
        options.line = True
    elif flag == "v":
        options.invert = True
    elif flag == "c":
        options.count = True
    elif flag == "l":
        options.list_matching, options.list_missing = True, False
    elif flag == "L":
        options.list_missing, options.list_matching = True, False
    elif flag == "n":
        options.number = True
    elif flag == "b":
        options.byte_offset = True
    elif flag == "H":
        options.with_filename = True
    elif flag == "h":
        options.with_filename = False
    elif flag == "o":
        options.only = True
    elif flag == "q":
        options.quiet = True
    elif flag == "s":
        options.no_messages = True
    elif flag == "r":
        options.recursive = True
    elif flag == "R":
        options.recursive = options.dereference = True
    elif flag == "a":
        options.text = True
    elif flag == "I":
        options.skip_binary = True
    elif flag == "z":
        options.null_data = True
    elif flag == "Z":
        options.null_names = True
    elif flag == "U":
        pass  # binary mode only matters on systems that translate line ends
    elif flag == "e":
        assert value is not None
        options.patterns = [*(options.patterns or []), *value.split("\n")]
    elif flag == "f":
        assert value is not None
        options.pattern_files.append(value)
    elif flag == "m":
        assert value is not None
        try:
            options.max_count = int(value)
        except ValueError:
            raise UsageError(f"grep: invalid max count '{value}'") from None
    elif flag in "ABC":
        assert value is not None
        number = _context_number(value)
        if flag in "AC":
            options.after = number
        if flag in "BC":
            options.before = number
    elif flag == "d":
        if value not in ("read", "skip", "recurse"):
            raise UsageError(f"grep: invalid argument '{value}' for '--directories'")
        options.directories = value
        if value == "recurse":
            options.recursive = True
    elif flag == "D":
        pass  # the sandbox has no devices
    elif flag == "T":
        raise UnsupportedHere("grep: -T (--initial-tab)")
    elif flag == "V":
        raise UnsupportedHere("grep: -V (--version)")


def _grep_options(args: list[str], fixed_mode: str | None) -> _GrepOptions:
    options = _GrepOptions()
    if fixed_mode is not None:
        options.mode = cast(Literal["G", "E", "F", "P"], fixed_mode)
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        if arg == "--":
            options.operands.extend(args[index:])
            break
        if arg.startswith("--"):
            name, value = long_option(arg, _GREP_LONG, "grep")
            if _GREP_LONG[name] and value is None:
                if index >= len(args):
                    raise UsageError(f"grep: option '--{name}' requires an argument")
                value = args[index]
                index += 1
            if name in _GREP_LONG_TO_SHORT:
                _grep_option(options, _GREP_LONG_TO_SHORT[name], value)
            elif name == "no-ignore-case":
                options.ignore_case = False
            elif name == "no-line-number":
                options.number = False
            elif name == "label":
                options.label = value or ""
            elif name == "binary-files":
                if value not in ("binary", "text", "without-match"):
                    raise UsageError(f"grep: invalid argument '{value}' for '--binary-files'")
                options.text, options.skip_binary = value == "text", value == "without-match"
            elif name == "include":
                options.includes.append(value or "")
            elif name == "exclude":
                options.excludes.append(value or "")
            elif name == "exclude-dir":
                options.exclude_dirs.append(value or "")
            elif name == "group-separator":
                options.separator = value
            elif name == "no-group-separator":
                options.separator = None
            elif name == "help":
                raise UnsupportedHere("grep: --help")
            continue  # --color, --line-buffered: nothing to do without a terminal
        if arg.startswith("-") and arg != "-":
            position = 1
            while position < len(arg):
                flag = arg[position]
                position += 1
                if flag.isdigit():  # -NUM: context of NUM lines
                    digits = re.match(r"\d+", arg[position - 1 :])
                    assert digits is not None
                    options.before = options.after = int(digits.group())
                    position += len(digits.group()) - 1
                elif flag in _GREP_SHORT_VALUES:
                    value = arg[position:]
                    if not value:
                        if index >= len(args):
                            raise UsageError(f"grep: option requires an argument -- '{flag}'")
                        value = args[index]
                        index += 1
                    _grep_option(options, flag, value)
                    break
                elif flag in _GREP_SHORT_FLAGS:
                    _grep_option(options, flag, None)
                else:
                    raise UsageError(f"grep: invalid option -- '{flag}'")
            continue
        options.operands.append(arg)
    return options


@dataclass
class _GrepRun:
    """The state of one grep command: output, errors and whether any line was selected."""

    options: _GrepOptions
    matcher: Matcher
    out: list[str] = field(default_factory=list[str])
    err: list[str] = field(default_factory=list[str])
    selected_any: bool = False
    failed: bool = False
    quit: bool = False
    printed_group: bool = False
    show_names: bool = False

    def error(self, message: str) -> None:
        self.failed = True
        if not self.options.no_messages:
            self.err.append(f"grep: {message}\n")

    def selects(self, line: str) -> bool:
        return (self.matcher.search(line) is not None) != self.options.invert

    def search(self, name: str, content: str) -> None:
        options = self.options
        end = "\0" if options.null_data else "\n"
        lines = content.split(end)
        if lines and lines[-1] == "":
            lines.pop()
        binary = not options.text and "\0" in content and not options.null_data
        if binary and options.skip_binary:
            return
        limit = options.max_count
        selected: list[int] = []
        if limit is None or limit > 0:
            for number, line in enumerate(lines):
                if self.selects(line):
                    selected.append(number)
                    if options.quiet:
                        self.selected_any = self.quit = True
                        return
                    if limit is not None and len(selected) >= limit:
                        break
        if selected:
            self.selected_any = True
        if options.count:
            head = name + ("\0" if options.null_names else ":") if self.show_names else ""
            self.out.append(f"{head}{len(selected)}\n")
            return
        if options.list_matching or options.list_missing:
            if bool(selected) == options.list_matching:
                self.out.append(name + ("\0" if options.null_names else "\n"))
            return
        if not selected:
            return
        if binary:
            self.err.append(f"grep: {name}: binary file matches\n")
            return
        offsets: list[int] = []
        if options.byte_offset:
            total = 0
            for line in lines:
                offsets.append(total)
                total += len(line.encode("utf-8", "surrogateescape")) + 1

        def prefix(number: int, mark: str, offset: int | None = None) -> str:
            parts: list[str] = []
            if self.show_names:
                parts.append(name + ("\0" if options.null_names else mark))
            if options.number:
                parts.append(f"{number + 1}{mark}")
            if options.byte_offset:
                parts.append(f"{offsets[number] if offset is None else offset}{mark}")
            return "".join(parts)

        if options.only:
            for number in [] if options.invert else selected:
                line = lines[number]
                pos = 0
                while pos <= len(line):
                    found = self.matcher.search(line, pos)
                    if found is None:
                        break
                    if found.end() == found.start():
                        pos = found.end() + 1
                        continue
                    offset = None
                    if options.byte_offset:
                        before = line[: found.start()].encode("utf-8", "surrogateescape")
                        offset = offsets[number] + len(before)
                    self.out.append(f"{prefix(number, ':', offset)}{found.group()}{end}")
                    pos = found.end()
            return
        shown = -1  # the last line printed
        chosen = set(selected)
        for number in selected:
            first = max(number - options.before, shown + 1)
            if (
                (options.before or options.after)
                and options.separator is not None
                and (shown >= 0 or self.printed_group)
                and first > shown + 1
            ):
                self.out.append(options.separator + "\n")
            for context in range(first, number):
                self.out.append(f"{prefix(context, '-')}{lines[context]}{end}")
            self.out.append(f"{prefix(number, ':')}{lines[number]}{end}")
            shown = number
            stop = min(len(lines) - 1, number + options.after)
            following = number + 1
            while following <= stop and following not in chosen:
                self.out.append(f"{prefix(following, '-')}{lines[following]}{end}")
                shown = following
                following += 1
        self.printed_group = True


async def _lstat(ctx: CommandContext, path: str) -> FsStat:
    """``lstat`` where the filesystem has it (the sandbox's does), else ``stat``."""
    lstat = cast(Callable[[str], Awaitable[FsStat]] | None, getattr(ctx.fs, "lstat", None))
    return await (lstat or ctx.fs.stat)(path)


def _name_matches(name: str, globs: list[str]) -> bool:
    base = name.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatchcase(base, glob) or fnmatch.fnmatchcase(name, glob) for glob in globs)


class Grep:
    """GNU grep: BRE/ERE/fixed/Perl-style patterns, ``-r`` paths as given, exit codes 0/1/2."""

    def __init__(self, name: str = "grep", mode: str | None = None) -> None:
        self.name = name
        self._mode = mode

    async def execute(self, args: list[str], ctx: CommandContext) -> ExecResult:
        try:
            options = _grep_options(args, self._mode)
        except UsageError as error:
            return exec_result(stderr=f"{error}\n{_GREP_USAGE}", exit_code=2)
        except UnsupportedHere as error:
            return unsupported(str(error))
        if options.patterns is None and not options.pattern_files:
            if not options.operands:
                return exec_result(stderr=_GREP_USAGE, exit_code=2)
            options.patterns = options.operands.pop(0).split("\n")
        patterns = list(options.patterns or [])
        for name in options.pattern_files:
            try:
                text = ctx.stdin if name == "-" else await read_text(ctx, name)
            except OSError as error:
                return exec_result(stderr=f"grep: {name}: {os_reason(error)}\n", exit_code=2)
            lines = text.split("\n")
            if lines and lines[-1] == "":
                lines.pop()
            patterns.extend(lines)
        wrap: Callable[[str], str] = lambda text: text  # noqa: E731
        if options.line:
            wrap = lambda text: rf"\A(?:{text})\Z"  # noqa: E731
        elif options.word:
            wrap = lambda text: rf"(?<![A-Za-z0-9_])(?:{text})(?![A-Za-z0-9_])"  # noqa: E731
        try:
            matcher = build_matcher(
                patterns, mode=options.mode, ignore_case=options.ignore_case, wrap=wrap
            )
        except RegexSyntaxError as error:
            return exec_result(stderr=f"grep: {error}\n", exit_code=2)
        run = _GrepRun(options, matcher)
        operands = options.operands or (["."] if options.recursive else ["-"])
        run.show_names = (
            options.with_filename if options.with_filename is not None else len(operands) > 1
        )
        implicit_dot = options.recursive and not options.operands
        for operand in operands:
            if run.quit:
                break
            await self._operand(run, ctx, operand, implicit_dot)
        if options.quiet and run.selected_any:
            code = 0
        else:
            code = 2 if run.failed else 0 if run.selected_any else 1
        return exec_result("".join(run.out), "".join(run.err), code)

    async def _operand(
        self, run: _GrepRun, ctx: CommandContext, operand: str, implicit: bool
    ) -> None:
        options = run.options
        if operand == "-":
            run.search(options.label, ctx.stdin)
            return
        path = ctx.fs.resolve_path(ctx.cwd, operand)
        try:
            is_dir = await ctx.fs.is_directory(path)
        except OSError:
            is_dir = False
        if is_dir:
            if options.directories == "skip":
                return
            if not options.recursive:
                run.error(f"{operand}: Is a directory")
                return
            if options.with_filename is None:
                run.show_names = True
            await self._walk(run, ctx, path, "" if implicit else operand)
            return
        if options.includes and not _name_matches(operand, options.includes):
            return
        if options.excludes and _name_matches(operand, options.excludes):
            return
        try:
            content = await ctx.fs.read_file(path)
        except OSError as error:
            run.error(f"{operand}: {os_reason(error)}")
            return
        run.search(operand, content)

    async def _walk(self, run: _GrepRun, ctx: CommandContext, path: str, shown: str) -> None:
        options = run.options
        try:
            entries = sorted(await ctx.fs.readdir(path))
        except OSError as error:
            run.error(f"{shown or '.'}: {os_reason(error)}")
            return
        for entry in entries:
            if run.quit:
                return
            child = f"{path.rstrip('/')}/{entry}"
            name = entry if not shown else f"{shown}{'' if shown.endswith('/') else '/'}{entry}"
            try:
                facts = await _lstat(ctx, child)
                is_dir = facts.is_directory
                if facts.is_symbolic_link:
                    if not options.dereference:
                        continue  # -r follows only the links named on the command line
                    is_dir = await ctx.fs.is_directory(child)
            except OSError as error:
                run.error(f"{name}: {os_reason(error)}")
                continue
            if is_dir:
                if options.exclude_dirs and _name_matches(entry, options.exclude_dirs):
                    continue
                await self._walk(run, ctx, child, name)
                continue
            if options.includes and not _name_matches(entry, options.includes):
                continue
            if options.excludes and _name_matches(entry, options.excludes):
                continue
            try:
                content = await ctx.fs.read_file(child)
            except OSError as error:
                run.error(f"{name}: {os_reason(error)}")
                continue
            run.search(name, content)
