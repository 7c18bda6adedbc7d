"""The interpreter's semantics as GNU bash 5 has them: subshells, traps, jobs and signals, errors
that end a line or the shell, where ``set -e`` does not apply, and integer arithmetic.

Runs inside a worker process only. just-bash 0.2.1 differed from bash in these ways; each is fixed
where its cause is, by the patches :func:`patch_semantics` applies:

- Every stage of a pipeline ran in the caller's shell, and so did ``$(...)`` and ``<(...)``
  (``echo v | read x`` set ``x``; ``$(cd /tmp)`` moved the caller). Each now runs in a subshell:
  a copy of the shell's state with its own ``exit``, traps and jobs (``shopt -s lastpipe`` keeps
  a pipeline's last stage in the shell, as bash's does; ``$(...)`` runs without ``set -e``
  unless ``shopt -s inherit_errexit``). What the earlier stages and ``$(...)`` write to stderr
  reaches the shell's stderr (just-bash dropped it), and a subshell that reads the shell's own
  stdin consumes it, as bash's shared file does.
- ``trap`` did not exist. ``EXIT`` runs when a shell ends (the end of its script, ``exit``,
  ``set -e``, a fatal error or signal; subshells too), ``ERR`` where ``set -e`` would stop the
  shell (in functions and subshells only with ``set -E``), and ``HUP``, ``INT``, ``TERM``,
  ``USR1``, ... when ``kill`` sends that signal to the shell. ``DEBUG`` and ``RETURN`` actions are
  refused with a message rather than never run.
- ``&`` ran a job in the foreground, ``$!`` was empty, ``wait`` did nothing and there was no
  ``kill``. A job is now an asyncio task running a subshell: it runs while the shell waits
  (``wait``, ``sleep``, ``kill``), its output joins the shell's when it is done, ``wait`` returns
  its status, ``kill`` ends it (status 128+N; ``INT`` and ``QUIT`` are ignored by jobs, as bash's
  are), and a shell that ends waits for its jobs, as a reader of its output would. ``jobs``
  lists them; ``fg`` and ``bg`` say "no job control", as a script's bash does. Stopping a process
  (``kill -STOP``) is refused with a message.
- ``${v:?}`` and an unset variable under ``set -u`` now end the shell (status 127 for the
  command line, which bash runs as ``bash -c``; 1 for scripts and subshells), keeping what was
  printed; an error in ``$((...))`` or a bad substitution ends only the current line, as bash's
  reader does: the next line runs, with ``$?`` 1.
- ``set -e`` stopped the shell inside a function called as ``f && ...``, ``f || ...`` or
  ``! f``; bash ignores it in everything such a list runs but its last pipeline.
- A function's arguments were expanded after the caller's positional parameters were cleared
  (``fact $(($1 - 1))`` passed ``-1``); ``((n == 0))`` parsed as an assignment; ``+=`` on a
  ``declare -i`` variable appended text; ``local -i`` was ignored and ``local v`` set ``v`` to
  the empty string where bash leaves it unset; arithmetic used Python's unbounded integers where
  bash wraps at 64 bits.
- ``< <(cmd)`` did not parse, and ``<(cmd)`` named a file left behind in ``/tmp``: it is now
  ``/dev/fd/63`` (62, ...) while the command runs, as in bash, and ``>(cmd)`` gets what the
  command wrote to it.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import re
import types
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, cast

from just_bash.interpreter.errors import (
    BadSubstitutionError,
    BreakError,
    ContinueError,
    ErrexitError,
    ExitError,
    InterpreterError,
    NounsetError,
    ReturnError,
)
from just_bash.interpreter.interpreter import Interpreter
from just_bash.interpreter.types import InterpreterState
from just_bash.types import ExecResult

from pai.sandbox_inmemory._worker._scripts import ExitKeepingOutput

__all__ = ["patch_semantics"]

_PROVIDER_HINT = 'use provider = "docker" (or the local provider) for a real shell'

Body = Callable[[Interpreter], Awaitable[ExecResult]]
"""What runs in a subshell, given its interpreter."""


def _result(stdout: str = "", stderr: str = "", exit_code: int = 0) -> ExecResult:
    return ExecResult(stdout=stdout, stderr=stderr, exit_code=exit_code)


def _variables(env: object) -> dict[str, str]:
    """The interpreter's variables (a ``dict`` subclass just-bash leaves untyped)."""
    return cast("dict[str, str]", env)


# -- signals ---------------------------------------------------------------------------------------

_SIGNAL_NAMES = (
    *("HUP", "INT", "QUIT", "ILL", "TRAP", "ABRT", "BUS", "FPE", "KILL", "USR1", "SEGV"),
    *("USR2", "PIPE", "ALRM", "TERM", "STKFLT", "CHLD", "CONT", "STOP", "TSTP", "TTIN"),
    *("TTOU", "URG", "XCPU", "XFSZ", "VTALRM", "PROF", "WINCH", "IO", "PWR", "SYS"),
)
_SIGNALS: dict[int, str] = dict(enumerate(_SIGNAL_NAMES, 1))
"""Linux's signal numbers and names (without ``SIG``), real-time ones named as bash names them."""
_SIGNALS[34] = "RTMIN"
_SIGNALS.update({34 + offset: f"RTMIN+{offset}" for offset in range(1, 16)})
_SIGNALS.update({64 - offset: f"RTMAX-{offset}" for offset in range(1, 15)})
_SIGNALS[64] = "RTMAX"
_NUMBERS = {name: number for number, name in _SIGNALS.items()}

_DESCRIPTIONS = {
    "HUP": "Hangup",
    "INT": "Interrupt",
    "QUIT": "Quit",
    "ILL": "Illegal instruction",
    "TRAP": "Trace/breakpoint trap",
    "ABRT": "Aborted",
    "BUS": "Bus error",
    "FPE": "Floating point exception",
    "KILL": "Killed",
    "USR1": "User defined signal 1",
    "SEGV": "Segmentation fault",
    "USR2": "User defined signal 2",
    "PIPE": "Broken pipe",
    "ALRM": "Alarm clock",
    "TERM": "Terminated",
}
_IGNORED_BY_DEFAULT = frozenset({"CHLD", "CONT", "URG", "WINCH"})
_STOPPING = frozenset({"STOP", "TSTP", "TTIN", "TTOU"})
_IGNORED_BY_JOBS = frozenset({"INT", "QUIT"})  # asynchronous commands of a script ignore them
_PSEUDO = ("EXIT", "DEBUG", "ERR", "RETURN")
_UNSUPPORTED_TRAPS = frozenset({"DEBUG", "RETURN"})


def _signal_number(spec: str) -> int | None:
    """The signal ``spec`` names (``15``, ``TERM``, ``SIGTERM``, ``term``), or None."""
    if spec.isdigit():
        number = int(spec)
        return number if number in _SIGNALS or number == 0 else None
    name = spec.upper()
    name = name.removeprefix("SIG")
    return _NUMBERS.get(name)


def _trap_name(spec: str) -> str | None:
    """The key a trap is kept under (``EXIT``, ``ERR``, ``INT``, ...), or None."""
    upper = spec.upper()
    if upper.removeprefix("SIG") in _PSEUDO:
        return upper.removeprefix("SIG")
    number = _signal_number(spec)
    if number is None:
        return None
    return "EXIT" if number == 0 else _SIGNALS[number]


def _signal_table() -> str:
    """``kill -l`` / ``trap -l``: bash's table of every signal, five to a line."""
    entries = [f"{number:2d}) SIG{name}" for number, name in sorted(_SIGNALS.items())]
    text = "".join(
        entry + ("\n" if index % 5 == 4 else "\t") for index, entry in enumerate(entries)
    )
    return text if len(entries) % 5 == 0 else text + "\n"


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


# -- the state each shell keeps beside just-bash's ---------------------------------------------


@dataclass(eq=False)
class _Job:
    """A background job: a subshell run as an asyncio task."""

    number: int
    pid: int
    text: str
    shell: _Shell
    task: asyncio.Task[ExecResult] | None = None
    signal: int | None = None  # the signal that ended it, if one did


@dataclass(eq=False)
class _Shell:
    """What just-bash's ``InterpreterState`` has no room for: traps, jobs, signals on their way."""

    pid: int
    tree: _Tree
    top_level: bool = False  # the command line, which bash runs as ``bash -c``
    subshell: bool = False
    traps: dict[str, str] = field(default_factory=dict[str, str])
    inherited_listing: dict[str, str] | None = None  # what `trap` lists in a fresh subshell
    errtrace: bool = False
    jobs: list[_Job] = field(default_factory=list[_Job])  # the job table
    inherited_jobs: list[_Job] = field(default_factory=list[_Job])  # what `jobs` lists in a
    # fresh subshell: bash's ``$(jobs -p)`` names the shell's jobs
    unflushed: list[_Job] = field(default_factory=list[_Job])  # output not yet shown
    statuses: dict[int, int] = field(default_factory=dict[int, int])  # of jobs waited for
    pending: list[int] = field(default_factory=list[int])  # signals not yet delivered
    script_depth: int = 0
    in_trap: bool = False
    finished: bool = False


