"""Hostile configuration: tables and arrays nested thousands deep, in a file, in a ``PAI_*``
variable's name or value, or in ``overrides``. Each is one :class:`ConfigError` naming the file or
variable and the limit (never a ``RecursionError``), also through ``pai config --check``."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from config_helpers import NO_ENV, write

from pai.core import ConfigError, PaiConfig, load_config
from pai.core._config import MAX_DEPTH
from pai.core.cli import create_cli

DEEP = 10_000


def arrays(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


def inline_tables(depth: int) -> str:
    return "{ a = " * depth + "1" + " }" * depth


def nested(depth: int) -> dict[str, Any]:
    tree: dict[str, Any] = {"leaf": 1}
    for _ in range(depth - 1):
        tree = {"a": tree}
    return tree


def says_the_limit(error: ConfigError) -> str:
    message = str(error)
    assert f"at most {MAX_DEPTH} levels" in message
    assert "flatten it" in message
    assert len(message) < 1_000  # the offending text is never repeated whole
    return message


FILES = {
    "arrays 10,000 deep": f"[capabilities]\nx = {arrays(DEEP)}\n",
    "inline tables 10,000 deep": f"[capabilities]\nx = {inline_tables(DEEP)}\n",
    "a dotted key of 10,000 parts": "[capabilities]\n" + ".".join(["a"] * DEEP) + " = 1\n",
    "a table header of 10,000 parts": "[capabilities." + ".".join(["a"] * DEEP) + "]\nx = 1\n",
    "arrays 40 deep": f"[capabilities]\nx = {arrays(40)}\n",
    "inline tables 40 deep": f"[capabilities]\nx = {inline_tables(40)}\n",
}


@pytest.mark.parametrize("kind", FILES)
def test_a_pai_toml_nested_too_deep_is_a_config_error_naming_the_file(
    kind: str, tmp_path: Path
) -> None:
    path = write(tmp_path / "pai.toml", FILES[kind])

    with pytest.raises(ConfigError) as raised:
        load_config(tmp_path, environ=NO_ENV)

    message = says_the_limit(raised.value)
    assert f"the configuration file {path}" in message
    if "40" in kind:
        assert f"level {MAX_DEPTH + 1}" in message
        assert "capabilities.x[0]" in message or "capabilities.x.a.a" in message


def test_exactly_the_limit_loads_and_one_more_level_does_not(tmp_path: Path) -> None:
    # capabilities (1) . x (2) then arrays: MAX_DEPTH - 2 of them reach the limit exactly.
    write(tmp_path / "pai.toml", f"[capabilities]\nx = {arrays(MAX_DEPTH - 2)}\n")
    assert load_config(tmp_path, environ=NO_ENV).data["capabilities"]["x"] is not None

    write(tmp_path / "pai.toml", f"[capabilities]\nx = {arrays(MAX_DEPTH - 1)}\n")
    with pytest.raises(ConfigError, match=rf"level {MAX_DEPTH + 1}\)"):
        load_config(tmp_path, environ=NO_ENV)


def test_a_pyproject_tool_pai_nested_too_deep_is_a_config_error_naming_it(
    tmp_path: Path,
) -> None:
    path = write(tmp_path / "pyproject.toml", f"[tool.pai.capabilities]\nx = {arrays(DEEP)}\n")

    with pytest.raises(ConfigError) as raised:
        load_config(tmp_path, environ=NO_ENV)

    assert str(path) in says_the_limit(raised.value)
    write(tmp_path / "pyproject.toml", f"[tool.pai.capabilities]\nx = {arrays(40)}\n")
    with pytest.raises(ConfigError, match=re.escape(f"{path} [tool.pai] nests")):
        load_config(tmp_path, environ=NO_ENV)


def test_a_deep_pyproject_without_pai_configuration_is_not_ours(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", f"[tool.other]\nx = {arrays(DEEP)}\n")

    assert load_config(tmp_path, environ=NO_ENV).files == ()


ENVIRON = {
    "a name of 5,000 segments": ("PAI_CAPABILITIES__" + "__".join(["X"] * 5_000), "1"),
    "a name of 40 segments": ("PAI_CAPABILITIES__" + "__".join(["X"] * 40), "1"),
    "a name of 40 dotted parts": ("PAI_CAPABILITIES__" + ".".join(["x"] * 40), "1"),
    "a value of arrays 10,000 deep": ("PAI_CAPABILITIES__X", arrays(DEEP)),
    "a value of inline tables 10,000 deep": ("PAI_CAPABILITIES__X", inline_tables(DEEP)),
    "a value of arrays 40 deep": ("PAI_CAPABILITIES__X", arrays(40)),
}


@pytest.mark.parametrize("kind", ENVIRON)
def test_a_pai_variable_nested_too_deep_is_a_config_error_naming_it_not_its_value(
    kind: str, tmp_path: Path
) -> None:
    name, value = ENVIRON[kind]

    with pytest.raises(ConfigError) as raised:
        load_config(tmp_path, environ={name: value})

    message = str(raised.value)
    assert f"at most {MAX_DEPTH} levels" in message
    assert len(message) < 1_000
    assert name[:40] in message
    if len(name) > 100:
        assert f"({len(name):,} characters)" in message
    assert value not in message or value == "1"  # a value may be a secret: never shown


def test_overrides_nested_too_deep_or_containing_themselves_are_a_config_error(
    tmp_path: Path,
) -> None:
    with pytest.raises(ConfigError, match=r"load_config\(overrides=...\) nests") as raised:
        load_config(tmp_path, environ=NO_ENV, overrides={"capabilities": nested(DEEP)})
    says_the_limit(raised.value)

    loop: dict[str, Any] = {}
    loop["a"] = loop
    with pytest.raises(ConfigError, match=r"load_config\(overrides=...\) nests"):
        load_config(tmp_path, environ=NO_ENV, overrides={"capabilities": loop})


def test_a_config_built_in_code_lists_its_leaves_however_deep() -> None:
    config = PaiConfig(data={"capabilities": nested(DEEP)})

    [(key, value, source)] = config.flat()

    assert key.startswith("capabilities.a.a.")
    assert key.endswith(".leaf")
    assert (value, source) == (1, "default")


@pytest.mark.parametrize("check", [[], ["--check"]], ids=["config", "config --check"])
@pytest.mark.parametrize("where", ["file", "variable"])
def test_pai_config_reports_a_too_deep_configuration_as_one_error_line(
    where: str, check: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [name for name in os.environ if name.startswith("PAI_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PAI_LOAD_PLUGINS", "")
    monkeypatch.chdir(tmp_path)
    if where == "file":
        write(tmp_path / "pai.toml", f"[capabilities]\nx = {arrays(DEEP)}\n")
    else:
        monkeypatch.setenv("PAI_CAPABILITIES__X", arrays(DEEP))

    result = CliRunner().invoke(create_cli(), ["config", *check], catch_exceptions=False)

    assert result.exit_code == 2
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("Error: ")
    assert f"at most {MAX_DEPTH} levels" in line
    assert ("pai.toml" if where == "file" else "PAI_CAPABILITIES__X") in line
