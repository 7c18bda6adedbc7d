"""The commands a worker's shell offers, each audited for host access, and the fixes they need.

:data:`COMMAND_AUDIT` is the one source of truth for what the in-memory shell registers: every
command name with the reason it cannot reach the host. The package README's command table is
generated from it (``render_audit_table``), and a test fails when the registry and the table
differ. :func:`command_registry` builds the registry; it refuses a command missing from the table.

Fixes applied to just-bash 0.2.1 in the worker (:func:`patch_just_bash`):

- ``sqlite3`` is replaced: databases are files of the sandbox's filesystem (loaded with
  ``Connection.deserialize``, written back with ``serialize``); ``ATTACH``/``DETACH`` (and so
  ``VACUUM INTO``), ``load_extension`` and temp-store pragmas are denied by an authorizer;
  dot-commands (``.open``, ``.read``, ``.import``, ...) are refused.
- ``seq`` printed at most 100,000 numbers, silently: longer integer sequences are generated here,
  and a longer fractional one fails with a message naming the limit.
- ``cat`` without options copies its input byte for byte (just-bash's adds a newline).
- ``gzip -c`` (and ``gzip`` reading stdin) prints the compressed bytes, not a placeholder.
- ``gunzip -c``/``zcat``, ``base64 -d`` and ``tar -cf -`` print binary data byte for
  byte (just-bash decoded it with replacement characters, or as Latin-1).
- ``printf``, ``echo -e`` and ``$'...'`` escapes ``\\NNN`` / ``\\xHH`` produce the raw byte, not the
  Unicode character of that number (``printf '\\377'`` writes 0xff).
- The arithmetic fallback's Python ``eval`` of shell text is replaced by an evaluator of plain
  integer arithmetic.
- ``printf '%(fmt)T'`` put the shell's ``TZ`` into the worker's process environment and called
  ``time.tzset()``, so glibc opened any host file ``TZ`` named; it now computes the time in the
  zone ``_zones.zone_for`` reads (zone files come from the sandbox's filesystem).
- ``ls``, ``stat``, ``touch``, ``date``, ``paste``, ``xargs``, ``cp -p``, ``head -c`` of
  ``/dev/zero`` and the missing ``uname``, ``id``, ``mktemp`` behave as GNU coreutils'
  (``_coreutils``); a command the shell lacks fails naming the in-memory sandbox.
- ``sh``/``bash``, script files run as commands, ``source``, ``exit`` and ``exec`` run scripts as
  bash does, in a new shell where bash starts one (``_scripts``).
- Subshells, ``trap``, jobs, ``kill``, ``wait``, fatal and line-ending errors, ``set -e``'s
  exceptions and 64-bit arithmetic behave as bash's (``_semantics``).
- ``awk``, ``sed`` and ``grep`` are replaced, and ``jq`` wrapped, to behave as gawk, GNU sed,
  GNU grep and jq 1.6 (``_texttools``); just-bash's awk stopped loops silently after 10,000
  iterations, the new one fails past ``max_awk_iterations``.
"""

from __future__ import annotations

import ast
import inspect
import io
import os
import sqlite3
import time
import types
from collections.abc import Callable
from typing import Any

from just_bash.commands import create_command_registry
from just_bash.types import Command, CommandContext, ExecResult

from pai.sandbox_inmemory._worker import _coreutils, _scripts, _semantics, _texttools, _zones
from pai.sandbox_inmemory._worker._shell import (
    BinaryText,
    decode,
    names_the_bytes,
    patch_redirections,
)

__all__ = [
    "COMMAND_AUDIT",
    "UnauditedCommandError",
    "command_registry",
    "patch_just_bash",
    "render_audit_table",
]