@dataclass(eq=False)
class _Tree:
    """The processes of one command line: its shell, subshells and jobs, by pid."""

    next_pid: int
    shells: dict[int, _Shell] = field(default_factory=dict[int, _Shell])
    jobs: dict[int, _Job] = field(default_factory=dict[int, _Job])
    fds: set[int] = field(default_factory=set[int])  # /dev/fd/N of process substitutions
    closed: bool = False

    def allocate(self) -> int:
        pid = self.next_pid
        self.next_pid += 1
        return pid


_SHELL_KEY = "_pai_shell"
_tree: list[_Tree] = [_Tree(next_pid=2)]
"""The tree of the command line running in this worker (one at a time)."""


class _TreeClosed(BaseException):
    """A job of a command line that has ended tried to go on: it must not touch the files of
    whatever runs next. A ``BaseException`` so that no handler of the interpreter swallows it."""


def _pid_of(state: InterpreterState) -> int:
    value = _variables(state.env).get("$", "1")
    return int(value) if value.isdigit() else 1


def _shell_of(interpreter: Interpreter) -> _Shell:
    return _shell_of_state(interpreter.state)


def _shell_of_state(state: InterpreterState) -> _Shell:
    shell = cast("_Shell | None", state.__dict__.get(_SHELL_KEY))
    if shell is None:
        # a shell this module did not start (a child ``bash``, or ``env``/``xargs`` running a
        # command line): it has no traps or jobs yet and shares the command line's processes
        shell = _Shell(pid=_pid_of(state), tree=_tree[0])
        state.__dict__[_SHELL_KEY] = shell
    if shell.tree.closed:
        raise _TreeClosed
    return shell


def _owner(ctx: Any) -> Interpreter:
    """The interpreter whose context (``InterpreterContext``) a builtin was given (its
    ``execute_script`` is bound to it, see :func:`_with_substitutions`)."""
    owner = getattr(ctx.execute_script, "__self__", None)
    if not isinstance(owner, Interpreter):
        raise RuntimeError("pai-sandbox-inmemory: a builtin ran outside an interpreter")
    return owner


def _new_tree(interpreter: Interpreter) -> None:
    """A new command line: a fresh process table whose first shell is ``interpreter``."""
    pid = _pid_of(interpreter.state)
    tree = _Tree(next_pid=pid + 1)
    _tree[0] = tree
    shell = _Shell(pid=pid, tree=tree, top_level=True)
    tree.shells[pid] = shell
    interpreter.state.__dict__[_SHELL_KEY] = shell


# -- errors that end a line, a shell, or a job --------------------------------------------------


class _LineAborted(ExitKeepingOutput):
    """An expansion error (``$((1/0))``, a bad substitution): bash's reader drops the rest of the
    line it was running and goes on with the next (in a subshell, the subshell ends with 1)."""

    def __init__(self, stdout: str, stderr: str) -> None:
        super().__init__(1, stdout, stderr)


class _ArithmeticFailed(_LineAborted):
    def __init__(self, message: str, line: int) -> None:
        where = f"line {line}: " if line else ""
        super().__init__("", f"bash: {where}{message}\n")
        Exception.__init__(self, message)  # what ``((...))`` and ``let`` print


class _Killed(ExitKeepingOutput):
    """A signal ended the shell (128+N)."""

    def __init__(self, signal: int, stdout: str = "", stderr: str = "") -> None:
        super().__init__(128 + signal, stdout, stderr)
        self.signal = signal


def _fatal(interpreter: Interpreter, stdout: str, stderr: str) -> ExitKeepingOutput:
    """``${v:?}`` or ``set -u``: bash ends a non-interactive shell, with status 127 when it runs
    a ``-c`` command line (as the provider's command line is run) and 1 otherwise."""
    shell = _shell_of(interpreter)
    return ExitKeepingOutput(127 if shell.top_level else 1, stdout, stderr)


def _as_exit(interpreter: Interpreter, error: BaseException) -> BaseException:
    """The error bash's own would be: a fatal one ends the shell, an expansion error the line."""
    if isinstance(error, NounsetError):
        name = str(error).removeprefix("unbound variable: ")
        name = f"${name}" if name.isdigit() else name
        line = interpreter.state.current_line
        where = f"line {line}: " if line and _shell_of(interpreter).top_level else ""
        return _fatal(interpreter, error.stdout, f"bash: {where}{name}: unbound variable\n")
    if isinstance(error, BadSubstitutionError):
        return _LineAborted(error.stdout, error.stderr or f"bash: {error}\n")
    if type(error) is ExitError:  # raised by an expansion: ``${v:?message}``
        return _fatal(interpreter, error.stdout, error.stderr)
    return error


# -- subshells ------------------------------------------------------------------------------------


def _subshell_state(parent: InterpreterState, stdin: str | None) -> InterpreterState:
    """A copy of ``parent``'s state, as a forked bash has (just-bash's own subshell copied only
    some options and no local scopes)."""
    return InterpreterState(
        env=parent.env.copy(),
        cwd=parent.cwd,
        previous_dir=parent.previous_dir,
        functions=dict(parent.functions),
        local_scopes=[dict(scope) for scope in parent.local_scopes],
        call_depth=parent.call_depth,
        source_depth=parent.source_depth,
        command_count=parent.command_count,
        last_exit_code=parent.last_exit_code,
        last_arg=parent.last_arg,
        start_time=parent.start_time,
        seconds_reset_time=parent.seconds_reset_time,
        last_background_pid=parent.last_background_pid,
        current_line=parent.current_line,
        options=dataclasses.replace(parent.options),
        in_condition=parent.in_condition,
        parent_has_loop_context=parent.loop_depth > 0 or parent.parent_has_loop_context,
        group_stdin=stdin or None,
        dir_stack=list(parent.dir_stack),
        readonly_vars=set(parent.readonly_vars),
        associative_arrays=set(parent.associative_arrays),
        fd_table=parent.fd_table.clone(),
    )


def _fork(parent: Interpreter, stdin: str | None, *, errexit: bool | None = None) -> Interpreter:
    """A subshell of ``parent``: its state copied, traps reset (ignored signals stay ignored;
    ``ERR`` stays with ``set -E``), a pid of its own."""
    state = _subshell_state(parent.state, stdin)
    if errexit is not None:
        state.options.errexit = errexit
    outer = _shell_of(parent)
    tree = outer.tree
    shell = _Shell(pid=tree.allocate(), tree=tree, subshell=True, errtrace=outer.errtrace)
    shell.traps = {
        name: action
        for name, action in outer.traps.items()
        if (action == "" and name not in _PSEUDO) or (name == "ERR" and outer.errtrace)
    }
    shell.inherited_listing = dict(outer.traps)
    shell.inherited_jobs = list(outer.jobs or outer.inherited_jobs)
    state.__dict__[_SHELL_KEY] = shell
    tree.shells[shell.pid] = shell
    raw: Any = parent
    return Interpreter(
        fs=raw._fs,
        commands=raw._commands,
        limits=raw._limits,
        state=state,
        fetch=raw._fetch,
    )


async def _run_forked(child: Interpreter, body: Body) -> ExecResult:
    """Run ``body`` in the subshell ``child`` to its end: ``exit`` ends the subshell only, its
    ``EXIT`` trap runs, and it waits for its own jobs."""
    stdout = stderr = ""
    code = 0
    skip_exit_trap = False
    try:
        result = await body(child)
        stdout, stderr, code = result.stdout, result.stderr, result.exit_code
    except ExitError as error:
        stdout, stderr, code = error.stdout, error.stderr, error.exit_code
        skip_exit_trap = isinstance(error, _Killed) and error.signal == 9
    except ErrexitError as error:
        stdout, stderr, code = error.stdout, error.stderr, error.exit_code
    except ReturnError as error:
        stdout, stderr, code = error.stdout, error.stderr, error.exit_code
    except (BreakError, ContinueError) as error:  # they cannot leave the subshell
        stdout, stderr = error.stdout, error.stderr
    except (NounsetError, BadSubstitutionError) as error:
        converted = _as_exit(child, error)
        assert isinstance(converted, ExitError)
        stdout, stderr, code = converted.stdout, converted.stderr, 1
    try:
        return await _finish_shell(child, _result(stdout, stderr, code), skip_exit_trap)
    finally:
        shell = cast("_Shell", child.state.__dict__[_SHELL_KEY])
        shell.tree.shells.pop(shell.pid, None)
        raw: Any = child
        raw._ctx = None  # its bound methods hold the interpreter; nothing runs in it any more


