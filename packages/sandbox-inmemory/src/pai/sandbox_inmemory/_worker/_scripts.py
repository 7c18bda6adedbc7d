"""Scripts run as bash runs them: child shells, script files, ``source``, ``eval``, ``exit``.

Runs inside a worker process only. just-bash 0.2.1 ran a script given to ``sh``/``bash`` by
dropping its comment lines and joining the rest with ``"; "`` (so any multi-line ``if`` was a
parse error that ended the caller's whole command line), in the caller's own shell state, with
positional parameters faked as variables and without the caller's stdin. Here:

- ``sh``/``bash`` (:class:`Shell`) start a new shell as a new bash process would: the exported
  variables only (and ``VAR=x sh f``'s own), exported functions (``export -f``), default options
  plus the flags given (``-e``, ``-u``, ``-o pipefail``, ...), their own positional parameters,
  ``BASH_SOURCE``, cwd and ``exit``; the caller's stdin. The script is ``-c STRING``, a file, or
  stdin (``sh < f``, ``cat f | sh``, ``sh -s``), where a command that reads stdin (``read``)
  reads the rest of the script, as in bash. ``-l`` reads the profile files that exist.
- The whole script text goes to the parser, and runs as bash reads it, a line at a time: a
  syntax error runs the lines before it, then prints ``NAME: line N: syntax error ...`` and
  fails with exit code 2. So does the command line itself (as ``bash -c``), ``eval``'s text and
  a sourced file. A word no command starts with (a stray ``fi``) made just-bash's parser spin
  to its iteration limit, about ten seconds; it is a syntax error at once.
- A file run as a command (``./x.sh``, a script on ``PATH``) starts the interpreter its ``#!`` line
  names (``sh``/``bash``, also through ``/usr/bin/env``, or another command of the shell such as
  ``sed -f``), or a new shell without one; an interpreter the sandbox lacks fails with bash's
  message and a hint naming the provider.
- ``source``/``.`` run the file in the current shell; a ``return`` in it ends the file.
- ``exit`` keeps the output printed before it (just-bash dropped what a compound command, a
  function or an ``a && b`` list had printed, see :class:`ExitKeepingOutput`); ``exec COMMAND``
  ends the shell with the command's status; the output redirections of loops, ``if`` and
  ``case`` (``done > file``), ignored by just-bash, apply.
- Text in ``"..."``, ``$(...)`` and ``${...}`` ends where bash ends it: just-bash's word parser
  took the first ``"`` or ``)`` as the end, so ``"$(cd "$(dirname "$0")" && pwd)"`` came apart.
"""

from __future__ import annotations

import contextvars
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from just_bash.interpreter.errors import (
    BreakError,
    ContinueError,
    ErrexitError,
    ExecutionLimitError,
    ExitError,
    InterpreterError,
    ReturnError,
)
from just_bash.interpreter.interpreter import Interpreter
from just_bash.interpreter.types import InterpreterState, ShellOptions, VariableStore
from just_bash.parser import ParseException, Parser
from just_bash.types import Command, CommandContext, ExecResult

__all__ = [
    "SUBSCRIPT_MESSAGE",
    "SUBSCRIPT_SUBSTITUTION",
    "ExitKeepingOutput",
    "Shell",
    "patch_scripts",
    "run_command_line",
    "run_shell",
    "shell_commands",
]

_INVALID_OPTION_USAGE = (
    "Usage:\t{name} [GNU long option] [option] ...\n"
    "\t{name} [GNU long option] [option] script-file ...\n"
)
_PROVIDER_HINT = (
    '(the in-memory sandbox has no {program}; use provider = "docker", or run it where real '
    "programs exist)"
)

# just-bash 0.2.1 evaluates "$(...)" and "$((...))" inside an array subscript (``${a[$(cmd)]}``,
# ``a[$((i+1))]=x``) through ``nest_asyncio`` and a thread of its own, and gets the arithmetic
# form wrong. Every script (the command line, a child shell's, a sourced file, ``eval``'s text)
# refuses it with a clear message.
SUBSCRIPT_SUBSTITUTION = re.compile(
    r"(?:\$\{[#!]?|(?:^|(?<=[\s;&|(){}]))[A-Za-z_])[A-Za-z0-9_]*\[[^\]\n]*\$\("
)

SUBSCRIPT_MESSAGE = (
    "pai-sandbox-inmemory: $(...) and $((...)) inside an array subscript are not supported by "
    "the in-memory shell; compute the index into a variable first, e.g. i=$((n+1)); "
    'echo "${a[$i]}"\n'
)

_nesting = contextvars.ContextVar[int]("pai_sandbox_inmemory_shell_nesting", default=0)
"""How many child shells enclose the running command (a script that runs itself is bounded)."""


def _variables(env: object) -> dict[str, str]:
    """The interpreter's variables (a ``dict`` subclass just-bash leaves untyped)."""
    return cast("dict[str, str]", env)


def _result(stdout: str = "", stderr: str = "", exit_code: int = 0) -> ExecResult:
    return ExecResult(stdout=stdout, stderr=stderr, exit_code=exit_code)


# -- exit keeps the output printed before it ----------------------------------------------------


class ExitKeepingOutput(ExitError, ErrexitError):
    """What ``exit`` raises. just-bash's compound commands (``{ ...; }``, ``if`` bodies, ...) put
    the output printed so far in front of an ``ErrexitError`` or ``ReturnError`` they pass on, but
    not of an ``ExitError``, so ``f() { echo a; exit 1; }; f`` printed nothing. Being both, this
    exit collects that output; every handler that treats ``ErrexitError`` differently catches
    ``ExitError`` first."""

    def __init__(self, exit_code: int, stdout: str = "", stderr: str = "") -> None:
        InterpreterError.__init__(self, f"exit {exit_code}")
        self.exit_code = exit_code
        self.stdout = stdout
        self.stderr = stderr


_and_or_outputs = contextvars.ContextVar[tuple[tuple[Any, list[tuple[str, str]]], ...]](
    "pai_sandbox_inmemory_and_or_outputs", default=()
)
"""For each ``a && b || c`` list running (innermost last): the list and what its pipelines
printed so far (per task: a background job runs as a task of its own)."""


