"""The one module that touches just-bash's interpreter: a typed, narrow adapter.

just-bash 0.2.1 is a pure-Python bash interpreter over a virtual filesystem. What this module
adds on top, and why:

- :class:`SandboxFs` is its ``InMemoryFs`` made binary-safe for the interpreter (just-bash passes
  text around as ``str``; bytes that are not UTF-8 travel as lone surrogates, ``surrogateescape``,
  instead of crashing ``cat``) and made cancellable (it yields to the event loop on every read and
  write, so a timeout lands inside a loop that does file I/O).
- :func:`command_registry` wraps each built-in command so that running one yields to the event
  loop (concurrent commands interleave, and a timeout can stop a script between two commands)
  and so that its input encodes back to the bytes it stands for (:class:`BinaryText`).
- :func:`run_script` runs one command line in a fresh interpreter (its own variables, cwd and
  stdin, like ``sh -c``) over a shared filesystem, and turns interpreter failures
  (``ExecutionLimitError``, crashes) into results.

Everything here must run on the provider's private asyncio loop (see ``_loop.py``).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from dataclasses import dataclass

from just_bash import Bash, ExecutionLimits, InMemoryFs
from just_bash.commands import create_command_registry
from just_bash.interpreter import ExecutionLimitError
from just_bash.types import Command, CommandContext, ExecResult

__all__ = [
    "EXIT_INTERPRETER_ERROR",
    "Command",
    "ExecutionLimits",
    "SandboxFs",
    "ScriptResult",
    "command_registry",
    "decode",
    "encode",
    "run_script",
]

EXIT_INTERPRETER_ERROR = 126
"""Exit code when the interpreter itself stopped the script (a limit hit, an internal error)."""

EXIT_UNSUPPORTED = 2
"""Exit code for a script the adapter refuses before running it (like a bash syntax error)."""


def encode(text: str, encoding: str = "utf-8") -> bytes:
    """Text from the interpreter as bytes: lone surrogates from ``surrogateescape`` become the
    bytes they stand for; any other lone surrogate becomes U+FFFD."""
    try:
        return text.encode(encoding, "surrogateescape")
    except UnicodeEncodeError:
        return "".join(
            "\ufffd" if 0xD800 <= ord(ch) <= 0xDFFF and not 0xDC80 <= ord(ch) <= 0xDCFF else ch
            for ch in text
        ).encode(encoding, "surrogateescape")


class BinaryText(str):
    """Interpreter text that encodes back to the bytes it was decoded from.

    just-bash's commands count or hash content with ``text.encode("utf-8")``, which fails on the
    lone surrogates ``surrogateescape`` uses for non-UTF-8 bytes (``wc -c`` of a binary file
    crashed). Text read from files and fed as stdin is this subclass, whose ``encode`` applies
    ``surrogateescape``, so such commands see the file's real bytes.
    """

    __slots__ = ()

    def encode(self, encoding: str = "utf-8", errors: str = "surrogateescape") -> bytes:
        return str.encode(self, encoding, "surrogateescape" if errors == "strict" else errors)


def decode(data: bytes, encoding: str = "utf-8") -> str:
    """Bytes as interpreter text, reversibly (``surrogateescape``)."""
    return BinaryText(data.decode(encoding, "surrogateescape"))


class SandboxFs(InMemoryFs):
    """just-bash's in-memory filesystem, binary-safe for the interpreter and cancellable."""

    async def read_file(self, path: str, encoding: str = "utf-8") -> str:
        await asyncio.sleep(0)
        return decode(await self.read_file_bytes(path), encoding)

    async def write_file(self, path: str, content: str | bytes, encoding: str = "utf-8") -> None:
        await asyncio.sleep(0)
        data = encode(content, encoding) if isinstance(content, str) else content
        await super().write_file(path, data)

    async def append_file(self, path: str, content: str | bytes, encoding: str = "utf-8") -> None:
        await asyncio.sleep(0)
        data = encode(content, encoding) if isinstance(content, str) else content
        await super().append_file(path, data)