async def _subshell(
    parent: Interpreter, body: Body, stdin: str | None, *, errexit: bool | None = None
) -> ExecResult:
    """``body`` in a new subshell of ``parent``, as bash forks one; what it read of ``parent``'s
    own stdin is gone for ``parent`` too, as with bash's shared file."""
    child = _fork(parent, stdin, errexit=errexit)
    try:
        return await _run_forked(child, body)
    finally:
        parent.state.command_count = max(parent.state.command_count, child.state.command_count)
        left = child.state.group_stdin
        if stdin and stdin is parent.state.group_stdin and left is not stdin:
            # just-bash's pipeline moves the shell's stdin on from this variable
            _variables(parent.state.env)["__remaining_stdin__"] = left or ""


async def _finish_shell(
    interpreter: Interpreter, result: ExecResult, skip_exit_trap: bool = False
) -> ExecResult:
    """A shell ends: its ``EXIT`` trap runs (``$?`` is its status; ``exit`` in the trap sets a new
    one), then it waits for its jobs, whose output joins its own."""
    shell = _shell_of(interpreter)
    if shell.finished:
        return result
    shell.finished = True
    stdout, stderr, code = result.stdout, result.stderr, result.exit_code
    action = shell.traps.pop("EXIT", "")
    if action and not skip_exit_trap:
        _set_status(interpreter, code)
        trapped, exited = await _run_action(interpreter, shell, action)
        stdout, stderr = stdout + trapped.stdout, stderr + trapped.stderr
        if exited is not None:
            code = exited
    for job in list(shell.jobs):
        await _settle(job)
    flushed = _flush_jobs(interpreter, shell)
    return _result(stdout + flushed.stdout, stderr + flushed.stderr, code)


def _set_status(interpreter: Interpreter, code: int) -> None:
    interpreter.state.last_exit_code = code
    _variables(interpreter.state.env)["?"] = str(code)


async def _run_action(
    interpreter: Interpreter, shell: _Shell, action: str
) -> tuple[ExecResult, int | None]:
    """Run a trap's action in ``interpreter``: its output, and the status an ``exit`` in it gave
    (None when it did not exit). ``$?`` is as it was before."""
    from just_bash.parser import ParseException, Parser

    state = interpreter.state
    saved = state.last_exit_code
    shell.in_trap = True
    shell.script_depth += 1
    try:
        parsed = Parser().parse(action)
        result: ExecResult = await interpreter.execute_script(parsed)
        return result, None
    except ExitError as error:
        return _result(error.stdout, error.stderr), error.exit_code
    except ParseException as error:
        return _result(stderr=f"bash: trap: syntax error: {error}\n"), None
    finally:
        shell.in_trap = False
        shell.script_depth -= 1
        if not shell.finished:
            _set_status(interpreter, saved)


# -- jobs ----------------------------------------------------------------------------------------


def _job_text(node: Any) -> str:
    from just_bash.interpreter.builtins import declare

    source: Any = declare
    try:
        return str(source._stmt_to_source(node))
    except Exception:  # a best-effort label for `jobs`; the job runs regardless
        return "job"


async def _start_job(parent: Interpreter, node: Any) -> ExecResult:
    """``node &``: a subshell as an asyncio task, with stdin from ``/dev/null`` as bash gives a
    script's jobs; ``$!`` is its pid."""
    shell = _shell_of(parent)
    child = _fork(parent, None)
    child_shell = _shell_of(child)
    for name in _IGNORED_BY_JOBS:
        child_shell.traps.setdefault(name, "")
    statement = dataclasses.replace(node, background=False)
    numbers = [job.number for job in shell.jobs]
    job = _Job(
        number=max(numbers, default=0) + 1,
        pid=child_shell.pid,
        text=_job_text(statement),
        shell=child_shell,
    )

    async def run(interpreter: Interpreter) -> ExecResult:
        pipelines = statement.pipelines
        if len(pipelines) == 1 and not pipelines[0].negated and len(pipelines[0].commands) == 1:
            command = pipelines[0].commands[0]
            if command.type == "Subshell":  # `( ... ) &` is one process: the job itself
                return await _subshell_node(interpreter, command, "")
        return await interpreter.execute_statement(statement)

    job.task = asyncio.get_running_loop().create_task(_run_forked(child, run))
    shell.jobs.append(job)
    shell.unflushed.append(job)
    shell.tree.jobs[job.pid] = job
    parent.state.last_background_pid = job.pid
    return _result()


def _done(job: _Job) -> bool:
    return job.task is None or job.task.done()


def _status(job: _Job) -> int:
    task = job.task
    if task is None or task.cancelled():
        return 128 + (job.signal or 15)
    error = task.exception()
    if error is not None:
        raise error
    return task.result().exit_code


async def _settle(job: _Job) -> int:
    """Wait for ``job`` to end (without passing a cancellation of the waiter on to it)."""
    if job.task is not None and not job.task.done():
        await asyncio.wait([job.task])
    return _status(job)


def _flush_jobs(interpreter: Interpreter, shell: _Shell) -> ExecResult:
    """The output of ``shell``'s jobs that ended and were not yet shown, and bash's notice of a
    job that a signal other than ``INT`` or ``TERM`` ended."""
    stdout = stderr = ""
    for job in [job for job in shell.unflushed if _done(job)]:
        shell.unflushed.remove(job)
        task = job.task
        if task is not None and not task.cancelled():
            error = task.exception()
            if error is not None:
                raise error
            output = task.result()
            stdout, stderr = stdout + output.stdout, stderr + output.stderr
        name = _SIGNALS.get(job.signal or 0, "")
        if name and name not in ("INT", "TERM"):
            description = _DESCRIPTIONS.get(name, f"Signal {job.signal}")
            line = interpreter.state.current_line
            stderr += f"bash: line {line}: {job.pid:5d} {description:<24}{job.text}\n"
    return _result(stdout, stderr)


def _find_job(shell: _Shell, spec: str) -> _Job | None:
    """The job ``%N``, ``%%``/``%+`` (the last), ``%-`` (the one before) or ``%name`` names."""
    jobs = shell.jobs
    rest = spec[1:]
    if rest in ("", "%", "+"):
        return jobs[-1] if jobs else None
    if rest == "-":
        return jobs[-2] if len(jobs) > 1 else (jobs[-1] if jobs else None)
    if rest.isdigit():
        return next((job for job in jobs if job.number == int(rest)), None)
    matches = [job for job in jobs if job.text.startswith(rest.removeprefix("?"))]
    return matches[-1] if matches else None


def _signal_job(job: _Job, signal: int) -> None:
    """Deliver ``signal`` to a job that has not ended: a trap it set runs, an ignored signal does
    nothing, any other ends it."""
    name = _SIGNALS[signal]
    action = job.shell.traps.get(name)
    if action == "" or (action is None and name in _IGNORED_BY_DEFAULT):
        return
    if action is None:
        job.signal = signal
    job.shell.pending.append(signal)
    if job.task is not None:
        job.task.cancel()  # wakes it where it waits; a statement boundary delivers the signal


# -- builtins: trap, kill, wait, jobs, fg, bg, set -E ------------------------------------------------

_TRAP_USAGE = "trap: usage: trap [-lp] [[arg] signal_spec ...]\n"
_KILL_USAGE = (
    "kill: usage: kill [-s sigspec | -n signum | -sigspec] pid | jobspec ... or kill -l [sigspec]\n"
)


def _trap_label(name: str) -> str:
    return name if name in _PSEUDO else f"SIG{name}"


def _trap_order(name: str) -> tuple[int, int]:
    if name == "EXIT":
        return (0, 0)
    if name in _NUMBERS:
        return (1, _NUMBERS[name])
    return (2, _PSEUDO.index(name))


async def _trap(ctx: Any, args: list[str]) -> ExecResult:
    shell = _shell_of(_owner(ctx))
    index = 0
    listing = printing = False
    while index < len(args) and args[index].startswith("-") and args[index] not in ("-", "--"):
        for letter in args[index][1:]:
            if letter == "l":
                listing = True
            elif letter == "p":
                printing = True
            else:
                return _result(
                    stderr=f"bash: trap: -{letter}: invalid option\n{_TRAP_USAGE}", exit_code=2
                )
        index += 1
    if index < len(args) and args[index] == "--":
        index += 1
    operands = args[index:]
    if listing:
        return _result(_signal_table())
    if printing or not operands:
        shown = shell.traps if shell.inherited_listing is None else shell.inherited_listing
        names = sorted(shown, key=_trap_order)
        stderr = ""
        code = 0
        if operands:
            wanted: list[str] = []
            for spec in operands:
                name = _trap_name(spec)
                if name is None:
                    stderr += f"bash: trap: {spec}: invalid signal specification\n"
                    code = 1
                else:
                    wanted.append(name)
            names = [name for name in names if name in wanted]
        lines = "".join(f"trap -- {_quote(shown[name])} {_trap_label(name)}\n" for name in names)
        return _result(lines, stderr, code)
    if len(operands) == 1 and _trap_name(operands[0]) is None:
        return _result(stderr=_TRAP_USAGE, exit_code=2)
    if len(operands) == 1 or operands[0].isdigit():
        action: str | None = None
        specs = operands
    else:
        action = None if operands[0] == "-" else operands[0]
        specs = operands[1:]
    shell.inherited_listing = None
    stderr = ""
    code = 0
    for spec in specs:
        name = _trap_name(spec)
        if name is None:
            stderr += f"bash: trap: {spec}: invalid signal specification\n"
            code = 1
        elif action is None:
            shell.traps.pop(name, None)
        elif action and name in _UNSUPPORTED_TRAPS:
            stderr += (
                f"bash: trap: {name} traps are not supported by the in-memory sandbox; "
                f"{_PROVIDER_HINT}\n"
            )
            code = 1
        else:
            shell.traps[name] = action
    return _result(stderr=stderr, exit_code=code)