def _keeping_and_or_output(
    execute_statement: Callable[..., Any], execute_pipeline: Callable[..., Any]
) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """``echo a && exit 1`` printed nothing: just-bash's statement adds each pipeline's output
    to its own but drops it when a later one exits. These wrappers note the output of a list's
    pipelines and put it in front of the exit's."""

    async def statement(self: Interpreter, node: Any) -> ExecResult:
        if len(node.pipelines) < 2:
            return await execute_statement(self, node)
        outputs: list[tuple[str, str]] = []
        token = _and_or_outputs.set((*_and_or_outputs.get(), (node, outputs)))
        try:
            return await execute_statement(self, node)
        except ExitError as error:
            error.prepend_output("".join(o for o, _ in outputs), "".join(e for _, e in outputs))
            raise
        finally:
            _and_or_outputs.reset(token)

    async def pipeline(self: Interpreter, node: Any) -> ExecResult:
        result: ExecResult = await execute_pipeline(self, node)
        running = _and_or_outputs.get()
        if running:
            owner, outputs = running[-1]
            if any(candidate is node for candidate in owner.pipelines):
                outputs.append((result.stdout, result.stderr))
        return result

    return statement, pipeline


def _compound_redirections(execute_command: Callable[..., Any]) -> Callable[..., Any]:
    """Output redirections of ``if``, ``for``, ``while``, ``until`` and ``case``
    (``done > file``) were ignored by just-bash, and a group's (``{ ...; exit 1; } >&2``) too when
    ``exit``, ``return``, ``break`` or ``set -e`` ended it: they now apply, as bash's do."""
    carry = (ExitError, ErrexitError, ReturnError, BreakError, ContinueError)

    async def execute(self: Interpreter, node: Any, stdin: str) -> ExecResult:
        redirections = getattr(node, "redirections", None)
        if not redirections or node.type in ("SimpleCommand", "Subshell", "FunctionDef"):
            return await execute_command(self, node, stdin)
        interpreter: Any = self
        process: Callable[..., Any] = interpreter._process_output_redirections
        try:
            result: ExecResult = await execute_command(self, node, stdin)
        except carry as error:
            output = _result(error.stdout, error.stderr, getattr(error, "exit_code", 0))
            redirected = await process(redirections, output)
            error.stdout, error.stderr = redirected.stdout, redirected.stderr
            raise
        if node.type == "Group":  # just-bash's group applies them when it ends normally
            return result
        return await process(redirections, result)

    return execute


# -- where quoted text and substitutions end ----------------------------------------------------


def _end_of_single(text: str, index: int) -> int:
    """The index after the ``'`` closing the quote opened before ``index``; -1 if none."""
    end = text.find("'", index)
    return -1 if end < 0 else end + 1


def _end_of_escaped(text: str, index: int, close: str) -> int:
    """The index after the ``close`` character ending a ``$'...'`` (``close`` is ``'``) or a
    backquoted substitution (`` ` ``) opened before ``index``, where a backslash escapes the
    next character; -1 if none."""
    while index < len(text):
        char = text[index]
        if char == "\\":
            index += 2
        elif char == close:
            return index + 1
        else:
            index += 1
    return -1


def _end_of_double(text: str, index: int) -> int:
    """The index after the ``"`` closing the quote opened before ``index`` (substitutions inside
    may hold quotes of their own); -1 if none."""
    while index < len(text):
        char = text[index]
        if char == "\\":
            index += 2
        elif char == '"':
            return index + 1
        elif char == "`":
            index = _end_of_escaped(text, index + 1, "`")
        elif char == "$" and text.startswith("(", index + 1):
            index = _end_of_substitution(text, index + 2)
        elif char == "$" and text.startswith("{", index + 1):
            index = _end_of_braces(text, index + 2, quoted=True)
        else:
            index += 1
        if index < 0:
            return -1
    return -1


def _end_of_substitution(text: str, index: int) -> int:
    """The index after the ``)`` closing ``$(`` (or ``$((``) opened before ``index``; -1 if
    none. Quotes and substitutions inside are skipped whole; a comment runs to the line's end."""
    depth = 1
    while index < len(text):
        char = text[index]
        if char == "\\":
            index += 2
            continue
        if char == "'":
            index = _end_of_single(text, index + 1)
        elif char == '"':
            index = _end_of_double(text, index + 1)
        elif char == "`":
            index = _end_of_escaped(text, index + 1, "`")
        elif char == "$" and text.startswith("'", index + 1):
            index = _end_of_escaped(text, index + 2, "'")
        elif char == "$" and text.startswith("(", index + 1):
            index = _end_of_substitution(text, index + 2)
        elif char == "$" and text.startswith("{", index + 1):
            index = _end_of_braces(text, index + 2, quoted=False)
        elif char == "#" and (index == 0 or text[index - 1] in " \t\n;&|("):
            newline = text.find("\n", index)
            index = len(text) if newline < 0 else newline
        elif char == "(":
            depth += 1
            index += 1
        elif char == ")":
            depth -= 1
            index += 1
            if depth == 0:
                return index
        else:
            index += 1
        if index < 0:
            return -1
    return -1


def _end_of_braces(text: str, index: int, *, quoted: bool) -> int:
    """The index after the ``}`` closing ``${`` opened before ``index``; -1 if none. Single
    quotes quote inside it only outside double quotes."""
    depth = 1
    while index < len(text):
        char = text[index]
        if char == "\\":
            index += 2
            continue
        if char == "'" and not quoted:
            index = _end_of_single(text, index + 1)
        elif char == '"':
            index = _end_of_double(text, index + 1)
        elif char == "`":
            index = _end_of_escaped(text, index + 1, "`")
        elif char == "$" and text.startswith("(", index + 1):
            index = _end_of_substitution(text, index + 2)
        elif char == "$" and text.startswith("{", index + 1):
            index = _end_of_braces(text, index + 2, quoted=quoted)
        elif char == "{":
            depth += 1
            index += 1
        elif char == "}":
            depth -= 1
            index += 1
            if depth == 0:
                return index
        else:
            index += 1
        if index < 0:
            return -1
    return -1


def _naive_end(text: str, index: int, opener: str, closer: str) -> int:
    """Where just-bash's word parser ends ``$(``/``${`` (counting ``opener``/``closer`` only)."""
    depth = 1
    while index < len(text) and depth > 0:
        if text[index] == opener:
            depth += 1
        elif text[index] == closer:
            depth -= 1
        index += 1
    return index


def _naive_double_end(text: str, index: int) -> int:
    """Where just-bash's word parser ends a ``"`` quote (the next unescaped ``"``)."""
    while index < len(text) and text[index] != '"':
        index += 2 if text[index] == "\\" and index + 1 < len(text) else 1
    return index + 1


_Chunk = tuple[str, int, int]  # (kind, start, end): "plain", "double", "command" or "braces"


