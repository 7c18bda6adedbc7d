"""Exactly-once commands for durable runs: receipts, claims and re-attach.

Inside a tool call of a durable run (:func:`pai.core.current_durable_call` is not ``None``) the
facade runs each command through :class:`DurableCommand`. The n-th command of a call has a key that
is the same on every replay (``DurableCall.next_key("sandbox.command")``); its name in the
sandbox is the first 32 hex digits of the key's SHA-256. Under ``/workspace/.pai/receipts``:

- ``<name>.json``, the *receipt*: what the command returned (exit code, output, ``timed_out``,
  ``truncated``) and a digest of what it was (command, cwd, env, stdin). The host writes it
  once the command has finished. A replay that finds it returns it, and runs nothing.
- ``<name>.claim/``, the *claim*: made with ``mkdir`` (atomic) by the wrapper script below before
  it runs the command, holding the wrapper's PID (``pid``), its deadline (``deadline``, seconds
  of the sandbox's clock, empty without a timeout), the command's output (``out``, ``err``) and,
  once it has finished, its exit code (``rc``, written then renamed into place).

A wrapper that finds the claim taken prints :data:`CLAIMED_MARKER` and exits with
:data:`CLAIMED_EXIT_CODE` without running anything; the host then *re-attaches*: it polls until
``rc`` appears (the result is read from the claim), the PID is gone without an ``rc`` (the
command was interrupted, by a crash of the host or of the sandbox: :data:`INTERRUPTED_EXIT_CODE`,
and it is not run again, as it may have had effects), or the deadline passed. Each of those is
written as the receipt, so later replays agree.

The command's output goes to files in the claim, so the wrapper passes it on to the host when
the command has finished: ``on_stdout`` / ``on_stderr`` get it at the end, not as it comes.
Once the receipt is written the host removes ``out`` and ``err`` (when they hold anything);
the claim keeps ``pid``, ``deadline`` and ``rc``.

The wrapper runs the command by ``eval`` of its single-quoted text in a subshell, in the
provider's shell (bash where there is one; busybox ``sh`` does too), with few processes of its
own: the claim's ``mkdir``, the ``mv`` of the exit code, a ``cat`` per non-empty stream.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import shlex
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final, Literal, TypeAlias

import anyio

from pai.sandbox._errors import (
    SandboxFileNotFoundError,
    SandboxNotDurableError,
    SandboxReplayError,
)
from pai.sandbox._paths import RESERVED
from pai.sandbox._types import FileWrite, RawCommandResult

if TYPE_CHECKING:
    from pai.sandbox._provider import OutputCallback, SandboxInstance

DurableCommands: TypeAlias = Literal["exactly-once", "at-least-once"]
"""What a durable run's commands may do on a provider that keeps no receipts: be refused
(``"exactly-once"``, the default) or run again on replay (``"at-least-once"``)."""

DURABLE_COMMANDS: Final[tuple[str, ...]] = ("exactly-once", "at-least-once")

RECEIPTS: Final = f"{RESERVED}/receipts"
"""Where receipts and claims live in the sandbox."""

RECEIPT_VERSION: Final = 1

CLAIMED_EXIT_CODE: Final = 217
"""The wrapper's exit code when another run of the same key holds the claim (with the marker)."""

CLAIMED_MARKER: Final = "pai-sandbox: claimed by an earlier attempt"

INTERRUPTED_EXIT_CODE: Final = 255
"""The exit code of a command that was started and interrupted before it finished (its outcome
is unknown, so it is not run again)."""

POLL_INITIAL: Final = 0.05
POLL_MAX: Final = 0.5
NO_PID_GRACE: Final = 10.0
"""Seconds a claim without a PID is given (the wrapper writes it right after the claim) before
its wrapper is taken as dead."""
_HELPER_TIMEOUT: Final = 30.0
_HELPER_LIMIT: Final = 4096