def _kill_list(operands: list[str]) -> ExecResult:
    if not operands:
        return _result(_signal_table())
    stdout = stderr = ""
    code = 0
    for spec in operands:
        if spec.isdigit():
            number = int(spec)
            number = number - 128 if number > 128 else number
            if number in _SIGNALS:
                stdout += _SIGNALS[number] + "\n"
                continue
        else:
            number = _signal_number(spec)
            if number is not None:
                stdout += f"{number}\n"
                continue
        stderr += f"bash: kill: {spec}: invalid signal specification\n"
        code = 1
    return _result(stdout, stderr, code)


async def _kill(ctx: Any, args: list[str]) -> ExecResult:
    interpreter = _owner(ctx)
    shell = _shell_of(interpreter)
    await asyncio.sleep(0)  # a job started just before runs up to its first wait, as a fork would
    if not args:
        return _result(stderr=_KILL_USAGE, exit_code=2)
    signal = 15
    index = 0
    first = args[0]
    if first in ("-l", "-L"):
        return _kill_list(args[1:])
    if first in ("-s", "-n"):
        if len(args) < 2:
            return _result(
                stderr=f"bash: kill: {first}: option requires an argument\n{_KILL_USAGE}",
                exit_code=2,
            )
        number = _signal_number(args[1])
        if number is None:
            return _result(
                stderr=f"bash: kill: {args[1]}: invalid signal specification\n", exit_code=1
            )
        signal, index = number, 2
    elif first.startswith("-") and first != "-" and first != "--":
        number = _signal_number(first[1:])
        if number is None:
            return _result(
                stderr=f"bash: kill: {first[1:]}: invalid signal specification\n", exit_code=1
            )
        signal, index = number, 1
    if index < len(args) and args[index] == "--":
        index += 1
    targets = args[index:]
    if not targets:
        return _result(stderr=_KILL_USAGE, exit_code=2)
    name = _SIGNALS.get(signal, "")
    if name in _STOPPING:
        return _result(
            stderr=f"bash: kill: stopping a process (SIG{name}) is not supported by the "
            f"in-memory sandbox; {_PROVIDER_HINT}\n",
            exit_code=1,
        )
    stderr = ""
    sent = False
    for target in targets:
        job: _Job | None = None
        receiver: _Shell | None = None
        if target.startswith("%"):
            job = _find_job(shell, target)
            if job is None:
                stderr += f"bash: kill: {target}: no such job\n"
                continue
        elif target.lstrip("-").isdigit():
            pid = int(target)
            job = shell.tree.jobs.get(pid)
            receiver = None if job is not None else shell.tree.shells.get(pid)
        else:
            stderr += f"bash: kill: {target}: arguments must be process or job IDs\n"
            continue
        if job is not None and not _done(job):
            if signal:
                _signal_job(job, signal)
        elif receiver is not None and not receiver.finished:
            if signal:
                receiver.pending.append(signal)
        else:
            pid = job.pid if job is not None else int(target)
            stderr += f"bash: kill: ({pid}) - No such process\n"
            continue
        sent = True
    return _result(stderr=stderr, exit_code=0 if sent else 1)


async def _wait(ctx: Any, args: list[str]) -> ExecResult:
    interpreter = _owner(ctx)
    shell = _shell_of(interpreter)
    any_job = False
    variable: str | None = None
    index = 0
    while index < len(args) and args[index].startswith("-") and args[index] != "--":
        option = args[index]
        if option == "-p" and index + 1 < len(args):
            variable = args[index + 1]
            index += 1
        elif option in ("-n", "-f", "-fn", "-nf"):
            any_job = any_job or "n" in option
        else:
            return _result(
                stderr=f"bash: wait: {option}: invalid option\n"
                "wait: usage: wait [-fn] [-p var] [id ...]\n",
                exit_code=2,
            )
        index += 1
    if index < len(args) and args[index] == "--":
        index += 1
    ids = args[index:]
    env = _variables(interpreter.state.env)
    if any_job and not ids:
        if not shell.jobs:
            return _result(exit_code=127)
        done = [job for job in shell.jobs if _done(job)]
        if not done:
            tasks = [job.task for job in shell.jobs if job.task is not None]
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            done = [job for job in shell.jobs if _done(job)]
        job = done[0]
        code = await _settle(job)
        _forget(shell, job, code)
        if variable:
            env[variable] = str(job.pid)
        return _result(exit_code=code)
    if not ids:
        for job in list(shell.jobs):
            _forget(shell, job, await _settle(job))
        return _result()
    stderr = ""
    code = 0
    for spec in ids:
        if spec.startswith("%"):
            job = _find_job(shell, spec)
            if job is None:
                stderr += f"bash: wait: {spec}: no such job\n"
                code = 127
                continue
        elif spec.isdigit():
            job = next((job for job in shell.jobs if job.pid == int(spec)), None)
            if job is None:
                if int(spec) in shell.statuses:
                    code = shell.statuses[int(spec)]
                    continue
                stderr += f"bash: wait: pid {spec} is not a child of this shell\n"
                code = 127
                continue
        else:
            stderr += f"bash: wait: `{spec}': not a pid or valid job spec\n"
            code = 2
            continue
        code = await _settle(job)
        _forget(shell, job, code)
        if variable:
            env[variable] = str(job.pid)
    return _result(stderr=stderr, exit_code=code)


def _forget(shell: _Shell, job: _Job, status: int) -> None:
    """A job waited for leaves the job table; bash still answers ``wait PID`` with its status."""
    shell.statuses[job.pid] = status
    if job in shell.jobs:
        shell.jobs.remove(job)


async def _jobs(ctx: Any, args: list[str]) -> ExecResult:
    shell = _shell_of(_owner(ctx))
    await asyncio.sleep(0)
    pids_only = any(arg.startswith("-") and "p" in arg for arg in args)
    stdout = ""
    jobs = list(shell.jobs or shell.inherited_jobs)
    for position, job in enumerate(jobs):
        if pids_only:
            stdout += f"{job.pid}\n"
            continue
        mark = "+" if position == len(jobs) - 1 else "-" if position == len(jobs) - 2 else " "
        if not _done(job):
            state, suffix = "Running", " &"
        else:
            status = _status(job)
            if job.signal:
                state = _DESCRIPTIONS.get(_SIGNALS[job.signal], f"Signal {job.signal}")
            else:
                state = "Done" if status == 0 else f"Exit {status}"
            suffix = ""
            if job in shell.jobs:
                _forget(shell, job, status)
        stdout += f"[{job.number}]{mark}  {state:<24}{job.text}{suffix}\n"
    return _result(stdout)


def _no_job_control(name: str) -> Callable[[Any, list[str]], Awaitable[ExecResult]]:
    async def handle(ctx: Any, args: list[str]) -> ExecResult:
        return _result(stderr=f"bash: {name}: no job control\n", exit_code=1)

    return handle


def _with_errtrace(original: Callable[..., Awaitable[ExecResult]]) -> Callable[..., Any]:
    """``set -E`` / ``-o errtrace`` (the ``ERR`` trap in functions and subshells) and ``-T`` /
    ``-o functrace`` are accepted; just-bash refused them, so ``set -eEuo pipefail`` failed."""

    async def handle_set(ctx: Any, args: list[str]) -> ExecResult:
        shell = _shell_of_state(ctx.state)
        kept: list[str] = []
        index = 0
        while index < len(args):
            arg = args[index]
            if arg in ("--", "-") or arg[:1] not in ("-", "+") or len(arg) < 2:
                kept.extend(args[index:])
                break
            if arg in ("-o", "+o") and index + 1 < len(args):
                if args[index + 1] in ("errtrace", "functrace"):
                    if args[index + 1] == "errtrace":
                        shell.errtrace = arg == "-o"
                else:
                    kept.extend(args[index : index + 2])
                index += 2
                continue
            letters = arg[1:]
            if "E" in letters:
                shell.errtrace = arg[0] == "-"
            letters = letters.replace("E", "").replace("T", "")
            if letters:
                kept.append(arg[0] + letters)
            index += 1
        if args and not kept:
            return _result()
        return await original(ctx, kept)

    return handle_set


