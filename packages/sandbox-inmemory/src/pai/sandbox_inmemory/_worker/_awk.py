"""``awk``: POSIX awk with gawk's common extensions, as gawk 5 behaves.

just-bash's awk evaluated a condition by splitting its text on the first operator it found
(``$3 > 10`` never matched), had no ``NR==FNR``, no regex anchors in patterns and no
concatenation rules. This is an interpreter of its own: a lexer (regex literals vs division,
newlines as terminators), a recursive-descent parser following awk's grammar and precedence
(``print a > "f"`` redirects, ``(a, b) in arr``, ``cmd | getline``), compiled into closures over
a runtime. Values follow awk's rules: numbers, strings and "strnums" (input that looks numeric
compares numerically), ``CONVFMT``/``OFMT``, integral numbers printed as integers. Fields split
lazily (``FS`` a blank, one character or an ERE; ``RS`` a character, a paragraph or an ERE),
``$0``/``NF`` rebuilt with ``OFS``. gawk extensions: ``gensub``, ``asort``/``asorti``,
``strftime``/``systime``/``mktime`` (UTC), bit functions, ``strtonum``, ``typeof``,
``PROCINFO["sorted_in"]``, ``match`` with an array, ``split`` with separators.

Input and output go through ``ctx.fs``; ``system()``, ``print | "cmd"`` and ``"cmd" | getline``
run the command line in the same in-memory shell (``ctx.exec``), with gawk's ordering of its
own buffered output and the commands'. A loop past ``max_awk_iterations`` raises the limit
error the caller gives; a fatal error ends the program with exit code 2, a syntax error with 1.
"""

from __future__ import annotations

import calendar
import functools
import math
import random
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, NoReturn, cast

from just_bash.types import CommandContext, ExecResult, ExecutionLimits

from pai.sandbox_inmemory._worker._posix import (
    RegexSyntaxError,
    UnsupportedHere,
    exec_result,
    os_reason,
    posix_regex,
    posix_sub,
    read_text,
    run_now,
    unsupported,
)

__all__ = ["Awk", "AwkLoopLimitError"]


class AwkLoopLimitError(Exception):
    """An awk loop ran past the command's ``max_awk_iterations`` (never stopped silently)."""


# -- awk: values --------------------------------------------------------------------------------------------


class _StrNum(str):
    """Text from input (a field, a ``getline`` record, a ``split`` element, ``ARGV``,
    ``ENVIRON``, ``-v``) that looks like a number: it compares as a number with numbers."""


class _Uninit(_StrNum):
    """The value of a variable never assigned: ``""`` and ``0`` at once."""


_UNINIT = _Uninit("")


class _Array(dict[str, "Value"]):
    """An awk array: string subscripts, values in insertion order."""


class _Unset:
    """A function's local slot not yet used as a scalar or an array."""


_UNSET = _Unset()


class _Pending:
    """An unset variable passed to a function: if the function uses it as an array, the
    caller's variable becomes that array."""

    def __init__(self, bind: Callable[[_Array], None]) -> None:
        self.bind = bind


Value = float | str
Slot = float | str | _Array | _Unset | _Pending

_NUMBER_PREFIX = re.compile(
    r"[ \t\n\r\f\v]*([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?))"
)
_LOOKS_NUMERIC = re.compile(
    r"[ \t\n]*[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)[ \t\n]*"
)
_NUMBER_CACHE: dict[str, float] = {}


def _str_to_num(text: str) -> float:
    cached = _NUMBER_CACHE.get(text)
    if cached is not None:
        return cached
    found = _NUMBER_PREFIX.match(text)
    value = float(found.group(1)) if found else 0.0
    if len(_NUMBER_CACHE) > 4096:
        _NUMBER_CACHE.clear()
    _NUMBER_CACHE[text] = value
    return value


def _num(value: Value) -> float:
    if type(value) is float:
        return value
    if type(value) is _StrNum:
        return float(value)
    if value is _UNINIT:
        return 0.0
    return _str_to_num(cast(str, value))


def _input_value(text: str) -> Value:
    """Input text as awk sees it: a strnum when it looks like a number."""
    if text and _LOOKS_NUMERIC.fullmatch(text):
        return _StrNum(text)
    return text


def _num_str(number: float, fmt: str) -> str:
    if number.is_integer():
        return str(int(number))
    if math.isnan(number):
        return "-nan" if math.copysign(1.0, number) < 0 else "+nan"
    if math.isinf(number):
        return "-inf" if number < 0 else "+inf"
    if fmt == "%.6g":
        return f"{number:.6g}"
    return _sprintf(fmt, [number], fmt)


def _is_numeric(value: Value) -> bool:
    return type(value) is float or isinstance(value, _StrNum)


def _truth(value: Value) -> bool:
    if type(value) is float:
        return value != 0.0
    if type(value) is _StrNum:
        return float(value) != 0.0
    return value != ""


def _compare(left: Value, right: Value, convfmt: str) -> int:
    if _is_numeric(left) and _is_numeric(right):
        a, b = _num(left), _num(right)
        return (a > b) - (a < b)
    a_text = _num_str(left, convfmt) if type(left) is float else cast(str, left)
    b_text = _num_str(right, convfmt) if type(right) is float else cast(str, right)
    return (a_text > b_text) - (a_text < b_text)


_FORMAT_SPEC = re.compile(r"%([-+ #0']*)(\*|\d+)?(?:\.(\*|\d*))?(.?)")


class _AwkFatal(Exception):
    """A run-time error that ends the program with exit code 2, as gawk's fatal errors do."""


def _sprintf(fmt: str, values: list[Value], convfmt: str) -> str:
    out: list[str] = []
    position = 0
    used = 0

    def next_value() -> Value:
        nonlocal used
        if used >= len(values):
            raise _AwkFatal("not enough arguments to satisfy format string")
        used += 1
        return values[used - 1]

    for spec in _FORMAT_SPEC.finditer(fmt):
        out.append(fmt[position : spec.start()])
        position = spec.end()
        flags, width, precision, conversion = spec.groups()
        if conversion == "%":
            out.append("%")
            continue
        if conversion == "" or conversion not in "cdiouxXeEfFgGs":
            out.append(spec.group())
            continue
        flags = flags.replace("'", "")
        if width == "*":
            star = int(_num(next_value()))
            width = str(abs(star))
            if star < 0:
                flags += "-"
        if precision == "*":
            precision = str(max(0, int(_num(next_value()))))
        head = "%" + flags + (width or "") + ("." + precision if precision is not None else "")
        value = next_value()
        if conversion in "diouxX":
            number = _num(value)
            if not math.isfinite(number):
                text = _num_str(number, convfmt)
                out.append(("%" + flags.replace("0", "") + (width or "") + "s") % text)
                continue
            integer = int(number)
            if conversion in "ouxX" and integer < 0:
                integer += 1 << 64
            letter = "d" if conversion in "diu" else conversion
            out.append((head + letter) % integer)
        elif conversion in "eEfFgG":
            out.append((head + conversion) % _num(value))
        elif conversion == "c":
            if _is_numeric(value) and value is not _UNINIT:
                code = int(_num(value))
                char = chr(code) if 0 <= code < 0x110000 else ""
            else:
                char = cast(str, value)[:1] or "\0"
            out.append(("%" + flags + (width or "") + "s") % char)
        else:
            text = _num_str(value, convfmt) if type(value) is float else cast(str, value)
            out.append((head + "s") % text)
    out.append(fmt[position:])
    return "".join(out)


# -- awk: lexer ---------------------------------------------------------------------------------------------

_AWK_KEYWORDS = frozenset(
    {
        "BEGIN",
        "END",
        "BEGINFILE",
        "ENDFILE",
        "function",
        "func",
        "if",
        "else",
        "while",
        "for",
        "do",
        "break",
        "continue",
        "next",
        "nextfile",
        "exit",
        "return",
        "delete",
        "in",
        "getline",
        "print",
        "printf",
    }
)
_AWK_BUILTINS = frozenset(
    {
        "length",
        "substr",
        "index",
        "split",
        "sub",
        "gsub",
        "gensub",
        "match",
        "sprintf",
        "sin",
        "cos",
        "atan2",
        "exp",
        "log",
        "sqrt",
        "int",
        "rand",
        "srand",
        "tolower",
        "toupper",
        "system",
        "close",
        "fflush",
        "systime",
        "strftime",
        "mktime",
        "asort",
        "asorti",
        "and",
        "or",
        "xor",
        "lshift",
        "rshift",
        "compl",
        "strtonum",
        "isarray",
        "typeof",
    }
)
_AWK_OPERATORS = (
    "**=",
    "+=",
    "-=",
    "*=",
    "/=",
    "%=",
    "^=",
    "**",
    "==",
    "<=",
    ">=",
    "!=",
    "!~",
    "++",
    "--",
    "&&",
    "||",
    ">>",
    "|&",
    "{",
    "}",
    "(",
    ")",
    "[",
    "]",
    ";",
    ",",
    "+",
    "-",
    "*",
    "/",
    "%",
    "^",
    "!",
    ">",
    "<",
    "|",
    "?",
    ":",
    "~",
    "$",
    "=",
)
# After these, "/" divides; elsewhere it starts a regular expression.
_AWK_OPERAND_END = frozenset(
    {"NUMBER", "STRING", "ERE", "NAME", "BUILTIN", ")", "]", "$", "++", "--"}
)
_AWK_STRING_ESCAPES = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "\\": "\\",
    '"': '"',
    "/": "/",
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "v": "\v",
}


