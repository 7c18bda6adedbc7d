"""The interpreter's semantics as bash has them: subshells, traps, jobs, ``kill`` and ``wait``,
process substitution, errors that end a line or the shell, ``set -e``'s exceptions, arithmetic;
through the real provider on asyncio and trio.

Every expected stdout and exit code below is what GNU bash 5.2 printed for the same command line
(``bash -c '<command line>'`` in an empty folder, ``LC_ALL=C``); stderr is compared whole where
the in-memory shell words it as bash does, else by the part that says what went wrong. Where the
in-memory shell refuses what bash does, the test says so and checks the message names the
provider.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from pai.sandbox_inmemory import InMemorySandboxInstance, create_in_memory_sandbox_provider

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module", params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Both event loops, each kept for the whole module so that one instance serves its tests
    (a worker starts in about a second; these tests run commands only, each in a fresh shell)."""
    return request.param


@pytest.fixture(scope="module")
async def instance(anyio_backend: str) -> AsyncIterator[InMemorySandboxInstance]:
    """One instance for the module's tests on ``anyio_backend``; no two tests write the same
    file."""
    provider = create_in_memory_sandbox_provider()
    try:
        yield await provider.create(f"semantics-{anyio_backend}")
    finally:
        await provider.aclose()


async def shell(
    instance: InMemorySandboxInstance, command: str, stdin: bytes | None = None
) -> tuple[str, str, int]:
    """``command`` run in /workspace: its stdout, stderr and exit code."""
    result = await instance.run(
        command, cwd="/workspace", env={}, stdin=stdin, timeout=30, output_limit=1 << 20
    )
    return result.stdout.decode(), result.stderr.decode(), result.exit_code


# -- subshells ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "stdout"),
    [
        ('echo v | read x; echo "${x-unset}"', "unset\n"),
        ("n=0; printf 'a\\nb\\n' | while read -r _; do n=$((n + 1)); done; echo \"$n\"", "0\n"),
        ("mkdir d; cd d | true; pwd", "/workspace\n"),
    ],
    ids=["read", "loop-counter", "cd"],
)
async def test_each_stage_of_a_pipeline_runs_in_a_subshell(
    instance: InMemorySandboxInstance, command: str, stdout: str
) -> None:
    assert await shell(instance, command) == (stdout, "", 0)


async def test_lastpipe_keeps_only_the_last_stage_in_the_shell(
    instance: InMemorySandboxInstance,
) -> None:
    command = 'shopt -s lastpipe; cd /tmp | true; echo v | read x; echo "$PWD [$x]"'

    assert await shell(instance, command) == ("/workspace [v]\n", "", 0)


async def test_command_substitution_runs_in_a_subshell(instance: InMemorySandboxInstance) -> None:
    command = 'x=$(y=5; cd /tmp; echo hi); echo "$x ${y-unset} $PWD"'

    assert await shell(instance, command) == ("hi unset /workspace\n", "", 0)


async def test_what_a_command_substitution_writes_to_stderr_reaches_the_shell(
    instance: InMemorySandboxInstance,
) -> None:
    command = 'x=$(echo err >&2; echo out); echo "[$x]"'

    assert await shell(instance, command) == ("[out]\n", "err\n", 0)


async def test_what_an_earlier_stage_writes_to_stderr_is_kept(
    instance: InMemorySandboxInstance,
) -> None:
    stdout, stderr, code = await shell(instance, 'ls nope | wc -l; echo "rc=$?"')

    assert (stdout, code) == ("0\nrc=0\n", 0)
    assert stderr == "ls: cannot access 'nope': No such file or directory\n"


async def test_a_subshell_reading_the_shells_stdin_consumes_it(
    instance: InMemorySandboxInstance,
) -> None:
    command = 'read a; (read b; echo "sub $b"); read c; echo "[$a][$c]"'

    assert await shell(instance, command, stdin=b"1\n2\n3\n") == ("sub 2\n[1][3]\n", "", 0)


