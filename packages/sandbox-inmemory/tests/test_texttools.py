"""awk, sed, grep and jq behave as the GNU tools and jq do, through the real provider on both
backends.

Each expected text is what the same script printed when run with ``bash -c`` by the host's GNU
bash 5.2, with gawk 5.2.1 as ``awk``, GNU sed 4.9, GNU grep 3.8 and jq 1.6, under ``LC_ALL=C``, in
a fresh temporary folder. A script echoes ``exit=$?`` where the exit code is part of the
behaviour, so the comparison of stdout covers it.
"""

from __future__ import annotations

import pytest

from pai.sandbox import CommandResult, Sandbox, create_sandbox, create_sandbox_session_manager
from pai.sandbox_inmemory import InMemorySandboxProvider

pytestmark = pytest.mark.anyio


@pytest.fixture
def sandbox(provider: InMemorySandboxProvider) -> Sandbox:
    return create_sandbox(create_sandbox_session_manager(provider=provider).handle("thread-1"))


async def sh(sandbox: Sandbox, script: str) -> CommandResult:
    return await sandbox.run_command(script, timeout=60)


# -- awk ---------------------------------------------------------------------------------------------


async def test_awk_field_conditions_compare_numbers(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with gawk 5.2.1 as awk
    script = r"""printf 'alice 30 12\nbob 5 20\ncarol 100 3\n' > d.txt; awk '$3 > 10 {print $1}' d.txt; awk '$2 > $3 {print $1}' d.txt; awk '$2 >= 30' d.txt"""
    result = await sh(sandbox, script)
    assert result.stdout == "alice\nbob\nalice\ncarol\nalice 30 12\ncarol 100 3\n", result.stderr


async def test_awk_compares_as_strings_when_a_side_is_not_numeric(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with gawk 5.2.1 as awk
    script = r"""echo '10 9 abc' | awk '{print ($1 < $2), ($1 < "9"), ($2 < $3), ($1 == 10.0)}'"""
    result = await sh(sandbox, script)
    assert result.stdout == "0 1 1 1\n", result.stderr


async def test_awk_sums_an_array_keyed_by_the_first_field(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with gawk 5.2.1 as awk
    script = r"""printf 'a 1\nb 2\na 3\n' > k.txt; printf 'a x\nc y\n' > m.txt; awk '{s[$1] += $2} END {for (k in s) print k, s[k]}' k.txt | sort; awk '!seen[$1]++' k.txt"""
    result = await sh(sandbox, script)
    assert result.stdout == "a 4\nb 2\na 1\nb 2\n", result.stderr


async def test_awk_nr_fnr_joins_two_files(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with gawk 5.2.1 as awk
    script = r"""printf 'a 1\nb 2\na 3\n' > k.txt; printf 'a x\nc y\n' > m.txt; awk 'NR == FNR {a[$1] = $2; next} $1 in a {print $0, a[$1]}' m.txt k.txt"""
    result = await sh(sandbox, script)
    assert result.stdout == "a 1 x\na 3 x\n", result.stderr


async def test_awk_regex_anchors_and_match_operators(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with gawk 5.2.1 as awk
    script = r"""printf 'apple\nbanana\ncherry\n' | awk '/^b/; /y$/; $0 ~ /an/ {print "has an:", $0} $0 !~ /a/ {print "no a:", $0}'"""
    result = await sh(sandbox, script)
    assert result.stdout == "banana\nhas an: banana\ncherry\nno a: cherry\n", result.stderr


async def test_awk_field_separator_as_a_regex_or_a_tab(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with gawk 5.2.1 as awk
    script = r"""printf 'a:b;c\n' | awk -F'[:;]' '{print $3, NF}'; printf 'x\ty z\n' | awk -F'\t' '{print $2}'; echo 'k=v=w' | awk -F= '{print $2}'"""
    result = await sh(sandbox, script)
    assert result.stdout == "c 3\ny z\nv\n", result.stderr


async def test_awk_printf_formats(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with gawk 5.2.1 as awk
    script = r"""awk 'BEGIN { printf "%-6s|%6.2f|%05d|%x|%c|%e|%s%%|%i\n", "ab", 3.14159, 42, 255, 65, 12345.678, 7, 3.9 }'"""
    result = await sh(sandbox, script)
    assert result.stdout == "ab    |  3.14|00042|ff|A|1.234568e+04|7%|3\n", result.stderr


async def test_awk_ofs_rebuilds_the_record_when_a_field_changes(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with gawk 5.2.1 as awk
    script = r"""echo 'a b c' | awk 'BEGIN {OFS = "-"} {print; $1 = $1; print; $2 = "X"; print; print NF}'; echo 'a b c d' | awk '{NF = 2; print; $5 = "e"; print; print NF}'"""
    result = await sh(sandbox, script)
    assert result.stdout == "a b c\na-b-c\na-X-c\n3\na b\na b   e\n5\n", result.stderr


async def test_awk_split_sub_and_gsub_with_ampersand(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with gawk 5.2.1 as awk
    script = r"""echo 'one,two,three' | awk '{n = split($0, p, ","); print n, p[3]; s = $0; gsub(/o/, "[&]", s); print s; sub(/t/, "\\&"); print}'"""
    result = await sh(sandbox, script)
    assert result.stdout == "3 three\n[o]ne,tw[o],three\none,&wo,three\n", result.stderr


async def test_awk_substr_length_index_and_case(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with gawk 5.2.1 as awk
    script = r"""echo 'Hello World' | awk '{print substr($1, 2, 3), length($2), length, index($0, "o"), toupper($1), tolower($2)}'"""
    result = await sh(sandbox, script)
    assert result.stdout == "ell 5 11 5 HELLO world\n", result.stderr


async def test_awk_getline_reads_a_file(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with gawk 5.2.1 as awk
    script = r"""printf 'l1\nl2\n' > f; awk 'BEGIN { while ((getline line < "f") > 0) n++; print n, line; print close("f") }'"""
    result = await sh(sandbox, script)
    assert result.stdout == "2 l2\n0\n", result.stderr


async def test_awk_prints_integral_numbers_as_integers(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with gawk 5.2.1 as awk
    script = r"""awk 'BEGIN { print 1e6, 0.1 + 0.2, 1 / 3, 2^53 + 1, 100 / 4, -7 % 3, 2^3^2; x = 3.14159; print x "" }'"""
    result = await sh(sandbox, script)
    assert result.stdout == ("1000000 0.3 0.333333 9007199254740992 25 -1 512\n3.14159\n"), (
        result.stderr
    )


async def test_awk_user_functions_recurse_and_fill_arrays(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with gawk 5.2.1 as awk
    script = r"""awk 'function fact(n) { return n <= 1 ? 1 : n * fact(n - 1) } function fill(a, n,   i) { for (i = 1; i <= n; i++) a[i] = i * i } BEGIN { print fact(10); fill(sq, 4); print length(sq), sq[3] }'"""
    result = await sh(sandbox, script)
    assert result.stdout == "3628800\n4 9\n", result.stderr


async def test_awk_range_patterns_and_exit_status(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with gawk 5.2.1 as awk
    script = r"""seq 10 | awk 'NR == 3, NR == 5'; seq 3 | awk '{ exit $1 + 4 } END { print "end" }'; echo $?"""
    result = await sh(sandbox, script)
    assert result.stdout == "3\n4\n5\nend\n5\n", result.stderr


async def test_awk_runs_commands_in_the_same_shell(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with gawk 5.2.1 as awk
    script = r"""awk 'BEGIN { system("echo from system"); print "b" | "sort"; print "a" | "sort"; close("sort"); "echo piped" | getline x; print x }'"""
    result = await sh(sandbox, script)
    assert result.stdout == "from system\na\nb\npiped\n", result.stderr


async def test_awk_missing_input_file_is_fatal(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with gawk 5.2.1 as awk
    script = r'''awk '{ print }' nofile; echo "exit=$?"'''
    result = await sh(sandbox, script)
    assert result.stdout == "exit=2\n", result.stderr
    assert "cannot open file `nofile'" in result.stderr


async def test_awk_syntax_error_exits_1(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with gawk 5.2.1 as awk
    script = r'''awk 'BEGIN { print ( }'; echo "exit=$?"'''
    result = await sh(sandbox, script)
    assert result.stdout == "exit=1\n", result.stderr
    assert "syntax error" in result.stderr


async def test_awk_while_with_a_parenthesised_condition_ends(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with gawk 5.2.1 as awk
    script = (
        r"""awk 'BEGIN { while ((i + 1) < 5) i++; print i; do { j++ } while (j < 3); print j }'"""
    )
    result = await sh(sandbox, script)
    assert result.stdout == "4\n3\n", result.stderr


async def test_awk_uninitialised_values_and_numeric_strings(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with gawk 5.2.1 as awk
    script = r"""echo '0.0 x' | awk '{ if ($1) print "true"; else print "false"; print (y == 0), (y == ""), length(y), $1 + 1 }'"""
    result = await sh(sandbox, script)
    assert result.stdout == "false\n1 1 0 1\n", result.stderr


async def test_awk_gensub_strftime_and_sorted_iteration(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with gawk 5.2.1 as awk
    script = r"""awk 'BEGIN { print gensub(/(o)/, "<\\1>", "g", "foo"); print strftime("%Y-%m-%d %H:%M", 86400, 1); PROCINFO["sorted_in"] = "@ind_str_asc"; a["b"]; a["a"]; a["c"]; for (k in a) printf "%s ", k; print "" }'"""
    result = await sh(sandbox, script)
    assert result.stdout == "f<o><o>\n1970-01-02 00:00\na b c \n", result.stderr


async def test_awk_redirects_output_to_files(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with gawk 5.2.1 as awk
    script = r"""seq 3 | awk '{ print > "out.txt"; print $1 * 2 >> "twice.txt" } END { close("out.txt"); while ((getline l < "out.txt") > 0) printf "%s,", l; print "" }'; cat twice.txt"""
    result = await sh(sandbox, script)
    assert result.stdout == "1,2,3,\n2\n4\n6\n", result.stderr


# -- sed ---------------------------------------------------------------------------------------------


async def test_sed_case_conversion_in_replacements(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with GNU sed 4.9
    script = r"""echo 'hello world' | sed 's/\w\+/\u&/g'; echo 'Hello World' | sed 's/.*/\U&/'; echo 'Hello World' | sed -E 's/(\w+) (\w+)/\L\1\E \U\2/'; echo 'ABC' | sed 's/B/\l&/'"""
    result = await sh(sandbox, script)
    assert result.stdout == "Hello World\nHELLO WORLD\nhello WORLD\nAbC\n", result.stderr


async def test_sed_posix_character_classes(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with GNU sed 4.9
    script = r"""echo 'a  	 b 123 Cd' | sed 's/[[:space:]]\+/_/g; s/[[:digit:]]\{2\}/NN/; s/[[:upper:]]/U/'"""
    result = await sh(sandbox, script)
    assert result.stdout == "a_b_UN3_Cd\n", result.stderr


async def test_sed_numbered_and_global_substitutions(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with GNU sed 4.9
    script = r"""echo 'aaaa' | sed 's/a/b/2'; echo 'aaaa' | sed 's/a/b/g'; echo 'aaaa' | sed 's/a/b/3g'; echo 'abc' | sed 's/b*/X/g'"""
    result = await sh(sandbox, script)
    assert result.stdout == "abaa\nbbbb\naabb\nXaXcX\n", result.stderr


async def test_sed_extended_regex_groups_and_alternation(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with GNU sed 4.9
    script = r"""echo 'key=value' | sed -E 's/^([^=]+)=(.*)$/\2=\1/'; echo 'cat dog' | sed -E 's/(cat|dog)/[\1]/g'; echo 'a+b' | sed 's/a+b/plus/'; echo 'A a' | sed -E 's/a/x/'"""
    result = await sh(sandbox, script)
    assert result.stdout == "value=key\n[cat] [dog]\nplus\nA x\n", result.stderr


async def test_sed_n_with_p_prints_only_selected_lines(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with GNU sed 4.9
    script = r"""seq 6 | sed -n '2,3p'; seq 6 | sed -n '/5/p'; seq 6 | sed -n '$p'; seq 6 | sed -n '0~3p'"""
    result = await sh(sandbox, script)
    assert result.stdout == "2\n3\n5\n6\n3\n6\n", result.stderr


async def test_sed_in_place_edits_the_file(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with GNU sed 4.9
    script = r"""printf 'one\ntwo\n' > f.txt; sed -i 's/o/0/g' f.txt; cat f.txt; sed -i.bak '1d' f.txt; cat f.txt f.txt.bak"""
    result = await sh(sandbox, script)
    assert result.stdout == "0ne\ntw0\ntw0\n0ne\ntw0\n", result.stderr


async def test_sed_address_ranges(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with GNU sed 4.9
    script = (
        r"""seq 8 | sed '/3/,/5/d'; seq 5 | sed '2,+1d'; seq 5 | sed '1,/2/d'; seq 5 | sed '2!d'"""
    )
    result = await sh(sandbox, script)
    assert result.stdout == "1\n2\n6\n7\n8\n1\n4\n5\n3\n4\n5\n2\n", result.stderr


async def test_sed_append_insert_and_change(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with GNU sed 4.9
    script = r"""seq 3 | sed '2a added'; seq 3 | sed '1i\
inserted'; seq 4 | sed '2,3c changed'; seq 2 | sed '$a end'"""
    result = await sh(sandbox, script)
    assert result.stdout == ("1\n2\nadded\n3\ninserted\n1\n2\n3\n1\nchanged\n4\n1\n2\nend\n"), (
        result.stderr
    )


async def test_sed_blocks_hold_space_and_branches(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with GNU sed 4.9
    script = r"""seq 4 | sed '1!G;h;$!d'; seq 3 | sed -n '/2/{s//two/;p}'; seq 4 | sed ':a;N;$!ba;s/\n/+/g'; seq 3 | sed -n 'H;${x;s/\n/,/g;p}'"""
    result = await sh(sandbox, script)
    assert result.stdout == "4\n3\n2\n1\ntwo\n1+2+3+4\n,1,2,3\n", result.stderr


async def test_sed_keeps_a_missing_final_newline(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with GNU sed 4.9
    script = r"""printf 'a\nb' | sed 's/b/B/'; echo '|'; printf 'a\nb' | sed -n p; echo '|'"""
    result = await sh(sandbox, script)
    assert result.stdout == "a\nB|\na\nb|\n", result.stderr


async def test_sed_unknown_command_is_an_error(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with GNU sed 4.9
    script = r'''echo x | sed 'k'; echo "exit=$?"; echo x | sed 's/x/y'; echo "exit=$?"; seq 3 | sed -n '2{p'; echo "exit=$?"'''
    result = await sh(sandbox, script)
    assert result.stdout == "exit=1\nexit=1\nexit=1\n", result.stderr
    assert "unknown command" in result.stderr


async def test_sed_missing_file_exits_2_after_the_others(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with GNU sed 4.9
    script = r'''printf 'l1\nl2\n' > f1; sed 's/l/L/' nofile f1; echo "exit=$?"'''
    result = await sh(sandbox, script)
    assert result.stdout == "L1\nL2\nexit=2\n", result.stderr
    assert "can't read nofile" in result.stderr


# -- grep --------------------------------------------------------------------------------------------


async def test_grep_o_prints_every_match(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with GNU grep 3.8
    script = r"""echo 'a1b22c333' | grep -o '[0-9]\+'; echo 'foo food' | grep -o 'fo*'; echo 'abcd' | grep -oE 'ab|abcd'"""
    result = await sh(sandbox, script)
    assert result.stdout == "1\n22\n333\nfoo\nfoo\nabcd\n", result.stderr


async def test_grep_r_names_files_from_the_operand(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with GNU grep 3.8
    script = r"""mkdir -p src/sub && printf 'foo bar\nbaz foo\nqux\n' > src/a.txt && printf 'Foo\nfood\n' > src/sub/b.txt && printf 'none\n' > src/c.txt; grep -r foo src | sort; grep -rn foo . | sort; cd src && grep -r foo | sort"""
    result = await sh(sandbox, script)
    assert result.stdout == (
        "src/a.txt:baz foo\n"
        "src/a.txt:foo bar\n"
        "src/sub/b.txt:food\n"
        "./src/a.txt:1:foo bar\n"
        "./src/a.txt:2:baz foo\n"
        "./src/sub/b.txt:2:food\n"
        "a.txt:baz foo\n"
        "a.txt:foo bar\n"
        "sub/b.txt:food\n"
    ), result.stderr


async def test_grep_l_c_and_n(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with GNU grep 3.8
    script = r"""mkdir -p src/sub && printf 'foo bar\nbaz foo\nqux\n' > src/a.txt && printf 'Foo\nfood\n' > src/sub/b.txt && printf 'none\n' > src/c.txt; grep -rl foo src | sort; grep -c foo src/a.txt src/c.txt; grep -n baz src/a.txt; grep -L foo src/*.txt"""
    result = await sh(sandbox, script)
    assert result.stdout == (
        "src/a.txt\nsrc/sub/b.txt\nsrc/a.txt:2\nsrc/c.txt:0\n2:baz foo\nsrc/c.txt\n"
    ), result.stderr


async def test_grep_v_w_i_and_x(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with GNU grep 3.8
    script = r"""mkdir -p src/sub && printf 'foo bar\nbaz foo\nqux\n' > src/a.txt && printf 'Foo\nfood\n' > src/sub/b.txt && printf 'none\n' > src/c.txt; grep -v foo src/a.txt; grep -w foo src/sub/b.txt; echo "exit=$?"; grep -i FOO src/sub/b.txt; grep -x food src/sub/b.txt; printf 'ab\nxc\n' | grep -x -e ab -e c"""
    result = await sh(sandbox, script)
    assert result.stdout == "qux\nexit=1\nFoo\nfood\nfood\nab\n", result.stderr


async def test_grep_extended_and_fixed_patterns(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with GNU grep 3.8
    script = r"""mkdir -p src/sub && printf 'foo bar\nbaz foo\nqux\n' > src/a.txt && printf 'Foo\nfood\n' > src/sub/b.txt && printf 'none\n' > src/c.txt; grep -E 'fo+|qu' src/a.txt; grep -F 'o.' src/a.txt; echo "exit=$?"; echo 'a.b' | grep -F '.'; grep -e qux -e baz src/a.txt; printf 'a\nb\nc\n' | grep -F -e a -e b"""
    result = await sh(sandbox, script)
    assert result.stdout == "foo bar\nbaz foo\nqux\nexit=1\na.b\nbaz foo\nqux\na\nb\n", (
        result.stderr
    )


async def test_grep_q_exits_0_on_a_match_and_1_without(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with GNU grep 3.8
    script = r'''echo abc | grep -q b; echo "exit=$?"; echo abc | grep -q z; echo "exit=$?"; echo abc | grep z; echo "exit=$?"; echo abc | grep -q z nofile; echo "exit=$?"'''
    result = await sh(sandbox, script)
    assert result.stdout == "exit=0\nexit=1\nexit=1\nexit=2\n", result.stderr


async def test_grep_missing_file_exits_2_and_searches_the_others(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with GNU grep 3.8
    script = r'''mkdir -p src/sub && printf 'foo bar\nbaz foo\nqux\n' > src/a.txt && printf 'Foo\nfood\n' > src/sub/b.txt && printf 'none\n' > src/c.txt; grep foo nofile src/a.txt; echo "exit=$?"; grep -q foo nofile src/a.txt; echo "exit=$?"; grep foo src; echo "exit=$?"'''
    result = await sh(sandbox, script)
    assert result.stdout == ("src/a.txt:foo bar\nsrc/a.txt:baz foo\nexit=2\nexit=0\nexit=2\n"), (
        result.stderr
    )
    assert "nofile: No such file or directory" in result.stderr


async def test_grep_context_lines(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with GNU grep 3.8
    script = r"""seq 12 | grep -C1 -e 5 -e 9; seq 6 | grep -A1 -m1 2; seq 6 | grep -B2 4; seq 9 | grep --group-separator=:: -A1 -e 2 -e 6"""
    result = await sh(sandbox, script)
    assert result.stdout == "4\n5\n6\n--\n8\n9\n10\n2\n3\n2\n3\n4\n2\n3\n::\n6\n7\n", result.stderr


async def test_grep_basic_regex_intervals_and_classes(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with GNU grep 3.8
    script = r"""printf 'aa\naaa\na+b\nx1\n' | grep 'a\{3\}'; printf 'a+b\n' | grep 'a+b'; printf 'ab\nx1\n' | grep '[[:digit:]]'; echo 'w1 w2' | grep -o '\<w.'"""
    result = await sh(sandbox, script)
    assert result.stdout == "aaa\na+b\nx1\nw1\nw2\n", result.stderr


# -- jq ----------------------------------------------------------------------------------------------


async def test_jq_csv_and_tsv_format_booleans_numbers_and_null(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with jq 1.6
    script = r"""echo '[1, "a,b", "q\"x", true, false, null, 2.5]' | jq -r '@csv, @tsv'"""
    result = await sh(sandbox, script)
    assert result.stdout == ('1,"a,b","q""x",true,false,,2.5\n1\ta,b\tq"x\ttrue\tfalse\t\t2.5\n'), (
        result.stderr
    )


async def test_jq_arg_and_argjson(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with jq 1.6
    script = r"""jq -n --arg name x --argjson n 2 --argjson o '{"a":[1]}' -c '{name: $name, n: ($n + 1), a: $o.a, named: $ARGS.named.name}'"""
    result = await sh(sandbox, script)
    assert result.stdout == '{"name":"x","n":3,"a":[1],"named":"x"}\n', result.stderr


async def test_jq_raw_compact_slurp_and_null_input(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with jq 1.6
    script = r"""printf '{"a":1}\n{"a":2}\n' > m.json; jq -c -s 'map(.a)' m.json; jq -r '.a' m.json; jq -n '1 + 1'; printf 'x\ny\n' | jq -R -c '[., length]'; jq -j -n '"a", 1'; echo"""
    result = await sh(sandbox, script)
    assert result.stdout == '[1,2]\n1\n2\n2\n["x",1]\n["y",1]\na1\n', result.stderr


async def test_jq_select_map_and_length(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with jq 1.6
    script = r"""echo '[{"id":1,"g":"a"},{"id":2,"g":"b"},{"id":3,"g":"a"}]' | jq -c '[.[] | select(.g == "a") | .id], map(.id * 10), length, (map(.id) | add), any(.[]; .id > 2), all(.[]; .id > 1)'"""
    result = await sh(sandbox, script)
    assert result.stdout == "[1,3]\n[10,20,30]\n3\n6\ntrue\nfalse\n", result.stderr


async def test_jq_to_entries_keys_and_has(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with jq 1.6
    script = r"""echo '{"b":1,"a":[1,2]}' | jq -c 'to_entries, keys, (.a | length), has("a"), with_entries(.value |= tostring)'"""
    result = await sh(sandbox, script)
    assert result.stdout == (
        '[{"key":"b","value":1},{"key":"a","value":[1,2]}]\n'
        '["a","b"]\n'
        "2\n"
        "true\n"
        '{"b":"1","a":"[1,2]"}\n'
    ), result.stderr


async def test_jq_sort_group_and_unique_in_jq_order(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with jq 1.6
    script = r"""echo '[{"n":10,"k":"x"},{"n":9,"k":"y"},{"n":10,"k":"z"}]' | jq -c 'sort_by(.n) | map(.k), (group_by(.n) | map(length)), (map(.n) | unique), (map(.n) | max), (group_by(.n) | map(.[0].k)), (unique_by(.n) | map(.k))'; echo '[{"k":2,"i":1},{"k":1,"i":2},{"k":2,"i":3}]' | jq -c '(group_by(.k) | map(map(.i))), (max_by(.k) | .i)'; echo '[[10],[2,"a"],[1,2]]' | jq -c 'sort'"""
    result = await sh(sandbox, script)
    assert result.stdout == (
        '["y","x","z"]\n'
        "[1,2]\n"
        "[9,10]\n"
        "10\n"
        '["y","x"]\n'
        '["y","x"]\n'
        "[[2],[1,3]]\n"
        "3\n"
        '[[1,2],[2,"a"],[10]]\n'
    ), result.stderr


async def test_jq_string_interpolation_and_alternative(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with jq 1.6
    script = r"""echo '{"name":"x","tags":["a","b"]}' | jq -r '"\(.name) has \(.tags | length) tags", (.missing // "default"), "\(.tags[])!"'"""
    result = await sh(sandbox, script)
    assert result.stdout == "x has 2 tags\ndefault\na!\nb!\n", result.stderr


async def test_jq_assignment_creates_paths_and_del_removes_selected(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with jq 1.6
    script = r"""echo '{}' | jq -c '.a.b = 1 | .list += [2] | .n //= 5'; echo '[1,2,3,4]' | jq -c 'del(.[] | select(. > 2))'; echo '{"a":1,"b":2}' | jq -c 'del(.a), (.b |= . * 10)'"""
    result = await sh(sandbox, script)
    assert result.stdout == ('{"a":{"b":1},"list":[2],"n":5}\n[1,2]\n{"b":2}\n{"a":1,"b":20}\n'), (
        result.stderr
    )


async def test_jq_prints_numbers_as_jq_does(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with jq 1.6
    script = r"""jq -n -c '[1.0, 0.1 + 0.2, 1e17, 1e-5, 100000, 3 / 2, 10 / 2, -7 % 3]'"""
    result = await sh(sandbox, script)
    assert result.stdout == "[1,0.30000000000000004,1e+17,1e-05,100000,1.5,5,-1]\n", result.stderr


async def test_jq_error_and_exit_codes(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with jq 1.6
    script = r'''echo '{"a":1}' | jq '.a.b'; echo "exit=$?"; echo null | jq -e '.x'; echo "exit=$?"; jq -n '$nope'; echo "exit=$?"'''
    result = await sh(sandbox, script)
    assert result.stdout == "exit=5\nnull\nexit=1\nexit=3\n", result.stderr
    assert "Cannot index number with" in result.stderr


async def test_jq_regex_captures_and_substitutions(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with jq 1.6
    script = r"""echo '"2024-05-17 foo"' | jq -c 'capture("(?<y>\\d+)-(?<m>\\d+)"), test("FOO"; "i"), sub("(?<w>[a-z]+)"; "<\(.w)>"), gsub("-"; "/"), [scan("\\d+")]'"""
    result = await sh(sandbox, script)
    assert result.stdout == (
        '{"y":"2024","m":"05"}\ntrue\n"2024-05-17 <foo>"\n"2024/05/17 foo"\n["2024","05","17"]\n'
    ), result.stderr


async def test_jq_keeps_the_outputs_before_an_error(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with jq 1.6
    script = r'''echo '[1, "a", 3]' | jq '.[] | . + 1'; echo "exit=$?"'''
    result = await sh(sandbox, script)
    assert result.stdout == "2\nexit=5\n", result.stderr
    assert "cannot be added" in result.stderr


async def test_jq_input_and_inputs(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with jq 1.6
    script = r"""printf '1 2 3 4' | jq -c '[., input]'; printf '1 2 3' | jq -n -c '[inputs]'"""
    result = await sh(sandbox, script)
    assert result.stdout == "[1,2]\n[3,4]\n[1,2,3]\n", result.stderr


async def test_jq_pretty_printing_with_indent_and_tab(sandbox: Sandbox) -> None:
    # bash -c SCRIPT with jq 1.6
    script = r"""echo '{"a":[1,{"b":null}],"c":{}}' | jq '.'; echo '{"a":[1]}' | jq --indent 1 .; echo '{"a":[1]}' | jq --tab -S ."""
    result = await sh(sandbox, script)
    assert result.stdout == (
        "{\n"
        '  "a": [\n'
        "    1,\n"
        "    {\n"
        '      "b": null\n'
        "    }\n"
        "  ],\n"
        '  "c": {}\n'
        "}\n"
        "{\n"
        ' "a": [\n'
        "  1\n"
        " ]\n"
        "}\n"
        "{\n"
        '\t"a": [\n'
        "\t\t1\n"
        "\t]\n"
        "}\n"
    ), result.stderr


# -- what the in-memory provider does not do -----------------------------------------------------


async def test_refused_features_fail_naming_the_in_memory_provider(sandbox: Sandbox) -> None:
    # GNU sed runs `e` commands and jq 1.6 colours with -C; here they are refused, never ignored
    for script in ("echo x | sed 'e date'", "jq -C -n 1", "echo a | awk '{ print |& \"cat\" }'"):
        result = await sh(sandbox, script)
        assert result.exit_code == 2, script
        assert "in-memory provider" in result.stderr, script
