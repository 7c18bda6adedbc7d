"""Every command the in-memory shell registers is in the audit table, and the README shows it."""

from __future__ import annotations

from pathlib import Path

import pytest

from pai.sandbox_inmemory._worker import _commands

README = Path(__file__).parents[1] / "README.md"


def test_every_registered_command_is_in_the_audit_table() -> None:
    registered = _commands.command_registry(lambda command: command)
    assert sorted(registered) == sorted(_commands.COMMAND_AUDIT)


def test_a_command_missing_from_the_audit_table_is_never_registered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    audit = dict(_commands.COMMAND_AUDIT)
    del audit["tar"]
    monkeypatch.setattr(_commands, "COMMAND_AUDIT", audit)
    with pytest.raises(_commands.UnauditedCommandError, match="tar"):
        _commands.command_registry(lambda command: command)


def test_the_readme_shows_the_audit_table_generated_from_the_code() -> None:
    assert _commands.render_audit_table() in README.read_text(encoding="utf-8"), (
        "regenerate the README's command table: "
        'python -c "from pai.sandbox_inmemory._worker._commands import render_audit_table as r; '
        'print(r())"'
    )


def test_shell_arithmetic_fallback_accepts_integers_and_operators_only() -> None:
    assert _commands._arith_eval("(2 + 3) * 4 % 7 << 1") == 12
    for source in ("().__class__", "__import__('os')", "[1][0]", "x", "'a' * 3", "2 ** 99999"):
        with pytest.raises((ValueError, SyntaxError)):
            _commands._arith_eval(source)