# -- trap ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("trap 'echo cleanup' EXIT; echo work", ("work\ncleanup\n", "", 0)),
        ("trap 'echo \"bye $?\"' EXIT; exit 3", ("bye 3\n", "", 3)),
        ("trap 'echo in-trap; exit 7' EXIT; exit 2", ("in-trap\n", "", 7)),
        ("trap 'echo t' EXIT; f() { echo a; exit 4; }; f; echo no", ("a\nt\n", "", 4)),
        ("trap 'echo \"t $?\"' EXIT; set -e; false; echo no", ("t 1\n", "", 1)),
        ("trap 'echo x' EXIT; trap - EXIT; echo done", ("done\n", "", 0)),
    ],
    ids=["end", "status", "exit-in-trap", "exit-in-function", "set-e", "reset"],
)
async def test_the_exit_trap_runs_when_the_shell_ends(
    instance: InMemorySandboxInstance, command: str, expected: tuple[str, str, int]
) -> None:
    assert await shell(instance, command) == expected


@pytest.mark.parametrize(
    ("command", "stdout"),
    [
        ("( trap 'echo sub-exit' EXIT; echo in ); echo out", "in\nsub-exit\nout\n"),
        ('x=$(trap "echo sub-exit" EXIT; echo in); echo "[$x]"', "[in\nsub-exit]\n"),
        ("trap 'echo outer' EXIT; (echo sub)", "sub\nouter\n"),
    ],
    ids=["subshell", "command-substitution", "not-inherited"],
)
async def test_a_subshell_runs_its_own_exit_trap(
    instance: InMemorySandboxInstance, command: str, stdout: str
) -> None:
    assert await shell(instance, command) == (stdout, "", 0)


@pytest.mark.parametrize(
    ("command", "stdout", "code"),
    [
        ("trap 'echo caught' ERR; false; echo go", "caught\ngo\n", 0),
        (
            "trap 'echo err' ERR; x=$(false); echo end; false || true; if false; then :; fi; "
            "! false; false && true",
            "err\nend\n",
            1,
        ),
        (
            "trap 'echo err' ERR; f() { false; echo in; return 1; }; f; echo after",
            "in\nerr\nafter\n",
            0,
        ),
        ("set -E; trap 'echo err' ERR; f() { false; }; f; echo end", "err\nerr\nend\n", 0),
        ("trap 'echo err' ERR; { false; echo g; }; echo after", "err\ng\nafter\n", 0),
        ("trap 'echo err' ERR; set -e; false; echo no", "err\n", 1),
    ],
    ids=["command", "not-in-conditions", "functions-without-E", "set-E", "group", "set-e"],
)
async def test_the_err_trap_runs_where_set_e_would_stop(
    instance: InMemorySandboxInstance, command: str, stdout: str, code: int
) -> None:
    assert await shell(instance, command) == (stdout, "", code)


async def test_trap_lists_sets_and_resets(instance: InMemorySandboxInstance) -> None:
    command = 'trap "echo A" INT; trap "echo B" INT TERM; trap -p; trap - INT; trap'

    assert await shell(instance, command) == (
        "trap -- 'echo B' SIGINT\ntrap -- 'echo B' SIGTERM\ntrap -- 'echo B' SIGTERM\n",
        "",
        0,
    )


async def test_trap_refuses_an_invalid_signal_and_sets_the_others(
    instance: InMemorySandboxInstance,
) -> None:
    stdout, stderr, code = await shell(instance, 'trap "echo x" FOO INT; echo $?; trap -p')

    assert (stdout, code) == ("1\ntrap -- 'echo x' SIGINT\n", 0)
    assert stderr == "bash: trap: FOO: invalid signal specification\n"


async def test_a_debug_trap_is_refused_naming_the_provider(
    instance: InMemorySandboxInstance,
) -> None:
    # bash runs it before every command; the in-memory shell says it cannot, rather than never
    stdout, stderr, code = await shell(instance, "trap 'echo d' DEBUG; echo \"rc=$?\"")

    assert (stdout, code) == ("rc=1\n", 0)
    assert "in-memory sandbox" in stderr
    assert 'provider = "docker"' in stderr


