"""Scripts run as bash runs them: ``sh``/``bash`` with a file, ``-c`` or stdin, files run as
commands, ``source``, ``exit`` and ``exec``, through the real provider on asyncio and trio.

Every expected output below is what GNU bash 5.2 printed for the same command line in a folder
holding the same files (``bash -c '<command line>'``, with ``LC_ALL=C``); ``sh`` is expected to
behave as bash does (the in-memory shell has one shell).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import pytest
from click.testing import CliRunner

from pai.core.cli import create_cli
from pai.core.testing import reset_plugins
from pai.sandbox.provider import FileWrite
from pai.sandbox_inmemory import InMemorySandboxInstance

IF_SCRIPT = 'if [ ! -f p ]; then\n  echo "no pkg"\nfi\necho end\n'
ARGS_SCRIPT = 'echo "0=$0 #=$#"\nfor a in "$@"; do echo "[$a]"; done\necho "star=$*"\n'


async def shell(
    instance: InMemorySandboxInstance,
    command: str,
    files: Mapping[str, str] | None = None,
    *,
    stdin: bytes | None = None,
    executable: tuple[str, ...] = (),
) -> tuple[str, str, int]:
    """``command`` run in /workspace after writing ``files`` there (``executable`` ones 0755):
    its stdout, stderr and exit code."""
    if files:
        await instance.write_files(
            [
                FileWrite(
                    f"/workspace/{name}",
                    text.encode(),
                    mode=0o755 if name in executable else 0o644,
                )
                for name, text in files.items()
            ]
        )
    result = await instance.run(
        command, cwd="/workspace", env={}, stdin=stdin, timeout=30, output_limit=1 << 20
    )
    return result.stdout.decode(), result.stderr.decode(), result.exit_code


# -- the script goes whole to the parser -----------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("command", ["sh s.sh", "bash s.sh", 'sh -c "$(cat s.sh)"'])
async def test_a_script_with_a_multi_line_if_runs(
    instance: InMemorySandboxInstance, command: str
) -> None:
    assert await shell(instance, command, {"s.sh": IF_SCRIPT}) == ("no pkg\nend\n", "", 0)


@pytest.mark.anyio
async def test_heredocs_comments_and_continuations_in_a_script_file(
    instance: InMemorySandboxInstance,
) -> None:
    script = (
        "cat <<EOF\nline $1 # not a comment\n  indented\nEOF\n"
        "cat <<-X\n\tTabbed\n\tX\n"
        "echo one \\\n  continued # a comment\n"
        "# whole line\n"
        'echo "#quoted" # trailing\n'
    )

    assert await shell(instance, "bash hd.sh arg", {"hd.sh": script}) == (
        "line arg # not a comment\n  indented\nTabbed\none continued\n#quoted\n",
        "",
        0,
    )


@pytest.mark.anyio
async def test_a_syntax_error_fails_the_child_only_and_the_caller_keeps_its_output(
    instance: InMemorySandboxInstance,
) -> None:
    bad = "echo before\nif true; then\n  echo x\nfi fi\necho after\n"

    assert await shell(instance, "ls; sh bad.sh; echo exit=$?", {"bad.sh": bad}) == (
        "bad.sh\nbefore\nexit=2\n",
        "bad.sh: line 4: syntax error near unexpected token `fi'\nbad.sh: line 4: `fi fi'\n",
        0,
    )


@pytest.mark.anyio
async def test_a_script_that_ends_inside_an_if_says_unexpected_end_of_file(
    instance: InMemorySandboxInstance,
) -> None:
    eof = "echo before\nif true; then\n  echo x\n"

    assert await shell(instance, "bash eof.sh; echo exit=$?", {"eof.sh": eof}) == (
        "before\nexit=2\n",
        "eof.sh: line 4: syntax error: unexpected end of file\n",
        0,
    )


@pytest.mark.anyio
async def test_a_syntax_error_in_bash_c_names_the_line_and_runs_the_lines_before(
    instance: InMemorySandboxInstance,
) -> None:
    assert await shell(instance, "bash -c 'echo a\nfi\necho b'; echo exit=$?") == (
        "a\nexit=2\n",
        "bash: -c: line 2: syntax error near unexpected token `fi'\nbash: -c: line 2: `fi'\n",
        0,
    )


@pytest.mark.anyio
async def test_a_syntax_error_on_the_first_line_runs_nothing_of_that_line(
    instance: InMemorySandboxInstance,
) -> None:
    assert await shell(instance, "bash -c 'echo a; fi'; echo exit=$?") == (
        "exit=2\n",
        "bash: -c: line 1: syntax error near unexpected token `fi'\n"
        "bash: -c: line 1: `echo a; fi'\n",
        0,
    )


@pytest.mark.anyio
async def test_a_syntax_error_in_the_command_line_itself_runs_the_lines_before(
    instance: InMemorySandboxInstance,
) -> None:
    assert await shell(instance, "echo a\nfi\necho b") == (
        "a\n",
        "bash: -c: line 2: syntax error near unexpected token `fi'\nbash: -c: line 2: `fi'\n",
        2,
    )


@pytest.mark.anyio
async def test_bash_n_checks_the_syntax_without_running(
    instance: InMemorySandboxInstance,
) -> None:
    files = {"bad.sh": "echo a\nfi\n", "s.sh": IF_SCRIPT}

    assert await shell(instance, "bash -n bad.sh; echo rc=$?; bash -n s.sh; echo rc=$?", files) == (
        "rc=2\nrc=0\n",
        "bad.sh: line 2: syntax error near unexpected token `fi'\nbad.sh: line 2: `fi'\n",
        0,
    )


# -- scripts read from stdin ----------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("command", ["sh < s.sh; echo rc=$?", "cat s.sh | bash; echo rc=$?"])
async def test_a_script_fed_on_stdin_runs(instance: InMemorySandboxInstance, command: str) -> None:
    assert await shell(instance, command, {"s.sh": IF_SCRIPT}) == ("no pkg\nend\nrc=0\n", "", 0)


@pytest.mark.anyio
async def test_sh_s_takes_its_arguments_as_positional_parameters(
    instance: InMemorySandboxInstance,
) -> None:
    command = "printf 'echo \"$0 $# [$1] [$2]\"\\n' | bash -s a 'b c'"

    assert await shell(instance, command) == ("bash 2 [a] [b c]\n", "", 0)


@pytest.mark.anyio
async def test_a_script_read_from_stdin_gives_its_readers_the_rest_of_itself(
    instance: InMemorySandboxInstance,
) -> None:
    script = 'read x\nhello there\necho "got $x"\necho end\n'

    assert await shell(instance, "bash < rd.sh; echo rc=$?", {"rd.sh": script}) == (
        "got hello there\nend\nrc=0\n",
        "",
        0,
    )


@pytest.mark.anyio
async def test_a_syntax_error_in_a_script_read_from_stdin(
    instance: InMemorySandboxInstance,
) -> None:
    assert await shell(instance, "printf 'echo a\\nfi\\necho b\\n' | bash; echo exit=$?") == (
        "a\nexit=2\n",
        "bash: line 2: syntax error near unexpected token `fi'\nbash: line 2: `fi'\n",
        0,
    )


# -- stdin reaches the child ------------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_commands_stdin_reaches_a_nested_shell(
    instance: InMemorySandboxInstance,
) -> None:
    assert await shell(instance, "sh -c 'cat > g; wc -c < g'", stdin=b"abc\n") == ("4\n", "", 0)


@pytest.mark.anyio
async def test_a_pipe_reaches_a_nested_shell(instance: InMemorySandboxInstance) -> None:
    command = "printf 'a\\nb\\n' | sh -c 'while read l; do echo \"<$l>\"; done'"

    assert await shell(instance, command) == ("<a>\n<b>\n", "", 0)


@pytest.mark.anyio
async def test_what_a_nested_shell_reads_is_gone_for_its_caller(
    instance: InMemorySandboxInstance,
) -> None:
    command = '{ sh -c \'read a; echo "child $a"\'; read b; echo "parent $b"; }'

    assert await shell(instance, command, stdin=b"one\ntwo\n") == (
        "child one\nparent two\n",
        "",
        0,
    )


def test_pai_sandbox_exec_i_feeds_piped_stdin_to_sh_c(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in list(os.environ):
        if name.startswith("PAI_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("PAI_LOAD_PLUGINS", "pai-sandbox,pai-sandbox-inmemory")
    monkeypatch.chdir(tmp_path)
    reset_plugins()
    try:
        result = CliRunner().invoke(
            create_cli(),
            ["sandbox", "exec", "-i", "--", "sh", "-c", "cat > /workspace/x; wc -c < /workspace/x"],
            input="abc\n",
            catch_exceptions=False,
        )
    finally:
        reset_plugins()

    assert (result.exit_code, result.stdout) == (0, "4\n")


# -- a child is a new shell -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_script_file_gets_its_own_positional_parameters(
    instance: InMemorySandboxInstance,
) -> None:
    command = 'set -- p q r s t; bash args.sh "a b" c "" d'

    assert await shell(instance, command, {"args.sh": ARGS_SCRIPT}) == (
        "0=args.sh #=4\n[a b]\n[c]\n[]\n[d]\nstar=a b c  d\n",
        "",
        0,
    )


@pytest.mark.anyio
async def test_sh_c_takes_its_name_and_arguments(instance: InMemorySandboxInstance) -> None:
    command = (
        "set -- p q r; "
        'sh -c \'echo "0=$0 #=$#"; for a in "$@"; do echo "[$a]"; done\' name \'x y\' z; '
        "sh -c 'echo \"$0 $#\"'"
    )

    assert await shell(instance, command) == ("0=name #=2\n[x y]\n[z]\nsh 0\n", "", 0)


@pytest.mark.anyio
async def test_a_child_sees_exported_variables_and_its_own_assignments_only(
    instance: InMemorySandboxInstance,
) -> None:
    child = 'echo "u=${U-unset} e=${E-unset} t=${T-unset}"\n'

    assert await shell(instance, "U=1; export E=2; T=3 bash st.sh", {"st.sh": child}) == (
        "u=unset e=2 t=3\n",
        "",
        0,
    )


@pytest.mark.anyio
async def test_a_child_sees_exported_functions_only(instance: InMemorySandboxInstance) -> None:
    command = "f() { echo \"f:$1\"; }; g() { echo g; }; export -f f; bash -c 'f x; g'; echo rc=$?"

    stdout, stderr, _ = await shell(instance, command)

    assert stdout == "f:x\nrc=127\n"
    assert stderr.startswith("bash: g: command not found")


@pytest.mark.anyio
async def test_the_callers_set_e_does_not_apply_in_a_child(
    instance: InMemorySandboxInstance,
) -> None:
    command = "set -e; bash -c 'false; echo child-continues'; echo parent-continues"

    assert await shell(instance, command) == ("child-continues\nparent-continues\n", "", 0)


@pytest.mark.anyio
async def test_cd_and_variables_in_a_child_stay_there(instance: InMemorySandboxInstance) -> None:
    files = {"c.sh": "cd /; y=1; pwd\n"}
    command = (
        "cd /tmp; bash -c 'cd /; x=1; pwd'; /workspace/c.sh; pwd; "
        'echo "x=${x-unset} y=${y-unset}"'
    )

    assert await shell(instance, command, files, executable=("c.sh",)) == (
        "/\n/\n/tmp\nx=unset y=unset\n",
        "",
        0,
    )


@pytest.mark.anyio
async def test_exit_ends_only_the_child(instance: InMemorySandboxInstance) -> None:
    assert await shell(instance, "bash -c 'echo a; exit 5; echo b'; echo rc=$?") == (
        "a\nrc=5\n",
        "",
        0,
    )


@pytest.mark.anyio
async def test_exec_ends_only_the_child_with_the_commands_status(
    instance: InMemorySandboxInstance,
) -> None:
    command = "bash -c 'exec echo replaced; echo no'; echo rc=$?"

    assert await shell(instance, command) == ("replaced\nrc=0\n", "", 0)


@pytest.mark.anyio
async def test_env_assignments_reach_a_child_as_exported_variables(
    instance: InMemorySandboxInstance,
) -> None:
    command = "x=unexported; env FOO=1 sh -c 'echo \"foo=$FOO x=${x-unset}\"'"

    assert await shell(instance, command) == ("foo=1 x=unset\n", "", 0)


@pytest.mark.anyio
async def test_a_script_may_run_itself_recursively(instance: InMemorySandboxInstance) -> None:
    script = 'if [ "$1" -lt 5 ]; then\n  echo "level $1"\n  bash rec.sh $(($1 + 1))\nfi\n'

    assert await shell(instance, "bash rec.sh 1", {"rec.sh": script}) == (
        "level 1\nlevel 2\nlevel 3\nlevel 4\n",
        "",
        0,
    )


@pytest.mark.anyio
async def test_a_script_that_runs_itself_forever_stops_at_the_call_depth_limit(
    instance: InMemorySandboxInstance,
) -> None:
    script = "bash rec.sh\n"

    _, stderr, exit_code = await shell(instance, "bash rec.sh", {"rec.sh": script})

    assert exit_code == 126
    assert "too many nested shells (>100)" in stderr


@pytest.mark.anyio
async def test_a_child_script_refuses_substitutions_in_array_subscripts_with_a_message(
    instance: InMemorySandboxInstance,
) -> None:
    files = {"arr.sh": 'a=(1 2 3); i=0; echo "${a[$((i+1))]}"\n'}

    stdout, stderr, _ = await shell(instance, "bash arr.sh; echo rc=$?", files)

    assert stdout == "rc=2\n"
    assert "inside an array subscript are not supported by the in-memory shell" in stderr


# -- options --------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_bash_e_stops_the_child_at_a_failure(instance: InMemorySandboxInstance) -> None:
    assert await shell(instance, "bash -e -c 'false; echo no'; echo rc=$?") == ("rc=1\n", "", 0)


@pytest.mark.anyio
async def test_bash_o_pipefail_applies_to_the_child_only(
    instance: InMemorySandboxInstance,
) -> None:
    command = "bash -o pipefail -c 'false | true'; echo rc=$?; bash -c 'false | true'; echo rc=$?"

    assert await shell(instance, command) == ("rc=1\nrc=0\n", "", 0)


@pytest.mark.anyio
async def test_combined_flags_euo_pipefail(instance: InMemorySandboxInstance) -> None:
    command = "bash -euo pipefail -c 'false | true; echo no'; echo rc=$?"

    assert await shell(instance, command) == ("rc=1\n", "", 0)


@pytest.mark.anyio
async def test_an_invalid_option_exits_2(instance: InMemorySandboxInstance) -> None:
    stdout, stderr, _ = await shell(instance, "bash -z; echo rc=$?")

    assert stdout == "rc=2\n"
    assert stderr.startswith("bash: -z: invalid option\nUsage:\tbash [GNU long option]")


@pytest.mark.anyio
async def test_an_interactive_shell_is_refused_naming_the_provider(
    instance: InMemorySandboxInstance,
) -> None:
    stdout, stderr, _ = await shell(instance, "bash -i; echo rc=$?")

    assert stdout == "rc=2\n"
    assert "not supported by the in-memory sandbox" in stderr
    assert 'provider = "docker"' in stderr


@pytest.mark.anyio
async def test_a_script_file_that_cannot_be_read_fails_as_in_bash(
    instance: InMemorySandboxInstance,
) -> None:
    assert await shell(instance, "bash nope.sh; echo rc=$?; bash /tmp; echo rc=$?") == (
        "rc=127\nrc=126\n",
        "bash: nope.sh: No such file or directory\n/tmp: /tmp: Is a directory\n",
        0,
    )


# -- files run as commands ------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_file_with_a_sh_shebang_runs_with_its_path_as_0(
    instance: InMemorySandboxInstance,
) -> None:
    files = {"x.sh": '#!/bin/sh\necho "x $0 $1 v=${v-unset}"\n'}

    assert await shell(instance, "v=1; ./x.sh q", files, executable=("x.sh",)) == (
        "x ./x.sh q v=unset\n",
        "",
        0,
    )


@pytest.mark.anyio
async def test_a_file_run_by_its_absolute_path(instance: InMemorySandboxInstance) -> None:
    files = {"x.sh": '#!/bin/bash\nif true; then\n  echo "abs $0 v=${v-unset}"\nfi\n'}

    assert await shell(instance, "v=1; /workspace/x.sh", files, executable=("x.sh",)) == (
        "abs /workspace/x.sh v=unset\n",
        "",
        0,
    )


@pytest.mark.anyio
async def test_an_env_bash_shebang_starts_a_new_shell(instance: InMemorySandboxInstance) -> None:
    files = {"b.sh": '#!/usr/bin/env bash\nset -e\necho "b $0"\nfalse\necho no\n'}

    assert await shell(instance, "./b.sh; echo rc=$?", files, executable=("b.sh",)) == (
        "b ./b.sh\nrc=1\n",
        "",
        0,
    )


@pytest.mark.anyio
async def test_a_shebang_with_an_option_passes_it_to_the_shell(
    instance: InMemorySandboxInstance,
) -> None:
    files = {"be.sh": '#!/bin/bash -e\necho "b $0"\nfalse\necho no\n'}

    assert await shell(instance, "./be.sh; echo rc=$?", files, executable=("be.sh",)) == (
        "b ./be.sh\nrc=1\n",
        "",
        0,
    )


@pytest.mark.anyio
async def test_a_file_without_a_shebang_runs_in_a_new_bash(
    instance: InMemorySandboxInstance,
) -> None:
    files = {"n.sh": 'echo "n $0 $1 v=${v-unset}"\n'}
    command = "v=parent; ./n.sh a; echo rc=$?"

    assert await shell(instance, command, files, executable=("n.sh",)) == (
        "n ./n.sh a v=unset\nrc=0\n",
        "",
        0,
    )


@pytest.mark.anyio
async def test_a_shebang_naming_another_command_of_the_shell(
    instance: InMemorySandboxInstance,
) -> None:
    files = {"a.sed": "#!/bin/sed -f\ns/hi/ho/\n"}

    assert await shell(instance, "echo hi | ./a.sed", files, executable=("a.sed",)) == (
        "ho\n",
        "",
        0,
    )


@pytest.mark.anyio
async def test_a_file_without_execute_permission_is_refused_with_126(
    instance: InMemorySandboxInstance,
) -> None:
    assert await shell(instance, "./nx.sh; echo rc=$?", {"nx.sh": "echo hi\n"}) == (
        "rc=126\n",
        "bash: ./nx.sh: Permission denied\n",
        0,
    )


@pytest.mark.anyio
async def test_a_missing_file_path_is_no_such_file(instance: InMemorySandboxInstance) -> None:
    assert await shell(instance, "./nope.sh; echo rc=$?") == (
        "rc=127\n",
        "bash: ./nope.sh: No such file or directory\n",
        0,
    )


@pytest.mark.anyio
async def test_a_shebang_naming_a_program_the_sandbox_lacks_says_so(
    instance: InMemorySandboxInstance,
) -> None:
    files = {"p.py": "#!/usr/bin/env python3\nprint(1)\n"}

    stdout, stderr, _ = await shell(instance, "./p.py; echo rc=$?", files, executable=("p.py",))

    assert stdout == "rc=127\n"
    assert stderr.startswith("/usr/bin/env: 'python3': No such file or directory")
    assert "the in-memory sandbox has no python3" in stderr
    assert 'provider = "docker"' in stderr


# -- source and . ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_source_sets_positional_parameters_and_shares_state(
    instance: InMemorySandboxInstance,
) -> None:
    files = {"s2.sh": 'echo "$# $1 $2"\nv=set\nreturn 3\necho no\n'}
    command = "set -- x y; source ./s2.sh 'a b' c; echo \"rc=$? $@ v=$v\""

    assert await shell(instance, command, files) == ("2 a b c\nrc=3 x y v=set\n", "", 0)


@pytest.mark.anyio
async def test_a_syntax_error_in_a_sourced_file(instance: InMemorySandboxInstance) -> None:
    files = {"bad.sh": "echo in\nfi\necho after\n"}

    command = "source bad.sh; echo rc=$?; . ./bad.sh; echo rc=$?"

    assert await shell(instance, command, files) == (
        "in\nrc=2\nin\nrc=2\n",
        "bad.sh: line 2: syntax error near unexpected token `fi'\nbad.sh: line 2: `fi'\n"
        "./bad.sh: line 2: syntax error near unexpected token `fi'\n./bad.sh: line 2: `fi'\n",
        0,
    )


@pytest.mark.anyio
async def test_bash_source_names_the_file_being_read_so_a_main_guard_works(
    instance: InMemorySandboxInstance,
) -> None:
    tool = (
        "#!/usr/bin/env bash\n"
        'helper() {\n  echo "helper: $1"\n}\n'
        'main() {\n  helper "main $1"\n}\n'
        'if [[ "${BASH_SOURCE[0]}" == "${0}" ]]; then\n  main "$@"\nfi\n'
    )
    command = "bash tool.sh run\nsource ./tool.sh\nhelper sourced"

    assert await shell(instance, command, {"tool.sh": tool}) == (
        "helper: main run\nhelper: sourced\n",
        "",
        0,
    )


@pytest.mark.anyio
async def test_eval_reports_a_syntax_error_as_bash_does(instance: InMemorySandboxInstance) -> None:
    assert await shell(instance, "eval fi; echo rc=$?") == (
        "rc=2\n",
        "bash: eval: line 1: syntax error near unexpected token `fi'\nbash: eval: line 1: `fi'\n",
        0,
    )


# -- exit keeps what was printed before ------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("{ echo a; exit 3; }; echo no", ("a\n", "", 3)),
        ("if true; then echo a; exit 4; fi; echo no", ("a\n", "", 4)),
        ("for i in 1 2 3; do echo $i; [ $i = 2 ] && exit 4; done; echo no", ("1\n2\n", "", 4)),
        ("f() { echo top; exit 6; echo no; }; f; echo no", ("top\n", "", 6)),
        ("echo a && exit 3; echo no", ("a\n", "", 3)),
        (
            "bash -c 'f() { echo f1; exit 7; echo no; }; f; echo no'; echo rc=$?",
            ("f1\nrc=7\n", "", 0),
        ),
    ],
    ids=["block", "if", "loop", "function", "and-list", "function-in-child"],
)
async def test_exit_keeps_the_output_printed_before_it(
    instance: InMemorySandboxInstance, command: str, expected: tuple[str, str, int]
) -> None:
    assert await shell(instance, command) == expected


@pytest.mark.anyio
async def test_exit_in_a_redirected_block_writes_to_the_redirection(
    instance: InMemorySandboxInstance,
) -> None:
    command = "bash -c '{ echo a; exit 3; } > out.txt'; echo rc=$?; cat out.txt"

    assert await shell(instance, command) == ("rc=3\na\n", "", 0)


@pytest.mark.anyio
async def test_a_redirected_loop_writes_to_the_redirection(
    instance: InMemorySandboxInstance,
) -> None:
    command = "for i in 1 2; do echo $i; done > f; echo ---; cat f"

    assert await shell(instance, command) == ("---\n1\n2\n", "", 0)


@pytest.mark.anyio
async def test_a_failed_redirection_names_its_target_as_written(
    instance: InMemorySandboxInstance,
) -> None:
    # bash -c 'f=nope/h; echo x > nope/f; echo x >> ./a/../$f' printed
    # "bash: nope/f: No such file or directory", "bash: ./a/../nope/h: No such file or directory"
    command = "f=nope/h; echo x > nope/f; echo x >> ./a/../$f"

    assert await shell(instance, command) == (
        "",
        "bash: nope/f: No such file or directory\nbash: ./a/../nope/h: No such file or directory\n",
        1,
    )


# -- quotes inside $(...) inside quotes --------------------------------------------------------------


@pytest.mark.anyio
async def test_script_dir_idiom_with_nested_quotes(instance: InMemorySandboxInstance) -> None:
    files = {"d/x.sh": 'SCRIPT_DIR="$(cd "$(dirname "$0")" && pwd)"\necho "$SCRIPT_DIR"\n'}

    assert await shell(instance, "bash d/x.sh", files) == ("/workspace/d\n", "", 0)


@pytest.mark.anyio
async def test_quotes_and_parentheses_inside_substitutions(
    instance: InMemorySandboxInstance,
) -> None:
    command = (
        'echo x"$(echo "a b")"y; echo "$(echo ")")"; a="$(echo "}")"; echo "$a"; echo $(echo "a)b")'
    )

    assert await shell(instance, command) == ("xa by\n)\n}\na)b\n", "", 0)