def _word_chunks(value: str, *, quoted: bool, literal_single: bool) -> list[_Chunk] | None:
    """``value`` cut where a ``"..."``, ``$(...)`` or ``${...}`` ends elsewhere than just-bash's
    word parser thinks; None when every such end agrees (the parser is right as it is)."""
    chunks: list[_Chunk] = []
    plain_from = 0
    differs = False
    index = 0
    while index < len(value):
        char = value[index]
        if char == "\\":
            index += 2
            continue
        kind, end, naive = "", -1, -1
        if char == "$" and value.startswith("((", index + 1):
            index = max(_naive_end(value, index + 3, "(", ")"), index + 3)
            continue
        if char == "$" and value.startswith("(", index + 1):
            kind = "command"
            end = _end_of_substitution(value, index + 2)
            naive = _naive_end(value, index + 2, "(", ")")
        elif char == "$" and value.startswith("{", index + 1):
            kind = "braces"
            end = _end_of_braces(value, index + 2, quoted=quoted)
            naive = _naive_end(value, index + 2, "{", "}")
        elif char == "$" and value.startswith("'", index + 1) and not quoted:
            index = _end_of_escaped(value, index + 2, "'")
        elif char == "'" and not quoted and not literal_single:
            index = _end_of_single(value, index + 1)
        elif char == "`":
            index = _end_of_escaped(value, index + 1, "`")
        elif char == '"' and not quoted:
            kind = "double"
            end = _end_of_double(value, index + 1)
            naive = _naive_double_end(value, index + 1)
        else:
            index += 1
        if index < 0:
            return [*chunks, ("plain", plain_from, len(value))] if differs else None
        if not kind:
            continue
        if end < 0:  # unterminated: leave it to just-bash's parser
            break
        if end != naive:
            differs = True
        if plain_from < index:
            chunks.append(("plain", plain_from, index))
        chunks.append((kind, index, end))
        index = plain_from = end
    if not differs:
        return None
    if plain_from < len(value):
        chunks.append(("plain", plain_from, len(value)))
    return chunks


def _patch_word_parser() -> None:
    """Make ``Parser._parse_word_parts`` end quotes and substitutions where bash does."""
    from just_bash.ast.types import (
        CommandSubstitutionPart,
        DoubleQuotedPart,
        LiteralPart,
        TildeExpansionPart,
    )

    original: Callable[..., list[Any]] = Parser._parse_word_parts  # pyright: ignore[reportPrivateUsage]

    def parse_word_parts(self: Parser, value: str, quoted: bool = False, **flags: Any) -> list[Any]:
        if flags.get("single_quoted") or flags.get("in_heredoc") or "$" not in value:
            return original(self, value, quoted, **flags)
        literal_single = bool(flags.get("literal_single_quotes"))
        chunks = _word_chunks(value, quoted=quoted, literal_single=literal_single)
        if chunks is None:
            return original(self, value, quoted, **flags)
        parts: list[Any] = []
        for kind, start, end in chunks:
            text = value[start:end]
            if kind == "double":
                inner = parse_word_parts(self, text[1:-1], True)
                parts.append(DoubleQuotedPart(parts=tuple(inner)))
            elif kind == "command":
                try:
                    parts.append(CommandSubstitutionPart(body=Parser().parse(text[2:-1])))
                except ParseException:
                    parts.append(LiteralPart(value=text))  # as just-bash does
            elif kind == "braces":
                parts.append(self._parse_parameter_expansion(text[2:-1], in_double_quotes=quoted))  # pyright: ignore[reportPrivateUsage]
            else:
                pieces = original(self, text, quoted, **flags)
                # only a word's first character (or one after ":" in an assignment) starts a
                # tilde expansion
                after_colon = bool(flags.get("in_assignment")) and value[start - 1 : start] == ":"
                first = pieces[0] if start > 0 and pieces and not after_colon else None
                if isinstance(first, TildeExpansionPart):
                    pieces[0] = LiteralPart(value="~" + (first.user or ""))
                parts.extend(pieces)
        return parts or [LiteralPart(value="")]

    Parser._parse_word_parts = parse_word_parts  # pyright: ignore[reportAttributeAccessIssue, reportPrivateUsage]


# -- a script's text, as bash reads it: complete lines at a time ---------------------------------


@dataclass(frozen=True, slots=True)
class _Parsed:
    """A script cut where bash would run what it has read: after each line that completes a
    command (``statements[:ends[k][0]]`` are the first ``k + 1`` such lines, whose text ends at
    offset ``ends[k][1]``). ``error`` is the syntax error after them, if any."""

    statements: tuple[Any, ...]
    ends: tuple[tuple[int, int], ...]
    error: ParseException | None


def _parse_script(parser: Any, statements: list[Any], line_end: Callable[[], None]) -> Any:
    """just-bash's ``Parser._parse_script`` loop, calling ``line_end`` after each statement, and
    failing at once on a word no command starts with (a stray ``fi``), where just-bash's loop
    made no progress until its iteration limit (about ten seconds)."""
    from just_bash.ast.types import ScriptNode
    from just_bash.parser.lexer import TokenType

    parser._skip_newlines()
    while not parser._check(TokenType.EOF):
        parser._check_iteration_limit()
        if (
            parser._check(TokenType.HEREDOC_CONTENT)
            and parser.pos in parser._consumed_heredoc_positions
        ):
            parser._advance()
            continue
        start = parser.pos
        statement = parser._parse_statement()
        if statement:
            statements.append(statement)
        line_end()
        parser._skip_separators()
        if parser.pos == start:
            raise parser._error("unexpected token")
    return ScriptNode(statements=tuple(statements))


def _parse_whole_script(parser: Any) -> Any:
    return _parse_script(parser, [], lambda: None)


class _LineParser(Parser):
    """just-bash's parser, noting where each line that completes a command ends."""

    def __init__(self) -> None:
        super().__init__()
        self.statements: list[Any] = []
        self.ends: list[tuple[int, int]] = []

    def _parse_script(self) -> Any:
        return _parse_script(self, self.statements, self._note_line_end)

    def _note_line_end(self) -> None:
        from just_bash.parser.lexer import TokenType

        index = self.pos
        while self.tokens[index].type in (TokenType.SEMICOLON, TokenType.COMMENT):
            index += 1
        token = self.tokens[index]
        if token.type == TokenType.EOF:
            self.ends.append((len(self.statements), token.end))
        elif token.type == TokenType.NEWLINE:
            end = token.end
            while self.tokens[index + 1].type == TokenType.HEREDOC_CONTENT:
                index += 1
                end = self.tokens[index].end
            self.ends.append((len(self.statements), end))