# -- kill and signals to the shell ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (
            "trap 'echo got TERM; exit 0' TERM; kill -TERM $$; echo not reached",
            ("got TERM\n", "", 0),
        ),
        ("trap 'echo got' USR1; kill -USR1 $$; echo after", ("got\nafter\n", "", 0)),
        ('trap "" TERM; kill $$; echo survived', ("survived\n", "", 0)),
        # bash is killed by the signal: its caller sees 128 + 15, and 128 + 9 with no EXIT trap
        ("trap 'echo exit-trap' EXIT; kill $$; echo after", ("exit-trap\n", "", 143)),
        ("trap 'echo exit-trap' EXIT; kill -9 $$; echo after", ("", "", 137)),
        ("(kill $$; echo in-sub); echo after-sub", ("in-sub\n", "", 143)),
    ],
    ids=["trapped", "trapped-goes-on", "ignored", "default", "kill", "from-a-subshell"],
)
async def test_kill_sends_a_signal_to_the_shell(
    instance: InMemorySandboxInstance, command: str, expected: tuple[str, str, int]
) -> None:
    assert await shell(instance, command) == expected


async def test_kill_lists_signals(instance: InMemorySandboxInstance) -> None:
    command = "kill -l | head -3; kill -l 15; kill -l 143; kill -l TERM"

    assert await shell(instance, command) == (
        " 1) SIGHUP\t 2) SIGINT\t 3) SIGQUIT\t 4) SIGILL\t 5) SIGTRAP\n"
        " 6) SIGABRT\t 7) SIGBUS\t 8) SIGFPE\t 9) SIGKILL\t10) SIGUSR1\n"
        "11) SIGSEGV\t12) SIGUSR2\t13) SIGPIPE\t14) SIGALRM\t15) SIGTERM\n"
        "TERM\nTERM\n15\n",
        "",
        0,
    )


async def test_kill_of_a_missing_process_says_so(instance: InMemorySandboxInstance) -> None:
    stdout, stderr, code = await shell(instance, "kill -0 $$ 99999; echo $?; kill 99999; echo $?")

    assert (stdout, code) == ("0\n1\n", 0)
    assert stderr.count("kill: (99999) - No such process\n") == 2


# -- jobs and wait ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "stdout"),
    [
        ('(exit 3) & wait $!; echo "rc=$?"', "rc=3\n"),
        ("false & wait $!; echo $?; wait $!; echo $?", "1\n1\n"),
        ('(exit 2) & echo "started $?"; (exit 7) & wait; echo "all $?"', "started 0\nall 0\n"),
        ("x=1; x=2 & wait; echo $x", "1\n"),
        ("{ sleep 0.1; echo late; } & echo first; wait", "first\nlate\n"),
    ],
    ids=["status", "status-again", "all", "subshell", "concurrent"],
)
async def test_a_job_runs_in_a_subshell_and_wait_returns_its_status(
    instance: InMemorySandboxInstance, command: str, stdout: str
) -> None:
    assert await shell(instance, command) == (stdout, "", 0)


@pytest.mark.parametrize(
    ("command", "stdout"),
    [
        ('sleep 5 & pid=$!; kill "$pid"; wait "$pid"; echo "status $?"', "status 143\n"),
        ("sleep 5 & kill -0 $! && echo alive; kill $!; wait; echo done", "alive\ndone\n"),
        ("(sleep 5; echo never) & kill %1; wait; echo killed", "killed\n"),
        ("sleep 5 & sleep 5 & kill $(jobs -p); wait; echo done", "done\n"),
    ],
    ids=["term", "probe", "jobspec", "jobs-p"],
)
async def test_kill_ends_a_running_job(
    instance: InMemorySandboxInstance, command: str, stdout: str
) -> None:
    assert await shell(instance, command) == (stdout, "", 0)


