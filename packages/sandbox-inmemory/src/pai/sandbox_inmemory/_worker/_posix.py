"""POSIX regular expressions for Python's ``re``, and the plumbing the text tools share.

GNU grep, sed and awk read POSIX regular expressions (basic or extended, with GNU's
extensions); :func:`posix_regex` translates one to a Python pattern: bracket expressions with
``[:classes:]`` (C locale), BRE's ``\\(``/``\\{``/``\\+``, intervals, backreferences, ``\\<``
``\\>`` ``\\b`` ``\\w`` ``\\s``, a ``*`` with nothing to repeat taken literally, ``.``
matching a newline, ``^``/``$`` anchoring the whole text. One difference remains: POSIX takes the
longest of alternatives matching at the same place (``ab|abcd`` on ``abcd`` is ``abcd``), Python
the first. grep and sed split a pattern's top-level alternatives and choose the longest
themselves (:class:`Matcher`); inside a group, the first one wins. :func:`posix_sub` replaces
matches as sed's ``s`` and awk's ``gsub`` do (an empty match right after a match does not count).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, cast

from just_bash.types import CommandContext, ExecResult

__all__ = [
    "Dialect",
    "Matcher",
    "RegexSyntaxError",
    "UnsupportedHere",
    "UsageError",
    "build_matcher",
    "exec_result",
    "long_option",
    "os_reason",
    "posix_regex",
    "posix_sub",
    "read_text",
    "run_now",
    "translate",
    "unsupported",
]

T = TypeVar("T")

_PROVIDER = "the in-memory provider"
_ALTERNATIVE = 'use provider = "docker" or the local provider for it'


def exec_result(stdout: str = "", stderr: str = "", exit_code: int = 0) -> ExecResult:
    return ExecResult(stdout=stdout, stderr=stderr, exit_code=exit_code)


class UnsupportedHere(Exception):
    """A feature of the real tool this implementation does not have (exit code 2)."""


def run_now(awaitable: Awaitable[T]) -> T:
    """The value of a coroutine that completes without suspending (the sandbox filesystem's
    operations and the shell's ``exec`` of a command that does not wait), from synchronous code.

    Raises :class:`UnsupportedHere` if it would suspend (a command that sleeps, say)."""
    coroutine = cast(Coroutine[Any, Any, T], awaitable)
    try:
        coroutine.send(None)
    except StopIteration as done:
        return cast(T, done.value)
    coroutine.close()
    raise UnsupportedHere(f"a command that waits cannot run inside awk on {_PROVIDER}")


async def read_text(ctx: CommandContext, name: str) -> str:
    return await ctx.fs.read_file(ctx.fs.resolve_path(ctx.cwd, name))


def os_reason(error: OSError) -> str:
    if isinstance(error, FileNotFoundError):
        return "No such file or directory"
    if isinstance(error, IsADirectoryError):
        return "Is a directory"
    if isinstance(error, NotADirectoryError):
        return "Not a directory"
    if isinstance(error, PermissionError):
        return "Permission denied"
    return str(error) or type(error).__name__


def unsupported(what: str) -> ExecResult:
    return exec_result(
        stderr=f"{what}: not supported by {_PROVIDER} (pai-sandbox-inmemory); {_ALTERNATIVE}\n",
        exit_code=2,
    )


# -- POSIX regular expressions ----------------------------------------------------------------------


class RegexSyntaxError(ValueError):
    """A regular expression the GNU tools would refuse (the message is theirs)."""


Dialect = Literal["grep", "sed", "awk"]

_CLASSES = {
    "alpha": "a-zA-Z",
    "digit": "0-9",
    "alnum": "0-9A-Za-z",
    "upper": "A-Z",
    "lower": "a-z",
    "space": " \\t\\n\\r\\f\\v",
    "blank": " \\t",
    "punct": "!-/:-@\\[-`{-~",
    "print": " -~",
    "graph": "!-~",
    "cntrl": "\\x00-\\x1f\\x7f",
    "xdigit": "0-9A-Fa-f",
}
_WORD = "[A-Za-z0-9_]"
_ESCAPES = {
    "w": _WORD,
    "W": "[^A-Za-z0-9_]",
    "s": "[ \\t\\n\\r\\f\\v]",
    "S": "[^ \\t\\n\\r\\f\\v]",
}
_ANCHORS = {
    "<": r"\b(?=[A-Za-z0-9_])",
    ">": r"\b(?<=[A-Za-z0-9_])",
    "`": r"\A",
    "'": r"\Z",
    "B": r"\B",
}
_AWK_CHARS = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v", "a": "\a", "b": "\b"}
_UNMATCHED_BRACKET = "Unmatched [, [^, [:, [., or [="


def _class_char(char: str) -> str:
    if char in "\\]^-[&~|":
        return "\\" + char
    if char == "\n":
        return "\\n"
    return char


def _escaped_char(pattern: str, index: int, dialect: Dialect) -> tuple[str | None, int]:
    """The character ``\\x`` at ``index`` stands for inside a bracket expression (awk and sed
    read escapes there; grep takes a backslash literally), and the index after it."""
    following = pattern[index + 1] if index + 1 < len(pattern) else ""
    if dialect == "awk" and following:
        if following in _AWK_CHARS:
            return _AWK_CHARS[following], index + 2
        if following in "01234567":
            digits = re.match(r"[0-7]{1,3}", pattern[index + 1 :])
            assert digits is not None
            return chr(int(digits.group(), 8)), index + 1 + len(digits.group())
        return following, index + 2
    if dialect == "sed" and following in ("n", "t", "\\", "]"):
        return {"n": "\n", "t": "\t"}.get(following, following), index + 2
    return None, index


def _bracket(pattern: str, start: int, dialect: Dialect) -> tuple[str, int]:
    """A bracket expression at ``start`` (``[``) as a Python character class, and the index
    after its ``]``."""
    index = start + 1
    negate = index < len(pattern) and pattern[index] == "^"
    if negate:
        index += 1
    items: list[str] = []
    first = True

    def member(at: int) -> tuple[str, int, bool]:  # (char or class text, next index, is_class)
        char = pattern[at]
        if char == "[" and at + 1 < len(pattern) and pattern[at + 1] in ":.=":
            kind = pattern[at + 1]
            end = pattern.find(kind + "]", at + 2)
            if end < 0:
                raise RegexSyntaxError(_UNMATCHED_BRACKET)
            name = pattern[at + 2 : end]
            if kind == ":":
                if name not in _CLASSES:
                    raise RegexSyntaxError("Invalid character class name")
                return _CLASSES[name], end + 2, True
            if len(name) != 1:
                raise RegexSyntaxError("Invalid collation character")
            return name, end + 2, False
        if char == "\\":
            escaped, after = _escaped_char(pattern, at, dialect)
            if escaped is not None:
                return escaped, after, False
        return char, at + 1, False

    while True:
        if index >= len(pattern):
            raise RegexSyntaxError(_UNMATCHED_BRACKET)
        if pattern[index] == "]" and not first:
            index += 1
            break
        first = False
        low, index, is_class = member(index)
        if is_class:
            items.append(low)
            continue
        if index + 1 < len(pattern) and pattern[index] == "-" and pattern[index + 1] != "]":
            high, index, high_is_class = member(index + 1)
            if high_is_class or ord(high) < ord(low):
                raise RegexSyntaxError("Invalid range end")
            items.append(f"{_class_char(low)}-{_class_char(high)}")
        else:
            items.append(_class_char(low))
    return ("[^" if negate else "[") + "".join(items) + "]", index


_HEX = re.compile(r"[0-9A-Fa-f]{1,2}")
_INTERVAL = re.compile(r"\{(\d*)(,(\d*))?\}")
_BRE_INTERVAL = re.compile(r"\\\{(\d*)(,(\d*))?\\\}")


@dataclass
class _Translation:
    alternatives: list[str]
    backrefs: bool


def translate(
    pattern: str, extended: bool, dialect: Dialect, multiline: bool = False
) -> _Translation:
    alternatives: list[str] = []
    out: list[str] = []
    groups: list[int] = []  # indices in ``out`` of open groups
    atom: int | None = None  # index in ``out`` where the last repeatable atom starts
    repeated = False  # the last thing emitted was a repetition
    starting = True  # at the start of the expression, a group or an alternative (BRE rules)
    backrefs = False
    length = len(pattern)
    index = 0

    def emit(text: str, repeatable: bool = True) -> None:
        nonlocal atom, repeated, starting
        atom = len(out) if repeatable else None
        out.append(text)
        repeated = False
        starting = False

    def repeat(text: str) -> None:
        nonlocal repeated, starting
        if atom is None:  # nothing to repeat: GNU takes it literally
            emit(re.escape(text[0]) + re.escape(text[1:]) if len(text) > 1 else re.escape(text))
            return
        if repeated:  # ``a**``, ``a+?``: Python would read a lazy or possessive repeat
            out[atom:] = ["(?:" + "".join(out[atom:]) + ")"]
        out.append(text)
        repeated = True
        starting = False

    def open_group() -> None:
        nonlocal atom, repeated, starting
        groups.append(len(out))
        out.append("(")
        atom, repeated, starting = None, False, True

    def close_group() -> None:
        nonlocal atom, repeated, starting
        atom = groups.pop()
        out.append(")")
        repeated, starting = False, False

    def alternate() -> None:
        nonlocal out, atom, repeated, starting
        if groups:
            out.append("|")
        else:
            alternatives.append("".join(out))
            out = []
        atom, repeated, starting = None, False, True

    def dollar() -> str:
        return "$" if multiline else r"\Z"

    def caret() -> str:
        return "^" if multiline else r"\A"

    while index < length:
        char = pattern[index]
        if char == "[":
            text, index = _bracket(pattern, index, dialect)
            emit(text)
            continue
        if char == "\\":
            if index + 1 >= length:
                raise RegexSyntaxError("Trailing backslash")
            following = pattern[index + 1]
            index += 2
            if not extended and following in "(){}|+?":
                if following == "(":
                    open_group()
                elif following == ")":
                    if not groups:
                        raise RegexSyntaxError("Unmatched ) or \\)")
                    close_group()
                elif following == "|":
                    alternate()
                elif following == "{":
                    interval = _BRE_INTERVAL.match(pattern, index - 2)
                    if interval is None:
                        raise RegexSyntaxError("Unmatched \\{")
                    if starting or atom is None:
                        raise RegexSyntaxError("Invalid preceding regular expression")
                    repeat(_interval_text(interval))
                    index = interval.end()
                elif following == "}":
                    emit(r"\}")
                else:
                    repeat(following)
            elif following in "123456789" and dialect != "awk":
                if int(following) > _closed_groups(out):
                    raise RegexSyntaxError("Invalid back reference")
                backrefs = True
                emit("\\" + following)
            elif following in _ESCAPES:
                emit(_ESCAPES[following])
            elif following in _ANCHORS:
                emit(_ANCHORS[following], repeatable=False)
            elif (following == "b" and dialect != "awk") or (following == "y" and dialect == "awk"):
                emit(r"\b", repeatable=False)
            elif dialect == "awk":
                escaped, index = _escaped_char(pattern, index - 2, dialect)
                emit(re.escape(escaped or following))
            elif dialect == "sed" and following in "nt":
                emit("\\n" if following == "n" else "\\t")
            elif dialect == "sed" and following == "x" and _HEX.match(pattern, index):
                digits = _HEX.match(pattern, index)
                assert digits is not None
                emit(re.escape(chr(int(digits.group(), 16))))
                index = digits.end()
            else:
                emit(re.escape(following))
            continue
        index += 1
        if char == ".":
            emit(".")
        elif char == "*":
            if starting and not extended:
                emit(r"\*")
            else:
                repeat("*")
        elif char == "^":
            if extended or starting:
                emit(caret(), repeatable=False)
                starting = not extended  # BRE: "^*" takes the star literally
            else:
                emit(r"\^")
        elif char == "$":
            at_end = index >= length or (not extended and pattern.startswith(("\\)", "\\|"), index))
            if extended or at_end:
                emit(dollar(), repeatable=False)
            else:
                emit(r"\$")
        elif extended and char in "+?":
            repeat(char)
        elif extended and char == "{":
            interval = _INTERVAL.match(pattern, index - 1)
            if interval is None or atom is None:
                emit(r"\{")
            else:
                repeat(_interval_text(interval))
                index = interval.end()
        elif extended and char == "(":
            open_group()
        elif extended and char == ")":
            if groups:
                close_group()
            else:
                emit(r"\)")
        elif extended and char == "|":
            alternate()
        else:
            emit(re.escape(char))
    if groups:
        raise RegexSyntaxError("Unmatched ( or \\(")
    alternatives.append("".join(out))
    return _Translation(alternatives, backrefs)


def _interval_text(interval: re.Match[str]) -> str:
    low, comma, high = interval.group(1), interval.group(2), interval.group(3)
    if comma is None:
        return "{" + (low or "0") + "}"
    if low and high and int(high) < int(low):
        raise RegexSyntaxError("Invalid content of \\{\\}")
    return "{" + (low or "0") + "," + (high or "") + "}"


def _closed_groups(out: list[str]) -> int:
    return sum(1 for piece in out if piece == ")")


@functools.lru_cache(maxsize=512)
def posix_regex(
    pattern: str,
    *,
    extended: bool,
    dialect: Dialect,
    ignore_case: bool = False,
    multiline: bool = False,
) -> re.Pattern[str]:
    """A POSIX regular expression (basic or extended, with GNU's extensions) as a compiled Python
    pattern. ``.`` matches a newline; ``^``/``$`` match at the ends of the text only (at line
    ends too with ``multiline``, sed's ``M`` flag).

    >>> posix_regex(r"a\\{2\\}[[:digit:]]", extended=False, dialect="sed").pattern
    'a{2}[0-9]'
    """
    translation = translate(pattern, extended, dialect, multiline)
    return _compile("|".join(translation.alternatives), ignore_case, multiline)


def _compile(python_pattern: str, ignore_case: bool, multiline: bool) -> re.Pattern[str]:
    flags = re.DOTALL | (re.IGNORECASE if ignore_case else 0) | (re.MULTILINE if multiline else 0)
    try:
        return re.compile(python_pattern, flags)
    except re.error as error:
        raise RegexSyntaxError(f"Invalid regular expression ({error})") from None
    except (OverflowError, RecursionError):
        raise RegexSyntaxError("Regular expression too big") from None


@dataclass(frozen=True)
class Matcher:
    """Patterns searched together, with the POSIX choice among them: the leftmost match, and of
    those the longest."""

    patterns: tuple[re.Pattern[str], ...]

    def search(self, text: str, pos: int = 0) -> re.Match[str] | None:
        if len(self.patterns) == 1:
            return self.patterns[0].search(text, pos)
        best: re.Match[str] | None = None
        for pattern in self.patterns:
            found = pattern.search(text, pos)
            if found is not None and (
                best is None
                or found.start() < best.start()
                or (found.start() == best.start() and found.end() > best.end())
            ):
                best = found
        return best


def build_matcher(
    patterns: list[str],
    *,
    mode: Literal["G", "E", "F", "P"],
    ignore_case: bool,
    wrap: Callable[[str], str] = lambda text: text,
) -> Matcher:
    pieces: list[str] = []
    for pattern in patterns:
        if mode == "F":
            pieces.append(re.escape(pattern))
        elif mode == "P":
            pieces.append(pattern)
        else:
            translation = translate(pattern, mode == "E", "grep")
            if translation.backrefs or len(translation.alternatives) == 1:
                pieces.append("|".join(translation.alternatives))
            else:
                pieces.extend(translation.alternatives)
    compiled = tuple(_compile(wrap(piece), ignore_case, False) for piece in pieces)
    return Matcher(compiled)


def posix_sub(
    regex: re.Pattern[str] | Matcher,
    text: str,
    replace: Callable[[re.Match[str]], str],
    *,
    occurrence: int = 1,
    every: bool = False,
) -> tuple[str, int]:
    """Replace the ``occurrence``-th match (and every one after it with ``every``) the POSIX way:
    an empty match right after a match is not a match (``s/b*/X/g`` on ``abc`` is ``XaXcX``).
    Returns the text and the number of replacements."""
    out: list[str] = []
    pos, last_end, count, seen = 0, -1, 0, 0
    length = len(text)
    while pos <= length:
        found = regex.search(text, pos)
        if found is None:
            break
        start, end = found.span()
        if start == end and start == last_end:  # empty match adjacent to the previous one
            if start >= length:
                break
            out.append(text[pos : start + 1])
            pos = start + 1
            continue
        seen += 1
        if seen >= occurrence:
            out.append(text[pos:start])
            out.append(replace(found))
            count += 1
        else:
            out.append(text[pos:end])
        last_end = end
        if start == end:
            if end < length:
                out.append(text[end])
            pos = end + 1
        else:
            pos = end
        if count and not every:
            break
    out.append(text[pos:])
    return "".join(out), count


# -- option parsing shared by grep and sed -----------------------------------------------------------


class UsageError(Exception):
    """A command line the tool refuses (the message is the tool's)."""


def long_option(arg: str, known: dict[str, bool | None], tool: str) -> tuple[str, str | None]:
    """``--name[=value]`` resolved to a known long option (unique prefixes allowed, as getopt
    does): its full name and inline value. ``known`` maps names to whether they take a value
    (``None``: an optional one, given with ``=`` only)."""
    name, equals, value = arg[2:].partition("=")
    if name not in known:
        candidates = [option for option in known if option.startswith(name)]
        if len(candidates) != 1:
            verb = "ambiguous" if candidates else "unrecognized"
            raise UsageError(f"{tool}: {verb} option '--{name}'")
        name = candidates[0]
    if equals and known[name] is False:
        raise UsageError(f"{tool}: option '--{name}' doesn't allow an argument")
    return name, value if equals else None