def _awk_unescape(text: str) -> str:
    """A string's escape sequences, as in awk string literals and ``-v`` assignments."""
    if "\\" not in text:
        return text
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        index += 1
        if char != "\\" or index >= len(text):
            out.append(char)
            continue
        following = text[index]
        index += 1
        if following in _AWK_STRING_ESCAPES:
            out.append(_AWK_STRING_ESCAPES[following])
        elif following in "01234567":
            digits = following
            while len(digits) < 3 and index < len(text) and text[index] in "01234567":
                digits += text[index]
                index += 1
            out.append(chr(int(digits, 8)))
        elif following == "x" and index < len(text) and text[index] in "0123456789abcdefABCDEF":
            digits = ""
            while len(digits) < 2 and index < len(text) and text[index] in "0123456789abcdefABCDEF":
                digits += text[index]
                index += 1
            out.append(chr(int(digits, 16)))
        elif following == "\n":
            pass
        else:
            out.append(following)
    return "".join(out)


@dataclass
class _Token:
    kind: str  # NUMBER STRING ERE NAME FUNC_NAME BUILTIN NEWLINE EOF, a keyword, an operator
    text: str
    line: int
    column: int
    number: float = 0.0


class _AwkSyntaxError(Exception):
    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(message)
        self.line = line
        self.column = column


def _awk_tokens(source: str) -> list[_Token]:
    tokens: list[_Token] = []
    index, line, line_start = 0, 1, 0
    length = len(source)

    def fail(message: str) -> NoReturn:
        raise _AwkSyntaxError(message, line, index - line_start)

    while index < length:
        char = source[index]
        if char in " \t\r":
            index += 1
            continue
        if char == "\\" and source.startswith("\n", index + 1):
            index += 2
            line, line_start = line + 1, index
            continue
        if char == "\\" and source.startswith("\r\n", index + 1):
            index += 3
            line, line_start = line + 1, index
            continue
        if char == "#":
            while index < length and source[index] != "\n":
                index += 1
            continue
        column = index - line_start
        if char == "\n":
            tokens.append(_Token("NEWLINE", "\n", line, column))
            index += 1
            line, line_start = line + 1, index
            continue
        previous = tokens[-1].kind if tokens else ""
        if char == '"':
            index += 1
            out: list[str] = []
            while True:
                if index >= length or source[index] == "\n":
                    fail("unterminated string")
                current = source[index]
                if current == '"':
                    index += 1
                    break
                if current == "\\" and index + 1 < length:
                    out.append(source[index : index + 2])
                    index += 2
                    continue
                out.append(current)
                index += 1
            tokens.append(_Token("STRING", _awk_unescape("".join(out)), line, column))
            continue
        if char == "/" and previous not in _AWK_OPERAND_END:
            index += 1
            out = []
            in_bracket = False
            while True:
                if index >= length or source[index] == "\n":
                    fail("unterminated regexp")
                current = source[index]
                if current == "\\" and index + 1 < length:
                    pair = source[index : index + 2]
                    out.append("/" if pair == "\\/" else pair)
                    index += 2
                    continue
                if in_bracket:
                    if current == "]" and not (out and out[-1] in ("[", "[^")):
                        in_bracket = False
                    elif current == "[" and source.startswith((":", ".", "="), index + 1):
                        end = source.find(source[index + 1] + "]", index + 2)
                        if end > 0:
                            out.append(source[index : end + 2])
                            index = end + 2
                            continue
                elif current == "[":
                    in_bracket = True
                    if source.startswith("^", index + 1):
                        out.append("[^")
                        index += 2
                        continue
                elif current == "/":
                    index += 1
                    break
                out.append(current)
                index += 1
            tokens.append(_Token("ERE", "".join(out), line, column))
            continue
        if char.isdigit() or (char == "." and index + 1 < length and source[index + 1].isdigit()):
            hexadecimal = re.compile(r"0[xX][0-9a-fA-F]+").match(source, index)
            if hexadecimal:
                text = hexadecimal.group()
                tokens.append(_Token("NUMBER", text, line, column, float(int(text, 16))))
                index = hexadecimal.end()
                continue
            found = re.compile(r"(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?").match(source, index)
            assert found is not None
            text = found.group()
            value = float(int(text, 8)) if re.fullmatch(r"0[0-7]+", text) else float(text)
            tokens.append(_Token("NUMBER", text, line, column, value))
            index = found.end()
            continue
        if char.isalpha() or char == "_":
            found = re.compile(r"[A-Za-z_][A-Za-z0-9_]*").match(source, index)
            assert found is not None
            word = found.group()
            index = found.end()
            if word in _AWK_KEYWORDS:
                kind = "function" if word == "func" else word
            elif word in _AWK_BUILTINS:
                kind = "BUILTIN"
            elif index < length and source[index] == "(":
                kind = "FUNC_NAME"
            else:
                kind = "NAME"
            tokens.append(_Token(kind, word, line, column))
            continue
        for operator in _AWK_OPERATORS:
            if source.startswith(operator, index):
                if operator == "/=" and previous not in _AWK_OPERAND_END:
                    continue
                tokens.append(_Token(operator, operator, line, column))
                index += len(operator)
                break
        else:
            fail(f"invalid char '{char}' in expression")
    tokens.append(_Token("EOF", "", line, index - line_start))
    return tokens


# -- awk: the running program -----------------------------------------------------------------------------


class _Next(Exception):
    pass


class _NextFile(Exception):
    pass


class _Exit(Exception):
    pass


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


class _Return(Exception):
    def __init__(self, value: Value) -> None:
        self.value = value


_WHITESPACE_RUN = re.compile(r"[ \t\n]+")
_PARAGRAPH_END = re.compile(r"\n\n+")
_ASSIGNMENT_OPERAND = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