_FS = "reads and writes only through the sandbox filesystem (`ctx.fs`, served by the host)"
_TEXT = "pure text processing of its arguments, stdin and sandbox files; no other I/O"
_SHELL = "runs its arguments as a command line in the same in-memory shell"
_INFO = "prints fixed or interpreter-held values; no I/O"
_ENV = (
    "prints the shell's own variables; the worker's process environment is fixed (`TZ=UTC0`, "
    "`LC_ALL=C`) and never shown"
)

_NEW_SHELL = (
    "runs a script (`-c`, a sandbox file or stdin) in a new in-memory shell of the same "
    "commands over the same sandbox filesystem (`_scripts`)"
)

COMMAND_AUDIT: dict[str, str] = {
    "alias": _INFO,
    "argv.py": "prints its arguments (a just-bash test helper); no I/O",
    "awk": "pure text processing of its arguments, stdin and sandbox files (replaced, `_awk`); "
    "`system()` and pipes to and from commands run command lines in the same in-memory shell",
    "base64": _TEXT,
    "basename": _TEXT,
    "bash": _NEW_SHELL,
    "cat": _FS,
    "chmod": _FS + "; modes are metadata of the in-memory entries",
    "clear": _INFO,
    "column": _TEXT,
    "comm": _TEXT,
    "cp": _FS + "; `-p`/`-a` set the copies' modes and times from the sources",
    "cut": _TEXT,
    "date": "formats the host clock's time (or a `-d` date) in the shell's `TZ`, read in Python "
    "(zone files from the sandbox's filesystem), never through the C library",
    "diff": _TEXT,
    "dirname": _TEXT,
    "du": _FS,
    "echo": _INFO,
    "egrep": _TEXT + " (replaced, `_grep`)",
    "env": _ENV + "; runs a command line in the same shell",
    "expand": _TEXT,
    "expr": _TEXT,
    "false": _INFO,
    "fgrep": _TEXT + " (replaced, `_grep`)",
    "file": _FS + "; guesses types from content, no magic database",
    "find": _FS + "; `-exec` runs in the same shell",
    "fold": _TEXT,
    "grep": _TEXT + " (replaced, `_grep`)",
    "gunzip": _FS + "; `gzip` module on in-memory bytes",
    "gzip": _FS + "; `gzip` module on in-memory bytes (`-c` and stdin: replaced, byte-exact)",
    "head": _TEXT + "; `-c N /dev/zero` gives N zero bytes",
    "id": "prints the sandbox's fixed identity (`user`, uid and gid 1000); no host lookup",
    "help": _INFO,
    "history": _INFO,
    "hostname": "prints the instance's name (a hash of its key); no host lookup",
    "html-to-markdown": _TEXT + " (markdownify on strings; no fetching)",
    "join": _TEXT,
    "jq": _TEXT + " (just-bash's own jq interpreter, with jq's options and output, `_jq`)",
    "ln": _FS + "; links are entries of the in-memory filesystem, resolved inside it",
    "ls": _FS + "; owners are the sandbox's fixed identity",
    "md5sum": _TEXT,
    "mkdir": _FS,
    "mktemp": _FS + "; random names from Python's `secrets`",
    "mv": _FS,
    "nl": _TEXT,
    "od": _TEXT,
    "paste": _TEXT,
    "printenv": _ENV,
    "printenv.py": _ENV + " (a just-bash test helper)",
    "printf": _INFO
    + "; `%(...)T` reads `TZ` in Python (zone files from the sandbox's filesystem), never through "
    "the C library",
    "pwd": _INFO,
    "read": _TEXT,
    "readlink": _FS,
    "realpath": _FS + "; links resolved inside the in-memory filesystem",
    "rev": _TEXT,
    "rg": _TEXT,
    "rm": _FS,
    "rmdir": _FS,
    "sed": _TEXT + " (replaced, `_sed`); `r`/`w` commands use sandbox files; `e` is refused",
    "seq": _INFO + " (replaced: no silent 100,000-number cap)",
    "sh": _NEW_SHELL,
    "sha1sum": _TEXT,
    "sha256sum": _TEXT,
    "shuf": _TEXT,
    "sleep": "waits in the worker; the host's timeout still applies",
    "sort": _TEXT,
    "split": _FS,
    "sqlite3": (
        "replaced: databases are sandbox files loaded into `:memory:` (`deserialize`) and "
        "written back (`serialize`); ATTACH/DETACH/VACUUM INTO, load_extension and temp-store "
        "pragmas denied by an authorizer; dot-commands refused"
    ),
    "stat": _FS + "; owners are the sandbox's fixed identity",
    "strings": _TEXT,
    "tac": _TEXT,
    "tail": _TEXT,
    "tar": _FS + "; `tarfile`/`gzip`/`bz2`/`lzma` on in-memory buffers only",
    "tee": _FS,
    "time": _SHELL,
    "timeout": _SHELL + "; the host's own timeout still applies",
    "touch": _FS,
    "tr": _TEXT,
    "tree": _FS,
    "true": _INFO,
    "unalias": _INFO,
    "uname": "prints a fixed Linux identity and the instance's name; no host lookup",
    "unexpand": _TEXT,
    "uniq": _TEXT,
    "wc": _TEXT,
    "which": _FS + " (looks in the sandbox's `/bin`, `/usr/bin`)",
    "whoami": "prints the sandbox's fixed user name (`user`); no host lookup",
    "xan": _TEXT + " (CSV)",
    "xargs": _SHELL + "; input read as GNU xargs reads it",
    "yq": _TEXT + " (YAML/JSON/XML/INI parsed from strings; XML entities are not fetched)",
    "zcat": _FS + "; `gzip` module on in-memory bytes",
}