def _with_local_attributes(original: Callable[..., Awaitable[ExecResult]]) -> Callable[..., Any]:
    """``local -i`` gives the integer attribute (just-bash ignored it), and ``local v`` without a
    value leaves ``v`` unset, as bash does (just-bash set it to the empty string)."""

    async def handle_local(ctx: Any, args: list[str]) -> ExecResult:
        state: InterpreterState = ctx.state
        integer = False
        kept: list[str] = []
        bare: list[str] = []
        for arg in args:
            if arg.startswith("-") and "=" not in arg and len(arg) > 1:
                letters = arg[1:]
                if "i" in letters:
                    integer = True
                    letters = letters.replace("i", "")
                if letters:
                    kept.append("-" + letters)
                continue
            kept.append(arg)
        # arrays and name references keep just-bash's handling
        special = any(arg.startswith("-") and set(arg[1:]) & set("aAn") for arg in kept)
        scope = state.local_scopes[-1] if state.local_scopes else None
        if scope is not None and not special:
            bare = [arg for arg in kept if not arg.startswith("-") and "=" not in arg]
            bare = [name for name in bare if name not in scope]
        result: ExecResult = await original(ctx, kept)
        if result.exit_code != 0:
            return result
        env = _variables(state.env)
        for name in bare:
            env.pop(name, None)
        if integer:
            store = state.env
            for arg in kept:
                if arg.startswith("-"):
                    continue
                name = arg.split("=", 1)[0].removesuffix("+")
                store.set_attribute(name, "i")
                if "=" in arg and name in env:
                    env[name] = str(_arithmetic(ctx, env[name]))
        return result

    return handle_local


def _arithmetic(ctx: Any, text: str) -> int:
    from just_bash.interpreter import expansion
    from just_bash.parser.parser import Parser

    evaluator: Any = expansion
    parser: Any = Parser()
    return int(evaluator.evaluate_arithmetic_sync(ctx, parser._parse_arith_comma(text)))


# -- the interpreter's methods ---------------------------------------------------------------------


@dataclass(eq=False)
class _Running:
    """A statement running in ``interpreter``, and the pipeline of it that ran last."""

    interpreter: Interpreter
    node: Any
    last: Any = None


@dataclass(eq=False)
class _Reader:
    """The statements of a script being read (a command line, a sourced file, an ``eval``'s
    text, a trap's action): an expansion error drops the rest of its line."""

    interpreter: Interpreter
    statements: frozenset[int]
    aborted_line: int | None = None


_running = contextvars.ContextVar[_Running | None]("pai_sandbox_inmemory_running", default=None)
_reader = contextvars.ContextVar[_Reader | None]("pai_sandbox_inmemory_reader", default=None)
_stages = contextvars.ContextVar[tuple[Interpreter, frozenset[int], list[str]] | None](
    "pai_sandbox_inmemory_stages", default=None
)


@dataclass(eq=False)
class _Scope:
    """What the substitutions in a command's words left for it: the files of ``<(...)`` and
    ``>(...)`` (removed when it is done) and what ``$(...)`` wrote to stderr (the shell's stderr:
    just-bash dropped it, so ``x=$(ls nope)`` failed without a word)."""

    files: list[tuple[str, Any]] = field(default_factory=list[tuple[str, Any]])
    stderr: str = ""


_scope = contextvars.ContextVar[_Scope | None]("pai_sandbox_inmemory_scope", default=None)


def _command_scope() -> _Scope:
    scope = _scope.get()
    if scope is None:  # made on first use: most commands substitute nothing
        scope = _Scope()
        _scope.set(scope)
    return scope


_COMPOUND = frozenset({"If", "For", "CStyleFor", "While", "Until", "Case", "Group"})


def _line_of(node: Any) -> int | None:
    pipelines = node.pipelines
    if not pipelines or not pipelines[0].commands:
        return None
    line = getattr(pipelines[0].commands[0], "line", None)
    return line if isinstance(line, int) else None


def _is_shopt_set(interpreter: Interpreter, name: str) -> bool:
    from just_bash.interpreter.builtins.shopt import DEFAULT_SHOPTS

    value = _variables(interpreter.state.env).get(f"__shopt_{name}__")
    return value == "1" if value is not None else bool(DEFAULT_SHOPTS.get(name, False))


def _err_trap_applies(interpreter: Interpreter, shell: _Shell) -> bool:
    return (
        bool(shell.traps.get("ERR"))
        and not shell.in_trap
        and not interpreter.state.in_condition
        and (interpreter.state.call_depth == 0 or shell.errtrace)
    )


async def _at_boundary(interpreter: Interpreter, shell: _Shell, result: ExecResult) -> ExecResult:
    """After a command (or ``&``): signals sent to this shell arrive (a trap runs, or the shell
    ends), and the output of its jobs that ended joins its own (to the shell's stdout: never
    into a pipe)."""
    if shell.unflushed:
        flushed = _flush_jobs(interpreter, shell)
        result = _result(
            result.stdout + flushed.stdout, result.stderr + flushed.stderr, result.exit_code
        )
    while shell.pending:
        signal = shell.pending.pop(0)
        name = _SIGNALS[signal]
        action = shell.traps.get(name)
        if action == "" or (action is None and name in _IGNORED_BY_DEFAULT):
            continue
        if action is None or name == "KILL":
            raise _Killed(signal, result.stdout, result.stderr)
        trapped, exited = await _run_action(interpreter, shell, action)
        result = _result(
            result.stdout + trapped.stdout, result.stderr + trapped.stderr, result.exit_code
        )
        if exited is not None:
            raise ExitKeepingOutput(exited, result.stdout, result.stderr)
    return result


def _statements(original: Callable[..., Awaitable[ExecResult]]) -> Callable[..., Any]:
    """``execute_statement``: jobs (``&``), the ``ERR`` trap, and an expansion error dropping the
    rest of the line."""

    async def execute_statement(self: Interpreter, node: Any) -> ExecResult:
        shell = _shell_of(self)
        if node.background:
            result = await _start_job(self, node)
            return await _at_boundary(self, shell, result)
        reader = _reader.get()
        at_top = reader is not None and reader.interpreter is self and id(node) in reader.statements
        if at_top and reader is not None and reader.aborted_line is not None:
            if _line_of(node) == reader.aborted_line:
                return _result(exit_code=self.state.last_exit_code)
            reader.aborted_line = None
        running = _Running(self, node)
        token = _running.set(running)
        try:
            result = await original(self, node)
        except _LineAborted as aborted:
            if not at_top or reader is None:
                raise
            reader.aborted_line = _line_of(node)
            _set_status(self, 1)
            result = _result(aborted.stdout, aborted.stderr, 1)
        except ExitError:
            raise
        except ErrexitError as error:
            if not getattr(error, "pai_err_trap", False):
                marked: Any = error
                marked.pai_err_trap = True  # the innermost statement decides
                if _err_trap_applies(self, shell):
                    trapped, exited = await _run_action(self, shell, shell.traps["ERR"])
                    error.stdout += trapped.stdout
                    error.stderr += trapped.stderr
                    if exited is not None:
                        raise ExitKeepingOutput(exited, error.stdout, error.stderr) from None
            raise
        finally:
            _running.reset(token)
        if result.exit_code != 0 and _err_trap_applies(self, shell):
            last: Any = running.last
            pipelines = node.pipelines
            in_shell = last is not None and len(last.commands) == 1
            if (
                last is not None
                and last is pipelines[-1]
                and not last.negated
                and not (in_shell and last.commands[0].type in _COMPOUND)
            ):
                trapped, exited = await _run_action(self, shell, shell.traps["ERR"])
                result = _result(
                    result.stdout + trapped.stdout,
                    result.stderr + trapped.stderr,
                    result.exit_code,
                )
                if exited is not None:
                    raise ExitKeepingOutput(exited, result.stdout, result.stderr)
        return result

    return execute_statement


def _pipelines(original: Callable[..., Awaitable[ExecResult]]) -> Callable[..., Any]:
    """``execute_pipeline``: every stage of ``a | b`` in a subshell (the last in the shell with
    ``shopt -s lastpipe``) keeping what the earlier stages wrote to stderr; ``set -e`` and the
    ``ERR`` trap off in a list's pipelines but the last and in ``! cmd``; errors bash's way."""

    async def execute_pipeline(self: Interpreter, node: Any) -> ExecResult:
        state = self.state
        owner = _running.get()
        pipelines: tuple[Any, ...] = ()
        if owner is not None and owner.interpreter is self:
            pipelines = owner.node.pipelines
            if any(pipeline is node for pipeline in pipelines):
                owner.last = node
            else:
                pipelines = ()
        condition = node.negated or (bool(pipelines) and node is not pipelines[-1])
        saved_condition = state.in_condition
        if condition:
            state.in_condition = True
        commands = node.commands
        token = None
        stderr: list[str] = []
        if len(commands) > 1:
            staged = commands[:-1] if _is_shopt_set(self, "lastpipe") else commands
            token = _stages.set((self, frozenset(id(command) for command in staged), stderr))
        try:
            result: ExecResult = await original(self, node)
        except asyncio.CancelledError:
            result = await _interrupted(self)
        except (NounsetError, BadSubstitutionError) as error:
            raise _as_exit(self, error) from None
        except ExitError as error:
            if type(error) is ExitError:
                raise _as_exit(self, error) from None
            raise
        finally:
            state.in_condition = saved_condition
            if token is not None:
                _stages.reset(token)
        if stderr:
            result = _result(result.stdout, "".join(stderr) + result.stderr, result.exit_code)
        return result

    return execute_pipeline