async def test_wait_for_what_is_not_a_job_fails_with_127(
    instance: InMemorySandboxInstance,
) -> None:
    stdout, stderr, code = await shell(instance, "wait 12345; echo $?; wait %3; echo $?")

    assert (stdout, code) == ("127\n127\n", 0)
    assert "wait: pid 12345 is not a child of this shell\n" in stderr
    assert "wait: %3: no such job\n" in stderr


async def test_fg_and_bg_say_there_is_no_job_control(instance: InMemorySandboxInstance) -> None:
    stdout, stderr, code = await shell(instance, "fg; echo $?; bg; echo $?")

    assert (stdout, stderr, code) == (
        "1\n1\n",
        "bash: fg: no job control\nbash: bg: no job control\n",
        0,
    )


async def test_stopping_a_job_is_refused_naming_the_provider(
    instance: InMemorySandboxInstance,
) -> None:
    # bash stops the job (exit 0); the in-memory shell cannot stop a task and says so
    stdout, stderr, code = await shell(instance, "sleep 5 & kill -STOP $!; echo $?; kill $!")

    assert (stdout, code) == ("1\n", 0)
    assert "in-memory sandbox" in stderr
    assert 'provider = "docker"' in stderr


# -- process substitution --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "stdout"),
    [
        ("wc -l < <(seq 5)", "5\n"),
        ("while read -r l; do echo \"<$l>\"; done < <(printf 'a\\nb\\n')", "<a>\n<b>\n"),
        ('n=0; while read -r _; do n=$((n + 1)); done < <(seq 3); echo "$n"', "3\n"),
        ("mapfile -t arr < <(printf 'x\\ny\\n'); echo \"${#arr[@]} ${arr[1]}\"", "2 y\n"),
    ],
    ids=["wc", "while-read", "loop-variable", "mapfile"],
)
async def test_a_process_substitution_can_be_redirected_from(
    instance: InMemorySandboxInstance, command: str, stdout: str
) -> None:
    assert await shell(instance, command) == (stdout, "", 0)


async def test_a_process_substitution_is_a_dev_fd_file_while_its_command_runs(
    instance: InMemorySandboxInstance,
) -> None:
    # and leaves nothing behind (just-bash left /tmp/proc_sub_* files)
    command = "echo <(true) <(true); cat <(echo a) <(echo b); ls /tmp"

    assert await shell(instance, command) == ("/dev/fd/63 /dev/fd/62\na\nb\n", "", 0)


async def test_an_output_process_substitution_reads_what_was_written(
    instance: InMemorySandboxInstance,
) -> None:
    command = "printf 'b\\na\\n' | tee >(sort) > /dev/null"

    assert await shell(instance, command) == ("a\nb\n", "", 0)


# -- errors that end the shell or the line ------------------------------------------------------------


async def test_a_required_variable_ends_the_command_line_with_127(
    instance: InMemorySandboxInstance,
) -> None:
    command = 'echo a; : "${REQ:?REQ must be set}"; echo never'

    assert await shell(instance, command) == ("a\n", "bash: line 1: REQ: REQ must be set\n", 127)


async def test_a_required_variable_in_a_subshell_ends_only_the_subshell(
    instance: InMemorySandboxInstance,
) -> None:
    command = 'f() { : "${1:?need arg}"; echo ok; }; f x; (f); echo "sub $?"'

    stdout, stderr, code = await shell(instance, command)

    assert (stdout, code) == ("ok\nsub 1\n", 0)
    assert "1: need arg\n" in stderr


async def test_an_unbound_variable_under_set_u_ends_the_shell_keeping_its_output(
    instance: InMemorySandboxInstance,
) -> None:
    command = 'set -u; f() { echo "${1:-def}" "${#}"; }; f; echo "$u"; echo after'

    assert await shell(instance, command) == (
        "def 0\n",
        "bash: line 1: u: unbound variable\n",
        127,
    )


async def test_an_arithmetic_error_ends_only_its_line(instance: InMemorySandboxInstance) -> None:
    command = "echo $((1 / 0)); echo same\necho next $?\necho $((1+)); echo same\necho next $?"

    stdout, stderr, code = await shell(instance, command)

    assert (stdout, code) == ("next 1\nnext 1\n", 0)
    assert "division by 0" in stderr
    assert "syntax error" in stderr


