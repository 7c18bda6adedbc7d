"""The ``pai`` command line of pai-core: ``pai plugins``, ``pai config``, errors, the entry path.

Plugins here are real distributions: each test writes a ``.dist-info`` folder (metadata and an
entry point of the ``pai`` group) and a module into a folder on ``sys.path``, so discovery goes
through ``importlib.metadata`` exactly as for an installed package. ``PAI_LOAD_PLUGINS`` limits
loading to the test's own distributions, so the result does not depend on what else is installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from pai.core import UserError
from pai.core import cli as pai_cli
from pai.core.cli import create_cli, generate_group, main

ANSI = "\x1b["


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fresh_plugins: None) -> None:
    """No configuration variables from outside, a fresh working folder, fresh plugins."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)


class Distributions:
    """Writes fake installed distributions (dist-info + module) into a folder on sys.path."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root = root
        self.modules: list[str] = []
        root.mkdir()
        monkeypatch.syspath_prepend(str(root))

    def add(self, name: str, module: str, source: str, *, version: str = "1.2.3") -> None:
        (self.root / f"{module}.py").write_text(textwrap.dedent(source))
        info = self.root / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (info / "entry_points.txt").write_text(f"[pai]\n{name} = {module}\n")
        self.modules.append(module)


@pytest.fixture
def dists(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Distributions]:
    found = Distributions(tmp_path / "site", monkeypatch)
    yield found
    for module in found.modules:
        sys.modules.pop(module, None)


GOOD_PLUGIN = """
import click
from pai.core.ext import hookimpl

@click.command("hello")
@click.option("--name", default="world")
def hello(name):
    '''Say hello (a command a plugin added).'''
    click.echo(f"hello, {name}")

@hookimpl
def pai_cli(cli):
    cli.add_command(hello)