class _Records:
    """Records of one input text, read one at a time with the ``RS`` of that moment."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def next(self, separator: str) -> tuple[str, str] | None:
        text, pos = self.text, self.pos
        if separator == "":
            while pos < len(text) and text[pos] == "\n":
                pos += 1
            if pos >= len(text):
                self.pos = pos
                return None
            found = _PARAGRAPH_END.search(text, pos)
            if found is None:
                self.pos = len(text)
                record = text[pos:]
                return (record[:-1], "\n") if record.endswith("\n") else (record, "")
            self.pos = found.end()
            return text[pos : found.start()], found.group()
        if pos >= len(text):
            return None
        if len(separator) == 1:
            end = text.find(separator, pos)
            if end < 0:
                self.pos = len(text)
                return text[pos:], ""
            self.pos = end + 1
            return text[pos:end], separator
        found = _awk_regex(separator).search(text, pos)
        while found is not None and found.start() == found.end():
            found = (
                _awk_regex(separator).search(text, found.end() + 1)
                if found.end() < len(text)
                else None
            )
        if found is None:
            self.pos = len(text)
            return text[pos:], ""
        self.pos = found.end()
        return text[pos : found.start()], found.group()


@functools.lru_cache(maxsize=256)
def _awk_regex(text: str) -> re.Pattern[str]:
    try:
        return posix_regex(text, extended=True, dialect="awk")
    except RegexSyntaxError as error:
        raise _AwkFatal(f"invalid regexp /{text}/: {error}") from None


def _split_text(text: str, separator: str, newline_too: bool = False) -> list[str]:
    """``text`` split into fields as awk does with ``FS`` = ``separator`` (with ``newline_too``,
    a newline separates fields as well: ``RS = ""``)."""
    if separator == " ":
        if "\t" not in text and "\n" not in text:
            return [piece for piece in text.split(" ") if piece]
        stripped = text.strip(" \t\n")
        return _WHITESPACE_RUN.split(stripped) if stripped else []
    if text == "":
        return []
    if separator == "":
        return list(text)
    if len(separator) == 1:
        if not newline_too:
            return text.split(separator)
        separator = "\\" + separator if separator in "\\^$.[]|()*+?{}/" else separator
    regex = _awk_regex(f"({separator})|\n" if newline_too else separator)
    pieces: list[str] = []
    pos = 0
    for found in regex.finditer(text):
        if found.start() == found.end():
            continue
        pieces.append(text[pos : found.start()])
        pos = found.end()
    pieces.append(text[pos:])
    return pieces


@dataclass
class _Output:
    kind: Literal[">", ">>", "|"]
    chunks: list[str] = field(default_factory=list[str])


@dataclass
class _Function:
    name: str
    params: list[str]
    body: Callable[[], None] = lambda: None


class _AwkRuntime:
    """Variables, the current record and its fields, input and output of one awk program."""

    def __init__(self, ctx: CommandContext) -> None:
        self.ctx = ctx
        limits = ctx.limits if ctx.limits is not None else ExecutionLimits()
        self.loop_limit = limits.max_awk_iterations
        self.globals: dict[str, Slot] = {
            "FS": " ",
            "OFS": " ",
            "ORS": "\n",
            "RS": "\n",
            "NR": 0.0,
            "NF": 0.0,
            "FNR": 0.0,
            "SUBSEP": "\x1c",
            "CONVFMT": "%.6g",
            "OFMT": "%.6g",
            "RSTART": 0.0,
            "RLENGTH": -1.0,
            "FILENAME": "",
            "RT": "",
        }
        environ = _Array({key: _input_value(value) for key, value in ctx.env.items()})
        self.globals["ENVIRON"] = environ
        self.globals["PROCINFO"] = _Array()
        self.frame: list[Slot] = []
        self.depth = 0
        self.functions: dict[str, _Function] = {}
        self.record = ""
        self.record_fs = " "
        self.fields: list[str] | None = []
        self.final: list[str] = []  # stdout written (flushed)
        self.pending: list[str] = []  # stdout still in awk's buffer
        self.err: list[str] = []
        self.outputs: dict[str, _Output] = {}
        self.readers: dict[str, _Records] = {}
        self.command_status: dict[str, int] = {}
        self.main: _Records | None = None
        self.arg_index = 1
        self.read_any_operand = False
        self.rng = random.Random(0)
        self.seed = 0.0
        self.exit_code = 0

    # -- variables

    def var(self, name: str) -> Value:
        value = self.globals.get(name, _UNINIT)
        if type(value) is _Array:
            raise _AwkFatal(f"attempt to use array `{name}' in a scalar context")
        return cast(Value, value)

    def text(self, value: Value) -> str:
        if type(value) is float:
            return _num_str(value, cast(str, self.globals["CONVFMT"]))
        return cast(str, value)

    def output_text(self, value: Value) -> str:
        if type(value) is float:
            return _num_str(value, self.text(self.var("OFMT")))
        return cast(str, value)

    def subscript(self, value: Value) -> str:
        if type(value) is float:
            return str(int(value)) if value.is_integer() else self.text(value)
        return str(value)

    def global_array(self, name: str) -> _Array:
        value = self.globals.get(name)
        if value is None:
            array = _Array()
            self.globals[name] = array
            return array
        if isinstance(value, _Array):
            return value
        raise _AwkFatal(f"attempt to use scalar `{name}' as an array")

    def local_array(self, index: int, name: str) -> _Array:
        value = self.frame[index]
        if isinstance(value, _Array):
            return value
        if value is _UNSET or isinstance(value, _Pending):
            array = _Array()
            if isinstance(value, _Pending):
                value.bind(array)
            self.frame[index] = array
            return array
        raise _AwkFatal(f"attempt to use scalar parameter `{name}' as an array")

    # -- the record

    def set_record(self, text: str) -> None:
        self.record = text
        self.record_fs = self.text(self.var("FS"))
        self.fields = None

    def split_record(self) -> list[str]:
        if self.fields is None:
            paragraph = self.globals.get("RS") == ""
            self.fields = _split_text(
                self.record, self.record_fs, paragraph and self.record_fs != " "
            )
            self.globals["NF"] = float(len(self.fields))
        return self.fields

    def field(self, index_value: Value) -> Value:
        return self.field_at(int(_num(index_value)))

    def field_at(self, index: int) -> Value:
        if index == 0:
            return _input_value(self.record)
        if index < 0:
            raise _AwkFatal(f"attempt to access field {index}")
        fields = self.split_record()
        if index <= len(fields):
            return _input_value(fields[index - 1])
        return ""

    def set_field(self, index_value: Value, value: Value) -> None:
        index = int(_num(index_value))
        if index == 0:
            self.set_record(self.text(value))
            return
        if index < 0:
            raise _AwkFatal(f"attempt to access field {index}")
        fields = self.split_record()
        while len(fields) < index:
            fields.append("")
        fields[index - 1] = self.text(value)
        self.globals["NF"] = float(len(fields))
        self.rebuild()

    def rebuild(self) -> None:
        fields = self.split_record()
        self.record = self.text(self.var("OFS")).join(fields)

    def nf(self) -> Value:
        self.split_record()
        return self.var("NF")

    def set_nf(self, value: Value) -> None:
        fields = self.split_record()
        count = int(_num(value))
        if count < 0:
            raise _AwkFatal(f"NF set to negative value {count}")
        del fields[count:]
        while len(fields) < count:
            fields.append("")
        self.globals["NF"] = float(count)
        self.rebuild()

    # -- input

    def read_file(self, name: str) -> str | None:
        if name in ("-", "/dev/stdin"):
            return self.ctx.stdin
        try:
            return run_now(self.ctx.fs.read_file(self.ctx.fs.resolve_path(self.ctx.cwd, name)))
        except OSError:
            return None

    def next_main_record(self) -> str | None:
        """The next record of the main input (the operands in ``ARGV``, else stdin), with
        ``NR``, ``FNR`` and ``FILENAME`` kept; ``None`` at its end."""
        while True:
            if self.main is not None:
                variables = self.globals
                separator = variables["RS"]
                item = self.main.next(
                    separator if type(separator) is str else self.text(self.var("RS"))
                )
                if item is not None:
                    variables["NR"] = _num(self.var("NR")) + 1
                    variables["FNR"] = _num(self.var("FNR")) + 1
                    variables["RT"] = item[1]
                    return item[0]
                self.main = None
            if not self.open_next_operand():
                return None

    def open_next_operand(self) -> bool:
        argv = self.global_array("ARGV")
        while self.arg_index < int(_num(self.var("ARGC"))):
            operand = self.text(argv.get(str(self.arg_index), ""))
            self.arg_index += 1
            if not operand:
                continue
            if _ASSIGNMENT_OPERAND.match(operand):
                name, _, value = operand.partition("=")
                self.assign_global(name, _input_value(_awk_unescape(value)))
                continue
            content = self.read_file(operand)
            if content is None:
                reason = "No such file or directory"
                path = self.ctx.fs.resolve_path(self.ctx.cwd, operand)
                if run_now(self.ctx.fs.exists(path)):
                    reason = "Is a directory"
                raise _AwkFatal(f"cannot open file `{operand}' for reading: {reason}")
            self.main = _Records(content)
            self.read_any_operand = True
            self.globals["FILENAME"] = operand
            self.globals["FNR"] = 0.0
            return True
        if not self.read_any_operand:
            self.read_any_operand = True
            self.main = _Records(self.ctx.stdin)
            self.globals["FILENAME"] = "-"
            self.globals["FNR"] = 0.0
            return True
        return False

    def assign_global(self, name: str, value: Value) -> None:
        if isinstance(self.globals.get(name), _Array):
            raise _AwkFatal(f"attempt to use array `{name}' in a scalar context")
        if name == "NF":
            self.set_nf(value)
        else:
            self.globals[name] = value

    # -- output

    def write(self, text: str, target: str | None, kind: str) -> None:
        if target is None or (kind != "|" and target in ("/dev/stdout", "-")):
            self.pending.append(text)
            return
        if kind != "|" and target == "/dev/stderr":
            self.err.append(text)
            return
        output = self.outputs.get(target)
        if output is None:
            if kind == "|":
                self.flush()
            output = self.outputs[target] = _Output(cast(Literal[">", ">>", "|"], kind))
            if kind == ">":
                self.write_file(target, "", append=False)
                output.kind = ">>"
        output.chunks.append(text)

    def flush(self) -> None:
        self.final.extend(self.pending)
        self.pending.clear()

    def write_file(self, name: str, text: str, append: bool) -> None:
        path = self.ctx.fs.resolve_path(self.ctx.cwd, name)
        try:
            if append:
                run_now(self.ctx.fs.append_file(path, text))
            else:
                run_now(self.ctx.fs.write_file(path, text))
        except OSError as error:
            raise _AwkFatal(f"can't redirect to `{name}' ({os_reason(error)})") from None

    def run_command(self, command: str, stdin: str | None = None) -> tuple[str, int]:
        """Runs a command line in the same in-memory shell; its stderr goes to awk's."""
        execute = self.ctx.exec
        if execute is None:
            raise UnsupportedHere("awk: running commands")
        script = command
        env: dict[str, str] | None = None
        if stdin is not None:
            env = {"AWK_PIPE_INPUT": stdin}
            script = f'printf "%s" "$AWK_PIPE_INPUT" | (unset AWK_PIPE_INPUT; {command}\n)'
        options: dict[str, Any] = {"cwd": self.ctx.cwd}
        if env is not None:
            options["env"] = env
        result = run_now(execute(script, options))
        self.err.append(result.stderr)
        return result.stdout, result.exit_code

    def close(self, name: str, flush: bool = True) -> float:
        output = self.outputs.pop(name, None)
        if output is not None:
            if output.kind == "|":
                if flush:
                    self.flush()
                stdout, code = self.run_command(name, "".join(output.chunks))
                self.final.append(stdout)
                return float(code)
            self.write_file(name, "".join(output.chunks), append=True)
            return 0.0
        if name in self.readers:
            del self.readers[name]
            return float(self.command_status.pop(name, 0))
        return -1.0

    def close_all(self) -> None:
        # At exit awk closes its pipes before it flushes its own output (gawk does).
        for name in list(self.outputs):
            self.close(name, flush=False)
        self.flush()

    def getline_from(self, name: str, command: bool) -> tuple[float, str]:
        """The next record of a file or command's output, with ``getline``'s status: 1 and the
        record, 0 at its end, -1 if it cannot be read."""
        reader = self.readers.get(name)
        if reader is None:
            if command:
                self.flush()
                stdout, code = self.run_command(name)
                self.command_status[name] = code
                content: str | None = stdout
            else:
                output = self.outputs.get(name)
                if output is not None:
                    self.close(name)
                content = self.read_file(name)
            if content is None:
                return -1.0, ""
            reader = self.readers[name] = _Records(content)
        item = reader.next(self.text(self.var("RS")))
        if item is None:
            return 0.0, ""
        self.globals["RT"] = item[1]
        return 1.0, item[0]


# -- awk: parser, compiling to closures ---------------------------------------------------------------------

Eval = Callable[[], Value]
Action = Callable[[], None]


def _nothing() -> None:
    return None


@dataclass
class _Node:
    """A compiled expression: ``ev`` computes it; lvalues and array names say what they are."""

    ev: Eval
    kind: str = "expr"  # expr, regex, group, paren, name, local, nf, elem, field
    regex: re.Pattern[str] | None = None
    name: str = ""
    slot: int = -1
    items: list[_Node] = field(default_factory=list["_Node"])
    array: Callable[[], _Array] | None = None  # name, local, elem: the array named
    key: Callable[[], str] | None = None  # elem: the subscript
    index: Eval | None = None  # field: the field number
    constant: float | None = None  # a number literal

    @property
    def assignable(self) -> bool:
        return self.kind in ("name", "local", "nf", "elem", "field")


_ASSIGNMENTS = frozenset({"=", "+=", "-=", "*=", "/=", "%=", "^=", "**="})
_RELATIONAL = frozenset({"<", "<=", "==", "!=", ">", ">="})
# What may start the right operand of a concatenation ("-" and "+" are binary there).
_CONCAT_START_STRICT = frozenset(
    {"NUMBER", "STRING", "ERE", "NAME", "FUNC_NAME", "BUILTIN", "$", "(", "++", "--"}
)
_TERMINATORS = frozenset({";", "NEWLINE", "}", "EOF"})


def _power(base: float, exponent: float) -> float:
    try:
        return math.pow(base, exponent)
    except OverflowError:
        return math.inf
    except ValueError:
        if base == 0:
            return math.inf
        return math.copysign(math.nan, -1.0)