def render_audit_table() -> str:
    """The README's command table (Markdown), generated from :data:`COMMAND_AUDIT`."""
    rows = [
        "| Command | Why it cannot touch the host |",
        "| --- | --- |",
        *(f"| `{name}` | {why} |" for name, why in sorted(COMMAND_AUDIT.items())),
    ]
    return "\n".join(rows) + "\n"


class UnauditedCommandError(RuntimeError):
    """A command would be registered that the audit table does not list."""


# -- replaced and wrapped commands -----------------------------------------------------------------


def _result(stdout: str = "", stderr: str = "", exit_code: int = 0) -> ExecResult:
    return ExecResult(stdout=stdout, stderr=stderr, exit_code=exit_code)


_SEQ_CAP = 100_000  # just-bash's seq stops silently after this many numbers


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


class _Seq:
    """``seq`` without just-bash's silent cap: long integer sequences are generated here."""

    name = "seq"

    def __init__(self, inner: Command) -> None:
        self._inner = inner

    async def execute(self, args: list[str], ctx: CommandContext) -> ExecResult:
        separator, equal_width, numbers = "\n", False, list[str]()
        index = 0
        while index < len(args):
            arg = args[index]
            if arg.startswith("--separator="):
                separator = arg[len("--separator=") :]
            elif arg == "--equal-width":
                equal_width = True
            elif arg.startswith("-") and arg != "-" and not _is_number(arg):
                flags = arg[1:]
                if flags.startswith("s"):
                    if len(flags) > 1:
                        separator = flags[1:]
                    elif index + 1 < len(args):
                        index += 1
                        separator = args[index]
                elif flags == "w":
                    equal_width = True
                else:
                    return await self._inner.execute(args, ctx)  # its own error message
            else:
                numbers.append(arg)
            index += 1
        if not 1 <= len(numbers) <= 3 or not all(_is_number(n) for n in numbers):
            return await self._inner.execute(args, ctx)
        first, step, last = (
            ("1", "1", numbers[0])
            if len(numbers) == 1
            else (numbers[0], "1", numbers[1])
            if len(numbers) == 2
            else (numbers[0], numbers[1], numbers[2])
        )
        f, s, la = float(first), float(step), float(last)
        if s == 0 or (la - f) / s < _SEQ_CAP:
            return await self._inner.execute(args, ctx)
        integral = all(n.lstrip("+-").isdigit() for n in (first, step, last))
        if not integral:
            return _result(
                stderr=(
                    f"seq: more than {_SEQ_CAP} numbers with a fractional part are not supported "
                    "by the in-memory shell; use integers\n"
                ),
                exit_code=1,
            )
        start, stride, stop = int(first), int(step), int(last)
        values = range(start, stop + (1 if stride > 0 else -1), stride)
        width = max(len(str(abs(start))), len(str(abs(stop)))) if equal_width else 0
        chunks: list[str] = []
        chunk = 65_536
        for offset in range(0, len(values), chunk):
            part = values[offset : offset + chunk]
            texts = (
                (f"-{str(-v).zfill(width)}" if v < 0 else str(v).zfill(width) for v in part)
                if width
                else map(str, part)
            )
            chunks.append(separator.join(texts))
        return _result(separator.join(chunks) + "\n" if chunks else "")