"""

BROKEN_PLUGIN = """
raise ImportError("this plugin needs a module that is not installed")
"""


@pytest.fixture
def good_and_broken(dists: Distributions, monkeypatch: pytest.MonkeyPatch) -> None:
    dists.add("pai-test-good", "pai_test_good_plugin", GOOD_PLUGIN)
    dists.add("pai-test-broken", "pai_test_broken_plugin", BROKEN_PLUGIN, version="0.0.1")
    monkeypatch.setenv("PAI_LOAD_PLUGINS", "pai-test-good,pai-test-broken")


def invoke(*args: str) -> Result:
    return CliRunner().invoke(create_cli(), list(args), catch_exceptions=False)


# -- pai plugins ------------------------------------------------------------------------------------


@pytest.mark.usefixtures("good_and_broken")
def test_plugins_json_lists_every_plugin_with_status_and_error() -> None:
    result = invoke("plugins", "--json")

    assert result.exit_code == 0, result.output
    rows = {row["name"]: row for row in json.loads(result.stdout)["plugins"]}
    assert rows["pai-test-good"] == {
        "name": "pai-test-good",
        "distribution": "pai-test-good",
        "version": "1.2.3",
        "status": "loaded",
        "hooks": ["pai_cli"],
        "error": None,
    }
    broken = rows["pai-test-broken"]
    assert broken["status"] == "failed"
    assert broken["distribution"] == "pai-test-broken"
    assert broken["version"] == "0.0.1"
    assert "ImportError" in broken["error"]
    assert "not installed" in broken["error"]
    # every other installed plugin is listed as skipped (PAI_LOAD_PLUGINS)
    assert {row["status"] for name, row in rows.items() if not name.startswith("pai-test")} <= {
        "skipped"
    }


@pytest.mark.usefixtures("good_and_broken")
def test_plugins_table_is_plain_when_piped_and_shows_the_error() -> None:
    result = invoke("plugins")

    assert result.exit_code == 0  # a failed plugin is reported, not fatal
    assert ANSI not in result.stdout
    header, *lines = result.stdout.splitlines()
    assert header.split() == ["PLUGIN", "DISTRIBUTION", "VERSION", "HOOKS", "STATUS", "ERROR"]
    good = next(line for line in lines if line.startswith("pai-test-good "))
    assert good.split()[:5] == ["pai-test-good", "pai-test-good", "1.2.3", "pai_cli", "loaded"]
    broken = next(line for line in lines if line.startswith("pai-test-broken "))
    assert "failed" in broken
    assert "ImportError: this plugin needs a module that is not installed" in broken
    # columns are aligned: every row's status starts where the header's does
    column = header.index("STATUS")
    assert good[column:].startswith("loaded")
    assert broken[column:].startswith("failed")
    assert "1 plugin(s) failed to load" in result.stderr
    assert "PAI_STRICT_PLUGINS" in result.stderr


@pytest.mark.usefixtures("good_and_broken")
def test_plugins_table_is_rich_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pai_cli, "stdout_is_terminal", lambda: True)

    result = invoke("plugins")

    assert result.exit_code == 0
    assert "Plugin" in result.stdout  # rich keeps the header's case
    assert "─" in result.stdout  # and draws the header rule
    assert "pai-test-good" in result.stdout
    assert "failed" in result.stdout


def test_plugins_with_none_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAI_LOAD_PLUGINS", "")

    result = invoke("plugins", "--json")

    assert result.exit_code == 0
    assert all(row["status"] == "skipped" for row in json.loads(result.stdout)["plugins"])


@pytest.mark.usefixtures("good_and_broken")
def test_a_plugin_adds_commands_through_the_pai_cli_hook() -> None:
    result = invoke("hello", "--name", "pai")

    assert result.exit_code == 0
    assert result.stdout == "hello, pai\n"
    assert "hello" in invoke("--help").stdout


@pytest.mark.usefixtures("good_and_broken")
def test_strict_plugins_make_a_broken_plugin_fatal_with_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PAI_STRICT_PLUGINS", "1")

    with pytest.raises(SystemExit) as exit_info:
        main(["plugins"])

    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "pai-test-broken" in err
    assert "unset PAI_STRICT_PLUGINS" in err
    assert "Traceback" not in err


def test_a_plugin_whose_cli_hook_fails_is_reported_and_the_rest_works(
    dists: Distributions, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    dists.add(
        "pai-test-badcli",
        "pai_test_badcli_plugin",
        """
        from pai.core.ext import hookimpl

        @hookimpl
        def pai_cli(cli):
            raise RuntimeError("boom")
        """,
    )
    monkeypatch.setenv("PAI_LOAD_PLUGINS", "pai-test-badcli")

    cli = create_cli()

    assert "pai_cli hook of plugin 'pai-test-badcli'" in capsys.readouterr().err
    assert CliRunner().invoke(cli, ["plugins", "--json"]).exit_code == 0


# -- pai config -------------------------------------------------------------------------------------


def test_config_without_a_file_says_defaults_apply() -> None:
    result = invoke("config")

    assert result.exit_code == 0
    assert "no pai.toml or pyproject.toml with [tool.pai] found" in result.stdout
    assert "defaults apply" in result.stdout
    assert json.loads(invoke("config", "--json").stdout) == {"files": [], "values": []}


def test_config_lists_each_value_with_its_source(monkeypatch: pytest.MonkeyPatch) -> None:
    config = Path("pai.toml")
    config.write_text(
        '[capabilities.sandbox]\nprovider = "docker"\n\n'
        '[capabilities.sandbox.docker]\nimage = "python:3.12-slim"\n'
    )
    monkeypatch.setenv("PAI_CAPABILITIES__SANDBOX__OUTPUT_LIMIT", "2048")

    result = invoke("config")

    assert result.exit_code == 0, result.output
    assert ANSI not in result.stdout
    lines = result.stdout.splitlines()
    assert lines[0] == f"read: {config.resolve()}"
    assert lines[1].split() == ["KEY", "VALUE", "SOURCE"]
    rows = {line.split()[0]: line.split(maxsplit=2)[1:] for line in lines[2:]}
    assert rows["capabilities.sandbox.provider"] == ['"docker"', str(config.resolve())]
    assert rows["capabilities.sandbox.docker.image"] == [
        '"python:3.12-slim"',
        str(config.resolve()),
    ]
    assert rows["capabilities.sandbox.output_limit"] == [
        "2048",
        "env PAI_CAPABILITIES__SANDBOX__OUTPUT_LIMIT",
    ]


def test_config_json_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    Path("pyproject.toml").write_text(
        '[project]\nname = "app"\n\n[tool.pai.capabilities.sandbox]\nscope = "user"\n'
    )

    result = invoke("config", "--json")

    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["files"] == [str(Path("pyproject.toml").resolve())]
    set_values = [row for row in data["values"] if row["source"] != "default"]
    assert set_values == [
        {
            "key": "capabilities.sandbox.scope",
            "value": "user",
            "source": str(Path("pyproject.toml").resolve()),
        }
    ]
    assert [row["key"] for row in data["values"]] == sorted(row["key"] for row in data["values"])


def test_config_error_is_one_message_and_exit_2() -> None:
    Path("pai.toml").write_text("[capabilities.sandbox\n")

    result = invoke("config")

    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("Error: ")
    assert "pai.toml" in result.stderr
    assert "not valid TOML" in result.stderr
    assert "Traceback" not in result.output


def test_config_finds_the_file_in_a_parent_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    Path("pai.toml").write_text('[capabilities.sandbox]\nprovider = "inmemory"\n')
    nested = Path("src", "app")
    nested.mkdir(parents=True)
    monkeypatch.chdir(nested)

    data = json.loads(invoke("config", "--json").stdout)

    assert data["files"] == [str((tmp_path / "work" / "pai.toml").resolve())]


# -- errors of any command --------------------------------------------------------------------------


def test_a_pai_error_in_any_command_exits_2_with_its_message() -> None:
    @click.command("explode")
    def explode() -> None:
        raise UserError("the widget is misconfigured; set widget.size in pai.toml")

    cli = create_cli()
    cli.add_command(explode)

    result = CliRunner().invoke(cli, ["explode"])

    assert result.exit_code == 2
    assert result.stderr == ("Error: the widget is misconfigured; set widget.size in pai.toml\n")
    assert "Traceback" not in result.output


def test_an_unknown_command_is_a_usage_error() -> None:
    result = invoke("no-such-command")

    assert result.exit_code == 2
    assert "No such command" in result.stderr


def test_version() -> None:
    result = invoke("--version")

    assert result.exit_code == 0
    assert result.stdout.startswith("pai, version ")


# -- output helpers ---------------------------------------------------------------------------------


def test_echo_table_aligns_plain_columns_and_shows_missing_values_as_dash() -> None:
    @click.command()
    def table() -> None:
        pai_cli.echo_table(
            [{"a": "x", "b": None, "c": ["p", "q"]}, {"a": "longer", "b": 1, "c": []}],
            [("a", "A"), ("b", "Bee"), ("c", "C")],
            title="things:",
        )

    result = CliRunner().invoke(table)

    assert result.stdout.splitlines() == [
        "things:",
        "A       BEE  C",
        "x       -    p, q",
        "longer  1    -",
    ]


def test_cell_text_keeps_a_cell_on_one_line() -> None:
    assert pai_cli.cell_text("two\nlines") == "two lines"
    assert pai_cli.cell_text(("a", None)) == "a, -"


# -- the real entry path ----------------------------------------------------------------------------


def test_python_dash_m_pai_core_cli_runs_plugins_json(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAI_")}
    completed = subprocess.run(
        [sys.executable, "-m", "pai.core.cli", "plugins", "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
        check=False,
    )

    assert completed.returncode == 0, completed.stderr
    data = json.loads(completed.stdout)
    assert isinstance(data["plugins"], list)
    for row in data["plugins"]:
        assert set(row) == {"name", "distribution", "version", "status", "hooks", "error"}


@pytest.mark.parametrize("check", [False, True], ids=["config", "config --check"])
def test_a_config_mistake_in_the_real_process_is_one_message_without_a_traceback(
    tmp_path: Path, check: bool
) -> None:
    (tmp_path / "pai.toml").write_text('[capabilites.sandbox]\nprovider = "docker"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAI_")}
    completed = subprocess.run(
        [sys.executable, "-m", "pai.core.cli", "config", *(["--check"] if check else [])],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**env, "PAI_LOAD_PLUGINS": ""},
        timeout=120,
        check=False,
    )

    assert completed.returncode == 2
    assert completed.stdout == ""
    [line] = completed.stderr.splitlines()
    assert line.startswith("Error: unknown configuration table [capabilites]")
    assert "pai.toml" in line
    assert "did you mean 'capabilities'?" in line


# -- pai config --check ------------------------------------------------------------------------------


def test_config_check_passes_a_valid_configuration_with_exit_0() -> None:
    Path("pai.toml").write_text('[storage]\nurl = "memory://"\n')

    result = invoke("config", "--check")

    assert result.exit_code == 0, result.output
    assert "check: the configuration is valid" in result.stdout
    assert json.loads(invoke("config", "--check", "--json").stdout)["check"] == "ok"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('[storage]\nurl = "sqlit:///x.db"\n', "did you mean sqlite://?"),
        ('[storag]\nurl = "memory://"\n', "did you mean 'storage'?"),
        ('[capabilities.sandbx]\nprovider = "docker"\n', "no installed package provides"),
    ],
    ids=["scheme", "table", "capability-id"],
)
def test_config_check_fails_with_one_message_naming_the_file_and_key(
    content: str, expected: str
) -> None:
    Path("pai.toml").write_text(content)

    result = invoke("config", "--check")

    assert result.exit_code == 2
    assert result.stdout == ""
    assert expected in result.stderr
    assert "pai.toml" in result.stderr
    assert "Traceback" not in result.output


CLI_BROKEN_PLUGIN = """
from pai.core.ext import hookimpl