def _arithmetic(operator: str, left: float, right: float) -> float:
    if operator == "+":
        return left + right
    if operator == "-":
        return left - right
    if operator == "*":
        return left * right
    if operator == "/":
        if right == 0:
            raise _AwkFatal("division by zero attempted")
        return left / right
    if operator == "%":
        if right == 0:
            raise _AwkFatal("division by zero attempted in `%'")
        return math.fmod(left, right)
    return _power(left, right)


@dataclass
class _Rule:
    kind: str  # BEGIN, END, main
    run: Action


class _AwkParser:
    """Reads an awk program and compiles it into closures over an :class:`_AwkRuntime`."""

    def __init__(self, tokens: list[_Token], rt: _AwkRuntime) -> None:
        self.tokens = tokens
        self.pos = 0
        self.rt = rt
        self.params: dict[str, int] | None = None
        self.loop_depth = 0

    # -- tokens

    def peek(self, ahead: int = 0) -> _Token:
        index = min(self.pos + ahead, len(self.tokens) - 1)
        return self.tokens[index]

    def at(self, *kinds: str) -> bool:
        return self.tokens[self.pos].kind in kinds

    def advance(self) -> _Token:
        token = self.tokens[self.pos]
        if self.pos < len(self.tokens) - 1:
            self.pos += 1
        return token

    def fail(self, message: str = "syntax error") -> NoReturn:
        token = self.peek()
        if token.kind == "EOF" or token.kind == "NEWLINE":
            message = (
                "unexpected newline or end of string" if message == "syntax error" else message
            )
        raise _AwkSyntaxError(message, token.line, token.column)

    def expect(self, kind: str) -> _Token:
        if not self.at(kind):
            self.fail()
        return self.advance()

    def newlines(self) -> None:
        while self.at("NEWLINE"):
            self.advance()

    def terminators(self) -> None:
        while self.at("NEWLINE", ";"):
            self.advance()

    # -- program

    def program(self) -> list[_Rule]:
        rules: list[_Rule] = []
        while True:
            self.terminators()
            if self.at("EOF"):
                return rules
            if self.at("function"):
                self.function()
                continue
            if self.at("BEGINFILE", "ENDFILE"):
                raise UnsupportedHere(f"awk: {self.peek().kind} rules")
            if self.at("BEGIN", "END"):
                kind = self.advance().kind
                if not self.at("{"):
                    self.fail(f"{kind} blocks must have an action part")
                rules.append(_Rule(kind, self.block()))
                continue
            rules.append(_Rule("main", self.pattern_rule()))

    def pattern_rule(self) -> Action:
        if self.at("{"):
            return self.block()
        first = self.expr()
        second: _Node | None = None
        if self.at(","):
            self.advance()
            self.newlines()
            second = self.expr()
        action = self.block() if self.at("{") else self.print_record()
        start_test = self.condition(first)
        if second is None:

            def run() -> None:
                if start_test():
                    action()

            return run
        end_test = self.condition(second)
        active = [False]

        def run_range() -> None:
            if not active[0]:
                if not start_test():
                    return
                active[0] = not end_test()
            elif end_test():
                active[0] = False
            action()

        return run_range

    def print_record(self) -> Action:
        rt = self.rt

        def run() -> None:
            rt.pending.append(rt.record + rt.text(rt.var("ORS")))

        return run

    def condition(self, node: _Node) -> Callable[[], bool]:
        if node.kind == "regex" and node.regex is not None:
            search = node.regex.search
            rt = self.rt
            return lambda: search(rt.record) is not None
        ev = node.ev
        return lambda: _truth(ev())

    def function(self) -> None:
        self.advance()
        if not self.at("NAME", "FUNC_NAME"):
            self.fail()
        name = self.advance().text
        if name in self.rt.functions:
            self.fail(f"function name `{name}' previously defined")
        self.expect("(")
        params: list[str] = []
        while not self.at(")"):
            params.append(self.expect("NAME").text)
            if self.at(","):
                self.advance()
                self.newlines()
            elif not self.at(")"):
                self.fail()
        self.advance()
        self.newlines()
        function = _Function(name, params)
        self.rt.functions[name] = function
        self.params = {param: index for index, param in enumerate(params)}
        try:
            function.body = self.block()
        finally:
            self.params = None

    # -- statements

    def block(self) -> Action:
        self.expect("{")
        statements: list[Action] = []
        while True:
            self.terminators()
            if self.at("}"):
                self.advance()
                break
            if self.at("EOF"):
                self.fail()
            statements.append(self.statement())
        return _sequence(statements)

    def simple_end(self) -> None:
        if self.at(";", "NEWLINE"):
            self.advance()
        elif not self.at("}", "EOF"):
            self.fail()

    def statement(self) -> Action:
        kind = self.peek().kind
        if kind == "{":
            return self.block()
        if kind == ";":
            self.advance()
            return _nothing
        if kind == "if":
            return self.if_statement()
        if kind == "while":
            self.advance()
            self.expect("(")
            condition = self.condition(self.expr())
            self.expect(")")
            if self.at(";"):
                self.advance()
                return self.while_loop(condition, _nothing)
            self.newlines()
            return self.while_loop(condition, self.loop_body())
        if kind == "do":
            self.advance()
            self.newlines()
            body = self.loop_body()
            self.terminators()
            self.expect("while")
            self.expect("(")
            condition = self.condition(self.expr())
            self.expect(")")
            self.simple_end()
            return self.do_loop(body, condition)
        if kind == "for":
            return self.for_statement()
        action = self.simple_statement()
        self.simple_end()
        return action

    def loop_body(self) -> Action:
        self.loop_depth += 1
        try:
            return self.statement()
        finally:
            self.loop_depth -= 1

    def if_statement(self) -> Action:
        self.advance()
        self.expect("(")
        condition = self.condition(self.expr())
        self.expect(")")
        self.newlines()
        then = self.statement()
        mark = self.pos
        self.terminators()
        if self.at("else"):
            self.advance()
            self.newlines()
            otherwise = self.statement()

            def run_else() -> None:
                if condition():
                    then()
                else:
                    otherwise()

            return run_else
        self.pos = mark

        def run() -> None:
            if condition():
                then()

        return run

    def counted(self, kind: str) -> Callable[[int], None]:
        rt = self.rt

        def check(count: int) -> None:
            if count > rt.loop_limit:
                raise AwkLoopLimitError(
                    f"awk: a {kind} loop ran past {rt.loop_limit} iterations "
                    "(limit max_awk_iterations)"
                )

        return check

    def while_loop(self, condition: Callable[[], bool], body: Action) -> Action:
        check = self.counted("while")

        def run() -> None:
            count = 0
            while condition():
                count += 1
                check(count)
                try:
                    body()
                except _Break:
                    break
                except _Continue:
                    pass

        return run

    def do_loop(self, body: Action, condition: Callable[[], bool]) -> Action:
        check = self.counted("do")

        def run() -> None:
            count = 0
            while True:
                count += 1
                check(count)
                try:
                    body()
                except _Break:
                    break
                except _Continue:
                    pass
                if not condition():
                    break

        return run

    def for_statement(self) -> Action:
        self.advance()
        self.expect("(")
        if (
            self.at("NAME")
            and self.peek(1).kind == "in"
            and self.peek(2).kind == "NAME"
            and self.peek(3).kind == ")"
        ):
            variable = self.name_node(self.advance().text)
            self.advance()
            array = self.array_of(self.name_node(self.advance().text))
            self.advance()
            self.newlines()
            body = self.loop_body()
            return self.for_in(variable, array, body)
        init = _nothing if self.at(";") else self.simple_statement()
        self.expect(";")
        self.newlines()
        condition = (lambda: True) if self.at(";") else self.condition(self.expr())
        self.expect(";")
        self.newlines()
        update = _nothing if self.at(")") else self.simple_statement()
        self.expect(")")
        if self.at(";"):
            self.advance()
            body: Action = _nothing
        else:
            self.newlines()
            body = self.loop_body()
        check = self.counted("for")

        def run() -> None:
            init()
            count = 0
            while condition():
                count += 1
                check(count)
                try:
                    body()
                except _Break:
                    break
                except _Continue:
                    pass
                update()

        return run

    def for_in(self, variable: _Node, array: Callable[[], _Array], body: Action) -> Action:
        assign = self.assigner(variable)
        rt = self.rt

        def run() -> None:
            target = array()
            for key in _ordered_keys(rt, target):
                if key not in target:
                    continue
                assign(_input_value(key))
                try:
                    body()
                except _Break:
                    break
                except _Continue:
                    pass

        return run

    def simple_statement(self) -> Action:
        token = self.peek()
        kind = token.kind
        rt = self.rt
        if kind in ("print", "printf"):
            return self.print_statement()
        if kind == "next":
            self.advance()

            def run_next() -> None:
                raise _Next

            return run_next
        if kind == "nextfile":
            self.advance()

            def run_nextfile() -> None:
                raise _NextFile

            return run_nextfile
        if kind in ("exit", "return"):
            self.advance()
            value = None if self.at(*_TERMINATORS) else self.expr()
            if kind == "return":
                if self.params is None:
                    self.fail("`return' used outside function context")

                def run_return() -> None:
                    raise _Return(value.ev() if value is not None else _UNINIT)

                return run_return

            def run_exit() -> None:
                if value is not None:
                    rt.exit_code = int(_num(value.ev())) & 0xFF
                raise _Exit

            return run_exit
        if kind in ("break", "continue"):
            self.advance()
            if self.loop_depth == 0:
                self.fail(f"`{kind}' is not allowed outside a loop")
            error = _Break if kind == "break" else _Continue

            def run_jump() -> None:
                raise error

            return run_jump
        if kind == "delete":
            self.advance()
            if self.at("("):
                self.advance()
                target = self.primary()
                self.expect(")")
            else:
                target = self.primary()
            if target.kind == "elem":
                array, key = target.array, target.key
                assert array is not None
                assert key is not None

                def run_delete() -> None:
                    array().pop(key(), None)

                return run_delete
            if target.kind in ("name", "local"):
                whole = self.array_of(target)
                return lambda: whole().clear()
            self.fail()
        node = self.expr()
        ev = node.ev

        def run() -> None:
            ev()

        return run

    def print_statement(self) -> Action:
        rt = self.rt
        is_printf = self.advance().kind == "printf"
        items: list[_Node] = []
        if not self.at(">", ">>", "|", "|&", *_TERMINATORS):
            items = self.expression_list(no_gt=True)
            if len(items) == 1 and items[0].kind == "group":
                items = items[0].items
        target: _Node | None = None
        kind = ""
        if self.at(">", ">>", "|"):
            kind = self.advance().kind
            target = self.concatenation(no_gt=True)
        elif self.at("|&"):
            raise UnsupportedHere("awk: coprocesses (|&)")
        if is_printf and not items:
            self.fail()
        evs = [item.ev for item in items]
        target_ev = target.ev if target is not None else None

        def emit(text: str) -> None:
            if target_ev is None:
                rt.pending.append(text)
            else:
                rt.write(text, rt.text(target_ev()), kind)

        if is_printf:
            fmt_ev, rest = evs[0], evs[1:]

            def run_printf() -> None:
                fmt = rt.text(fmt_ev())
                emit(_sprintf(fmt, [ev() for ev in rest], rt.text(rt.var("CONVFMT"))))

            return run_printf
        if not evs:

            def run_record() -> None:
                emit(rt.record + rt.text(rt.var("ORS")))

            return run_record
        if len(evs) == 1:
            only = evs[0]

            def run_one() -> None:
                emit(rt.output_text(only()) + rt.text(rt.var("ORS")))

            return run_one

        def run() -> None:
            separator = rt.text(rt.var("OFS"))
            emit(separator.join([rt.output_text(ev()) for ev in evs]) + rt.text(rt.var("ORS")))

        return run

    def expression_list(self, no_gt: bool = False) -> list[_Node]:
        items = [self.expr(no_gt)]
        while self.at(","):
            self.advance()
            self.newlines()
            items.append(self.expr(no_gt))
        return items

    # -- expressions

    def expr(self, no_gt: bool = False) -> _Node:
        left = self.ternary(no_gt)
        if self.at(*_ASSIGNMENTS):
            if not left.assignable:
                self.fail()
            operator = self.advance().kind
            self.newlines()
            right = self.expr(no_gt)
            return self.assignment(left, operator, right)
        return left

    def ternary(self, no_gt: bool) -> _Node:
        condition = self.or_expr(no_gt)
        if not self.at("?"):
            return condition
        self.advance()
        self.newlines()
        yes = self.expr(no_gt)
        self.newlines()
        self.expect(":")
        self.newlines()
        no = self.expr(no_gt)
        test, yes_ev, no_ev = self.condition(condition), yes.ev, no.ev
        return _Node(lambda: yes_ev() if test() else no_ev())

    def or_expr(self, no_gt: bool) -> _Node:
        left = self.and_expr(no_gt)
        while self.at("||"):
            self.advance()
            self.newlines()
            right = self.and_expr(no_gt)
            a, b = self.condition(left), self.condition(right)
            left = _Node(_either(a, b))
        return left

    def and_expr(self, no_gt: bool) -> _Node:
        left = self.in_expr(no_gt)
        while self.at("&&"):
            self.advance()
            self.newlines()
            right = self.in_expr(no_gt)
            a, b = self.condition(left), self.condition(right)
            left = _Node(_both(a, b))
        return left

    def in_expr(self, no_gt: bool) -> _Node:
        left = self.match_expr(no_gt)
        while self.at("in"):
            self.advance()
            if not self.at("NAME"):
                self.fail()
            array = self.array_of(self.name_node(self.advance().text))
            key = self.subscript_of(left.items if left.kind == "group" else [left])
            left = _Node(_membership(array, key))
        return left

    def match_expr(self, no_gt: bool) -> _Node:
        left = self.rel_expr(no_gt)
        while self.at("~", "!~"):
            negate = self.advance().kind == "!~"
            right = self.rel_expr(no_gt)
            regex = self.regex_of(right)
            left = _Node(_matching(self.rt, left.ev, regex, negate))
        return left

    def rel_expr(self, no_gt: bool) -> _Node:
        left = self.piped_getline(self.concatenation(no_gt), no_gt)
        if self.at(*_RELATIONAL) and not (no_gt and self.at(">")):
            operator = self.advance().kind
            right = self.piped_getline(self.concatenation(no_gt), no_gt)
            left = self.comparison(operator, left, right)
        return left

    def piped_getline(self, left: _Node, no_gt: bool) -> _Node:
        while self.at("|") and self.peek(1).kind == "getline":
            self.advance()
            self.advance()
            variable = self.primary() if self.at("NAME", "$") else None
            left = self.getline_node(variable, left, command=True)
        if self.at("|&"):
            raise UnsupportedHere("awk: coprocesses (|&)")
        return left

    def comparison(self, operator: str, left: _Node, right: _Node) -> _Node:
        rt, a, b = self.rt, left.ev, right.ev
        tests: dict[str, Callable[[int], bool]] = {
            "<": lambda c: c < 0,
            "<=": lambda c: c <= 0,
            "==": lambda c: c == 0,
            "!=": lambda c: c != 0,
            ">": lambda c: c > 0,
            ">=": lambda c: c >= 0,
        }
        test = tests[operator]

        def ev() -> Value:
            return 1.0 if test(_compare(a(), b(), cast(str, rt.globals["CONVFMT"]))) else 0.0

        return _Node(ev)

    def concatenation(self, no_gt: bool) -> _Node:
        left = self.additive()
        while self.at(*_CONCAT_START_STRICT):
            right = self.additive()
            left = _Node(_concatenating(self.rt, left.ev, right.ev))
        return left

    def additive(self) -> _Node:
        left = self.multiplicative()
        while self.at("+", "-"):
            operator = self.advance().kind
            right = self.multiplicative()
            left = _Node(_computing(operator, left.ev, right.ev))
        return left

    def multiplicative(self) -> _Node:
        left = self.unary()
        while self.at("*", "/", "%"):
            operator = self.advance().kind
            right = self.unary()
            left = _Node(_computing(operator, left.ev, right.ev))
        return left

    def unary(self) -> _Node:
        if self.at("!"):
            self.advance()
            operand = self.unary()
            test = self.condition(operand)
            return _Node(lambda: 0.0 if test() else 1.0)
        if self.at("-"):
            self.advance()
            operand = self.unary()
            ev = operand.ev
            return _Node(lambda: -_num(ev()))
        if self.at("+"):
            self.advance()
            operand = self.unary()
            ev = operand.ev
            return _Node(lambda: _num(ev()))
        return self.power()

    def power(self) -> _Node:
        base = self.postfix()
        if self.at("^", "**"):
            self.advance()
            exponent = self.unary() if self.at("-", "+", "!") else self.power()
            a, b = base.ev, exponent.ev
            return _Node(lambda: _power(_num(a()), _num(b())))
        return base

    def postfix(self) -> _Node:
        node = self.primary()
        if self.at("++", "--") and node.assignable:
            step = 1.0 if self.advance().kind == "++" else -1.0
            return self.increment(node, step, post=True)
        return node

    def primary(self) -> _Node:
        token = self.peek()
        kind = token.kind
        rt = self.rt
        if kind == "NUMBER":
            self.advance()
            number = token.number
            return _Node(lambda: number, constant=number)
        if kind == "STRING":
            self.advance()
            text = token.text
            return _Node(lambda: text)
        if kind == "ERE":
            self.advance()
            try:
                regex = posix_regex(token.text, extended=True, dialect="awk")
            except RegexSyntaxError as error:
                self.fail(f"invalid regexp /{token.text}/: {error}")
            search = regex.search
            return _Node(lambda: 1.0 if search(rt.record) else 0.0, "regex", regex=regex)
        if kind == "(":
            self.advance()
            self.newlines()
            first = self.expr()
            self.newlines()
            if self.at(","):
                items = [first]
                while self.at(","):
                    self.advance()
                    self.newlines()
                    items.append(self.expr())
                    self.newlines()
                self.expect(")")

                def grouped() -> Value:
                    raise _AwkFatal("a parenthesized list is not a value")

                return _Node(grouped, "group", items=items)
            self.expect(")")
            return _Node(first.ev, "paren", regex=first.regex)
        if kind == "$":
            self.advance()
            if self.at("++", "--"):
                step = 1.0 if self.advance().kind == "++" else -1.0
                index = self.increment(self.primary(), step, post=False)
            elif self.at("-", "+", "!"):
                index = self.unary()
            else:
                index = self.primary()
                if index.constant is not None:  # $1, $3: no conversion per record
                    number, rt = int(index.constant), self.rt
                    node = self.field_node(index.ev)
                    node.ev = lambda: rt.field_at(number)
                    return node
            return self.field_node(index.ev)
        if kind in ("++", "--"):
            self.advance()
            target = self.primary()
            if not target.assignable:
                self.fail()
            return self.increment(target, 1.0 if kind == "++" else -1.0, post=False)
        if kind in ("!", "-", "+"):
            return self.unary()
        if kind == "NAME":
            self.advance()
            if self.at("["):
                self.advance()
                subscripts = self.expression_list()
                self.expect("]")
                return self.element(token.text, subscripts)
            return self.name_node(token.text)
        if kind == "FUNC_NAME":
            self.advance()
            self.expect("(")
            args = [] if self.at(")") else self.expression_list()
            self.newlines()
            self.expect(")")
            return self.call(token.text, args)
        if kind == "BUILTIN":
            self.advance()
            args: list[_Node] = []
            if self.at("("):
                self.advance()
                self.newlines()
                args = [] if self.at(")") else self.expression_list()
                self.newlines()
                self.expect(")")
            elif token.text != "length":
                self.fail()
            return self.builtin(token.text, args)
        if kind == "getline":
            self.advance()
            variable = self.primary() if self.at("NAME", "$") else None
            source: _Node | None = None
            if self.at("<"):
                self.advance()
                source = self.primary()
            return self.getline_node(variable, source, command=False)
        self.fail()

    # -- names, fields, assignment

    def name_node(self, name: str) -> _Node:
        rt = self.rt
        if self.params is not None and name in self.params:
            slot = self.params[name]

            def local() -> Value:
                value = rt.frame[slot]
                if type(value) is float or isinstance(value, str):
                    return value
                if isinstance(value, _Array):
                    raise _AwkFatal(f"attempt to use array `{name}' in a scalar context")
                return _UNINIT

            return _Node(
                local,
                "local",
                name=name,
                slot=slot,
                array=lambda: rt.local_array(slot, name),
            )
        if name == "NF":
            return _Node(rt.nf, "nf", name=name)
        if name in self.rt.functions:
            self.fail(f"function `{name}' called with space between name and `('")
        variables = rt.globals

        def global_value() -> Value:
            value = variables.get(name, _UNINIT)
            if type(value) is _Array:
                raise _AwkFatal(f"attempt to use array `{name}' in a scalar context")
            return cast(Value, value)

        return _Node(global_value, "name", name=name, array=lambda: rt.global_array(name))

    def array_of(self, node: _Node) -> Callable[[], _Array]:
        if node.array is None or node.kind not in ("name", "local"):
            self.fail()
        return node.array

    def subscript_of(self, items: list[_Node]) -> Callable[[], str]:
        rt = self.rt
        if len(items) == 1:
            only = items[0].ev
            return lambda: rt.subscript(only())
        evs = [item.ev for item in items]
        return lambda: rt.text(rt.var("SUBSEP")).join([rt.subscript(ev()) for ev in evs])

    def element(self, name: str, subscripts: list[_Node]) -> _Node:
        array = self.array_of(self.name_node(name))
        key = self.subscript_of(subscripts)

        def ev() -> Value:
            target = array()
            subscript = key()
            value = target.get(subscript)
            if value is None:
                target[subscript] = value = _UNINIT
            return value

        return _Node(ev, "elem", name=name, array=array, key=key)

    def field_node(self, index: Eval) -> _Node:
        rt = self.rt
        return _Node(lambda: rt.field(index()), "field", index=index)

    def assigner(self, node: _Node) -> Callable[[Value], None]:
        """A function storing a value into the lvalue ``node`` (evaluating its subscript or
        field number each time)."""
        rt = self.rt
        if node.kind == "name":
            name, variables = node.name, rt.globals

            def set_global(value: Value) -> None:
                if type(variables.get(name)) is _Array:
                    raise _AwkFatal(f"attempt to use array `{name}' in a scalar context")
                variables[name] = value

            return set_global
        if node.kind == "local":
            slot, name = node.slot, node.name

            def set_local(value: Value) -> None:
                if isinstance(rt.frame[slot], _Array):
                    raise _AwkFatal(f"attempt to use array `{name}' in a scalar context")
                rt.frame[slot] = value

            return set_local
        if node.kind == "nf":
            return rt.set_nf
        if node.kind == "elem":
            array, key = node.array, node.key
            assert array is not None
            assert key is not None

            def set_element(value: Value) -> None:
                array()[key()] = value

            return set_element
        if node.kind == "field":
            index = node.index
            assert index is not None
            return lambda value: rt.set_field(index(), value)
        self.fail()

    def locator(self, node: _Node) -> Callable[[], tuple[Eval, Callable[[Value], None]]]:
        """For read-modify-write (``+=``, ``++``): the lvalue's getter and setter, with its
        subscript or field number evaluated once."""
        rt = self.rt
        if node.kind == "elem":
            array, key = node.array, node.key
            assert array is not None
            assert key is not None

            def locate_element() -> tuple[Eval, Callable[[Value], None]]:
                target, subscript = array(), key()

                def set_element(value: Value) -> None:
                    target[subscript] = value

                return (lambda: target.get(subscript, _UNINIT)), set_element

            return locate_element
        if node.kind == "field":
            index = node.index
            assert index is not None

            def locate_field() -> tuple[Eval, Callable[[Value], None]]:
                number = index()
                return (lambda: rt.field(number)), (lambda value: rt.set_field(number, value))

            return locate_field
        getter, setter = node.ev, self.assigner(node)
        return lambda: (getter, setter)

    def assignment(self, target: _Node, operator: str, right: _Node) -> _Node:
        value_ev = right.ev
        if operator == "=":
            store = self.assigner(target)

            def assign() -> Value:
                value = value_ev()
                store(value)
                return value

            return _Node(assign)
        locate = self.locator(target)
        arithmetic = "^" if operator == "**=" else operator[0]

        def update() -> Value:
            getter, setter = locate()
            value = _arithmetic(arithmetic, _num(getter()), _num(value_ev()))
            setter(value)
            return value

        return _Node(update)

    def increment(self, target: _Node, step: float, post: bool) -> _Node:
        if not target.assignable:
            self.fail()
        if target.kind == "name" and target.name != "NF":
            name, variables = target.name, self.rt.globals

            def bump_global() -> Value:
                old = variables.get(name, _UNINIT)
                if type(old) is _Array:
                    raise _AwkFatal(f"attempt to use array `{name}' in a scalar context")
                number = _num(cast(Value, old))
                variables[name] = number + step
                return number if post else number + step

            return _Node(bump_global)
        locate = self.locator(target)

        def bump() -> Value:
            getter, setter = locate()
            number = _num(getter())
            setter(number + step)
            return number if post else number + step

        return _Node(bump)

    def regex_of(self, node: _Node) -> Callable[[], re.Pattern[str]]:
        if node.kind in ("regex", "paren") and node.regex is not None:
            regex = node.regex
            return lambda: regex
        rt, ev = self.rt, node.ev
        return lambda: _awk_regex(rt.text(ev()))

    # -- getline, calls

    def getline_node(self, variable: _Node | None, source: _Node | None, command: bool) -> _Node:
        rt = self.rt
        store = self.assigner(variable) if variable is not None else None
        source_ev = source.ev if source is not None else None

        def ev() -> Value:
            if source_ev is None:
                record = rt.next_main_record()
                if record is None:
                    return 0.0
            else:
                status, record = rt.getline_from(rt.text(source_ev()), command)
                if status != 1.0:
                    return status
            if store is None:
                rt.set_record(record)
            else:
                store(_input_value(record))
            return 1.0

        return _Node(ev)

    def call(self, name: str, args: list[_Node]) -> _Node:
        rt = self.rt
        if self.params is not None and name in self.params:
            self.fail(f"function `{name}' is a parameter")

        def argument(node: _Node) -> Callable[[], Slot]:
            if node.kind == "name":
                variables, node_name = rt.globals, node.name

                def global_argument() -> Slot:
                    value = variables.get(node_name)
                    if value is None:

                        def bind(array: _Array) -> None:
                            variables[node_name] = array

                        return _Pending(bind)
                    return value

                return global_argument
            if node.kind == "local":
                slot = node.slot

                def local_argument() -> Slot:
                    value = rt.frame[slot]
                    if value is _UNSET:
                        frame = rt.frame

                        def bind(array: _Array) -> None:
                            frame[slot] = array

                        return _Pending(bind)
                    return value

                return local_argument
            return node.ev

        evs = [argument(arg) for arg in args]

        def ev() -> Value:
            function = rt.functions.get(name)
            if function is None:
                raise _AwkFatal(f"function `{name}' not defined")
            if len(evs) > len(function.params):
                raise _AwkFatal(f"function `{name}' called with more arguments than declared")
            frame: list[Slot] = [argument() for argument in evs]
            frame.extend([_UNSET] * (len(function.params) - len(frame)))
            saved = rt.frame
            rt.frame = frame
            rt.depth += 1
            try:
                function.body()
                return _UNINIT
            except _Return as returned:
                return returned.value
            finally:
                rt.frame = saved
                rt.depth -= 1

        return _Node(ev)

    def builtin(self, name: str, args: list[_Node]) -> _Node:
        return _awk_builtin(self, name, args)