async def test_output_of_a_function_that_exits_follows_its_redirections(
    instance: InMemorySandboxInstance,
) -> None:
    command = "f() { echo out; echo err >&2; exit 6; }; f 2>/dev/null"

    assert await shell(instance, command) == ("out\n", "", 6)


# -- set -e ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "stdout"),
    [
        ("set -e; f() { false; echo in f; }; f && echo y; echo end", "in f\ny\nend\n"),
        ("set -e; f() { false; echo in f; }; f || echo y; echo end", "in f\nend\n"),
        ("set -e; f() { false; echo in f; }; ! f; echo end $?", "in f\nend 1\n"),
        ("set -e; { false; echo in group; } || echo rescued; echo end", "in group\nend\n"),
    ],
    ids=["and", "or", "not", "group"],
)
async def test_set_e_is_ignored_in_a_list_but_its_last_pipeline(
    instance: InMemorySandboxInstance, command: str, stdout: str
) -> None:
    assert await shell(instance, command) == (stdout, "", 0)


async def test_set_e_is_off_in_a_command_substitution(instance: InMemorySandboxInstance) -> None:
    command = 'set -e; x=$(false; echo in); echo "end $x"'

    assert await shell(instance, command) == ("end in\n", "", 0)


async def test_set_capital_e_is_accepted(instance: InMemorySandboxInstance) -> None:
    assert await shell(instance, "set -eEuo pipefail; echo $?") == ("0\n", "", 0)


# -- arithmetic ------------------------------------------------------------------------------------


async def test_recursion_with_arithmetic_in_a_functions_arguments(
    instance: InMemorySandboxInstance,
) -> None:
    command = (
        'fact() { if [ "$1" -le 1 ]; then echo 1; else local p; p=$(fact $(($1 - 1))); '
        "echo $(($1 * p)); fi; }; fact 6"
    )

    assert await shell(instance, command) == ("720\n", "", 0)


async def test_a_comparison_is_not_an_assignment(instance: InMemorySandboxInstance) -> None:
    command = (
        "sum() { local n=$1; if ((n == 0)); then echo 0; return; fi; local r; "
        "r=$(sum $((n - 1))); echo $((n + r)); }; sum 20"
    )

    assert await shell(instance, command) == ("210\n", "", 0)


@pytest.mark.parametrize(
    ("command", "stdout"),
    [
        ('declare -i n=5; n=n+3; echo "$n"; n+=2; echo "$n"', "8\n10\n"),
        ("f() { local -i k; k=2+3; local -i j=4*2; echo $k $j; }; f", "5 8\n"),
    ],
    ids=["declare", "local"],
)
async def test_an_integer_variable_evaluates_what_is_assigned(
    instance: InMemorySandboxInstance, command: str, stdout: str
) -> None:
    assert await shell(instance, command) == (stdout, "", 0)


async def test_local_without_a_value_is_unset(instance: InMemorySandboxInstance) -> None:
    command = 'x=1; f() { local x; echo "${x-unset}"; x=2; echo $x; }; f; echo $x'

    assert await shell(instance, command) == ("unset\n2\n1\n", "", 0)


async def test_arithmetic_wraps_at_64_bits(instance: InMemorySandboxInstance) -> None:
    command = (
        "echo $((9223372036854775807 + 1)) $((2**64)) $((1 << 70)) "
        "$((-9223372036854775808 / -1)) $(( 7 / -2 )) $(( -7 % 3 ))"
    )

    assert await shell(instance, command) == (
        "-9223372036854775808 0 64 -9223372036854775808 -3 -1\n",
        "",
        0,
    )


async def test_a_variable_holding_an_expression_is_evaluated(
    instance: InMemorySandboxInstance,
) -> None:
    command = 'x="2+3"; echo $(( x * 2 )) $(( "5" + 1 ))'

    assert await shell(instance, command) == ("10 6\n", "", 0)