def _parse_lines(text: str) -> _Parsed:
    parser = _LineParser()
    try:
        parser.parse(text)
    except ParseException as error:
        complete = parser.ends[-1][0] if parser.ends else 0
        return _Parsed(tuple(parser.statements[:complete]), tuple(parser.ends), error)
    return _Parsed(tuple(parser.statements), tuple(parser.ends), None)


_TOKEN = re.compile(r"\s*(;;|&&|\|\||[;&|()<>]|[^\s;&|()<>]+)")


def _syntax_error(
    error: ParseException, text: str, where: Callable[[int], str], lines_before: int = 0
) -> str:
    """bash's message for ``error`` in ``text``; ``where(line)`` is its prefix (``f: line 3: ``),
    the line counted from ``lines_before`` lines before ``text``."""
    from just_bash.parser.lexer import TokenType

    def prefix_at(line: int) -> str:
        return where(line + lines_before)

    lines = text.splitlines()
    token = error.token
    if token is not None and token.type == TokenType.EOF:
        return f"{prefix_at(len(lines) + 1)}syntax error: unexpected end of file\n"
    line_text = lines[error.line - 1] if 0 < error.line <= len(lines) else ""
    if token is not None and token.type == TokenType.NEWLINE:
        word = "newline"
    elif token is not None and token.value:
        word = token.value
    else:
        found = _TOKEN.match(line_text, max(error.column - 1, 0))
        if found is None:  # past the last word: the input ended early
            return f"{prefix_at(len(lines) + 1)}syntax error: unexpected end of file\n"
        word = found.group(1)
    prefix = prefix_at(error.line)
    return f"{prefix}syntax error near unexpected token `{word}'\n{prefix}`{line_text}'\n"


# -- running a script in an interpreter ---------------------------------------------------------


class _ScriptReadStdin(ExitError):
    """A command of a script read from stdin consumed some of the script (``read``): the rest
    must be read again. An ``ExitError`` so that ``execute_script`` keeps the output so far."""

    def __init__(self, rest: str) -> None:
        super().__init__(0)
        self.rest = rest


@dataclass(frozen=True, slots=True)
class _Origin:
    """Where a script came from, for bash's syntax-error messages."""

    where: Callable[[int], str]


def _file_origin(name: str) -> _Origin:
    return _Origin(lambda line: f"{name}: line {line}: ")


class _TopLevel:
    """One pass of a script's top-level statements through an interpreter: notes whether the
    last one finished and, for a script read from stdin, gives each line the rest of the script
    as its stdin (and stops when a command read some of it)."""

    def __init__(self, interpreter: Interpreter, text: str, parsed: _Parsed, from_stdin: bool):
        self.interpreter = interpreter
        self.text = text
        self.statements = parsed.statements
        self.starts: dict[int, int] = {}  # id of a line's first statement -> its rest's offset
        if from_stdin:
            first = 0
            for count, end in parsed.ends:
                if first < count:
                    self.starts[id(self.statements[first])] = end
                first = count
        self.last = id(self.statements[-1]) if self.statements else None
        self.reached_end = not self.statements
        self.expected = interpreter.state.group_stdin

    async def execute_statement(self, node: Any) -> ExecResult:
        state = self.interpreter.state
        rest_from = self.starts.get(id(node))
        if rest_from is not None:
            if state.group_stdin is not None and state.group_stdin != self.expected:
                raise _ScriptReadStdin(state.group_stdin)
            self.expected = state.group_stdin = self.text[rest_from:]
        result = await type(self.interpreter).execute_statement(self.interpreter, node)
        if id(node) == self.last:
            self.reached_end = True
        return result

    async def run(self) -> ExecResult:
        from just_bash.ast.types import ScriptNode

        interpreter: Any = self.interpreter
        # execute_script looks the method up on the instance for top-level statements only
        # (compound commands call the one bound when the interpreter was made)
        outer = interpreter.__dict__.get("execute_statement")
        interpreter.execute_statement = self.execute_statement
        try:
            return await self.interpreter.execute_script(ScriptNode(statements=self.statements))
        finally:
            if outer is None:
                del interpreter.execute_statement
            else:
                interpreter.execute_statement = outer


async def _run_text(
    interpreter: Interpreter, text: str, origin: _Origin, *, from_stdin: bool = False
) -> ExecResult:
    """Run ``text`` in ``interpreter`` as bash runs a script: all of it when it parses; else the
    lines before the syntax error, then bash's message and exit code 2. ``from_stdin``: the
    script is the shell's stdin, so a command that reads stdin reads the rest of it.

    ``exit`` (``ExitError``) and ``return`` propagate to the caller, with the output so far.
    """
    if SUBSCRIPT_SUBSTITUTION.search(text):
        return _result(stderr=SUBSCRIPT_MESSAGE, exit_code=2)
    stdout = stderr = ""
    lines_before = 0  # of the script, read as data by its commands (from_stdin)
    while True:
        parsed = _parse_lines(text)
        top_level = _TopLevel(interpreter, text, parsed, from_stdin)
        try:
            result = await top_level.run()
        except _ScriptReadStdin as consumed:
            stdout, stderr = stdout + consumed.stdout, stderr + consumed.stderr
            lines_before += text[: len(text) - len(consumed.rest)].count("\n")
            text = consumed.rest
            continue
        except ExitError as error:
            error.prepend_output(stdout, stderr)
            raise
        stdout, stderr = stdout + result.stdout, stderr + result.stderr
        exit_code = result.exit_code
        if parsed.error is not None and top_level.reached_end:
            stderr += _syntax_error(parsed.error, text, origin.where, lines_before)
            exit_code = 2
            interpreter.state.last_exit_code = exit_code
            _variables(interpreter.state.env)["?"] = str(exit_code)
        return _result(stdout, stderr, exit_code)


async def run_command_line(interpreter: Interpreter, script: str) -> ExecResult:
    """A command line at the top of a fresh interpreter, run as ``bash -c`` runs it (the lines
    before a syntax error run; ``exit`` ends it with its status and the output so far)."""
    try:
        return await _run_text(
            interpreter, script, _Origin(lambda line: f"bash: -c: line {line}: ")
        )
    except ExitError as error:
        return _result(error.stdout, error.stderr, error.exit_code)


# -- a new shell ---------------------------------------------------------------------------------