def _either(a: Callable[[], bool], b: Callable[[], bool]) -> Eval:
    return lambda: 1.0 if a() or b() else 0.0


def _both(a: Callable[[], bool], b: Callable[[], bool]) -> Eval:
    return lambda: 1.0 if a() and b() else 0.0


def _membership(array: Callable[[], _Array], key: Callable[[], str]) -> Eval:
    return lambda: 1.0 if key() in array() else 0.0


def _matching(
    rt: _AwkRuntime, value: Eval, regex: Callable[[], re.Pattern[str]], negate: bool
) -> Eval:
    def ev() -> Value:
        found = regex().search(rt.text(value())) is not None
        return 1.0 if found != negate else 0.0

    return ev


def _concatenating(rt: _AwkRuntime, a: Eval, b: Eval) -> Eval:
    return lambda: rt.text(a()) + rt.text(b())


def _computing(operator: str, a: Eval, b: Eval) -> Eval:
    if operator == "+":
        return lambda: _num(a()) + _num(b())
    if operator == "-":
        return lambda: _num(a()) - _num(b())
    if operator == "*":
        return lambda: _num(a()) * _num(b())
    return lambda: _arithmetic(operator, _num(a()), _num(b()))


def _sequence(actions: list[Action]) -> Action:
    if not actions:
        return _nothing
    if len(actions) == 1:
        return actions[0]
    if len(actions) == 2:
        first, second = actions

        def run_two() -> None:
            first()
            second()

        return run_two

    def run() -> None:
        for action in actions:
            action()

    return run