async def _interrupted(interpreter: Interpreter) -> ExecResult:
    """A job woken by ``kill`` (its task was cancelled where it waited): the signal arrives now;
    the command it interrupted has the status 128+N when a trap lets the job go on."""
    shell = _shell_of(interpreter)
    task = asyncio.current_task()
    if not shell.pending or task is None:
        raise asyncio.CancelledError
    task.uncancel()
    return await _at_boundary(interpreter, shell, _result(exit_code=128 + shell.pending[0]))


def _commands(original: Callable[..., Awaitable[ExecResult]]) -> Callable[..., Any]:
    """``execute_command``: a pipeline's stage runs in a subshell; the files of process
    substitutions live while their command runs; then signals and jobs' output (see
    :func:`_at_boundary`): here, not after the pipeline, so that ``_scripts`` sees that output as
    the pipeline's when a later ``exit`` keeps what the list printed."""

    async def execute_command(self: Interpreter, node: Any, stdin: str) -> ExecResult:
        stages = _stages.get()
        if stages is not None and stages[0] is self and id(node) in stages[1]:
            collected = stages[2]
            token = _stages.set(None)
            try:
                result = await _subshell(
                    self, lambda child: child.execute_command(node, stdin), stdin
                )
            finally:
                _stages.reset(token)
            if not _is_last_stage(self, node):
                collected.append(result.stderr)
                return _result(result.stdout, "", result.exit_code)
            return await _after_command(self, result)
        token = _scope.set(None)
        try:
            result = await original(self, node, stdin)
        except (ExitError, ErrexitError) as error:
            scope = _scope.get()
            if scope is not None:
                error.stderr = scope.stderr + error.stderr
                await _close_substitutions(self, scope.files, _result())
            raise
        finally:
            scope = _scope.get()
            _scope.reset(token)
        if scope is not None:
            result = await _close_substitutions(self, scope.files, result)
            if scope.stderr:
                result = _result(result.stdout, scope.stderr + result.stderr, result.exit_code)
        return await _after_command(self, result)

    return execute_command


async def _after_command(interpreter: Interpreter, result: ExecResult) -> ExecResult:
    shell = _shell_of(interpreter)
    if shell.unflushed or shell.pending:
        return await _at_boundary(interpreter, shell, result)
    return result


def _is_last_stage(interpreter: Interpreter, node: Any) -> bool:
    owner = _running.get()
    last = owner.last if owner is not None and owner.interpreter is interpreter else None
    if last is None:
        return True
    index = next((i for i, command in enumerate(last.commands) if command is node), -1)
    if index == len(last.commands) - 1:
        return True
    merged = last.pipe_amp and index < len(last.pipe_amp) and last.pipe_amp[index]
    return bool(merged)  # with |& its stderr went down the pipe, not to the shell


def _scripts(original: Callable[..., Awaitable[ExecResult]]) -> Callable[..., Any]:
    """``execute_script``: a reader of statements (see :class:`_Reader`); when it is a shell's
    own script, the shell ends with it (``EXIT`` trap, its jobs)."""

    async def execute_script(self: Interpreter, node: Any) -> ExecResult:
        shell = _shell_of(self)
        outermost = shell.script_depth == 0 and not shell.subshell
        token = _reader.set(_Reader(self, frozenset(id(s) for s in node.statements)))
        shell.script_depth += 1
        exited: ExitKeepingOutput | None = None
        try:
            result: ExecResult = await original(self, node)
        except ExitKeepingOutput as error:
            if not outermost:
                raise
            exited = error
            result = _result(error.stdout, error.stderr, error.exit_code)
        except BaseException:
            if outermost and shell.top_level:
                await _close_tree(shell.tree)
            raise
        finally:
            shell.script_depth -= 1
            _reader.reset(token)
        if not outermost:
            return result
        try:
            skip = isinstance(exited, _Killed) and exited.signal == 9
            result = await _finish_shell(self, result, skip)
        finally:
            if shell.top_level:
                await _close_tree(shell.tree)
        if exited is not None:
            raise ExitKeepingOutput(result.exit_code, result.stdout, result.stderr)
        return result

    return execute_script


async def _close_tree(tree: _Tree) -> None:
    """The command line is over: no job of it may run on (the worker's next command belongs to
    another sandbox, perhaps)."""
    tasks = [job.task for job in tree.jobs.values() if job.task is not None and not job.task.done()]
    tree.closed = True
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks)
    for task in tasks:
        if not task.cancelled():
            task.exception()  # retrieved: it is the closing itself, nothing to report


async def _substitute(self: Interpreter, node: Any) -> ExecResult:
    """``$(...)`` and ``<(...)`` (just-bash's ``ctx.execute_script``): a subshell, without
    ``set -e`` unless ``shopt -s inherit_errexit``."""
    errexit = None if _is_shopt_set(self, "inherit_errexit") else False
    stdin = self.state.group_stdin
    result = await _subshell(self, lambda child: child.execute_script(node), stdin, errexit=errexit)
    if result.stderr:
        _command_scope().stderr += result.stderr
    return _result(result.stdout, "", result.exit_code)


