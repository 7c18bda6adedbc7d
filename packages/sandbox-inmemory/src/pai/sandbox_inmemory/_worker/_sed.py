"""``sed`` as GNU sed 4 behaves.

just-bash's sed flattened ``{...}`` blocks into their commands, had no ``\\U``/``\\L``/
``\\u``/``\\l``, no POSIX classes, no ``s///N``, and a hold space that gained no newline. This
one parses GNU's script syntax (blocks, labels, ``!``, ``addr1,+N``, ``addr1,~N``, ``first~step``,
``0,/re/``, ``I``/``M`` flags, ``a``/``i``/``c`` in the one-line and classic forms) and runs it
as GNU does: one stream over all files (``-s`` and ``-i`` make one per file), ``$`` the last line
of it, ``n``/``N`` at the end printing the pattern space, ``D`` restarting without reading, a
last line without a newline printed without one, ``w`` files written at the end. ``e`` and
``s///e`` run shell commands and are refused.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, NoReturn

from just_bash.types import CommandContext, ExecResult

from pai.sandbox_inmemory._worker._posix import (
    RegexSyntaxError,
    UnsupportedHere,
    UsageError,
    exec_result,
    long_option,
    os_reason,
    posix_regex,
    posix_sub,
    read_text,
    unsupported,
)

__all__ = ["Sed"]


# -- sed ---------------------------------------------------------------------------------------------------

_SED_USAGE = "Usage: sed [OPTION]... {script-only-if-no-other-script} [input-file]...\n"
_SED_LONG: dict[str, bool | None] = {
    "quiet": False,
    "silent": False,
    "expression": True,
    "file": True,
    "in-place": None,
    "regexp-extended": False,
    "separate": False,
    "null-data": False,
    "zero-terminated": False,
    "unbuffered": False,
    "line-length": True,
    "posix": False,
    "sandbox": False,
    "follow-symlinks": False,
    "debug": False,
    "help": False,
    "version": False,
}


class _SedError(Exception):
    """A script GNU sed refuses (``message`` is its text, without the location)."""


@dataclass
class _SedAddress:
    kind: Literal["line", "last", "regex", "step", "zero", "plus", "multiple"]
    number: int = 0
    step: int = 0
    regex: re.Pattern[str] | None = None  # None for ``//``: the last regex used


@dataclass
class _SedPiece:
    kind: Literal["text", "group", "case"]
    text: str = ""
    group: int = 0


@dataclass
class _SedCommand:
    name: str
    first: _SedAddress | None = None
    last: _SedAddress | None = None
    negate: bool = False
    text: str = ""  # a, i, c text; a label; a file name
    number: int | None = None  # q/Q exit code, l line length
    regex: re.Pattern[str] | None = None  # s (None: the last regex used)
    replacement: list[_SedPiece] = field(default_factory=list[_SedPiece])
    every: bool = False
    occurrence: int = 1
    print_count: int = 0
    write_to: str = ""
    translate: dict[int, str] = field(default_factory=dict[int, str])
    target: int = -1  # { : the index after its }; b, t, T: the label's index (-1: the end)
    active: bool = False  # a range that has started
    range_end: int = 0  # the line a numeric or +N range ends at


class _SedParser:
    """GNU sed's script syntax, one command at a time."""

    def __init__(self, script: str, extended: bool, starts: list[int]) -> None:
        self.script = script
        self.extended = extended
        self.pos = 0
        self.starts = starts  # where each -e expression starts in ``script``
        self.commands: list[_SedCommand] = []
        self.blocks: list[int] = []

    def fail(self, message: str) -> NoReturn:
        expression = sum(1 for start in self.starts if start <= self.pos) or 1
        char = self.pos - self.starts[expression - 1] if self.starts else self.pos
        raise _SedError(f"-e expression #{expression}, char {char}: {message}")

    def peek(self) -> str:
        return self.script[self.pos] if self.pos < len(self.script) else ""

    def take(self) -> str:
        char = self.peek()
        self.pos += 1
        return char

    def skip_blanks(self) -> None:
        while self.peek() in (" ", "\t"):
            self.pos += 1

    def parse(self) -> list[_SedCommand]:
        labels: dict[str, int] = {}
        while True:
            while self.peek() and self.peek() in " \t\n;":
                self.pos += 1
            if not self.peek():
                break
            if self.peek() == "#":
                while self.peek() and self.peek() != "\n":
                    self.pos += 1
                continue
            command = self.command()
            if command.name == ":":
                if command.text in labels:
                    self.fail(f"duplicate label `{command.text}'")
                labels[command.text] = len(self.commands)
            self.commands.append(command)
        if self.blocks:
            self.pos = 0
            self.fail("unmatched `{'")
        for command in self.commands:
            if command.name in "btT":
                if command.text and command.text not in labels:
                    raise _SedError(f"can't find label for jump to `{command.text}'")
                command.target = labels[command.text] if command.text else len(self.commands)
        return self.commands

    def number(self) -> int:
        start = self.pos
        while self.peek().isdigit():
            self.pos += 1
        return int(self.script[start : self.pos])

    def delimited(self, delimiter: str, what: str) -> str:
        """Text up to an unescaped ``delimiter``; ``\\delimiter`` stands for the delimiter,
        ``\\n`` for a newline; other escapes are kept for the regex or replacement."""
        out: list[str] = []
        while True:
            char = self.take()
            if not char:
                self.fail(f"unterminated {what}")
            if char == delimiter:
                return "".join(out)
            if char == "\\":
                following = self.take()
                if not following:
                    self.fail(f"unterminated {what}")
                if following == delimiter:
                    out.append(delimiter if delimiter != "&" else "\\&")
                elif following == "\n":
                    out.append("\\n" if what != "`y' command" else "\n")
                else:
                    out.append("\\" + following)
            elif char == "\n" and what == "address regex":
                self.fail(f"unterminated {what}")
            else:
                out.append(char)

    def regex(self, text: str, flags: str) -> re.Pattern[str] | None:
        if not text:
            return None
        try:
            return posix_regex(
                text,
                extended=self.extended,
                dialect="sed",
                ignore_case="I" in flags,
                multiline="M" in flags,
            )
        except RegexSyntaxError as error:
            self.fail(str(error))

    def address(self) -> _SedAddress | None:
        char = self.peek()
        if char.isdigit():
            number = self.number()
            if self.peek() == "~":
                self.pos += 1
                step = self.number() if self.peek().isdigit() else 0
                return _SedAddress("step", number, step)
            return _SedAddress("zero" if number == 0 else "line", number)
        if char == "$":
            self.pos += 1
            return _SedAddress("last")
        if char in ("/", "\\"):
            self.pos += 1
            delimiter = "/" if char == "/" else self.take()
            text = self.delimited(delimiter, "address regex")
            flags = ""
            while self.peek() in ("I", "M"):
                flags += self.take()
            return _SedAddress("regex", regex=self.regex(text, flags))
        return None

    def label(self) -> str:
        self.skip_blanks()
        start = self.pos
        while self.peek() and self.peek() not in ";\n}":
            self.pos += 1
        return self.script[start : self.pos].strip()

    def filename(self) -> str:
        self.skip_blanks()
        start = self.pos
        while self.peek() and self.peek() != "\n":
            self.pos += 1
        return self.script[start : self.pos]

    def text(self) -> str:
        """The text of ``a``, ``i`` and ``c``: GNU's one-line form (``a text``) or the classic
        one (``a\\`` and the text on the next lines, each ending in ``\\`` but the last)."""
        self.skip_blanks()
        if self.peek() == "\\":
            self.pos += 1
            if self.peek() == "\n":
                self.pos += 1
        elif not self.peek() or self.peek() == "\n":
            self.fail("expected \\ after `a', `c' or `i'")
        out: list[str] = []
        while self.peek():
            char = self.take()
            if char == "\\":
                following = self.take()
                out.append(following)
            elif char == "\n":
                break
            else:
                out.append(char)
        return "".join(out) + "\n" if out else ""

    def end_of_command(self) -> None:
        self.skip_blanks()
        char = self.peek()
        if char in ("", "\n", ";", "#", "}"):
            if char == ";":
                self.pos += 1
            return
        self.fail("extra characters after command")

    def command(self) -> _SedCommand:
        first = self.address()
        last: _SedAddress | None = None
        if first is not None and self.peek() == ",":
            self.pos += 1
            self.skip_blanks()
            if self.peek() in ("+", "~"):
                kind = "plus" if self.take() == "+" else "multiple"
                if not self.peek().isdigit():
                    self.fail("expected newer version of sed")
                last = _SedAddress(kind, self.number())
            else:
                last = self.address()
                if last is None:
                    self.fail("unexpected `,'")
                if last.kind == "zero":
                    self.fail("invalid usage of line address 0")
        if first is not None and first.kind == "zero" and (last is None or last.kind != "regex"):
            self.fail("invalid usage of line address 0")
        self.skip_blanks()
        negate = False
        while self.peek() == "!":
            negate = True
            self.pos += 1
            self.skip_blanks()
        name = self.take()
        command = _SedCommand(name, first, last, negate)
        if not name:
            self.fail("missing command")
        if name == "{":
            self.blocks.append(len(self.commands))
            return command
        if name == "}":
            if first is not None:
                self.fail("} doesn't want any addresses")
            if not self.blocks:
                self.fail("unexpected `}'")
            self.commands[self.blocks.pop()].target = len(self.commands) + 1
            self.end_of_command()
            return command
        if name in "aic":
            command.text = self.text()
            return command
        if name == ":":
            if first is not None:
                self.fail(": doesn't want any addresses")
            command.text = self.label()
            if not command.text:
                self.fail('":" lacks a label')
            if self.peek() == ";":
                self.pos += 1
            return command
        if name in "btT":
            command.text = self.label()
            if self.peek() == ";":
                self.pos += 1
            return command
        if name in "rRwW":
            command.text = self.filename()
            if not command.text:
                self.fail("missing filename in r/R/w/W commands")
            return command
        if name in "qQlL":
            self.skip_blanks()
            if self.peek().isdigit():
                command.number = self.number()
            self.end_of_command()
            return command
        if name == "s":
            self.substitute(command)
            return command
        if name == "y":
            self.transliterate(command)
            return command
        if name == "e":
            raise UnsupportedHere("sed: the e command (it runs a shell command)")
        if name in "=dDgGhHlnNpPxzF":
            self.end_of_command()
            return command
        if name == "v":
            self.label()
            return _SedCommand("#")
        self.fail(f"unknown command: `{name}'")

    def substitute(self, command: _SedCommand) -> None:
        delimiter = self.take()
        if not delimiter or delimiter in "\n\\":
            self.fail("unterminated `s' command")
        pattern = self.delimited(delimiter, "`s' command")
        replacement = self.delimited(delimiter, "`s' command")
        flags = ""
        while True:
            char = self.peek()
            if char in ("g", "p", "i", "I", "m", "M", "e"):
                self.pos += 1
                if char == "g":
                    command.every = True
                elif char == "p":
                    command.print_count += 1
                elif char == "e":
                    raise UnsupportedHere("sed: the e flag of s (it runs a shell command)")
                else:
                    flags += char.upper()
            elif char.isdigit():
                number = self.number()
                if number == 0:
                    self.fail("number option to `s' command may not be zero")
                command.occurrence = number
            elif char == "w":
                self.pos += 1
                command.write_to = self.filename()
                break
            else:
                break
        self.end_of_command()
        command.regex = self.regex(pattern, flags)
        command.replacement = self.replacement(replacement)
        groups = command.regex.groups if command.regex is not None else 9
        for piece in command.replacement:
            if piece.kind == "group" and piece.group > groups:
                self.fail(f"invalid reference \\{piece.group} on `s' command's RHS")

    def replacement(self, text: str) -> list[_SedPiece]:
        pieces: list[_SedPiece] = []
        literal: list[str] = []

        def flush() -> None:
            if literal:
                pieces.append(_SedPiece("text", "".join(literal)))
                literal.clear()

        index = 0
        while index < len(text):
            char = text[index]
            index += 1
            if char == "&":
                flush()
                pieces.append(_SedPiece("group", group=0))
            elif char == "\\" and index < len(text):
                following = text[index]
                index += 1
                if following.isdigit():
                    flush()
                    pieces.append(_SedPiece("group", group=int(following)))
                elif following in "ULulE":
                    flush()
                    pieces.append(_SedPiece("case", following))
                elif following == "n":
                    literal.append("\n")
                elif following == "t":
                    literal.append("\t")
                elif following == "x" and re.match(r"[0-9A-Fa-f]{1,2}", text[index:]):
                    digits = re.match(r"[0-9A-Fa-f]{1,2}", text[index:])
                    assert digits is not None
                    literal.append(chr(int(digits.group(), 16)))
                    index += len(digits.group())
                else:
                    literal.append(following)
            else:
                literal.append(char)
        flush()
        return pieces

    def transliterate(self, command: _SedCommand) -> None:
        delimiter = self.take()
        if not delimiter or delimiter in "\n\\":
            self.fail("unterminated `y' command")
        source = _sed_unescape(self.delimited(delimiter, "`y' command"))
        target = _sed_unescape(self.delimited(delimiter, "`y' command"))
        if len(source) != len(target):
            self.fail("strings for `y' command are different lengths")
        command.translate = {ord(a): b for a, b in zip(source, target, strict=True)}
        self.end_of_command()