def _ordered_keys(rt: _AwkRuntime, array: _Array) -> list[str]:
    """The keys of ``array`` for ``for (k in a)``: insertion order, or the order
    ``PROCINFO["sorted_in"]`` names (gawk's ``@ind_str_asc`` and the like)."""
    procinfo = rt.globals.get("PROCINFO")
    order = procinfo.get("sorted_in") if isinstance(procinfo, _Array) else None
    keys = list(array)
    if not order or order == "@unsorted":
        return keys
    how = rt.text(order)
    reverse = how.endswith("_desc")
    if how.startswith("@ind_str"):
        return sorted(keys, reverse=reverse)
    if how.startswith("@ind_num"):
        return sorted(keys, key=_str_to_num, reverse=reverse)
    if how.startswith("@val_str"):
        return sorted(keys, key=lambda k: rt.text(array[k]), reverse=reverse)
    if how.startswith("@val_num"):
        return sorted(keys, key=lambda k: _num(array[k]), reverse=reverse)
    if how.startswith("@val_type"):
        return sorted(
            keys,
            key=lambda k: (not _is_numeric(array[k]), _num(array[k]), rt.text(array[k])),
            reverse=reverse,
        )
    raise UnsupportedHere(f'awk: PROCINFO["sorted_in"] = "{how}"')