def check_durable_commands(value: object) -> DurableCommands:
    """``value`` if it is ``"exactly-once"`` or ``"at-least-once"``; ``SandboxInputError``
    otherwise."""
    from pai.sandbox._errors import SandboxInputError

    if value == "exactly-once":
        return "exactly-once"
    if value == "at-least-once":
        return "at-least-once"
    raise SandboxInputError(
        f"durable_commands must be 'exactly-once' or 'at-least-once', got {value!r}"
    )


def receipt_name(key: str) -> str:
    """The file name (without ``.json``) of the receipt of the effect ``key``."""
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def command_digest(command: str, cwd: str, env: Mapping[str, str], stdin: bytes | None) -> str:
    """The SHA-256 of what a command is: its text, cwd, env and stdin."""
    document = json.dumps(
        [command, cwd, sorted(env.items()), None if stdin is None else stdin.hex()],
        separators=(",", ":"),
    )
    return hashlib.sha256(document.encode()).hexdigest()


def not_durable(provider: str) -> SandboxNotDurableError:
    return SandboxNotDurableError(
        f"sandbox provider {provider!r} keeps no receipts of commands (features.durable is "
        "False), so a durable run replayed after a crash could run a command a second time. "
        "Use a provider that keeps its sandboxes (docker, e2b, local), or accept at-least-once "
        'commands: sandbox_capability(..., durable_commands="at-least-once"), or '
        'durable_commands = "at-least-once" in [capabilities.sandbox] of pai.toml'
    )


def wrapper_script(name: str, command: str, timeout: float | None) -> str:
    """The POSIX sh script that claims ``name``, runs ``command`` unchanged and records its exit
    code and output in the claim (see the module docstring)."""
    claim = shlex.quote(f"{RECEIPTS}/{name}.claim")
    # bash has the clock built in; busybox and dash ask date(1).
    deadline = (
        "" if timeout is None else f"$(( ${{EPOCHSECONDS:-$(date +%s)}} + {math.ceil(timeout)} ))"
    )
    # The command is run by `eval` of its single-quoted text in a subshell: the same shell as a
    # plain command (bash where the provider uses it), `exit` ends the subshell only,
    # here-documents and several lines work, and a syntax error is the command's exit code 2,
    # not the wrapper's. Its stdin is the wrapper's. Few processes: every fork is paid for.
    return (
        f"C={claim}\n"
        f"[ -d {shlex.quote(RECEIPTS)} ] || mkdir -p {shlex.quote(RECEIPTS)} 2>/dev/null\n"
        'if ! mkdir "$C" 2>/dev/null; then\n'
        f'if [ -d "$C" ]; then printf "%s\\n" {shlex.quote(CLAIMED_MARKER)}; '
        f"exit {CLAIMED_EXIT_CODE}; fi\n"
        'echo "pai-sandbox: cannot make the claim $C for a durable command" >&2; exit 125\n'
        "fi\n"
        'echo $$ >"$C/pid"\n'
        f'echo {deadline} >"$C/deadline"\n'
        f'( eval {shlex.quote(command)}\n) >"$C/out" 2>"$C/err"\n'
        "rc=$?\n"
        'echo $rc >"$C/rc.tmp" && mv -f "$C/rc.tmp" "$C/rc"\n'
        '[ -s "$C/out" ] && cat "$C/out"\n'
        '[ -s "$C/err" ] && cat "$C/err" >&2\n'
        "exit $rc\n"
    )


def _status_script(claim: str) -> str:
    # One round trip: "done", "alive", "dead" or "nopid", then the sandbox's clock and the
    # deadline. rc is looked at again after the PID: a command may finish in between.
    c = shlex.quote(claim)
    return (
        f"C={c}\n"
        'if [ -f "$C/rc" ]; then s=done; else\n'
        'p=$(cat "$C/pid" 2>/dev/null)\n'
        'if [ -z "$p" ]; then s=nopid\n'
        'elif kill -0 "$p" 2>/dev/null || [ -d "/proc/$p" ]; then s=alive\n'
        'elif [ -f "$C/rc" ]; then s=done; else s=dead; fi\n'
        "fi\n"
        'echo "$s $(date +%s) $(cat "$C/deadline" 2>/dev/null)"\n'
    )