def _replacer(pieces: list[_SedPiece]) -> Callable[[re.Match[str]], str]:
    def replace(found: re.Match[str]) -> str:
        parts: list[str | tuple[str]] = []
        for piece in pieces:
            if piece.kind == "text":
                parts.append(piece.text)
            elif piece.kind == "group":
                parts.append(found.group(piece.group) or "")
            else:
                parts.append((piece.text,))
        return _apply_case(parts)

    return replace


def _sed_unescape(text: str) -> str:
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text):
            following = text[index + 1]
            out.append({"n": "\n", "t": "\t", "\\": "\\"}.get(following, "\\" + following))
            index += 2
        else:
            out.append(char)
            index += 1
    return "".join(out)


def _apply_case(
    pieces: list[str | tuple[str]],
) -> str:
    """Joins replacement text, applying ``\\U``/``\\L`` (until ``\\E``) and the one-character
    ``\\u``/``\\l`` (each a 1-tuple among the strings)."""
    out: list[str] = []
    mode = ""  # "U", "L" or ""
    once = ""  # "u", "l" or ""
    for piece in pieces:
        if isinstance(piece, tuple):
            flag = piece[0]
            if flag in "ul":
                once = flag
            else:
                mode = "" if flag == "E" else flag
                once = "" if flag == "E" else once
            continue
        if not piece:
            continue
        text = piece.upper() if mode == "U" else piece.lower() if mode == "L" else piece
        if once:
            text = (text[0].upper() if once == "u" else text[0].lower()) + text[1:]
            once = ""
        out.append(text)
    return "".join(out)