@hookimpl
def pai_cli(cli):
    raise RuntimeError("this plugin's commands are broken")
"""


@pytest.fixture
def good_and_cli_broken(dists: Distributions, monkeypatch: pytest.MonkeyPatch) -> None:
    # "a-..." sorts first, so the broken hook runs before the good one would.
    dists.add("pai-test-a-cli-broken", "pai_test_a_cli_broken_plugin", CLI_BROKEN_PLUGIN)
    dists.add("pai-test-good", "pai_test_good_plugin", GOOD_PLUGIN)
    monkeypatch.setenv("PAI_LOAD_PLUGINS", "pai-test-good,pai-test-a-cli-broken")


@pytest.mark.usefixtures("good_and_cli_broken")
def test_a_plugin_whose_cli_hook_raises_leaves_the_other_plugins_commands_working(
    capsys: pytest.CaptureFixture[str],
) -> None:
    cli = create_cli()
    warned = capsys.readouterr().err

    result = CliRunner().invoke(cli, ["hello", "--name", "ann"], catch_exceptions=False)

    assert result.exit_code == 0, result.output
    assert "hello, ann" in result.stdout
    assert "pai_cli hook of plugin 'pai-test-a-cli-broken'" in warned


@pytest.mark.usefixtures("good_and_cli_broken")
def test_pai_plugins_names_the_plugin_whose_cli_hook_raised() -> None:
    result = invoke("plugins", "--json")

    rows = {row["distribution"]: row for row in json.loads(result.stdout)["plugins"]}
    broken = rows["pai-test-a-cli-broken"]
    assert broken["status"] == "failed"
    assert "this plugin's commands are broken" in broken["error"]
    assert rows["pai-test-good"]["status"] == "loaded"


# -- pai generate -----------------------------------------------------------------------------------

GENERATOR_PLUGIN = """
import click
from pai.core.ext import hookimpl
from pai.core.cli import generate_group