class _Cat:
    """``cat``: without options, the inputs' bytes unchanged (just-bash's adds a newline)."""

    name = "cat"

    def __init__(self, inner: Command) -> None:
        self._inner = inner

    async def execute(self, args: list[str], ctx: CommandContext) -> ExecResult:
        files: list[str] = []
        options_done = False
        for arg in args:
            if not options_done and arg == "--":
                options_done = True
            elif not options_done and arg.startswith("-") and arg != "-":
                return await self._inner.execute(args, ctx)  # options: just-bash's line mode
            else:
                files.append(arg)
        parts: list[str] = []
        errors: list[str] = []
        for name in files or ["-"]:
            if name in ("-", "/dev/stdin"):
                parts.append(ctx.stdin)
                continue
            try:
                parts.append(await ctx.fs.read_file(ctx.fs.resolve_path(ctx.cwd, name)))
            except FileNotFoundError:
                errors.append(f"cat: {name}: No such file or directory\n")
            except IsADirectoryError:
                errors.append(f"cat: {name}: Is a directory\n")
            except NotADirectoryError:
                errors.append(f"cat: {name}: Not a directory\n")
        return _result("".join(parts), "".join(errors), 1 if errors else 0)


class _GzipToStdout:
    """``gzip -c`` (or ``gzip`` reading stdin): the compressed bytes on stdout, byte for byte
    (just-bash printed a placeholder such as ``<binary gzip data, 30 bytes>``)."""

    name = "gzip"

    def __init__(self, inner: Command) -> None:
        self._inner = inner

    async def execute(self, args: list[str], ctx: CommandContext) -> ExecResult:
        import gzip

        to_stdout, level, files = False, 6, list[str]()
        for arg in args:
            if arg in ("--stdout", "--to-stdout"):
                to_stdout = True
            elif arg.startswith("--") or arg == "-":
                return await self._inner.execute(args, ctx)
            elif arg.startswith("-"):
                for flag in arg[1:]:
                    if flag == "c":
                        to_stdout = True
                    elif flag.isdigit():
                        level = int(flag)
                    elif flag not in "kfnq":
                        return await self._inner.execute(args, ctx)  # -d, -l, -t, -r, ...
            else:
                files.append(arg)
        if files and not to_stdout:
            return await self._inner.execute(args, ctx)
        parts: list[bytes] = []
        for name in files:
            try:
                data = await ctx.fs.read_file_bytes(ctx.fs.resolve_path(ctx.cwd, name))
            except OSError:
                return _result(stderr=f"gzip: {name}: No such file or directory\n", exit_code=1)
            parts.append(gzip.compress(data, compresslevel=level))
        if not files:
            parts.append(gzip.compress(ctx.stdin.encode("utf-8"), compresslevel=level))
        return _result(decode(b"".join(parts)))


# -- sqlite3 ----------------------------------------------------------------------------------------

