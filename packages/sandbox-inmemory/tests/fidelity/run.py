"""Run the fidelity corpus in the in-memory provider and in real bash, and compare.

    uv run python packages/sandbox-inmemory/tests/fidelity/run.py [-k SUBSTRING]... [--diff]
    uv run python packages/sandbox-inmemory/tests/fidelity/run.py --update-table

Prints one verdict per case (``same`` or how it differs), with ``--diff`` the outputs of both sides
for each differing case, and the summary line ``N of M identical (P%)``. ``--update-table``
(whole corpus only) rewrites the known-differences table of the package README from the results,
keeping the reasons of rows that stay and writing ``TODO: reason`` for new ones. Exits 1 when a
case differs, 2 when the host cannot be the oracle.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

import anyio

# The tests' folder, as pytest's pythonpath has it (this file runs as a script).
sys.path.insert(0, str(Path(__file__).parents[1]))

from fidelity._fidelity import (
    README,
    TODO_REASON,
    Case,
    Outcome,
    compare,
    expected_table,
    load_corpus,
    oracle_missing,
    read_table,
    rewrite_table,
    run_all_in_bash,
    run_all_in_sandbox,
    select,
    summary,
)

from pai.sandbox_inmemory import create_in_memory_sandbox_provider


def _show(case: Case, bash: Outcome, mine: Outcome) -> None:
    print(f"  --- script\n{_indent(case.script)}")
    if bash.stdout != mine.stdout:
        diff = difflib.unified_diff(
            bash.stdout.splitlines(keepends=True),
            mine.stdout.splitlines(keepends=True),
            "bash stdout",
            "in-memory stdout",
        )
        print(_indent("".join(diff)))
    for label, outcome in (("bash", bash), ("in-memory", mine)):
        print(f"  --- {label}: exit {outcome.exit_code}, stderr:")
        print(_indent(outcome.stderr or "(empty)\n"))


def _indent(text: str) -> str:
    return "".join(f"    {line}" for line in text.splitlines(keepends=True)).rstrip("\n")


async def _in_memory(cases: list[Case]) -> dict[str, Outcome]:
    provider = create_in_memory_sandbox_provider()
    try:
        return await run_all_in_sandbox(provider, cases)
    finally:
        await provider.aclose()


def main() -> int:
    parser = argparse.ArgumentParser(description="Compare the fidelity corpus with real bash.")
    parser.add_argument(
        "-k", action="append", default=[], metavar="SUBSTRING", help="cases whose name has it"
    )
    parser.add_argument("--diff", action="store_true", help="show both sides of a difference")
    parser.add_argument(
        "--update-table", action="store_true", help="rewrite the README's known-differences table"
    )
    args = parser.parse_args()
    if args.update_table and args.k:
        parser.error("--update-table runs the whole corpus; leave out -k")
    missing = oracle_missing()
    if missing is not None:
        print(missing, file=sys.stderr)
        return 2
    cases = select(load_corpus(), args.k)
    if not cases:
        parser.error(f"no case matches {args.k}")
    bash = run_all_in_bash(cases)
    mine = anyio.run(_in_memory, cases)
    differences = compare(cases, bash, mine)
    for case in cases:
        verdict = differences.get(case.name, "same")
        print(f"{case.name}: {verdict}")
        if args.diff and case.name in differences:
            _show(case, bash[case.name], mine[case.name])
    print(summary(len(cases), len(differences)))
    if args.update_table:
        readme = README.read_text(encoding="utf-8")
        table = expected_table(len(cases), differences, read_table(readme))
        README.write_text(rewrite_table(readme, table), encoding="utf-8")
        todo = sorted(row.case for row in table.rows.values() if row.reason == TODO_REASON)
        print(f"rewrote the table in {README.name}: {len(table.rows)} rows")
        if todo:
            print(f"write a reason for each of these rows ({TODO_REASON!r} now):")
            for name in todo:
                print(f"  {name}")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