_SPECIAL = frozenset({"?", "#", "@", "*", "$", "!", "-", "_"})
_SET_LETTERS = frozenset("abefhkmnptuvxBCEHPT")
_UNSUPPORTED_LETTERS = {
    "i": "interactive shells",
    "r": "restricted shells",
    "D": "lists of translatable strings",
}
_IGNORED_LONG = frozenset({"--norc", "--noprofile", "--noediting", "--posix", "--debugger"})
_LONG_WITH_VALUE = frozenset({"--rcfile", "--init-file"})
_VERSION = "GNU bash, version {version}\n"


_SOURCE_ELEMENT = re.compile(r"BASH_SOURCE_\d+")


def _bash_source(env: dict[str, str]) -> list[str]:
    """The ``BASH_SOURCE`` array: the files being read, innermost first."""
    elements: list[str] = []
    while f"BASH_SOURCE_{len(elements)}" in env:
        elements.append(env[f"BASH_SOURCE_{len(elements)}"])
    return elements


def _set_bash_source(env: dict[str, str], files: list[str]) -> None:
    for key in [key for key in env if _SOURCE_ELEMENT.fullmatch(key)]:
        del env[key]
    if not files:
        env.pop("BASH_SOURCE__is_array", None)
        return
    env["BASH_SOURCE__is_array"] = "indexed"
    for index, name in enumerate(files):
        env[f"BASH_SOURCE_{index}"] = name


def _exported_function_key(name: str) -> str:
    """The variable metadata that marks function ``name`` exported: bash passes exported
    functions in the environment under this name, and the interpreter copies variable metadata
    into every subshell, so the mark travels as bash's does."""
    return f"BASH_FUNC_{name}%%"


def _exports_function(env: VariableStore, name: str) -> bool:
    return "x" in env.get_attributes(_exported_function_key(name))


@dataclass(slots=True)
class _Invocation:
    """How ``sh``/``bash`` was asked to run (its command line, parsed as bash does)."""

    shell: str
    set_args: list[str]
    shopt: list[tuple[bool, str]]
    command: str | None = None  # -c
    read_stdin: bool = False  # -s, or no script file
    login: bool = False
    no_exec: bool = False
    operands: list[str] | None = None


def _parse_invocation(shell: str, args: list[str]) -> _Invocation | ExecResult:
    """``args`` of ``sh``/``bash`` as bash reads them, or the result of a bad command line."""
    invocation = _Invocation(shell, [], [])
    command_mode = False
    index = 0
    while index < len(args):
        arg = args[index]
        if arg in ("--", "-"):
            index += 1
            break
        if arg.startswith("--"):
            if arg == "--version":
                version = "5.0.0(1)-release"
                return _result(_VERSION.format(version=version))
            if arg == "--help":
                return _result(_INVALID_OPTION_USAGE.format(name=shell))
            if arg == "--login":
                invocation.login = True
            elif arg == "--verbose":
                invocation.set_args.append("-v")
            elif arg == "--restricted":
                return _unsupported(shell, "restricted shells (--restricted)")
            elif arg in _LONG_WITH_VALUE:
                index += 1
            elif arg not in _IGNORED_LONG:
                return _result(
                    stderr=f"{shell}: {arg}: invalid option\n"
                    + _INVALID_OPTION_USAGE.format(name=shell),
                    exit_code=2,
                )
            index += 1
            continue
        if len(arg) < 2 or arg[0] not in "-+":
            break
        sign = arg[0]
        for letter in arg[1:]:
            if letter == "c" and sign == "-":
                command_mode = True
            elif letter == "s" and sign == "-":
                invocation.read_stdin = True
            elif letter == "l" and sign == "-":
                invocation.login = True
            elif letter == "n":
                invocation.no_exec = sign == "-"
            elif letter in ("o", "O"):
                index += 1
                if index >= len(args):
                    return _result(
                        stderr=f"{shell}: -{letter}: option requires an argument\n", exit_code=2
                    )
                if letter == "o":
                    invocation.set_args += [f"{sign}o", args[index]]
                else:
                    invocation.shopt.append((sign == "-", args[index]))
            elif letter in _SET_LETTERS:
                invocation.set_args.append(sign + letter)
            elif letter in _UNSUPPORTED_LETTERS:
                return _unsupported(shell, f"{_UNSUPPORTED_LETTERS[letter]} (-{letter})")
            else:
                return _result(
                    stderr=f"{shell}: {sign}{letter}: invalid option\n"
                    + _INVALID_OPTION_USAGE.format(name=shell),
                    exit_code=2,
                )
        index += 1
    operands = args[index:]
    if command_mode:
        if not operands:
            return _result(stderr=f"{shell}: -c: option requires an argument\n", exit_code=2)
        invocation.command = operands[0]
        operands = operands[1:]
    elif not operands:
        invocation.read_stdin = True
    invocation.operands = operands
    return invocation


def _unsupported(shell: str, what: str) -> ExecResult:
    return _result(
        stderr=f"{shell}: {what} are not supported by the in-memory sandbox; use provider = "
        '"docker" for a real shell\n',
        exit_code=2,
    )


def _child_state(
    parent: Interpreter, name: str, args: list[str], stdin: str, script_file: str | None
) -> InterpreterState:
    """The state a new bash process starts with: the exported variables and functions, default
    options, its own positional parameters (and ``BASH_SOURCE``, when it reads ``script_file``)."""
    source = parent.state
    store = source.env
    inherited = _variables(store)
    env = VariableStore()
    variables = _variables(env)
    for key, value in inherited.items():
        if (
            key in _SPECIAL
            or key.isdigit()
            or key.startswith(("PIPESTATUS_", "__"))
            or f"{key}__is_array" in inherited
            or "x" not in store.get_attributes(key)
        ):
            continue
        variables[key] = value
        env.set_attribute(key, "x")
    functions = {
        function: body
        for function, body in source.functions.items()
        if _exports_function(store, function)
    }
    for function in functions:
        env.set_attribute(_exported_function_key(function), "x")
    try:
        level = int(inherited.get("SHLVL", "0")) + 1
    except ValueError:
        level = 1
    variables.update(
        {
            "?": "0",
            "PWD": source.cwd,
            "SHLVL": str(level),
            "BASH_VERSION": inherited.get("BASH_VERSION", "5.0.0(1)-release"),
            "OPTIND": "1",
            "0": name,
            "#": str(len(args)),
        }
    )
    for variable in ("PWD", "SHLVL"):
        env.set_attribute(variable, "x")
    for position, value in enumerate(args, 1):
        variables[str(position)] = value
    if script_file is not None:
        _set_bash_source(variables, [script_file])
    return InterpreterState(
        env=env,
        cwd=source.cwd,
        previous_dir="",
        functions=functions,
        start_time=time.time(),
        options=ShellOptions(),
        fd_table=source.fd_table.clone(),
        group_stdin=stdin,
    )