_SQLITE_HELP = """\
Usage: sqlite3 [OPTIONS] DATABASE [SQL]
SQLite on a database file of the sandbox (or :memory:). The SQL comes from the argument or stdin.

Options:
  -list -csv -json -line -column -table -markdown -tabs   output mode (default: list)
  -header / -noheader    show column headers or not
  -separator SEP         field separator (default: |)
  -nullvalue TEXT        text for NULL values
  -readonly              open the database read-only
  -bail                  stop on the first error
  -echo                  print SQL before running it
  -cmd SQL               run SQL before the rest
  -version               show the SQLite version

Not available in the in-memory sandbox: ATTACH, DETACH, VACUUM INTO, load_extension,
and dot-commands (.open, .read, .import, ...).
"""

_DENIED_MESSAGE = (
    "sqlite3: {what} is not allowed in the in-memory sandbox: databases are files of the "
    "sandbox and cannot reach other files (ATTACH, DETACH, VACUUM INTO, load_extension and "
    "temp-store pragmas are refused)"
)
_DENIED_FUNCTIONS = frozenset({"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer"})
_DENIED_PRAGMAS = frozenset({"temp_store", "temp_store_directory", "data_store_directory"})
_MODES = frozenset({"list", "csv", "json", "line", "column", "table", "markdown", "tabs"})


class _Sqlite3:
    """``sqlite3`` over a database file of the sandbox; nothing outside it can be opened."""

    name = "sqlite3"

    async def execute(self, args: list[str], ctx: CommandContext) -> ExecResult:
        from just_bash.commands.sqlite3 import sqlite3_cmd

        if any(arg in ("--help", "-help", "-h") for arg in args):
            return _result(_SQLITE_HELP)
        options = sqlite3_cmd.Sqlite3Options()
        positional: list[str] = []
        index, options_done = 0, False
        while index < len(args):
            arg = args[index]
            index += 1
            if options_done or not arg.startswith("-") or arg == "-":
                positional.append(arg)
            elif arg == "--":
                options_done = True
            elif arg == "-version":
                return _result(f"{sqlite3.sqlite_version}\n")
            elif arg[1:] in _MODES:
                options.mode = arg[1:]
            elif arg in ("-header", "-noheader"):
                options.header = arg == "-header"
            elif arg in ("-readonly", "-bail", "-echo"):
                setattr(options, arg[1:], True)
            elif arg in ("-separator", "-nullvalue", "-cmd"):
                if index >= len(args):
                    return _result(
                        stderr=f"sqlite3: Error: missing argument to {arg}\n", exit_code=1
                    )
                value = args[index]
                index += 1
                if arg == "-separator":
                    options.separator = value
                elif arg == "-nullvalue":
                    options.null_value = value
                else:
                    options.cmd = value
            else:
                return _result(stderr=f"sqlite3: Error: unknown option: {arg}\n", exit_code=1)
        if not positional:
            return _result(stderr="sqlite3: missing database argument\n", exit_code=1)
        database, sql = positional[0], (positional[1] if len(positional) > 1 else ctx.stdin)
        if options.cmd:
            sql = options.cmd + (";" + sql if sql.strip() else "")
        for line in sql.splitlines():
            if line.lstrip().startswith("."):
                command = line.split()[0]
                return _result(
                    stderr=(
                        f"sqlite3: the dot-command {command} is not supported in the in-memory "
                        "sandbox (no .open, .read, .import, ...); give SQL statements only\n"
                    ),
                    exit_code=1,
                )
        if not sql.strip():
            return _result(stderr="sqlite3: no SQL provided\n", exit_code=1)

        path = None if database in (":memory:", "") else ctx.fs.resolve_path(ctx.cwd, database)
        original: bytes | None = None
        if path is not None:
            try:
                original = await ctx.fs.read_file_bytes(path)
            except FileNotFoundError:
                original = None
            except OSError as error:
                return _result(stderr=f"sqlite3: cannot open {database}: {error}\n", exit_code=1)
        denied: list[str] = []
        connection = sqlite3.connect(":memory:")
        try:
            if original:
                try:
                    connection.deserialize(original)
                except sqlite3.Error as error:
                    return _result(stderr=f"Error: {database}: {error}\n", exit_code=1)
            connection.execute("PRAGMA temp_store = MEMORY")
            if options.readonly:
                connection.execute("PRAGMA query_only = ON")
            connection.set_authorizer(_authorizer(denied))
            stdout, had_error = self._run(connection, sql, options, denied, sqlite3_cmd)
            if isinstance(stdout, ExecResult):
                return stdout
            if path is not None and not options.readonly:
                try:
                    connection.set_authorizer(None)
                    updated = connection.serialize()
                except sqlite3.Error:
                    updated = b""
                if updated != (original or b"") and (original is not None or updated):
                    await ctx.fs.write_file(path, updated)
        finally:
            connection.close()
        return _result(stdout, "", 1 if had_error and options.bail else 0)

    def _run(
        self,
        connection: sqlite3.Connection,
        sql: str,
        options: Any,  # just-bash's Sqlite3Options
        denied: list[str],
        helpers: Any,  # just-bash's sqlite3_cmd module
    ) -> tuple[str | ExecResult, bool]:
        stdout = f"{sql}\n" if options.echo else ""
        had_error = False
        cursor = connection.cursor()
        for statement in helpers.split_statements(sql):
            try:
                cursor.execute(statement)
                if not helpers.is_write_statement(statement):
                    columns = [d[0] for d in cursor.description] if cursor.description else []
                    rows = cursor.fetchall()
                    if rows or options.header:
                        stdout += helpers.format_output(columns, rows, options)
            except sqlite3.Error as error:
                message = _DENIED_MESSAGE.format(what=denied[-1]) if denied else f"Error: {error}"
                denied.clear()
                if options.bail or message.startswith("sqlite3:"):
                    return _result(stdout, message + "\n", 1), True
                stdout += message + "\n"
                had_error = True
        return stdout, had_error


