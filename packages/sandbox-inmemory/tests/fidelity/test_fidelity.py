"""The in-memory shell against real GNU bash: every script of the corpus runs identically, or is
listed, with its reason, in the README's "Fidelity against bash" table (and a listed script that
now runs identically must leave it, so the table stays true).

The oracle is the host's GNU bash, coreutils, sed, grep, gawk and jq (``_fidelity.py``); without
them the comparison is skipped, or fails when ``PAI_REQUIRE_BASH_ORACLE=1`` (as in CI).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping

import pytest
from fidelity._fidelity import (
    README,
    REQUIRE_ORACLE_VARIABLE,
    TODO_REASON,
    UPDATE_COMMAND,
    Outcome,
    Row,
    Table,
    compare,
    describe_difference,
    expected_table,
    load_corpus,
    oracle_missing,
    read_table,
    render_summary,
    rewrite_table,
    run_all_in_bash,
    run_all_in_sandbox,
    table_problems,
)
from inmemory_helpers import MakeProvider

CASES = load_corpus()
NAMES = [case.name for case in CASES]


def skip_or_fail_without_oracle(missing: str | None, environ: Mapping[str, str]) -> None:
    """Skip when the host cannot be the oracle, or fail when the environment requires it."""
    if missing is None:
        return
    if environ.get(REQUIRE_ORACLE_VARIABLE) == "1":
        pytest.fail(f"{missing} ({REQUIRE_ORACLE_VARIABLE}=1 requires the oracle)")
    pytest.skip(f"{missing}; set {REQUIRE_ORACLE_VARIABLE}=1 to fail instead of skipping")


@pytest.fixture(scope="module")
def bash_outcomes() -> dict[str, Outcome]:
    """Every case run once by the oracle (shared by both event-loop backends)."""
    skip_or_fail_without_oracle(oracle_missing(), os.environ)
    return run_all_in_bash(CASES)


@pytest.mark.anyio
async def test_every_difference_from_bash_is_in_the_readme_table_and_nothing_else(
    bash_outcomes: dict[str, Outcome], make_provider: MakeProvider
) -> None:
    mine = await run_all_in_sandbox(make_provider(), CASES)
    differences = compare(CASES, bash_outcomes, mine)
    table = read_table(README.read_text(encoding="utf-8"))
    problems = table_problems(table, expected_table(len(CASES), differences, table), NAMES)
    assert not problems, (
        "the README's 'Fidelity against bash' table is not true to the corpus:\n- "
        + "\n- ".join(problems)
        + f"\nRewrite the table from the results with `{UPDATE_COMMAND}`, then write the reason "
        f"of every row marked {TODO_REASON!r} (see a case's outputs with `run.py -k NAME --diff`)."
    )


def test_every_row_of_the_readme_table_names_a_case_and_gives_a_reason() -> None:
    table = read_table(README.read_text(encoding="utf-8"))
    unknown = sorted(set(table.rows) - set(NAMES))
    assert not unknown, f"rows of the README's table name no case of the corpus: {unknown}"
    todo = sorted(row.case for row in table.rows.values() if row.reason.startswith("TODO"))
    assert not todo, f"write the reason of these rows of the README's table: {todo}"


def test_the_corpus_has_a_script_for_every_group_of_the_issue() -> None:
    groups = {name.split("/")[0] for name in NAMES}
    assert groups >= {
        "invoke", "stdin_scripts", "compound", "heredoc", "stdin", "exit", "substitution",
        "isolation", "signals", "procsub", "quoting", "params", "arith", "arrays", "pipelines",
        "redirect", "errors", "coreutils", "sed", "awk", "grep", "jq", "skills",
    }  # fmt: skip
    assert len(CASES) >= 180


def test_without_gawk_the_oracle_is_missing_and_the_suite_skips_or_fails_as_required(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    which = shutil.which
    monkeypatch.setattr(
        shutil, "which", lambda name, **kw: None if name == "gawk" else which(name, **kw)
    )
    missing = oracle_missing()
    assert missing is not None
    assert "`gawk` is not installed" in missing
    with pytest.raises(pytest.skip.Exception, match=f"set {REQUIRE_ORACLE_VARIABLE}=1"):
        skip_or_fail_without_oracle(missing, {})
    with pytest.raises(pytest.fail.Exception, match="gawk"):
        skip_or_fail_without_oracle(missing, {REQUIRE_ORACLE_VARIABLE: "1"})
    skip_or_fail_without_oracle(None, {REQUIRE_ORACLE_VARIABLE: "1"})


# -- the checker itself -------------------------------------------------------------------------

_SAME = Outcome("x\n", "", 0)


def test_identical_outcomes_have_no_difference_and_stderr_counts_by_shape() -> None:
    assert describe_difference(_SAME, Outcome("x\n", "", 0)) is None
    assert describe_difference(Outcome("", "bash: oops\n", 1), Outcome("", "other\n", 1)) is None
    assert describe_difference(_SAME, Outcome("y\n", "err\n", 126)) == (
        "stdout; stderr printed; exit 126 (bash 0)"
    )


def _table(*rows: Row, total: int = 3) -> Table:
    return Table(render_summary(total, len(rows)), {row.case: row for row in rows})


def test_the_checker_reports_an_unlisted_difference_and_a_listed_case_that_now_matches() -> None:
    listed = _table(Row("g/fixed", "stdout", "a reason"))
    results = expected_table(3, {"g/new": "exit 1 (bash 0)"}, listed)
    problems = table_problems(listed, results, ["g/fixed", "g/new", "g/same"])
    assert any("`g/new` differs from bash" in problem for problem in problems)
    assert any("`g/fixed` is in the table but now runs as bash does" in p for p in problems)


def test_the_checker_reports_a_changed_difference_and_a_missing_reason() -> None:
    listed = _table(Row("g/a", "stdout", TODO_REASON))
    results = expected_table(3, {"g/a": "stdout; exit 2 (bash 0)"}, listed)
    problems = table_problems(listed, results, ["g/a", "g/b", "g/c"])
    assert any("it now differs by 'stdout; exit 2 (bash 0)'" in p for p in problems)
    assert any("`g/a` has no reason yet" in problem for problem in problems)


_README = """# pkg

## Fidelity against bash

Intro.

**2 of 3** scripts of the corpus run identically (66.7%).

| Case | Difference | Reason |
| --- | --- | --- |
| `g/kept` | stdout | `a \\| b` is why |

After the table.

## Next
"""


def test_updating_the_table_keeps_reasons_and_marks_new_rows_todo() -> None:
    current = read_table(_README)
    assert current.rows["g/kept"].reason == "`a | b` is why"
    updated = rewrite_table(
        _README, expected_table(4, {"g/kept": "exit 1 (bash 0)", "g/new": "stdout"}, current)
    )
    assert updated == _README.replace(
        "**2 of 3** scripts of the corpus run identically (66.7%).",
        "**2 of 4** scripts of the corpus run identically (50.0%).",
    ).replace(
        "| `g/kept` | stdout | `a \\| b` is why |",
        f"| `g/kept` | exit 1 (bash 0) | `a \\| b` is why |\n| `g/new` | stdout | {TODO_REASON} |",
    )
    assert read_table(updated).rows["g/new"].reason == TODO_REASON