async def _script_file(
    interpreter: Interpreter, shell: str, path: str
) -> tuple[str, str] | ExecResult:
    """``(text, name)`` of the script file ``bash FILE`` runs (looked up in the current folder,
    then on ``PATH`` when the name has no ``/``), or bash's failure."""
    fs = interpreter._fs  # pyright: ignore[reportPrivateUsage]
    state = interpreter.state
    candidates = [fs.resolve_path(state.cwd, path)]
    if "/" not in path:
        candidates += [
            fs.resolve_path(state.cwd, f"{folder or '.'}/{path}")
            for folder in _variables(state.env).get("PATH", "").split(":")
        ]
    for candidate in candidates:
        try:
            return await fs.read_file(candidate), path
        except IsADirectoryError:
            return _result(stderr=f"{path}: {path}: Is a directory\n", exit_code=126)
        except (FileNotFoundError, NotADirectoryError):
            continue
    return _result(stderr=f"{shell}: {path}: No such file or directory\n", exit_code=127)


async def _read_profiles(child: Interpreter, shell: str) -> ExecResult:
    """A login shell (``bash -l``) first reads ``/etc/profile`` and the user's profile."""
    fs = child._fs  # pyright: ignore[reportPrivateUsage]
    home = _variables(child.state.env).get("HOME", "")
    personal = [".bash_profile", ".bash_login", ".profile"] if shell == "bash" else [".profile"]
    stdout = stderr = ""
    found = ["/etc/profile"] if await fs.exists("/etc/profile") else []
    for name in personal:
        path = f"{home.rstrip('/')}/{name}"
        if home and await fs.exists(path):
            found.append(path)
            break
    for path in found:
        result = await _run_text(child, await fs.read_file(path), _file_origin(path))
        stdout, stderr = stdout + result.stdout, stderr + result.stderr
    return _result(stdout, stderr, 0)


@dataclass(frozen=True, slots=True)
class _Script:
    """What a new shell runs: its text, ``$0`` and arguments, where it came from."""

    text: str
    name: str
    positional: list[str]
    origin: _Origin
    file: str | None = None  # the script file (``BASH_SOURCE``)
    from_stdin: bool = False


async def run_shell(
    parent: Interpreter, shell: str, args: list[str], stdin: str
) -> tuple[ExecResult, str | None]:
    """``sh``/``bash`` with ``args`` run from ``parent``: a new shell over the same files. Also
    returns what the shell left of ``stdin`` when it read some (None when it read none)."""
    invocation = _parse_invocation(shell, args)
    if isinstance(invocation, ExecResult):
        return invocation, None
    operands = invocation.operands or []
    if invocation.command is not None:
        name, positional = (operands[0], operands[1:]) if operands else (shell, [])
        where = _Origin(lambda line: f"{shell}: -c: line {line}: ")
        script = _Script(invocation.command, name, positional, where)
    elif invocation.read_stdin:
        where = _Origin(lambda line: f"{shell}: line {line}: ")
        script = _Script(stdin, shell, operands, where, from_stdin=True)
        stdin = ""
    else:
        found = await _script_file(parent, shell, operands[0])
        if isinstance(found, ExecResult):
            return found, None
        text, name = found
        script = _Script(text, name, operands[1:], _file_origin(name), file=name)
    if invocation.no_exec:
        parsed = _parse_lines(script.text)
        if parsed.error is None:
            return _result(), None
        message = _syntax_error(parsed.error, script.text, script.origin.where)
        return _result(stderr=message, exit_code=2), None
    return await _run_child(parent, invocation, script, stdin)


async def _run_child(
    parent: Interpreter, invocation: _Invocation, script: _Script, stdin: str
) -> tuple[ExecResult, str | None]:
    limits = parent._limits  # pyright: ignore[reportPrivateUsage]
    depth = _nesting.get()
    if depth >= limits.max_call_depth:
        raise ExecutionLimitError(
            f"too many nested shells (>{limits.max_call_depth}), increase "
            "execution_limits.max_call_depth",
            "call_depth",
        )
    child = Interpreter(
        fs=parent._fs,  # pyright: ignore[reportPrivateUsage]
        commands=parent._commands,  # pyright: ignore[reportPrivateUsage]
        limits=limits,
        state=_child_state(parent, script.name, script.positional, stdin, script.file),
    )
    # the command-count limit bounds the whole command line, child shells included
    child.state.command_count = parent.state.command_count
    token = _nesting.set(depth + 1)
    stdout = stderr = ""
    try:
        from just_bash.interpreter.builtins.set import handle_set
        from just_bash.interpreter.builtins.shopt import handle_shopt

        context = child._ctx  # pyright: ignore[reportPrivateUsage]
        if invocation.set_args:
            applied = await handle_set(context, invocation.set_args)
            if applied.exit_code != 0:
                return _result(applied.stdout, applied.stderr, 2), None
        for enable, option in invocation.shopt:
            applied = await handle_shopt(context, ["-s" if enable else "-u", option])
            if applied.exit_code != 0:
                return _result(applied.stdout, applied.stderr, 2), None
        if invocation.login:
            profiles = await _read_profiles(child, invocation.shell)
            stdout, stderr = profiles.stdout, profiles.stderr
        result = await _run_text(child, script.text, script.origin, from_stdin=script.from_stdin)
        result = _result(stdout + result.stdout, stderr + result.stderr, result.exit_code)
    except ExitError as error:  # `exit` ends this shell only
        result = _result(stdout + error.stdout, stderr + error.stderr, error.exit_code)
    finally:
        _nesting.reset(token)
        parent.state.command_count = max(parent.state.command_count, child.state.command_count)
        child._ctx = None  # pyright: ignore[reportAttributeAccessIssue, reportPrivateUsage]
    left = child.state.group_stdin
    if script.from_stdin:
        return result, ""  # it read all of its stdin: the script
    return result, (left if left is not None and left != stdin else None)


def _interpreter_of(ctx: CommandContext) -> Interpreter:
    """The interpreter running the command ``ctx`` belongs to: just-bash gives commands no
    handle on it, but the context's callbacks are closures over it."""
    for callback in (ctx.get_registered_commands, ctx.exec):
        for cell in getattr(callback, "__closure__", None) or ():
            value = cell.cell_contents
            if isinstance(value, Interpreter):
                return value
    raise RuntimeError("pai-sandbox-inmemory: a shell command ran outside an interpreter")