@dataclass
class _SedLine:
    text: str
    newline: bool  # the input line ended with the line terminator


class _SedInput:
    """The lines of the input files, one stream (or one per file with -s/-i)."""

    def __init__(self, files: list[tuple[str, str]], terminator: str) -> None:
        self.lines: list[tuple[_SedLine, str]] = []
        for name, content in files:
            parts = content.split(terminator)
            for index, part in enumerate(parts):
                if index == len(parts) - 1:
                    if part:
                        self.lines.append((_SedLine(part, False), name))
                else:
                    self.lines.append((_SedLine(part, True), name))
        self.index = 0

    def next(self) -> tuple[_SedLine, str] | None:
        if self.index >= len(self.lines):
            return None
        self.index += 1
        return self.lines[self.index - 1]

    def at_end(self) -> bool:
        return self.index >= len(self.lines)

    def name(self) -> str:
        return self.lines[self.index - 1][1] if self.index else "-"


@dataclass
class _SedRun:
    commands: list[_SedCommand]
    quiet: bool
    terminator: str
    stdout: list[str]
    stderr: list[str]
    files_out: dict[str, list[str]]
    read_file: Callable[[str], str | None]
    line_length: int = 70
    in_place: bool = False
    out: list[str] = field(default_factory=list[str])
    missing_newline: bool = False
    hold: str = ""
    last_regex: re.Pattern[str] | None = None
    line_number: int = 0
    read_lines: dict[str, list[str]] = field(default_factory=dict[str, list[str]])

    def write(self, text: str, newline: bool = True) -> None:
        if self.missing_newline:
            self.out.append(self.terminator)
        self.out.append(text)
        if newline:
            self.out.append(self.terminator)
        self.missing_newline = not newline

    def write_to(self, name: str, text: str) -> None:
        if name == "/dev/stdout" and self.in_place:
            self.stdout.append(text + self.terminator)
        elif name == "/dev/stdout":
            self.write(text)
        elif name == "/dev/stderr":
            self.stderr.append(text + "\n")
        else:
            self.files_out.setdefault(name, []).append(text + self.terminator)

    def regex(self, regex: re.Pattern[str] | None) -> re.Pattern[str]:
        if regex is None:
            if self.last_regex is None:
                raise _SedError("no previous regular expression")
            return self.last_regex
        self.last_regex = regex
        return regex

    def matches(self, address: _SedAddress, space: str, last: bool) -> bool:
        if address.kind == "line":
            return self.line_number == address.number
        if address.kind == "last":
            return last
        if address.kind == "step":
            if address.step <= 0:
                return self.line_number == address.number
            return (
                self.line_number >= address.number
                and (self.line_number - address.number) % address.step == 0
            )
        if address.kind == "regex":
            return self.regex(address.regex).search(space) is not None
        return False

    def selected(self, command: _SedCommand, space: str, last: bool) -> bool:
        first = command.first
        if first is None:
            return not command.negate
        end = command.last
        if end is None:
            return self.matches(first, space, last) != command.negate
        line = self.line_number
        if command.active:
            if end.kind in ("line", "plus"):
                done = line >= command.range_end
                if line > command.range_end:  # the end line was passed (a jump skipped it)
                    command.active = False
                    return self.selected(command, space, last)
            elif end.kind == "multiple":
                done = end.number <= 0 or line % end.number == 0
            else:
                done = self.matches(end, space, last)
            if done:
                command.active = False
            return not command.negate
        if first.kind == "zero":  # the range started before the first line
            if line != 1:
                return command.negate
            command.active = not self.matches(end, space, last)
            return not command.negate
        if not self.matches(first, space, last):
            return command.negate
        if end.kind == "line":
            command.range_end = end.number
            command.active = end.number > line
        elif end.kind == "plus":
            command.range_end = line + end.number
            command.active = end.number > 0
        elif end.kind == "multiple":
            command.active = end.number > 0 and line % end.number != 0
        elif end.kind == "last":
            command.active = not last
        else:
            command.active = True
        return not command.negate

    def listing(self, space: str, width: int) -> str:
        out: list[str] = []
        column = 0
        names = {7: "\\a", 8: "\\b", 9: "\\t", 10: "\\n", 11: "\\v", 12: "\\f", 13: "\\r"}
        for byte in space.encode("utf-8", "surrogateescape"):
            if byte == 0x5C:
                piece = "\\\\"
            elif byte in names:
                piece = names[byte]
            elif 32 <= byte < 127:
                piece = chr(byte)
            else:
                piece = f"\\{byte:03o}"
            if width > 0 and column + len(piece) > width - 1:
                out.append("\\\n")
                column = 0
            out.append(piece)
            column += len(piece)
        return "".join(out) + "$"

    def run(self, source: _SedInput) -> int | None:
        """Runs the script over ``source``; the exit code of ``q``/``Q``, if one ran."""
        append: list[str] = []
        space: str | None = None
        line: _SedLine | None = None
        replaced = False
        restart = False
        commands = self.commands

        def flush_append() -> None:
            for text in append:
                if text.startswith("\0r"):  # a file's contents, inserted as they are
                    if self.missing_newline:
                        self.out.append(self.terminator)
                        self.missing_newline = False
                    self.out.append(text[2:])
                    self.missing_newline = bool(text[2:]) and not text.endswith(self.terminator)
                else:
                    self.write(text[:-1] if text.endswith("\n") else text)
            append.clear()

        def read() -> bool:
            nonlocal space, line
            item = source.next()
            if item is None:
                return False
            line = item[0]
            self.line_number += 1
            space = line.text
            return True

        def finish(autoprint: bool) -> None:
            if autoprint and not self.quiet and space is not None and line is not None:
                self.write(space, line.newline)
            flush_append()

        while True:
            if not restart:
                if not read():
                    break
                replaced = False
            restart = False
            assert space is not None
            assert line is not None
            last = source.at_end()
            index = 0
            end_cycle: Literal["print", "delete", "restart"] = "print"
            while index < len(commands):
                command = commands[index]
                index += 1
                name = command.name
                if name in ("#", ":", "}"):
                    continue
                if not self.selected(command, space, last):
                    if name == "{":
                        index = command.target
                    continue
                if name == "{":
                    continue
                if name == "s":
                    regex = self.regex(command.regex)
                    replace = _replacer(command.replacement)
                    space, count = posix_sub(
                        regex, space, replace, occurrence=command.occurrence, every=command.every
                    )
                    if count:
                        replaced = True
                        for _ in range(command.print_count):
                            self.write(space, line.newline)
                        if command.write_to:
                            self.write_to(command.write_to, space)
                elif name == "p":
                    self.write(space, line.newline)
                elif name == "d":
                    end_cycle = "delete"
                    break
                elif name == "D":
                    if "\n" not in space:
                        end_cycle = "delete"
                    else:
                        space = space.split("\n", 1)[1]
                        end_cycle = "restart"
                    break
                elif name == "a":
                    if command.text:
                        append.append(command.text)
                elif name == "i":
                    if command.text:
                        self.write(command.text[:-1])
                elif name == "c":
                    if command.text and (command.last is None or not command.active):
                        self.write(command.text[:-1])
                    end_cycle = "delete"
                    break
                elif name == "=":
                    self.write(str(self.line_number))
                elif name == "l":
                    width = self.line_length if command.number is None else command.number
                    self.write(self.listing(space, width))
                elif name == "n":
                    if source.at_end():
                        finish(True)
                        return None
                    finish(True)
                    read()
                    last = source.at_end()
                elif name == "N":
                    if source.at_end():
                        finish(True)
                        return None
                    flush_append()
                    held = space
                    read()
                    space = held + "\n" + space
                    last = source.at_end()
                elif name == "g":
                    space = self.hold
                elif name == "G":
                    space = space + "\n" + self.hold
                elif name == "h":
                    self.hold = space
                elif name == "H":
                    self.hold = self.hold + "\n" + space
                elif name == "x":
                    space, self.hold = self.hold, space
                elif name == "z":
                    space = ""
                elif name == "y":
                    space = space.translate(command.translate)
                elif name == "P":
                    head, newline, _rest = space.partition("\n")
                    self.write(head, bool(newline) or line.newline)
                elif name == "b":
                    index = command.target
                elif name == "t":
                    if replaced:
                        replaced = False
                        index = command.target
                elif name == "T":
                    if not replaced:
                        index = command.target
                    else:
                        replaced = False
                elif name == "q":
                    finish(True)
                    return command.number or 0
                elif name == "Q":
                    return command.number or 0
                elif name == "r":
                    content = self.read_file(command.text)
                    if content:
                        append.append("\0r" + content)
                elif name == "R":
                    queue = self.read_lines.get(command.text)
                    if queue is None:
                        content = self.read_file(command.text) or ""
                        queue = content.split("\n")
                        if queue and queue[-1] == "":
                            queue.pop()
                        self.read_lines[command.text] = queue
                    if queue:
                        append.append(queue.pop(0) + "\n")
                elif name == "w":
                    self.write_to(command.text, space)
                elif name == "W":
                    self.write_to(command.text, space.split("\n", 1)[0])
                elif name == "F":
                    self.write(current if (current := source.name()) != "-" else "-")
            if end_cycle == "print":
                finish(True)
            elif end_cycle == "delete":
                finish(False)
            else:
                flush_append()
                restart = True
        return None


