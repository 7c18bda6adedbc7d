"""Prints how many documentation examples (Python and shell) ran and how many were skipped, by
reason."""

from __future__ import annotations

from collections import Counter

import pytest


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    def ours(report: pytest.TestReport) -> bool:
        return "test_example[" in report.nodeid or "test_shell_example[" in report.nodeid

    ran = [r for r in terminalreporter.stats.get("passed", []) if ours(r)]
    failed = [r for r in terminalreporter.stats.get("failed", []) if ours(r)]
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if ours(r)]
    kinds: Counter[str] = Counter()
    reasons: dict[str, list[str]] = {}
    for report in skipped:
        assert isinstance(report.longrepr, tuple)
        reason = str(report.longrepr[2]).removeprefix("Skipped: ")
        kind = reason.split(":", 1)[0] if ":" in reason else reason
        kinds[kind] += 1
        where = report.nodeid.partition("[")[2].rstrip("]")
        reasons.setdefault(kind, []).append(f"{where}: {reason}")
    terminalreporter.section("documentation examples")
    terminalreporter.write_line(
        f"{len(ran)} examples ran, {len(failed)} failed, {len(skipped)} not run"
    )
    for kind, count in kinds.most_common():
        terminalreporter.write_line(f"  {count} not run: {kind}")
        for line in reasons[kind]:
            terminalreporter.write_line(f"      {line}")