# -- awk: built-in functions --------------------------------------------------------------------------------


def _awk_replacement(text: str, gensub: bool) -> Callable[[re.Match[str]], str]:
    """The replacement of ``sub``/``gsub`` (``&`` is the match, ``\\&`` a literal ``&``,
    ``\\\\`` a backslash) or ``gensub`` (also ``\\0``-``\\9``)."""
    pieces: list[str | int] = []
    index = 0
    literal: list[str] = []
    while index < len(text):
        char = text[index]
        following = text[index + 1] if index + 1 < len(text) else ""
        if char == "\\" and following == "&":
            literal.append("&")
            index += 2
        elif char == "\\" and following == "\\":
            literal.append("\\")
            index += 2
        elif char == "\\" and gensub and following.isdigit():
            pieces.append("".join(literal))
            literal.clear()
            pieces.append(int(following))
            index += 2
        elif char == "&":
            pieces.append("".join(literal))
            literal.clear()
            pieces.append(0)
            index += 1
        else:
            literal.append(char)
            index += 1
    pieces.append("".join(literal))
    if len(pieces) == 1:
        constant = cast(str, pieces[0])
        return lambda found: constant

    def replace(found: re.Match[str]) -> str:
        return "".join(
            piece
            if isinstance(piece, str)
            else (found.group(piece) or "")
            if piece <= (found.re.groups)
            else ""
            for piece in pieces
        )

    return replace


def _check_args(parser: _AwkParser, name: str, args: list[_Node], low: int, high: int) -> None:
    if not low <= len(args) <= high:
        parser.fail(f"{name}: called with {len(args)} arguments")


def _awk_builtin(parser: _AwkParser, name: str, args: list[_Node]) -> _Node:
    rt = parser.rt
    evs = [arg.ev for arg in args]

    def text(index: int) -> str:
        return rt.text(evs[index]())

    def number(index: int) -> float:
        return _num(evs[index]())

    def math_function(function: Callable[..., float], count: int) -> _Node:
        _check_args(parser, name, args, count, count)

        def ev() -> Value:
            try:
                return float(function(*[number(i) for i in range(count)]))
            except OverflowError:
                return math.inf
            except ValueError:
                return math.copysign(math.nan, -1.0)

        return _Node(ev)

    if name == "length":
        _check_args(parser, name, args, 0, 1)
        if not args:
            return _Node(lambda: float(len(rt.record)))
        arg = args[0]
        if arg.kind in ("name", "local"):
            array = arg.array
            raw_name, slot = arg.name, arg.slot
            assert array is not None

            def length_of_name() -> Value:
                value = rt.globals.get(raw_name) if arg.kind == "name" else rt.frame[slot]
                if isinstance(value, _Array):
                    return float(len(value))
                if value is None or value is _UNSET or isinstance(value, _Pending):
                    return 0.0
                return float(len(rt.text(cast(Value, value))))

            return _Node(length_of_name)
        return _Node(lambda: float(len(text(0))))
    if name == "substr":
        _check_args(parser, name, args, 2, 3)

        def substr() -> Value:
            value = text(0)
            start = number(1)
            if not start >= 1:  # also NaN
                start = 1.0
            begin = int(start) - 1
            if len(args) == 2:
                return value[begin:]
            count = number(2)
            if not count >= 1:
                return ""
            return value[begin : begin + int(count)]

        return _Node(substr)
    if name == "index":
        _check_args(parser, name, args, 2, 2)
        return _Node(lambda: float(text(0).find(text(1)) + 1))
    if name in ("sub", "gsub"):
        _check_args(parser, name, args, 2, 3)
        regex = parser.regex_of(args[0])
        target = args[2] if len(args) == 3 else parser.field_node(lambda: 0.0)
        if not target.assignable:
            parser.fail(f"{name} third parameter is not a changeable object")
        locate = parser.locator(target)
        every = name == "gsub"

        def substitute() -> Value:
            pattern = regex()
            replace = _awk_replacement(text(1), gensub=False)
            getter, setter = locate()
            result, count = posix_sub(pattern, rt.text(getter()), replace, every=every)
            if count:
                setter(result)
            return float(count)

        return _Node(substitute)
    if name == "gensub":
        _check_args(parser, name, args, 3, 4)
        regex = parser.regex_of(args[0])

        def gensub() -> Value:
            pattern = regex()
            replace = _awk_replacement(text(1), gensub=True)
            how = evs[2]()
            source = text(3) if len(args) == 4 else rt.record
            how_text = rt.text(how)
            if how_text[:1] in ("g", "G"):
                return posix_sub(pattern, source, replace, every=True)[0]
            occurrence = int(_num(how)) if _num(how) >= 1 else 1
            return posix_sub(pattern, source, replace, occurrence=occurrence)[0]

        return _Node(gensub)
    if name == "match":
        _check_args(parser, name, args, 2, 3)
        regex = parser.regex_of(args[1])
        groups = parser.array_of(args[2]) if len(args) == 3 else None

        def match() -> Value:
            found = regex().search(text(0))
            if groups is not None:
                groups().clear()
            if found is None:
                rt.globals["RSTART"], rt.globals["RLENGTH"] = 0.0, -1.0
                return 0.0
            rt.globals["RSTART"] = float(found.start() + 1)
            rt.globals["RLENGTH"] = float(found.end() - found.start())
            if groups is not None:
                target = groups()
                separator = rt.text(rt.var("SUBSEP"))
                for group in range(found.re.groups + 1):
                    if found.group(group) is None:
                        continue
                    target[str(group)] = _input_value(found.group(group))
                    target[f"{group}{separator}start"] = float(found.start(group) + 1)
                    target[f"{group}{separator}length"] = float(len(found.group(group)))
            return float(found.start() + 1)

        return _Node(match)
    if name == "split":
        _check_args(parser, name, args, 2, 4)
        array = parser.array_of(args[1])
        separators = parser.array_of(args[3]) if len(args) == 4 else None
        separator_node = args[2] if len(args) >= 3 else None

        def split() -> Value:
            value = text(0)
            target = array()
            if separator_node is None:
                separator = rt.text(rt.var("FS"))
            elif separator_node.kind == "regex" and separator_node.regex is not None:
                separator = ""
            else:
                separator = rt.text(separator_node.ev())
            if separator_node is not None and separator_node.kind == "regex":
                assert separator_node.regex is not None
                pieces, between = _split_regex(value, separator_node.regex)
            elif separator == " ":
                stripped = value.strip(" \t\n")
                pieces = _WHITESPACE_RUN.split(stripped) if stripped else []
                between = _WHITESPACE_RUN.findall(stripped)
            elif len(separator) == 1:
                pieces = value.split(separator) if value else []
                between = [separator] * max(0, len(pieces) - 1)
            elif separator == "":
                pieces, between = list(value), [""] * max(0, len(value) - 1)
            else:
                pieces, between = _split_regex(value, _awk_regex(separator))
            target.clear()
            for position, piece in enumerate(pieces, 1):
                target[str(position)] = _input_value(piece)
            if separators is not None:
                found = separators()
                found.clear()
                for position, piece in enumerate(between, 1):
                    found[str(position)] = piece
            return float(len(pieces))

        return _Node(split)
    if name == "sprintf":
        if not args:
            parser.fail("sprintf: no arguments")
        return _Node(
            lambda: _sprintf(text(0), [ev() for ev in evs[1:]], rt.text(rt.var("CONVFMT")))
        )
    if name == "sin":
        return math_function(math.sin, 1)
    if name == "cos":
        return math_function(math.cos, 1)
    if name == "atan2":
        return math_function(math.atan2, 2)
    if name == "exp":
        return math_function(math.exp, 1)
    if name in ("log", "sqrt"):
        function = math.log if name == "log" else math.sqrt

        def checked(x: float) -> float:
            if x < 0:
                rt.err.append(
                    f"awk: cmd. line:1: warning: {name}: received negative argument {_num_str(x, '%.6g')}\n"
                )
                return math.copysign(math.nan, -1.0)
            if x == 0 and name == "log":
                return -math.inf
            return function(x)

        return math_function(checked, 1)
    if name == "int":

        def truncate(x: float) -> float:
            return float(int(x)) if math.isfinite(x) else x

        return math_function(truncate, 1)
    if name == "rand":
        _check_args(parser, name, args, 0, 0)
        return _Node(lambda: rt.rng.random())
    if name == "srand":
        _check_args(parser, name, args, 0, 1)

        def srand() -> Value:
            previous = rt.seed
            rt.seed = number(0) if args else float(int(time.time()))
            rt.rng.seed(rt.seed)
            return previous

        return _Node(srand)
    if name in ("tolower", "toupper"):
        _check_args(parser, name, args, 1, 1)
        if name == "tolower":
            return _Node(lambda: text(0).lower())
        return _Node(lambda: text(0).upper())
    if name == "system":
        _check_args(parser, name, args, 1, 1)

        def system() -> Value:
            rt.flush()
            stdout, code = rt.run_command(text(0))
            rt.final.append(stdout)
            return float(code)

        return _Node(system)
    if name == "close":
        _check_args(parser, name, args, 1, 2)
        return _Node(lambda: rt.close(text(0)))
    if name == "fflush":
        _check_args(parser, name, args, 0, 1)
        return _Node(lambda: 0.0)
    if name == "systime":
        _check_args(parser, name, args, 0, 0)
        return _Node(lambda: float(int(time.time())))
    if name == "strftime":
        _check_args(parser, name, args, 0, 3)

        def strftime() -> Value:
            fmt = text(0) if args else "%a %b %e %H:%M:%S %Z %Y"
            stamp = number(1) if len(args) >= 2 else time.time()
            try:
                moment = datetime.fromtimestamp(int(stamp), UTC)
            except (OverflowError, OSError, ValueError):
                return ""
            return moment.strftime(fmt)

        return _Node(strftime)
    if name == "mktime":
        _check_args(parser, name, args, 1, 2)

        def mktime() -> Value:
            parts = text(0).split()
            if len(parts) < 6:
                return -1.0
            try:
                year, month, day, hour, minute, second = (int(part) for part in parts[:6])
                return float(calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0)))
            except (ValueError, OverflowError):
                return -1.0

        return _Node(mktime)
    if name in ("and", "or", "xor"):
        if len(args) < 2:
            parser.fail(f"{name}: called with less than two arguments")

        def bits() -> Value:
            values = [int(number(i)) for i in range(len(args))]
            result = values[0]
            for value in values[1:]:
                result = (
                    result & value
                    if name == "and"
                    else result | value
                    if name == "or"
                    else result ^ value
                )
            return float(result)

        return _Node(bits)
    if name in ("lshift", "rshift"):
        _check_args(parser, name, args, 2, 2)
        if name == "lshift":
            return _Node(lambda: float(int(number(0)) << int(number(1))))
        return _Node(lambda: float(int(number(0)) >> int(number(1))))
    if name == "compl":
        _check_args(parser, name, args, 1, 1)
        return _Node(lambda: float(~int(number(0)) & ((1 << 53) - 1)))
    if name == "strtonum":
        _check_args(parser, name, args, 1, 1)

        def strtonum() -> Value:
            value = evs[0]()
            if type(value) is float:
                return value
            stripped = rt.text(value).strip()
            if re.fullmatch(r"[-+]?0[xX][0-9a-fA-F]+", stripped):
                return float(int(stripped, 16))
            if re.fullmatch(r"[-+]?0[0-7]+", stripped):
                return float(int(stripped, 8))
            return _num(value)

        return _Node(strtonum)
    if name in ("isarray", "typeof"):
        _check_args(parser, name, args, 1, 1)
        arg = args[0]

        def raw() -> Slot | None:
            if arg.kind == "name":
                return rt.globals.get(arg.name)
            if arg.kind == "local":
                return rt.frame[arg.slot]
            return arg.ev()

        if name == "isarray":
            return _Node(lambda: 1.0 if isinstance(raw(), _Array) else 0.0)

        def typeof() -> Value:
            value = raw()
            if isinstance(value, _Array):
                return "array"
            if value is None or value is _UNSET or isinstance(value, _Pending) or value is _UNINIT:
                return "untyped" if arg.kind in ("name", "local") else "unassigned"
            if type(value) is float:
                return "number"
            if type(value) is _StrNum:
                return "strnum"
            return "string"

        return _Node(typeof)
    if name in ("asort", "asorti"):
        _check_args(parser, name, args, 1, 3)
        source = parser.array_of(args[0])
        destination = parser.array_of(args[1]) if len(args) >= 2 else None
        how = args[2].ev if len(args) == 3 else None

        def sort_array() -> Value:
            values = source()
            if name == "asort":
                items: list[Value] = list(values.values())
            else:
                items = list(values)
            reverse = False
            by_string = name == "asorti"
            if how is not None:
                spec = rt.text(how())
                reverse = spec.endswith("_desc")
                by_string = "_str" in spec or (name == "asorti" and "_num" not in spec)
            if by_string:
                ordered = sorted(items, key=rt.text, reverse=reverse)
            else:
                ordered = sorted(
                    items,
                    key=lambda v: (
                        not _is_numeric(v),
                        _num(v) if _is_numeric(v) else 0.0,
                        rt.text(v),
                    ),
                    reverse=reverse,
                )
            target = destination() if destination is not None else values
            target.clear()
            for position, item in enumerate(ordered, 1):
                target[str(position)] = item
            return float(len(ordered))

        return _Node(sort_array)
    parser.fail(f"function `{name}' not defined")