def _sed_options(
    args: list[str],
) -> tuple[list[str], list[tuple[str, bool]], dict[str, Any]]:
    """(operands, script parts as (text, from_file), flags)."""
    scripts: list[tuple[str, bool]] = []
    operands: list[str] = []
    flags: dict[str, Any] = {
        "quiet": False,
        "extended": False,
        "in_place": None,
        "separate": False,
        "null": False,
        "line_length": 70,
    }
    index = 0

    def value_of(flag: str) -> str:
        nonlocal index
        if index >= len(args):
            raise UsageError(f"sed: option requires an argument -- '{flag}'")
        index += 1
        return args[index - 1]

    while index < len(args):
        arg = args[index]
        index += 1
        if arg == "--":
            operands.extend(args[index:])
            break
        if arg.startswith("--"):
            name, value = long_option(arg, _SED_LONG, "sed")
            if _SED_LONG[name] and value is None:
                value = value_of(name)
            if name in ("quiet", "silent"):
                flags["quiet"] = True
            elif name == "expression":
                scripts.append((value or "", False))
            elif name == "file":
                scripts.append((value or "", True))
            elif name == "in-place":
                flags["in_place"] = value or ""
                flags["separate"] = True
            elif name == "regexp-extended":
                flags["extended"] = True
            elif name == "separate":
                flags["separate"] = True
            elif name in ("null-data", "zero-terminated"):
                flags["null"] = True
            elif name == "line-length":
                flags["line_length"] = int(value or "70")
            elif name in ("debug", "help", "version"):
                raise UnsupportedHere(f"sed: --{name}")
            continue
        if arg.startswith("-") and arg != "-":
            position = 1
            while position < len(arg):
                flag = arg[position]
                position += 1
                if flag == "n":
                    flags["quiet"] = True
                elif flag in "Er":
                    flags["extended"] = True
                elif flag == "s":
                    flags["separate"] = True
                elif flag == "z":
                    flags["null"] = True
                elif flag == "u":
                    pass
                elif flag == "i":
                    flags["in_place"] = arg[position:]
                    flags["separate"] = True
                    break
                elif flag in "efl":
                    value = arg[position:] or value_of(flag)
                    if flag == "l":
                        flags["line_length"] = int(value)
                    else:
                        scripts.append((value, flag == "f"))
                    break
                else:
                    raise UsageError(f"sed: invalid option -- '{flag}'")
            continue
        operands.append(arg)
    if not scripts:
        if not operands:
            raise UsageError("")
        scripts.append((operands.pop(0), False))
    return operands, scripts, flags


