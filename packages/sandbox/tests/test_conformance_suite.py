"""The conformance suite shows what differed when a provider fails one of its checks."""

from __future__ import annotations

import importlib
import importlib.metadata
import textwrap
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

BROKEN_PROVIDER = """
from fakes import FakeProvider, Reply

from pai.sandbox.testing import SandboxProviderConformance


class TestAProviderThatMishearsEcho(SandboxProviderConformance):
    def create_provider(self):
        provider = FakeProvider()
        provider.reply(Reply(stdout=b"ho\\n"))
        return provider
"""

ECHO_CHECK = "test_echo_prints_to_stdout_with_exit_code_zero and asyncio"


def _run_broken_suite(pytester: pytest.Pytester, *plugin_args: str) -> pytest.RunResult:
    # A subprocess: in this process the suite module is imported (unrewritten) already.
    pytester.makepyfile(
        fakes=Path(__file__).with_name("fakes.py").read_text(),
        test_broken=textwrap.dedent(BROKEN_PROVIDER),
    )
    result = pytester.runpytest_subprocess(
        *plugin_args, "-p", "no:cacheprovider", "-q", "-k", ECHO_CHECK
    )
    result.assert_outcomes(failed=1)
    return result


def test_a_failing_suite_check_shows_both_values(pytester: pytest.Pytester) -> None:
    result = _run_broken_suite(pytester)
    result.stdout.fnmatch_lines([r"*assert ('ho\n', '', 0) == ('hi\n', '', 0)*"])


def test_with_plain_asserts_a_failing_suite_check_shows_no_values(
    pytester: pytest.Pytester,
) -> None:
    # The control: the values above come from assert rewriting, not from the suite's messages.
    result = _run_broken_suite(pytester, "--assert=plain")
    result.stdout.no_fnmatch_line(r"*'ho\n'*")
    result.stdout.fnmatch_lines(["*AssertionError*"])


def test_the_plugin_marks_the_suite_module_for_assert_rewriting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import pai.sandbox._pytest_plugin as plugin

    marked: list[str] = []
    monkeypatch.setattr(pytest, "register_assert_rewrite", lambda *names: marked.extend(names))
    importlib.reload(plugin)
    assert marked == ["pai.sandbox.testing"]


def test_the_plugin_is_installed_as_a_pytest11_entry_point() -> None:
    plugins = {
        entry.name: entry.value
        for entry in importlib.metadata.entry_points(group="pytest11")
        if entry.dist is not None and entry.dist.name == "pai-sandbox"
    }
    assert plugins == {"pai-sandbox": "pai.sandbox._pytest_plugin"}