def _with_substitutions(original: Callable[..., None]) -> Callable[..., None]:
    def __init__(self: Interpreter, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        raw: Any = self
        raw._ctx.execute_script = types.MethodType(_substitute, self)

    return __init__


async def _subshell_node(child: Interpreter, node: Any, stdin: str) -> ExecResult:
    """The body of ``( ... )`` with its redirections, in the subshell ``child``."""
    raw: Any = child
    if node.redirections:
        stdin = await raw._process_input_redirections(node.redirections, stdin)
        if stdin:
            child.state.group_stdin = stdin
    stdout = stderr = ""
    code = 0
    try:
        for statement in node.body:
            result = await child.execute_statement(statement)
            stdout, stderr = stdout + result.stdout, stderr + result.stderr
            code = result.exit_code
    except InterpreterError as error:
        error.prepend_output(stdout, stderr)
        if node.redirections and isinstance(error, (ExitError, ErrexitError, ReturnError)):
            redirected = await raw._process_output_redirections(
                node.redirections, _result(error.stdout, error.stderr)
            )
            error.stdout, error.stderr = redirected.stdout, redirected.stderr
        raise
    result = _result(stdout, stderr, code)
    if node.redirections:
        result = await raw._process_output_redirections(node.redirections, result)
    return result


async def _execute_subshell(self: Interpreter, node: Any, stdin: str) -> ExecResult:
    """``( ... )``: just-bash's copied the state only in part, and ran no ``EXIT`` trap."""
    return await _subshell(self, lambda child: _subshell_node(child, node, stdin), stdin)


def _function_calls(original: Callable[..., Awaitable[ExecResult]]) -> Callable[..., Any]:
    """``_call_function``: the arguments are expanded before the caller's positional parameters
    give way to the function's (just-bash cleared them first: ``f $(($1 - 1))`` passed ``-1``)."""
    from just_bash.interpreter import expansion

    expander: Any = expansion

    async def call_function(
        self: Interpreter,
        name: str,
        args: list[Any],
        stdin: str,
        alias_args: list[str] | None = None,
    ) -> ExecResult:
        raw: Any = self
        values: list[str] = list(alias_args or [])
        for arg in args:
            expanded: dict[str, list[str]] = await expander.expand_word_with_glob(raw._ctx, arg)
            values.extend(expanded["values"])
        return await original(self, name, [], stdin, values)

    return call_function


def _simple_commands(original: Callable[..., Awaitable[ExecResult]]) -> Callable[..., Any]:
    """``_execute_simple_command``: ``n+=2`` on a ``declare -i`` variable adds (bash evaluates
    ``n+(2)``; just-bash appended the text), and the output a function printed before ``exit``
    (or ``set -e``) ended the shell goes where the call's redirections say (``f 2>/dev/null``)."""
    from just_bash.ast.types import LiteralPart

    async def execute_simple_command(self: Interpreter, node: Any, stdin: str) -> ExecResult:
        assignments = node.assignments
        if any(assignment.append for assignment in assignments):
            store = self.state.env
            changed: list[Any] = []
            rewritten = False
            for assignment in assignments:
                name = assignment.name
                if (
                    assignment.append
                    and assignment.array is None
                    and assignment.value is not None
                    and "[" not in name
                    and "i" in store.get_attributes(name)
                ):
                    parts = (
                        LiteralPart(value=f"{name}+("),
                        *assignment.value.parts,
                        LiteralPart(value=")"),
                    )
                    value = dataclasses.replace(assignment.value, parts=parts)
                    assignment = dataclasses.replace(assignment, append=False, value=value)
                    rewritten = True
                changed.append(assignment)
            if rewritten:
                node = dataclasses.replace(node, assignments=tuple(changed))
        try:
            return await original(self, node, stdin)
        except (ExitError, ErrexitError) as error:
            if node.redirections and node.name is not None:
                raw: Any = self
                redirected: ExecResult = await raw._process_output_redirections(
                    node.redirections, _result(error.stdout, error.stderr)
                )
                error.stdout, error.stderr = redirected.stdout, redirected.stderr
            raise

    return execute_simple_command


def _exec_replaces_traps(original: Callable[..., Awaitable[ExecResult]]) -> Callable[..., Any]:
    """``exec COMMAND`` replaces the shell (``_scripts`` ends it after the command): no ``EXIT``
    trap of the old shell runs, as none would in bash's new process image."""

    async def execute_builtin(self: Interpreter, name: str, *args: Any) -> ExecResult:
        try:
            return await original(self, name, *args)
        except ExitKeepingOutput:
            if name == "exec":
                _shell_of(self).traps.pop("EXIT", None)
            raise

    return execute_builtin


# -- process substitution ------------------------------------------------------------------------


async def _process_substitution(ctx: Any, part: Any) -> str:
    """``<(cmd)``: the subshell's output as the file ``/dev/fd/N`` while the command runs;
    ``>(cmd)``: a file whose content the subshell reads when the command is done."""
    interpreter = _owner(ctx)
    shell = _shell_of(interpreter)
    tree = shell.tree
    number = next((fd for fd in range(63, 9, -1) if fd not in tree.fds), None)
    if number is None:
        raise _LineAborted("", "bash: too many process substitutions at once\n")
    tree.fds.add(number)
    path = f"/dev/fd/{number}"
    fs: Any = ctx.fs
    content = ""
    if part.direction == "input" and part.body is not None:
        content = (await _substitute(interpreter, part.body)).stdout
    await fs.mkdir("/dev/fd", recursive=True)
    await fs.write_file(path, content)
    _command_scope().files.append((path, part if part.direction == "output" else None))
    return path


async def _close_substitutions(
    interpreter: Interpreter, created: list[tuple[str, Any]], result: ExecResult
) -> ExecResult:
    raw: Any = interpreter
    fs: Any = raw._fs
    tree = _shell_of(interpreter).tree
    stdout, stderr = result.stdout, result.stderr
    for path, output in created:
        if output is not None and output.body is not None:
            written = await fs.read_file(path)
            fed = await _subshell(
                interpreter, lambda child, body=output.body: child.execute_script(body), written
            )
            stdout, stderr = stdout + fed.stdout, stderr + fed.stderr
        await fs.rm(path, force=True)
        tree.fds.discard(int(path.rsplit("/", 1)[1]))
    return _result(stdout, stderr, result.exit_code)


def _with_process_substitution(original: Callable[..., Any], segments: bool) -> Callable[..., Any]:
    from just_bash.ast.types import ProcessSubstitutionPart
    from just_bash.interpreter.expansion import ExpandedSegment

    async def expand(ctx: Any, part: Any, in_double_quotes: bool = False) -> Any:
        if isinstance(part, ProcessSubstitutionPart):
            path = await _process_substitution(ctx, part)
            return [ExpandedSegment(text=path, quoted=True)] if segments else path
        return await original(ctx, part, in_double_quotes)

    return expand


def _redirected_process_substitution(original: Callable[..., Any]) -> Callable[..., Any]:
    """``cmd < <(list)`` and ``cmd > >(list)``: just-bash's parser took ``<(`` only as an
    argument, so a redirection to one was a syntax error."""
    from just_bash.ast import AST
    from just_bash.ast.types import ProcessSubstitutionPart
    from just_bash.parser.lexer import TokenType

    arrows = (TokenType.LESS, TokenType.GREAT)

    def try_parse_redirection(self: Any) -> Any:
        offset = 0
        fd: int | None = None
        if self._check(TokenType.NUMBER) and self._peek(1).type in arrows:
            number, arrow = self._current(), self._peek(1)
            if arrow.column == number.column + len(number.value):
                offset, fd = 1, int(number.value)
        operator = self._peek(offset)
        if not (
            operator.type in arrows
            and self._peek(offset + 1).type in arrows
            and self._peek(offset + 2).type == TokenType.LPAREN
        ):
            return original(self)
        for _ in range(offset + 1):
            self._advance()
        direction = "input" if self._current().type == TokenType.LESS else "output"
        self._advance()
        self._advance()
        self._skip_newlines()
        statements = self._parse_compound_list()
        self._skip_newlines()
        self._expect(TokenType.RPAREN, "Expected ')' to close process substitution")
        word = AST.word([ProcessSubstitutionPart(body=AST.script(statements), direction=direction)])
        return AST.redirection("<" if operator.type == TokenType.LESS else ">", word, fd)

    return try_parse_redirection


# -- arithmetic ------------------------------------------------------------------------------------

_COMPARISON_FIRST = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\s*==")
_BITS = 64
_MODULUS = 1 << _BITS


def _wrap(value: int) -> int:
    """``value`` as bash's 64-bit signed integers hold it."""
    value &= _MODULUS - 1
    return value - _MODULUS if value >= 1 << (_BITS - 1) else value


def _binary(operator: str, left: int, right: int, line: int) -> int:
    if operator in ("/", "%") and right == 0:
        raise _ArithmeticFailed("division by 0", line)
    if operator == "/":
        quotient = abs(left) // abs(right)
        return _wrap(-quotient if (left < 0) != (right < 0) else quotient)
    if operator == "%":
        remainder = abs(left) % abs(right)
        return _wrap(-remainder if left < 0 else remainder)
    if operator == "**":
        if right < 0:
            raise _ArithmeticFailed("exponent less than 0", line)
        return _wrap(pow(left, right, _MODULUS))
    if operator == "<<":
        return _wrap(left << (right & (_BITS - 1)))
    return _wrap(left >> (right & (_BITS - 1)))  # ">>"


_OWN_OPERATORS = frozenset({"/", "%", "**", "<<", ">>"})
_OPERAND = re.compile(r"[A-Za-z0-9_#@.]+|[A-Za-z_][A-Za-z0-9_]*\[.*\]", re.DOTALL)
"""What just-bash's evaluator reads as a variable: names, numbers (``16#ff``, ``1.5`` fails on
its own), array elements; anything else is text its parser could not read."""


def _check_operand(expr: Any, line: int) -> None:
    """just-bash's arithmetic parser turns text it cannot read (``1+``, ``(1``, ``a b``) into a
    variable of that name, worth 0; bash reports a syntax error."""
    name = expr.name.strip()
    if name.startswith("$") or _OPERAND.fullmatch(name):
        return
    raise _ArithmeticFailed(f"{name}: syntax error in expression", line)


_PLAIN_VALUE = re.compile(r"\s*[+-]?[A-Za-z0-9_]+(?:#[A-Za-z0-9_@]+)?\s*")
_resolving = [0]
"""How deep variables whose values are expressions are being evaluated (``x=y+1``, ``y=x``...)."""


def _expression_values(original: Callable[..., int]) -> Callable[..., int]:
    """``_resolve_arith_variable``: a variable whose value is an expression (``x="2+3"``) is
    that expression, as in bash (just-bash's parse of it failed, giving 0)."""
    from just_bash.interpreter import expansion
    from just_bash.parser.parser import Parser

    evaluator: Any = expansion

    def resolve(ctx: Any, value: str) -> int:
        if not value or _PLAIN_VALUE.fullmatch(value):
            return original(ctx, value)
        if _resolving[0] >= 32:
            raise _ArithmeticFailed(
                f"{value.strip()}: expression recursion level exceeded", ctx.state.current_line
            )
        parser: Any = Parser()
        _resolving[0] += 1
        try:
            return evaluator.evaluate_arithmetic_sync(
                ctx, parser._parse_arithmetic_expression(value)
            )
        finally:
            _resolving[0] -= 1

    return resolve


async def _quoted_operand(ctx: Any, expr: Any, evaluate: Callable[..., Any]) -> Any:
    """``"5"`` in ``$(( "5" + 1 ))``: bash removes the double quotes."""
    from just_bash.parser.parser import Parser

    parser: Any = Parser()
    return await evaluate(ctx, parser._parse_arithmetic_expression(expr.name.strip()[1:-1]))


def _is_quoted(expr: Any) -> bool:
    if getattr(expr, "type", None) != "ArithVariable":
        return False
    name = expr.name.strip()
    return len(name) >= 2 and name[0] == name[-1] == '"'


def _arithmetic_evaluators(
    evaluate: Callable[..., Awaitable[int]], evaluate_sync: Callable[..., int]
) -> tuple[Callable[..., Awaitable[int]], Callable[..., int]]:
    """just-bash's evaluators with 64-bit wrapping at every step, exact integer division (it
    divided in floating point), and errors that drop the line as bash's do."""
    from just_bash.parser.parser import Parser

    def stored(ctx: Any, expr: Any, value: int) -> int:
        wrapped = _wrap(value)
        if expr.type == "ArithUnary" and expr.operator in ("++", "--"):
            name = getattr(expr.operand, "name", "")
            env = _variables(ctx.state.env)
            current = env.get(name, "") if name and "[" not in name else ""
            if current.lstrip("-").isdigit() and _wrap(int(current)) != int(current):
                env[name] = str(_wrap(int(current)))
        if wrapped != value and expr.type == "ArithAssignment":
            name = getattr(expr, "variable", None)
            keyed = getattr(expr, "subscript", None) or getattr(expr, "string_key", None)
            if name and keyed is None:
                _variables(ctx.state.env)[name] = str(wrapped)
        return wrapped

    async def evaluate_arithmetic(ctx: Any, expr: Any) -> int:
        line = ctx.state.current_line
        if _is_quoted(expr):
            return await _quoted_operand(ctx, expr, evaluate_arithmetic)
        if getattr(expr, "type", None) == "ArithVariable":
            _check_operand(expr, line)
        if getattr(expr, "type", None) == "ArithBinary" and expr.operator in _OWN_OPERATORS:
            left = await evaluate_arithmetic(ctx, expr.left)
            right = await evaluate_arithmetic(ctx, expr.right)
            return _binary(expr.operator, left, right, line)
        try:
            value = await evaluate(ctx, expr)
        except (ValueError, ZeroDivisionError) as error:
            raise _ArithmeticFailed(str(error), line) from None
        return stored(ctx, expr, value)

    def evaluate_arithmetic_sync(ctx: Any, expr: Any) -> int:
        line = ctx.state.current_line
        if _is_quoted(expr):
            parser: Any = Parser()
            inner = parser._parse_arithmetic_expression(expr.name.strip()[1:-1])
            return evaluate_arithmetic_sync(ctx, inner)
        if getattr(expr, "type", None) == "ArithVariable":
            _check_operand(expr, line)
        if getattr(expr, "type", None) == "ArithBinary" and expr.operator in _OWN_OPERATORS:
            left = evaluate_arithmetic_sync(ctx, expr.left)
            right = evaluate_arithmetic_sync(ctx, expr.right)
            return _binary(expr.operator, left, right, line)
        try:
            value = evaluate_sync(ctx, expr)
        except (ValueError, ZeroDivisionError) as error:
            raise _ArithmeticFailed(str(error), line) from None
        return stored(ctx, expr, value)

    return evaluate_arithmetic, evaluate_arithmetic_sync


def _comparisons_not_assignments(original: Callable[..., Any]) -> Callable[..., Any]:
    """``Parser._parse_arith_assignment`` read the first ``=`` of ``n == 0`` as an assignment
    (``n = (= 0)``), so ``((n == 0))`` was false and set ``n``."""

    def parse_arith_assignment(self: Any, expr: str) -> Any:
        if _COMPARISON_FIRST.match(expr.strip()):
            return self._parse_arith_ternary(expr)
        return original(self, expr)

    return parse_arith_assignment


def _special_parameters(original: Callable[..., Any], kind: str) -> Callable[..., Any]:
    """just-bash parses ``${#}`` as the length of an empty name (an error under ``set -u``; it is
    ``$#``), read ``$!`` as an indirection through an empty name (always empty; it is the pid of
    the last job), and left the name out of ``${v:?message}``'s message."""
    from just_bash.ast.types import LengthOp
    from just_bash.interpreter.expansion import ExpandedSegment

    def special(ctx: Any, part: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``part`` as just-bash should read it, or the value of ``$!``."""
        if part.parameter == "" and isinstance(part.operation, LengthOp):
            return dataclasses.replace(part, parameter="#", operation=None)
        if part.parameter == "!" and part.operation is None:
            pid = ctx.state.last_background_pid
            text = str(pid) if pid else ""
            if kind != "segments":
                return text
            quoted = bool(args[0]) if args else bool(kwargs.get("in_double_quotes", False))
            return [ExpandedSegment(text=text, quoted=quoted)]
        return part

    def named(ctx: Any, part: Any, error: ExitError) -> ExitError:
        if type(error) is not ExitError or getattr(part.operation, "type", "") != "ErrorIfUnset":
            return error
        message = error.stderr.removeprefix("bash: ").rstrip("\n")
        if not message:
            empty = getattr(part.operation, "check_empty", True)
            message = "parameter null or not set" if empty else "parameter not set"
        if not message.startswith(f"{part.parameter}: "):
            message = f"{part.parameter}: {message}"
        line = ctx.state.current_line
        where = f"line {line}: " if line and _shell_of_state(ctx.state).top_level else ""
        return ExitError(1, error.stdout, f"bash: {where}{message}\n")

    if kind == "sync":

        def expand(ctx: Any, part: Any, *args: Any, **kwargs: Any) -> Any:
            part = special(ctx, part, args, kwargs)
            if not hasattr(part, "parameter"):
                return part
            try:
                return original(ctx, part, *args, **kwargs)
            except ExitError as error:
                raise named(ctx, part, error) from None

        return expand

    async def expand_async(ctx: Any, part: Any, *args: Any, **kwargs: Any) -> Any:
        part = special(ctx, part, args, kwargs)
        if not hasattr(part, "parameter"):
            return part
        try:
            return await original(ctx, part, *args, **kwargs)
        except ExitError as error:
            raise named(ctx, part, error) from None

    return expand_async


# -- wiring ----------------------------------------------------------------------------------------


def _top_level(original: Callable[..., None]) -> Callable[..., None]:
    """``Bash(...)``: the provider's command line, run as bash runs ``bash -c``."""

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        _new_tree(self._interpreter)

    return __init__


_patched = [False]


def patch_semantics() -> None:
    """Apply this module's fixes to the imported just-bash (in the worker only)."""
    if _patched[0]:
        return
    _patched[0] = True
    from just_bash.bash import Bash
    from just_bash.interpreter import control_flow, expansion
    from just_bash.interpreter import interpreter as interpreter_module
    from just_bash.interpreter.builtins import BUILTINS
    from just_bash.interpreter.builtins import set as set_module
    from just_bash.parser.parser import Parser

    bash: Any = Bash
    bash.__init__ = _top_level(bash.__init__)
    interpreter: Any = Interpreter
    interpreter.__init__ = _with_substitutions(interpreter.__init__)
    interpreter.execute_script = _scripts(interpreter.execute_script)
    interpreter.execute_statement = _statements(interpreter.execute_statement)
    interpreter.execute_pipeline = _pipelines(interpreter.execute_pipeline)
    interpreter.execute_command = _commands(interpreter.execute_command)
    interpreter._execute_subshell = _execute_subshell
    interpreter._call_function = _function_calls(interpreter._call_function)
    interpreter._execute_builtin = _exec_replaces_traps(interpreter._execute_builtin)
    interpreter._execute_simple_command = _simple_commands(interpreter._execute_simple_command)
    module: Any = expansion
    module.evaluate_arithmetic, module.evaluate_arithmetic_sync = _arithmetic_evaluators(
        module.evaluate_arithmetic, module.evaluate_arithmetic_sync
    )
    for imported in (interpreter_module, control_flow):  # they imported the evaluator by name
        importer: Any = imported
        importer.evaluate_arithmetic = module.evaluate_arithmetic
    for name, kind in (
        ("expand_parameter", "sync"),
        ("expand_parameter_async", "async"),
        ("expand_parameter_segments_async", "segments"),
    ):
        setattr(module, name, _special_parameters(getattr(module, name), kind))
    module._resolve_arith_variable = _expression_values(module._resolve_arith_variable)
    module.expand_part = _with_process_substitution(module.expand_part, segments=False)
    module._expand_part_segments = _with_process_substitution(
        module._expand_part_segments, segments=True
    )
    parser: Any = Parser
    parser._parse_arith_assignment = _comparisons_not_assignments(parser._parse_arith_assignment)
    parser._try_parse_redirection = _redirected_process_substitution(parser._try_parse_redirection)
    handle_set = _with_errtrace(BUILTINS["set"])
    setter: Any = set_module
    setter.handle_set = handle_set
    BUILTINS["set"] = handle_set
    BUILTINS["local"] = _with_local_attributes(BUILTINS["local"])
    BUILTINS["trap"] = _trap
    BUILTINS["kill"] = _kill
    BUILTINS["wait"] = _wait
    BUILTINS["jobs"] = _jobs
    BUILTINS["fg"] = _no_job_control("fg")
    BUILTINS["bg"] = _no_job_control("bg")