class Sed:
    """GNU sed: blocks, ranges and steps, ``s`` with ``\\U``/``\\L``/``\\u``/``\\l``, ``N``-th
    and ``g`` flags, hold space, ``a``/``i``/``c`` in both forms, ``-i``, ``-s``, ``-z``."""

    name = "sed"

    async def execute(self, args: list[str], ctx: CommandContext) -> ExecResult:
        try:
            operands, scripts, flags = _sed_options(args)
        except UsageError as error:
            text = f"{error}\n" if str(error) else ""
            return exec_result(stderr=text + _SED_USAGE, exit_code=1)
        except UnsupportedHere as error:
            return unsupported(str(error))
        parts: list[str] = []
        starts: list[int] = []
        offset = 0
        for text, from_file in scripts:
            if from_file:
                try:
                    text = ctx.stdin if text == "-" else await read_text(ctx, text)
                except OSError as error:
                    return exec_result(
                        stderr=f"sed: couldn't open file {text}: {os_reason(error)}\n",
                        exit_code=1,
                    )
                if text.endswith("\n"):
                    text = text[:-1]
            starts.append(offset)
            parts.append(text)
            offset += len(text) + 1
        script = "\n".join(parts)
        quiet = bool(flags["quiet"]) or script.startswith("#n\n") or script == "#n"
        try:
            commands = _SedParser(script, bool(flags["extended"]), starts).parse()
        except _SedError as error:
            return exec_result(stderr=f"sed: {error}\n", exit_code=1)
        except UnsupportedHere as error:
            return unsupported(str(error))
        files_out: dict[str, list[str]] = {}
        for command in commands:
            if command.name in "wW" or command.write_to:
                name = command.text if command.name in "wW" else command.write_to
                if name not in ("/dev/stdout", "/dev/stderr"):
                    files_out.setdefault(name, [])
        contents: dict[str, str | None] = {}

        async def load(name: str) -> str | None:
            if name in ("-", "/dev/stdin"):
                return ctx.stdin
            try:
                return await read_text(ctx, name)
            except OSError:
                return None

        for command in commands:
            if command.name in "rR" and command.text not in contents:
                contents[command.text] = await load(command.text)
        stdout: list[str] = []
        stderr: list[str] = []
        run = _SedRun(
            commands,
            quiet,
            "\0" if flags["null"] else "\n",
            stdout,
            stderr,
            files_out,
            lambda name: contents.get(name),
            int(flags["line_length"]),
            flags["in_place"] is not None,
        )
        inputs: list[tuple[str, str]] = []
        code = 0
        for name in operands or ["-"]:
            if name == "-" and flags["in_place"] is not None:
                stderr.append("sed: couldn't edit -: not a regular file\n")
                code = 4
                continue
            try:
                inputs.append((name, ctx.stdin if name == "-" else await read_text(ctx, name)))
            except IsADirectoryError:
                verb = "couldn't edit" if flags["in_place"] is not None else "read error on"
                what = "not a regular file" if flags["in_place"] is not None else "Is a directory"
                stderr.append(f"sed: {verb} {name}: {what}\n")
                code = 4 if flags["in_place"] is not None else 2
            except OSError as error:
                stderr.append(f"sed: can't read {name}: {os_reason(error)}\n")
                code = 2
        groups = [[item] for item in inputs] if flags["separate"] else [inputs]
        quit_code: int | None = None
        try:
            for group in groups:
                if flags["separate"]:
                    run.line_number = 0
                    for command in commands:
                        command.active = False
                run.out, run.missing_newline = [], False
                quit_code = run.run(_SedInput(group, run.terminator))
                if flags["in_place"] is not None and group:
                    name, original = group[0]
                    path = ctx.fs.resolve_path(ctx.cwd, name)
                    suffix = str(flags["in_place"])
                    if suffix:
                        backup = (
                            suffix.replace("*", name.rsplit("/", 1)[-1])
                            if "*" in suffix
                            else name + suffix
                        )
                        await ctx.fs.write_file(ctx.fs.resolve_path(ctx.cwd, backup), original)
                    await ctx.fs.write_file(path, "".join(run.out))
                else:
                    stdout.extend(run.out)
                if quit_code is not None:
                    break
        except _SedError as error:
            stdout.extend(run.out)
            stderr.append(f"sed: {error}\n")
            code = 4
        for name, chunks in files_out.items():
            try:
                await ctx.fs.write_file(ctx.fs.resolve_path(ctx.cwd, name), "".join(chunks))
            except OSError as error:
                stderr.append(f"sed: couldn't open file {name}: {os_reason(error)}\n")
                code = 4
        if quit_code is not None and code == 0:
            code = quit_code
        return exec_result("".join(stdout), "".join(stderr), code)