class Shell:
    """``sh`` and ``bash``: a new shell, as a new bash process (see the module docstring)."""

    def __init__(self, name: str) -> None:
        self.name = name

    async def execute(self, args: list[str], ctx: CommandContext) -> ExecResult:
        parent = _interpreter_of(ctx)
        stdin = ctx.stdin
        result, left = await run_shell(parent, self.name, args, stdin)
        if left is not None and stdin and stdin == (parent.state.group_stdin or ""):
            # the shell read from its caller's stdin (not from a pipe): the caller's next
            # reader starts after what it read, as with ``read``
            ctx.env["__remaining_stdin__"] = left
        return result


def shell_commands() -> dict[str, Command]:
    """The ``sh`` and ``bash`` commands, replacing just-bash's."""
    return {"bash": Shell("bash"), "sh": Shell("sh")}


# -- builtins: source, exec, export -f ------------------------------------------------------------


def _interpreter_behind(ctx: Any) -> Interpreter:
    """The interpreter whose context (``InterpreterContext``) a builtin was given."""
    owner = getattr(ctx.execute_script, "__self__", None)
    if not isinstance(owner, Interpreter):
        raise RuntimeError("pai-sandbox-inmemory: a builtin ran outside an interpreter")
    return owner


async def _source(ctx: Any, args: list[str]) -> ExecResult:
    """``source FILE [ARGS]`` / ``. FILE``: the file's script in the current shell; a syntax
    error ends it as bash's does, ``return`` ends it (not an enclosing function)."""
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        return _result(
            stderr="bash: source: filename argument required\n"
            "source: usage: source filename [arguments]\n",
            exit_code=2,
        )
    interpreter = _interpreter_behind(ctx)
    state = interpreter.state
    fs = interpreter._fs  # pyright: ignore[reportPrivateUsage]
    filename, arguments = args[0], args[1:]
    candidates = (
        []
        if "/" in filename
        else [
            fs.resolve_path(state.cwd, f"{folder}/{filename}")
            for folder in _variables(state.env).get("PATH", "").split(":")
            if folder
        ]
    )
    candidates.append(fs.resolve_path(state.cwd, filename))
    text: str | None = None
    for candidate in candidates:
        try:
            text = await fs.read_file(candidate)
            break
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            continue
    if text is None:
        return _result(stderr=f"bash: {filename}: No such file or directory\n", exit_code=1)
    limits = interpreter._limits  # pyright: ignore[reportPrivateUsage]
    if state.source_depth >= limits.max_call_depth:
        return _result(stderr="bash: source: maximum source depth exceeded\n", exit_code=1)
    env = _variables(state.env)
    saved: dict[str, str] | None = None
    saved_count = env.get("#")
    if arguments:
        saved = {key: env.pop(key) for key in [k for k in env if k.isdigit() and k != "0"]}
        for position, value in enumerate(arguments, 1):
            env[str(position)] = value
        env["#"] = str(len(arguments))
    sources = _bash_source(env)
    _set_bash_source(env, [filename, *sources])
    state.source_depth += 1
    try:
        return await _run_text(interpreter, text, _file_origin(filename))
    except ReturnError as returned:
        return _result(returned.stdout, returned.stderr, returned.exit_code)
    finally:
        state.source_depth -= 1
        _set_bash_source(env, sources)
        if saved is not None:
            for key in [k for k in env if k.isdigit() and k != "0"]:
                del env[key]
            env.update(saved)
            if saved_count is None:
                env.pop("#", None)
            else:
                env["#"] = saved_count


async def _eval(ctx: Any, args: list[str]) -> ExecResult:
    """``eval ARGS``: the joined arguments as a script of the current shell, with bash's
    syntax-error message and exit code 2 (just-bash printed the parser's exception, exit 1)."""
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        return _result()
    where = _Origin(lambda line: f"bash: eval: line {line}: ")
    return await _run_text(_interpreter_behind(ctx), " ".join(args), where)


_exec_ran = contextvars.ContextVar[bool]("pai_sandbox_inmemory_exec_ran", default=False)
"""Set by ``exec COMMAND``: the shell ends when the builtin (and its redirections) is done."""


def _exec(original: Callable[..., Any]) -> Callable[..., Any]:
    """``exec COMMAND`` replaces the shell: once it is done, the shell exits with its status
    (just-bash ran the command and went on). ``exec`` with redirections only is unchanged."""

    async def handle_exec(ctx: Any, args: list[str]) -> ExecResult:
        result: ExecResult = await original(ctx, args)
        index = 0
        while index < len(args) and args[index].startswith("-") and args[index] != "--":
            index += 2 if args[index] == "-a" else 1
        if args[index : index + 1] == ["--"]:
            index += 1
        if index < len(args):
            _exec_ran.set(True)
        return result

    return handle_exec


def _exiting_after_exec(original: Callable[..., Any]) -> Callable[..., Any]:
    async def execute_builtin(
        self: Interpreter, name: str, node: Any, stdin: str, alias_args: Any = None
    ) -> ExecResult:
        if name == "exec":
            _exec_ran.set(False)
        result: ExecResult = await original(self, name, node, stdin, alias_args)
        if name == "exec" and _exec_ran.get():
            _exec_ran.set(False)
            raise ExitKeepingOutput(result.exit_code, result.stdout, result.stderr)
        return result

    return execute_builtin


def _export_functions(original: Callable[..., Any]) -> Callable[..., Any]:
    """``export -f NAME`` marks function NAME exported (just-bash ignored ``-f`` and exported a
    variable NAME instead); ``export -fn NAME`` unmarks it."""

    async def handle_export(ctx: Any, args: list[str]) -> ExecResult:
        flags = "".join(a[1:] for a in args if a.startswith("-") and a != "--")
        if "f" not in flags:
            return await original(ctx, args)
        env = ctx.state.env
        errors = ""
        for name in (a for a in args if not a.startswith("-")):
            if name not in ctx.state.functions:
                errors += f"bash: export: {name}: not a function\n"
            elif isinstance(env, VariableStore):
                key = _exported_function_key(name)
                if "n" in flags:
                    env.remove_attribute(key, "x")
                else:
                    env.set_attribute(key, "x")
        return _result(stderr=errors, exit_code=1 if errors else 0)

    return handle_export


# -- files run as commands ------------------------------------------------------------------------

_SHELLS = {"sh": "sh", "bash": "bash", "dash": "sh"}