def _authorizer(
    denied: list[str],
) -> Callable[[int, str | None, str | None, str | None, str | None], int]:
    def authorize(
        action: int, arg1: str | None, arg2: str | None, database: str | None, source: str | None
    ) -> int:
        if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH):
            denied.append("ATTACH/DETACH (or VACUUM INTO)")
            return sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in _DENIED_FUNCTIONS:
            denied.append(f"the function {arg2}()")
            return sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_PRAGMA and (arg1 or "").lower() in _DENIED_PRAGMAS:
            denied.append(f"PRAGMA {arg1}")
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    return authorize


class _WithFs:
    """A command that may read sandbox files from synchronous code (``printf``'s time zone):
    its ``ctx.fs`` is :data:`_zones.current_fs` while it runs."""

    def __init__(self, inner: Command) -> None:
        self.name = inner.name
        self._inner = inner

    async def execute(self, args: list[str], ctx: CommandContext) -> ExecResult:
        token = _zones.current_fs.set(ctx.fs)
        try:
            return await self._inner.execute(args, ctx)
        finally:
            _zones.current_fs.reset(token)


def _zoned_printf(printf_module: Any) -> None:
    """``printf '%(fmt)T'`` in the shell's ``TZ``, without the process environment: just-bash's
    code sets ``os.environ["TZ"]`` and calls ``time.tzset()``; it now sets a dict of its own, and
    its ``time.localtime`` reads the zone from that dict (see ``_zones``)."""
    environ: dict[str, str] = {}
    printf_module.os = _Proxy(os, environ=environ)
    printf_module.time = _Proxy(time, tzset=lambda: None, localtime=_zones.localtime_in(environ))


# -- the registry ---------------------------------------------------------------------------------