def _split_regex(text: str, regex: re.Pattern[str]) -> tuple[list[str], list[str]]:
    if text == "":
        return [], []
    pieces: list[str] = []
    between: list[str] = []
    pos = 0
    for found in regex.finditer(text):
        if found.start() == found.end():
            continue
        pieces.append(text[pos : found.start()])
        between.append(found.group())
        pos = found.end()
    pieces.append(text[pos:])
    return pieces, between


# -- awk: the command ---------------------------------------------------------------------------------------


def _awk_syntax_message(source: str, error: _AwkSyntaxError) -> str:
    lines = source.split("\n")
    text = lines[error.line - 1] if 0 < error.line <= len(lines) else ""
    where = f"awk: cmd. line:{error.line}:"
    return f"{where} {text}\n{where} {' ' * error.column}^ {error}\n"


class Awk:
    """POSIX awk with gawk's extensions (``gensub``, ``asort``, ``strftime``,
    ``PROCINFO["sorted_in"]``, ...). ``system()``, ``print | cmd`` and ``cmd | getline`` run
    command lines in the same in-memory shell."""

    name = "awk"

    async def execute(self, args: list[str], ctx: CommandContext) -> ExecResult:
        program: list[str] = []
        assignments: list[str] = []
        separator: str | None = None
        index = 0
        while index < len(args):
            arg = args[index]
            if arg == "--":
                index += 1
                break
            if not arg.startswith("-") or arg == "-":
                break
            index += 1
            flag, value = arg[:2], arg[2:]
            if flag in ("-F", "-v", "-f", "-e") or arg in (
                "--field-separator",
                "--assign",
                "--file",
                "--source",
            ):
                if arg.startswith("--"):
                    flag = {
                        "--field-separator": "-F",
                        "--assign": "-v",
                        "--file": "-f",
                        "--source": "-e",
                    }[arg]
                    value = ""
                if not value:
                    if index >= len(args):
                        return exec_result(
                            stderr=f"awk: option requires an argument -- {flag[1]}\n", exit_code=2
                        )
                    value = args[index]
                    index += 1
                if flag == "-F":
                    separator = _awk_unescape(value)
                elif flag == "-v":
                    if not _ASSIGNMENT_OPERAND.match(value):
                        return exec_result(
                            stderr=f"awk: `{value}' argument to `-v' not in `var=value' form\n",
                            exit_code=2,
                        )
                    assignments.append(value)
                elif flag == "-e":
                    program.append(value)
                else:
                    try:
                        program.append(await read_text(ctx, value))
                    except OSError as error:
                        return exec_result(
                            stderr=f"awk: fatal: can't open source file `{value}' for reading: "
                            f"{os_reason(error)}\n",
                            exit_code=2,
                        )
            elif arg in ("--posix", "--traditional", "--re-interval", "-P", "-c", "-r"):
                continue
            else:
                return unsupported(f"awk: the option {arg}")
        operands = args[index:]
        if not program:
            if not operands:
                return exec_result(
                    stderr="usage: awk [POSIX or GNU style options] -f progfile [--] file ...\n"
                    "usage: awk [POSIX or GNU style options] [--] 'program' file ...\n",
                    exit_code=2,
                )
            program.append(operands.pop(0))
        source = "\n".join(program)
        rt = _AwkRuntime(ctx)
        if separator is not None:
            rt.globals["FS"] = separator
        argv = _Array({"0": "awk"})
        for position, operand in enumerate(operands, 1):
            argv[str(position)] = _input_value(operand)
        rt.globals["ARGV"] = argv
        rt.globals["ARGC"] = float(len(operands) + 1)
        try:
            for assignment in assignments:
                name, _, value = assignment.partition("=")
                rt.assign_global(name, _input_value(_awk_unescape(value)))
            rules = _AwkParser(_awk_tokens(source), rt).program()
        except _AwkSyntaxError as error:
            return exec_result(stderr=_awk_syntax_message(source, error), exit_code=1)
        except UnsupportedHere as error:
            return unsupported(str(error))
        except _AwkFatal as error:
            return exec_result(stderr=f"awk: fatal: {error}\n", exit_code=2)
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(limit, 20_000))
        try:
            code = self._run(rt, rules)
        except _AwkFatal as error:
            rt.flush()
            rt.err.append(f"awk: fatal: {error}\n")
            code = 2
        except RecursionError:
            rt.flush()
            rt.err.append("awk: fatal: function calls nested too deeply\n")
            code = 2
        except UnsupportedHere as error:
            rt.flush()
            rt.err.append(unsupported(str(error)).stderr)
            code = 2
        finally:
            sys.setrecursionlimit(limit)
        return exec_result("".join(rt.final), "".join(rt.err), code)

    def _run(self, rt: _AwkRuntime, rules: list[_Rule]) -> int:
        begins = [rule.run for rule in rules if rule.kind == "BEGIN"]
        mains = [rule.run for rule in rules if rule.kind == "main"]
        ends = [rule.run for rule in rules if rule.kind == "END"]
        try:
            for begin in begins:
                begin()
            if mains or ends:
                body = _sequence(mains)
                while (record := rt.next_main_record()) is not None:
                    rt.set_record(record)
                    try:
                        body()
                    except _Next:
                        pass
                    except _NextFile:
                        rt.main = None
        except _Exit:
            pass  # `exit` skips the rest of the input; END actions still run
        except (_Next, _NextFile):
            raise _AwkFatal("`next' used in BEGIN action") from None
        try:
            for end in ends:
                end()
        except _Exit:
            pass
        except (_Next, _NextFile):
            raise _AwkFatal("`next' used in END action") from None
        rt.close_all()
        return rt.exit_code