def _command_context(interpreter: Interpreter, stdin: str) -> CommandContext:
    """A command's context, made as the interpreter makes one for a simple command."""
    state = interpreter.state
    commands = interpreter._commands  # pyright: ignore[reportPrivateUsage]
    return CommandContext(
        fs=interpreter._fs,  # pyright: ignore[reportPrivateUsage]
        cwd=state.cwd,
        env=state.env,
        stdin=stdin,
        limits=interpreter._limits,  # pyright: ignore[reportPrivateUsage]
        exec=lambda script, options: interpreter._exec_fn(  # pyright: ignore[reportPrivateUsage]
            script, options.get("env"), options["cwd"]
        ),
        get_registered_commands=lambda: list(commands),
        fd_contents={
            fd: entry.content
            for fd, entry in state.fd_table._fds.items()  # pyright: ignore[reportPrivateUsage]
            if fd >= 3 and not entry.is_closed
        },
    )


async def _located(interpreter: Interpreter, name: str) -> str | None:
    """The first file (not folder) ``name`` names on ``PATH``, as just-bash looks it up."""
    fs = interpreter._fs  # pyright: ignore[reportPrivateUsage]
    state = interpreter.state
    for folder in _variables(state.env).get("PATH", "").split(":"):
        candidate = fs.resolve_path(state.cwd, f"{folder or '.'}/{name}")
        try:
            if await fs.exists(candidate) and not await fs.is_directory(candidate):
                return candidate
        except OSError:
            continue
    return None


def _run_files(original: Callable[..., Any]) -> Callable[..., Any]:
    """A file run as a command starts the program its ``#!`` line names, as the kernel does,
    or a new shell when it has none; ``original`` (just-bash's) answers for a name not found."""
    import stat as stat_module

    async def try_execute_file(
        self: Interpreter, name: str, args: list[str], stdin: str
    ) -> ExecResult:
        fs = self._fs  # pyright: ignore[reportPrivateUsage]
        if "/" in name:
            path = fs.resolve_path(self.state.cwd, name)
            shown = name
        else:
            located = await _located(self, name)
            if located is None:
                return await original(self, name, args, stdin)
            path = shown = located
        try:
            status = await fs.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return _result(stderr=f"bash: {name}: No such file or directory\n", exit_code=127)
        if status.is_directory:
            return _result(stderr=f"bash: {name}: Is a directory\n", exit_code=126)
        if not status.mode & stat_module.S_IXUSR:
            return _result(stderr=f"bash: {name}: Permission denied\n", exit_code=126)
        head = (await fs.read_file(path))[:1024]
        if head.startswith("\x7fELF") or "\x00" in head:
            return _result(
                stderr=f"bash: {name}: cannot execute binary file: Exec format error\n",
                exit_code=126,
            )
        if not head.startswith("#!"):
            return (await run_shell(self, "bash", [shown, *args], stdin))[0]
        line = head[2:].split("\n", 1)[0].strip()
        program_path, _, argument = line.replace("\t", " ").partition(" ")
        program = program_path.rsplit("/", 1)[-1]
        extra = [argument.strip()] if argument.strip() else []
        missing = f"bash: {name}: cannot execute: required file not found"
        if program == "env":
            words = [w for w in argument.split() if w not in ("-S", "--split-string")]
            if not words or words[0].startswith("-"):
                return _result(
                    stderr=f"bash: {name}: the in-memory sandbox does not support the line "
                    f"'#!{line}'; use provider = \"docker\" for a real shell\n",
                    exit_code=126,
                )
            program, extra = words[0], words[1:]
            missing = f"/usr/bin/env: '{program}': No such file or directory"
        shell = _SHELLS.get(program)
        if shell is not None:
            return (await run_shell(self, shell, [*extra, shown, *args], stdin))[0]
        command = self._commands.get(program)  # pyright: ignore[reportPrivateUsage]
        if command is not None:
            return await command.execute([*extra, shown, *args], _command_context(self, stdin))
        hint = _PROVIDER_HINT.format(program=program)
        return _result(stderr=f"{missing} {hint}\n", exit_code=127)

    return try_execute_file


# -- commands that run a command line: env, xargs, find -exec, time, timeout ----------------------


def _exec_fn(original: Callable[..., Any]) -> Callable[..., Any]:
    """just-bash's ``_exec_fn`` (how ``env``, ``xargs``, ``find -exec``, ``time`` and ``timeout``
    run a command line), with the variables it is given exported, as the command's environment
    is (``env VAR=x sh -c 'echo $VAR'``), and a syntax error reported as bash's instead of
    ending the whole script."""

    async def exec_fn(
        self: Interpreter,
        script: str,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
    ) -> ExecResult:
        store = self.state.env
        marked: list[tuple[str, bool]] = []
        if env:
            for key, value in env.items():
                if _variables(store).get(key) != value and "x" not in store.get_attributes(key):
                    marked.append((key, store.has_metadata(key)))
                    store.set_attribute(key, "x")
        try:
            return await original(self, script, env, cwd)
        except ParseException as error:
            message = _syntax_error(error, script, lambda line: f"bash: line {line}: ")
            return _result(stderr=message, exit_code=2)
        finally:
            for key, had_metadata in marked:
                store.remove_attribute(key, "x")
                if not had_metadata:
                    store._metadata.pop(key, None)  # pyright: ignore[reportPrivateUsage]

    return exec_fn


_patched = [False]


def patch_scripts() -> None:
    """Apply this module's fixes to the imported just-bash (in the worker only)."""
    if _patched[0]:
        return
    _patched[0] = True
    # A nested shell costs about a dozen Python frames, a function call a few: at Python's
    # default limit of 1000 frames, max_call_depth (100) of either was out of reach and the
    # script failed with a RecursionError instead of the limit's message.
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    from just_bash.interpreter.builtins import BUILTINS, control

    control.ExitError = ExitKeepingOutput  # pyright: ignore[reportPrivateImportUsage]
    _patch_word_parser()
    parser: Any = Parser
    parser._parse_script = _parse_whole_script
    BUILTINS["source"] = BUILTINS["."] = _source
    BUILTINS["eval"] = _eval
    BUILTINS["exec"] = _exec(BUILTINS["exec"])
    BUILTINS["export"] = _export_functions(BUILTINS["export"])
    interpreter: Any = Interpreter
    interpreter._execute_builtin = _exiting_after_exec(interpreter._execute_builtin)
    interpreter._try_execute_vfs_script = _run_files(interpreter._try_execute_vfs_script)
    interpreter._exec_fn = _exec_fn(interpreter._exec_fn)
    interpreter.execute_statement, interpreter.execute_pipeline = _keeping_and_or_output(
        interpreter.execute_statement, interpreter.execute_pipeline
    )
    interpreter.execute_command = _compound_redirections(interpreter.execute_command)