def command_registry(wrap: Callable[[Command], Command]) -> dict[str, Command]:
    """The shell's commands (no network ones), each passed through ``wrap``.

    Raises :class:`UnauditedCommandError` when just-bash offers a command that
    :data:`COMMAND_AUDIT` does not list, so nothing unaudited is ever registered.
    """
    commands: dict[str, Command] = dict(create_command_registry(include_network=False))
    commands["seq"] = _Seq(commands["seq"])
    commands["cat"] = _Cat(commands["cat"])
    commands["sqlite3"] = _Sqlite3()
    commands["gzip"] = _GzipToStdout(commands["gzip"])
    commands["printf"] = _WithFs(commands["printf"])
    _coreutils.replaced_commands(commands)
    commands.update(_scripts.shell_commands())
    commands.update(_texttools.text_commands(commands))
    unaudited = sorted(set(commands) - set(COMMAND_AUDIT))
    if unaudited:
        raise UnauditedCommandError(
            f"commands not in the audit table (pai.sandbox_inmemory._worker._commands.COMMAND_AUDIT): "
            f"{', '.join(unaudited)}"
        )
    return {name: wrap(command) for name, command in commands.items()}


# -- patches: byte escapes, arithmetic eval -----------------------------------------------------


def _byte_chr(code: int) -> str:
    """``chr`` for escape decoders: ``\\NNN`` / ``\\xHH`` of 0x80-0xFF is that raw byte (a
    ``surrogateescape`` surrogate); ``\\uHHHH`` / ``\\UHHHHHHHH`` stay Unicode characters."""
    if 0x80 <= code <= 0xFF:
        here = inspect.currentframe()
        caller = here.f_back if here is not None else None
        local: dict[str, object] = caller.f_locals if caller is not None else {}
        text = local.get("s", local.get("value"))
        index = local.get("i")
        if (
            isinstance(text, str)
            and isinstance(index, int)
            and 0 <= index < len(text) - 1
            and text[index] == "\\"
            and text[index + 1] in "uU"
        ):
            return chr(code)
        return chr(0xDC00 + code)
    return chr(code)


class _RawBytes(bytes):
    """Bytes a command turns into output text: decoding them as UTF-8 or Latin-1 (whatever the
    error handler) keeps every byte (``surrogateescape``), so the output is those bytes."""

    def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        if names_the_bytes(encoding):
            return BinaryText(bytes.decode(self, "utf-8", "surrogateescape"))
        return bytes.decode(self, encoding, errors)


def _raw(function: Callable[..., bytes]) -> Callable[..., bytes]:
    def wrapper(*args: object, **kwargs: object) -> bytes:
        return _RawBytes(function(*args, **kwargs))

    return wrapper


class _RawBytesIO(io.BytesIO):
    """``io.BytesIO`` whose value decodes byte for byte (tar writing an archive to stdout)."""

    def getvalue(self) -> bytes:
        return _RawBytes(super().getvalue())


class _Proxy(types.ModuleType):
    """A module as one command module sees it: the real one, with a few names replaced."""

    def __init__(self, real: types.ModuleType, **replaced: object) -> None:
        super().__init__(real.__name__)
        self._real = real
        self.__dict__.update(replaced)

    def __getattr__(self, name: str) -> Any:  # the real module's attribute
        return getattr(self._real, name)


def _binary_output(compression: Any, base64_cmd: Any, tar: Any) -> None:
    """gzip/gunzip/zcat, ``base64 -d`` and ``tar -cf -`` print binary data byte for byte
    (just-bash decoded it with replacement characters or as Latin-1)."""
    import base64
    import bz2
    import gzip
    import lzma

    def packer(module: types.ModuleType) -> _Proxy:
        return _Proxy(module, compress=_raw(module.compress), decompress=_raw(module.decompress))

    compression.gzip = packer(gzip)
    base64_cmd.b64 = _Proxy(base64, b64decode=_raw(base64.b64decode))
    tar.io = _Proxy(io, BytesIO=_RawBytesIO)
    tar.gzip, tar.bz2, tar.lzma = packer(gzip), packer(bz2), packer(lzma)