def _collect_script(claim: str) -> str:
    c = shlex.quote(claim)
    return f'C={c}\ncat "$C/out" 2>/dev/null\ncat "$C/err" >&2 2>/dev/null\nexit "$(cat "$C/rc")"\n'


def _past(fields: list[str]) -> bool:
    # "alive NOW DEADLINE": the sandbox's clock is past the command's deadline.
    return (
        len(fields) >= 3
        and fields[1].isdigit()
        and fields[2].isdigit()
        and (int(fields[1]) > int(fields[2]))
    )


def _is_claimed(raw: RawCommandResult) -> bool:
    return raw.exit_code == CLAIMED_EXIT_CODE and raw.stdout.startswith(CLAIMED_MARKER.encode())


class DurableCommand:
    """One command of a durable run, keyed: runs it at most once per key in the sandbox."""

    def __init__(
        self,
        *,
        key: str,
        command: str,
        cwd: str,
        env: Mapping[str, str],
        stdin: bytes | None,
        timeout: float | None,
        output_limit: int,
        on_stdout: OutputCallback | None,
        on_stderr: OutputCallback | None,
    ) -> None:
        self.key = key
        self.name = receipt_name(key)
        self.command = command
        self.cwd = cwd
        self.env = env
        self.stdin = stdin
        self.timeout = timeout
        self.output_limit = output_limit
        self.on_stdout = on_stdout
        self.on_stderr = on_stderr
        self.digest = command_digest(command, cwd, env, stdin)
        self.receipt_path = f"{RECEIPTS}/{self.name}.json"
        self.claim = f"{RECEIPTS}/{self.name}.claim"

    async def __call__(self, instance: SandboxInstance) -> RawCommandResult:
        found = await self._read_receipt(instance)
        if found is not None:
            return found
        # The output is held until the run is known not to be a claimed one: the wrapper of a
        # key an earlier attempt claimed prints only its marker, which is not the command's.
        out: list[bytes] = []
        err: list[bytes] = []
        raw = await instance.run(
            wrapper_script(self.name, self.command, self.timeout),
            cwd=self.cwd,
            env=self.env,
            stdin=self.stdin,
            timeout=self.timeout,
            output_limit=self.output_limit,
            on_stdout=None if self.on_stdout is None else out.append,
            on_stderr=None if self.on_stderr is None else err.append,
        )
        if _is_claimed(raw):
            return await self.reattach(instance)
        for callback, chunks in ((self.on_stdout, out), (self.on_stderr, err)):
            if callback is not None:
                for chunk in chunks:
                    callback(chunk)
        await self._write_receipt(instance, raw)
        return raw

    # -- receipts -------------------------------------------------------------------------------

    async def _read_receipt(self, instance: SandboxInstance) -> RawCommandResult | None:
        try:
            data = await instance.read_file(self.receipt_path, max_bytes=64 * 1024 * 1024)
        except SandboxFileNotFoundError:
            return None
        try:
            receipt = json.loads(data)
            digest = receipt["digest"]
            raw = RawCommandResult(
                stdout=str(receipt["stdout"]).encode(),
                stderr=str(receipt["stderr"]).encode(),
                exit_code=int(receipt["exit_code"]),
                timed_out=bool(receipt["timed_out"]),
                truncated=bool(receipt["truncated"]),
            )
        except (ValueError, KeyError, TypeError):
            return None  # half-written or foreign: the claim decides
        if digest != self.digest:
            raise SandboxReplayError(
                f"durable command {self.key!r}: the tool ran a different command on replay than "
                f"the one recorded (receipt {self.receipt_path}); tools of a durable run must run "
                "the same commands, with the same cwd, env and stdin, in the same order on every "
                "replay"
            )
        for callback, text in ((self.on_stdout, raw.stdout), (self.on_stderr, raw.stderr)):
            if callback is not None and text:
                callback(text)
        return raw

    async def _write_receipt(self, instance: SandboxInstance, raw: RawCommandResult) -> None:
        limit = self.output_limit
        receipt = {
            "version": RECEIPT_VERSION,
            "key": self.key,
            "digest": self.digest,
            "exit_code": raw.exit_code,
            "stdout": raw.stdout[:limit].decode("utf-8", "replace"),
            "stderr": raw.stderr[:limit].decode("utf-8", "replace"),
            "timed_out": raw.timed_out,
            "truncated": raw.truncated or len(raw.stdout) > limit or len(raw.stderr) > limit,
        }
        data = json.dumps(receipt, ensure_ascii=False).encode()
        await instance.write_files([FileWrite(self.receipt_path, data)])
        # The output is in the receipt now; the claim keeps its pid, deadline and rc.
        for stream, output in (("out", raw.stdout), ("err", raw.stderr)):
            if output:  # an empty one is not worth a round trip
                with contextlib.suppress(SandboxFileNotFoundError):
                    await instance.remove(f"{self.claim}/{stream}", recursive=False)

    # -- re-attach ------------------------------------------------------------------------------

    async def _helper(self, instance: SandboxInstance, script: str, limit: int) -> RawCommandResult:
        return await instance.run(
            script,
            cwd="/",
            env={},
            stdin=None,
            timeout=_HELPER_TIMEOUT,
            output_limit=limit,
        )

    async def reattach(self, instance: SandboxInstance) -> RawCommandResult:
        """Wait for the command an earlier attempt started under this key, and take its result
        (or the interrupted result); write it as the receipt."""
        delay = POLL_INITIAL
        no_pid_since: float | None = None
        while True:
            status = await self._helper(instance, _status_script(self.claim), _HELPER_LIMIT)
            fields = status.stdout.decode("utf-8", "replace").split()
            state = fields[0] if fields else "nopid"
            if state == "done":
                # The attempt that ran it may be alive and write the receipt (then drop the
                # output) at any moment: its receipt, when there is one, is the answer.
                found = await self._read_receipt(instance)
                if found is not None:
                    return found
                raw = await self._helper(instance, _collect_script(self.claim), self.output_limit)
                found = await self._read_receipt(instance)
                if found is not None:
                    return found
                if self.on_stdout is not None and raw.stdout:
                    self.on_stdout(raw.stdout)
                if self.on_stderr is not None and raw.stderr:
                    self.on_stderr(raw.stderr)
                break
            if state == "dead":
                raw = self._interrupted(
                    "the command was started by an earlier attempt of this durable run and was "
                    "interrupted before it finished (its process is gone and it recorded no exit "
                    "code); it is not run again, as it may have had effects"
                )
                break
            if state == "nopid":
                now = time.monotonic()
                no_pid_since = now if no_pid_since is None else no_pid_since
                if now - no_pid_since > NO_PID_GRACE:
                    raw = self._interrupted(
                        "an earlier attempt of this durable run claimed the command and recorded "
                        "no process; it is taken as interrupted and not run again"
                    )
                    break
            elif _past(fields):
                await self._helper(
                    instance,
                    f'kill -KILL "$(cat {shlex.quote(self.claim)}/pid)" 2>/dev/null; true',
                    _HELPER_LIMIT,
                )
                raw = RawCommandResult(
                    stdout=b"",
                    stderr=(
                        b"pai-sandbox: the command started by an earlier attempt of this "
                        b"durable run was still running at its deadline and was stopped\n"
                    ),
                    exit_code=124,
                    timed_out=True,
                )
                break
            await anyio.sleep(delay)
            delay = min(delay * 2, POLL_MAX)
        await self._write_receipt(instance, raw)
        return raw

    def _interrupted(self, why: str) -> RawCommandResult:
        return RawCommandResult(
            stdout=b"",
            stderr=f"pai-sandbox: {why} (durable command {self.key})\n".encode(),
            exit_code=INTERRUPTED_EXIT_CODE,
        )


__all__ = [
    "CLAIMED_EXIT_CODE",
    "CLAIMED_MARKER",
    "DURABLE_COMMANDS",
    "INTERRUPTED_EXIT_CODE",
    "RECEIPTS",
    "DurableCommand",
    "DurableCommands",
    "check_durable_commands",
    "command_digest",
    "not_durable",
    "receipt_name",
    "wrapper_script",
]