class _Checkpointed:
    """A built-in command that yields to the event loop before it runs."""

    def __init__(self, inner: Command) -> None:
        self.name = inner.name
        self._inner = inner

    async def execute(self, args: list[str], ctx: CommandContext) -> ExecResult:
        await asyncio.sleep(0)
        # Piped input arrives as plain text (the interpreter concatenates output); make it
        # encode back to its bytes, as file content does.
        if ctx.stdin and type(ctx.stdin) is str:
            ctx.stdin = BinaryText(ctx.stdin)
        return await self._inner.execute(args, ctx)


def command_registry() -> dict[str, Command]:
    """just-bash's built-in commands, without network commands, each a cancellation point."""
    return {
        name: _Checkpointed(command)
        for name, command in create_command_registry(include_network=False).items()
    }


# just-bash 0.2.1 evaluates "$(...)" and "$((...))" inside an array subscript (``${a[$(cmd)]}``,
# ``a[$((i+1))]=x``) by calling ``nest_asyncio.apply()``, which patches asyncio for the whole
# process (the host application included), and then blocks the event loop while it runs the
# substitution in a thread of its own. It also gets the arithmetic form wrong. Refuse it.
_SUBSCRIPT_SUBSTITUTION = re.compile(
    r"(?:\$\{[#!]?|(?:^|(?<=[\s;&|(){}]))[A-Za-z_])[A-Za-z0-9_]*\[[^\]\n]*\$\("
)

_SUBSCRIPT_MESSAGE = (
    "pai-sandbox-inmemory: $(...) and $((...)) inside an array subscript are not supported by "
    "the in-memory shell; compute the index into a variable first, e.g. i=$((n+1)); "
    'echo "${a[$i]}"\n'
)


@dataclass(frozen=True, slots=True)
class ScriptResult:
    """What one command line printed and how it exited (text as the interpreter produced it)."""

    stdout: str
    stderr: str
    exit_code: int


def _feed_stdin(bash: Bash, text: str) -> None:
    # just-bash has no stdin parameter; a pipeline's first command reads the interpreter state's
    # ``group_stdin`` (what `{ ...; } < file` sets), so every top-level pipeline sees the data,
    # and ``read`` consumes it line by line. Binary data travels as surrogateescape text.
    state = bash._interpreter.state  # pyright: ignore[reportPrivateUsage]
    state.group_stdin = text


async def run_script(
    fs: SandboxFs,
    commands: Mapping[str, Command],
    limits: ExecutionLimits,
    script: str,
    *,
    cwd: str,
    env: Mapping[str, str],
    stdin: bytes | None,
) -> ScriptResult:
    """Run ``script`` in a fresh interpreter over ``fs``; never raises for what the script does.

    Cancellation (a timeout, a destroyed instance) propagates: the interpreter yields between
    commands and file operations, and stops there.
    """
    if _SUBSCRIPT_SUBSTITUTION.search(script):
        return ScriptResult("", _SUBSCRIPT_MESSAGE, EXIT_UNSUPPORTED)
    bash = Bash(
        fs=fs,
        cwd=cwd,
        env=dict(env),
        limits=limits,
        commands=dict(commands),
        unescape_html=False,  # plain bash semantics: "&lt;" is text, not "<"
    )
    if stdin is not None:
        _feed_stdin(bash, decode(stdin))
    try:
        return await _exec(bash, script)
    finally:
        _break_cycles(bash)


def _break_cycles(bash: Bash) -> None:
    """Drop the interpreter's context, which holds the interpreter's own bound methods: that
    cycle would otherwise leave every command's interpreter to the cyclic garbage collector,
    which then dominates the time of a busy host (1,000 sandboxes running commands)."""
    interpreter = getattr(bash, "_interpreter", None)
    if interpreter is not None and hasattr(interpreter, "_ctx"):
        interpreter._ctx = None


async def _exec(bash: Bash, script: str) -> ScriptResult:
    try:
        result = await bash.exec(script)
    except ExecutionLimitError as error:
        return ScriptResult(
            error.stdout,
            f"{error.stderr}bash: execution limit exceeded: {error}\n",
            EXIT_INTERPRETER_ERROR,
        )
    except Exception as error:  # the interpreter crashed: report it as the command's failure
        return ScriptResult(
            "",
            f"pai-sandbox-inmemory: the shell interpreter failed: {type(error).__name__}: "
            f"{error}\n",
            EXIT_INTERPRETER_ERROR,
        )
    return ScriptResult(result.stdout, result.stderr, result.exit_code)