_BINARY: dict[type[ast.operator], Callable[[int, int], int]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Div: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
    ast.LShift: lambda a, b: a << b,
    ast.RShift: lambda a, b: a >> b,
    ast.BitAnd: lambda a, b: a & b,
    ast.BitOr: lambda a, b: a | b,
    ast.BitXor: lambda a, b: a ^ b,
}
_COMPARE: dict[type[ast.cmpop], Callable[[int, int], bool]] = {
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
}
_MAX_SHIFT = 64


def _arith(node: ast.AST) -> int:
    if isinstance(node, ast.Expression):
        return _arith(node.body)
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp):
        value = _arith(node.operand)
        if isinstance(node.op, ast.USub):
            return -value
        if isinstance(node.op, ast.UAdd):
            return value
        if isinstance(node.op, ast.Invert):
            return ~value
        if isinstance(node.op, ast.Not):
            return int(not value)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _arith(node.left), _arith(node.right)
        if isinstance(node.op, ast.LShift | ast.RShift) and not 0 <= right <= _MAX_SHIFT:
            raise ValueError("shift out of range")
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        left, right = _arith(node.left), _arith(node.comparators[0])
        compare = _COMPARE.get(type(node.ops[0]))
        if compare is not None:
            return int(compare(left, right))
    raise ValueError("not plain integer arithmetic")


def _arith_eval(source: str, *_: object) -> int:
    """Replaces ``eval`` in just-bash's arithmetic fallback: integers and operators only."""
    if len(source) > 10_000:
        raise ValueError("expression too long")
    return _arith(ast.parse(source.strip(), mode="eval"))


class OutOfMemory(Exception):  # named for what the user sees
    """A ``MemoryError`` inside a command that reports errors as text (jq, yq), with a message."""


def _memory_reported(function: Callable[..., Any], message: str) -> Callable[..., Any]:
    """``function`` with ``MemoryError`` turned into :class:`OutOfMemory` carrying ``message``
    (jq and yq print an exception's text, and a bare ``MemoryError`` has none)."""

    def wrapper(*args: object, **kwargs: object) -> object:
        try:
            return function(*args, **kwargs)
        except MemoryError:
            raise OutOfMemory(message) from None

    return wrapper


def patch_just_bash(memory_message: str = "out of memory") -> None:
    """Apply the fixes above to the imported just-bash modules (in the worker only)."""
    from just_bash.commands.echo import echo as echo_module
    from just_bash.commands.printf import printf as printf_module
    from just_bash.interpreter import expansion
    from just_bash.parser import parser as parser_module

    for module in (echo_module, printf_module, parser_module, expansion):
        module.chr = _byte_chr  # pyright: ignore[reportAttributeAccessIssue]
    printf_module.bytes = _RawBytes  # pyright: ignore[reportAttributeAccessIssue]
    _zoned_printf(printf_module)
    expansion.eval = _arith_eval  # pyright: ignore[reportAttributeAccessIssue]
    patch_redirections()
    _coreutils.patch_interpreter()
    _scripts.patch_scripts()
    _texttools.patch_query_engine()  # jq's semantics for jq, yq and xan alike, from the start
    _semantics.patch_semantics()  # after _scripts: its wrappers go around those
    from just_bash.commands.base64 import base64 as base64_module
    from just_bash.commands.compression import compression as compression_module
    from just_bash.commands.jq import jq as jq_module
    from just_bash.commands.tar import tar as tar_module

    _binary_output(compression_module, base64_module, tar_module)
    from just_bash.commands.yq import yq as yq_module

    for module in (jq_module, yq_module):
        module.evaluate = _memory_reported(module.evaluate, memory_message)  # pyright: ignore[reportAttributeAccessIssue]