@click.command("widgets", help="Write a module of widget names.")
@click.option("--out", default="widgets.py")
def widgets(out):
    click.echo(f"wrote {out}")

@hookimpl
def pai_cli(cli):
    generate_group(cli).add_command(widgets)
"""

GENERATE_BROKEN_PLUGIN = """
from pai.core.ext import hookimpl
from pai.core.cli import generate_group

@hookimpl
def pai_cli(cli):
    generate_group(cli)
    raise RuntimeError("this generator is broken")
"""


@pytest.fixture
def generator(dists: Distributions, monkeypatch: pytest.MonkeyPatch) -> None:
    dists.add("pai-test-generator", "pai_test_generator_plugin", GENERATOR_PLUGIN)
    monkeypatch.setenv("PAI_LOAD_PLUGINS", "pai-test-generator")


@pytest.fixture
def generator_and_broken(dists: Distributions, monkeypatch: pytest.MonkeyPatch) -> None:
    # "a-..." sorts first, so the broken hook runs before the good one would.
    dists.add("pai-test-a-gen-broken", "pai_test_a_gen_broken_plugin", GENERATE_BROKEN_PLUGIN)
    dists.add("pai-test-generator", "pai_test_generator_plugin", GENERATOR_PLUGIN)
    monkeypatch.setenv("PAI_LOAD_PLUGINS", "pai-test-generator,pai-test-a-gen-broken")


@pytest.mark.usefixtures("generator")
def test_a_plugin_adds_a_subcommand_to_the_generate_group() -> None:
    result = invoke("generate", "widgets", "--out", "names.py")

    assert result.exit_code == 0, result.output
    assert result.stdout == "wrote names.py\n"


@pytest.mark.usefixtures("generator")
def test_generate_without_a_subcommand_lists_the_installed_generators() -> None:
    result = invoke("generate")

    assert result.exit_code == 0, result.output
    header, *lines = result.stdout.splitlines()
    assert header.split() == ["COMMAND", "WHAT", "IT", "GENERATES"]
    assert lines == [
        "pai generate widgets  Write a module of widget names.",
    ]


def test_generate_with_nothing_installed_says_which_package_adds_skills(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PAI_LOAD_PLUGINS", "")

    result = invoke("generate")

    assert result.exit_code == 0
    assert result.stdout == "no generators installed\n"
    assert "`pai generate skills` needs the pai-skills package: pip install pai-skills" in (
        result.stderr
    )


@pytest.mark.usefixtures("generator")
def test_generate_json_lists_generators_and_what_is_not_installed() -> None:
    result = invoke("generate", "--json")

    assert json.loads(result.stdout) == {
        "generators": [
            {"command": "pai generate widgets", "help": "Write a module of widget names."}
        ],
        "not_installed": [{"command": "pai generate skills", "install": "pai-skills"}],
    }


@pytest.mark.usefixtures("generator_and_broken")
def test_a_plugin_whose_cli_hook_raises_leaves_the_other_plugins_generators_working(
    capsys: pytest.CaptureFixture[str],
) -> None:
    cli = create_cli()
    warned = capsys.readouterr().err

    result = CliRunner().invoke(cli, ["generate", "widgets"], catch_exceptions=False)

    assert result.exit_code == 0, result.output
    assert result.stdout == "wrote widgets.py\n"
    assert "pai_cli hook of plugin 'pai-test-a-gen-broken'" in warned


@pytest.mark.usefixtures("generator_and_broken")
def test_pai_plugins_names_the_plugin_whose_generator_hook_raised() -> None:
    result = invoke("plugins", "--json")

    rows = {row["distribution"]: row for row in json.loads(result.stdout)["plugins"]}
    assert rows["pai-test-a-gen-broken"]["status"] == "failed"
    assert "this generator is broken" in rows["pai-test-a-gen-broken"]["error"]
    assert rows["pai-test-generator"]["status"] == "loaded"


def test_generate_group_adds_the_group_to_a_tree_that_lacks_it() -> None:
    tree = click.Group("custom")

    group = generate_group(tree)

    assert tree.commands["generate"] is group
    assert generate_group(tree) is group


def test_generate_group_refuses_a_generate_command_that_is_not_a_group() -> None:
    tree = click.Group("custom")
    tree.add_command(click.Command("generate"))

    with pytest.raises(TypeError, match="'generate' command that is not a group"):
        generate_group(tree)


def test_each_command_tree_has_its_own_generate_group() -> None:
    first = generate_group(create_cli())
    first.add_command(click.Command("only-here"))

    assert "only-here" not in generate_group(create_cli()).commands
