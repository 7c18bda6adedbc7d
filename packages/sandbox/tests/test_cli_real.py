"""The sandbox commands of ``pai`` over real providers, found through their entry points.

The in-memory provider runs in this process; the Docker cases need the engine ``DOCKER_HOST``
names and skip (saying so) without one. A stopped engine is a ``DOCKER_HOST`` pointing at a
socket nothing listens on.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from pai.core.cli import create_cli
from pai.core.testing import reset_plugins

DEFAULT_NOTE = "no sandbox provider configured; using the embedded 'inmemory' provider"


@pytest.fixture(autouse=True)
def environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    for name in list(os.environ):
        if name.startswith("PAI_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("PAI_LOAD_PLUGINS", "pai-sandbox,pai-sandbox-inmemory,pai-sandbox-docker")
    monkeypatch.chdir(tmp_path)
    reset_plugins()
    yield
    reset_plugins()


def invoke(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(create_cli(), list(args), input=input, catch_exceptions=False)


def config_check_error() -> str:
    """What ``pai config --check`` says about the configuration (it must find a problem)."""
    result = invoke("config", "--check")
    assert result.exit_code == 2, result.output
    return result.stderr


# -- every command checks the configuration as pai config --check does ------------------------------

SANDBOX_COMMANDS = [
    ("sandbox", "exec", "--", "echo", "hi"),
    ("sandbox", "ls"),
    ("sandbox", "rm", "--force", "cli"),
    ("sandbox", "prune", "--yes"),
    ("demo",),
]


@pytest.mark.parametrize("command", SANDBOX_COMMANDS, ids=" ".join)
def test_a_misspelt_capability_table_stops_every_sandbox_command(command: tuple[str, ...]) -> None:
    Path("pai.toml").write_text('[capabilities.sandbx]\nprovider = "inmemory"\n')

    result = invoke(*command)

    assert result.exit_code == 2, result.output
    assert result.stderr == config_check_error()
    assert "[capabilities.sandbx]" in result.stderr
    assert "did you mean 'sandbox'?" in result.stderr
    assert DEFAULT_NOTE not in result.output
    assert "hi" not in result.stdout
    assert "Traceback" not in result.output


@pytest.mark.parametrize("command", SANDBOX_COMMANDS, ids=" ".join)
def test_no_default_notice_before_an_error_about_the_sandbox_table(
    command: tuple[str, ...],
) -> None:
    # No provider named (so the default would be used) and a misspelt key in the same table.
    Path("pai.toml").write_text("[capabilities.sandbox]\ntimeout = 5\n")

    result = invoke(*command)

    assert result.exit_code == 2, result.output
    assert result.stderr == config_check_error()
    assert "unknown key(s) ['timeout']; did you mean 'default_timeout'?" in result.stderr
    assert "no sandbox provider configured" not in result.output
    assert "embedded" not in result.output


def test_a_valid_table_without_a_provider_says_once_that_the_default_is_used() -> None:
    Path("pai.toml").write_text("[capabilities.sandbox]\ndefault_timeout = 30\n")

    result = invoke("sandbox", "exec", "--", "echo", "hi")

    assert result.exit_code == 0, result.output
    assert result.stdout == "hi\n"
    assert result.stderr.count("no sandbox provider configured") == 1
    assert DEFAULT_NOTE in result.stderr


# -- pai sandbox exec: options before the command, the command's own after it ----------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--tiemout", "5", "echo", "hi"], "No such option '--tiemout'. Did you mean '--timeout'?"),
        (["--ky", "a", "echo", "hi"], "No such option '--ky'. Did you mean '--key'?"),
        (["-x", "echo", "hi"], "No such option '-x'"),
        (["--env", "1X=2", "echo", "hi"], "'1X' (in '1X=2') is not a variable name"),
        (["-e", "A-B=1", "echo", "hi"], "'A-B' (in 'A-B=1') is not a variable name"),
        (["-e", "FOO", "echo", "hi"], "'FOO' is not NAME=VALUE"),
        (["--timeout", "soon", "echo", "hi"], "'soon' is not a valid float"),
    ],
)
def test_exec_refuses_a_bad_option_before_the_command(args: list[str], expected: str) -> None:
    result = invoke("sandbox", "exec", *args)

    assert result.exit_code == 2, result.output
    assert expected in result.stderr
    assert "command not found" not in result.output  # never run as the command
    assert result.stdout == ""


def test_exec_passes_the_commands_own_options_through() -> None:
    assert invoke("sandbox", "exec", "echo", "-n", "hi").stdout == "hi"
    assert invoke("sandbox", "exec", "--", "echo", "-n", "hi").stdout == "hi"
    # after the command, even an option of exec is the command's
    assert invoke("sandbox", "exec", "echo", "--timeout", "5").stdout == "--timeout 5\n"


def test_exec_sets_environment_variables_and_the_working_directory() -> None:
    result = invoke(
        "sandbox",
        "exec",
        "--env",
        "GREETING=hello world",
        "-e",
        "EQ=a=b",
        "-e",
        "GREETING=hi",  # a later value wins
        "--cwd",
        "/tmp",
        "--",
        "sh",
        "-c",
        'echo "$GREETING|$EQ|$(pwd)"',
    )

    assert result.exit_code == 0, result.output
    assert result.stdout == "hi|a=b|/tmp\n"


def test_exec_cwd_is_relative_to_the_workspace_and_a_missing_one_fails() -> None:
    result = invoke("sandbox", "exec", "--cwd", "sub", "pwd")

    assert result.exit_code != 0
    assert "/workspace/sub" in result.stderr


def test_exec_json_prints_the_command_result() -> None:
    result = invoke("sandbox", "exec", "--json", "--", "sh", "-c", "echo out; echo err >&2; exit 3")

    assert result.exit_code == 3  # the command's status, as without --json
    data = json.loads(result.stdout)
    assert set(data) == {
        "key",
        "provider",
        "stdout",
        "stderr",
        "exit_code",
        "timed_out",
        "truncated",
        "environment_reset",
        "duration",
    }
    assert data["key"] == "cli"
    assert data["provider"] == "inmemory"
    assert (data["stdout"], data["stderr"], data["exit_code"]) == ("out\n", "err\n", 3)
    assert data["timed_out"] is False
    assert data["duration"] > 0
    assert "err" not in result.stderr  # the command's stderr is in the JSON, not on ours


def test_exec_json_of_a_timed_out_command_exits_124() -> None:
    result = invoke("sandbox", "exec", "--json", "--timeout", "0.5", "sleep", "5")

    assert result.exit_code == 124
    assert json.loads(result.stdout)["timed_out"] is True


# -- pai demo and pai config --check --probe on Docker ----------------------------------------------

IMAGE = os.environ.get("PAI_DOCKER_TEST_IMAGE", "pai-test-busybox:latest")


def docker_config(image: str = IMAGE) -> None:
    Path("pai.toml").write_text(
        f'[capabilities.sandbox]\nprovider = "docker"\n\n[capabilities.sandbox.docker]\n'
        f'image = "{image}"\nnamespace = "pai-test-cli-{uuid.uuid4().hex[:12]}"\n'
    )


@pytest.fixture
def stopped_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """DOCKER_HOST at a unix socket nothing listens on: the engine is down."""
    path = tmp_path / "stopped-docker.sock"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    address = f"unix://{path}"
    monkeypatch.setenv("DOCKER_HOST", address)
    try:
        yield address
    finally:
        sock.close()


@pytest.fixture
def engine() -> str:
    """The running engine DOCKER_HOST names (with the test image); skips without one."""
    try:
        import docker

        client = docker.from_env()
        try:
            client.images.get(IMAGE)
        finally:
            client.close()
    except Exception as error:
        pytest.skip(f"no usable Docker engine with image {IMAGE!r}: {error}")
    return os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")


def test_demo_with_the_engine_down_stops_before_the_first_step_in_one_line(
    stopped_engine: str,
) -> None:
    docker_config()

    result = invoke("demo")

    assert result.exit_code == 1
    assert result.stdout == ""  # no step replayed, no header
    assert result.stderr == (
        "Error: the demo cannot run: sandbox provider 'docker': cannot connect to the Docker "
        f"engine at {stopped_engine} (DOCKER_HOST): connection refused: nothing listens there; "
        "start Docker, or point DOCKER_HOST (or docker_host in [capabilities.sandbox.docker]) at "
        "a running engine\n"
    )
    assert "removed" not in result.output
    assert "Traceback" not in result.output


@pytest.mark.usefixtures("engine")
def test_demo_with_a_missing_image_says_how_to_get_it() -> None:
    image = f"pai-test-absent-{uuid.uuid4().hex[:8]}:1"
    docker_config(image)

    result = invoke("demo")

    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert f"image {image!r} (option image) is not present" in result.stderr
    assert f"docker pull {image}" in result.stderr


@pytest.mark.usefixtures("engine")
def test_demo_on_a_working_engine_runs_and_removes_its_sandbox() -> None:
    docker_config()

    result = invoke("demo")

    assert result.exit_code == 0, result.output
    assert "<- run: exit 0" in result.stdout
    assert "removed the demo's sandbox" in result.stdout
    assert json.loads(invoke("sandbox", "ls", "--json").stdout)["instances"] == []


def test_config_check_probe_reports_a_stopped_engine(stopped_engine: str) -> None:
    docker_config()

    result = invoke("config", "--check", "--probe", "--json")

    assert result.exit_code != 0
    (probe,) = [p for p in json.loads(result.stdout)["probes"] if p["name"].startswith("sandbox")]
    assert probe["name"] == "sandbox (docker)"
    assert probe["status"] == "failed"
    assert (
        f"cannot connect to the Docker engine at {stopped_engine} (DOCKER_HOST)" in probe["error"]
    )


@pytest.mark.usefixtures("engine")
def test_config_check_probe_passes_on_a_working_engine() -> None:
    docker_config()

    result = invoke("config", "--check", "--probe")

    assert result.exit_code == 0, result.output
    assert "probe sandbox (docker): ok" in result.stdout


def test_config_check_probe_has_no_sandbox_probe_without_a_sandbox_table() -> None:
    result = invoke("config", "--check", "--probe", "--json")

    assert result.exit_code == 0, result.output
    assert [p for p in json.loads(result.stdout)["probes"] if p["name"].startswith("sandbox")] == []


# -- pai providers ------------------------------------------------------------------------------------


def test_providers_describe_every_option_of_every_shipped_provider(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(
        "PAI_LOAD_PLUGINS", "pai-sandbox,pai-sandbox-inmemory,pai-sandbox-docker,pai-sandbox-e2b"
    )
    reset_plugins()

    data = json.loads(invoke("providers", "--json").stdout)

    assert sorted(p["name"] for p in data["providers"]) == ["docker", "e2b", "inmemory"]
    undescribed = [
        f"{provider['name']}.{option['name']}"
        for provider in data["providers"]
        for option in provider["options"]
        if not option["description"].strip()
    ]
    assert undescribed == []
    table = invoke("providers").stdout
    image = next(line for line in table.splitlines() if line.startswith("image "))
    assert "the image every sandbox runs" in image


@pytest.mark.parametrize(
    "command",
    [("sandbox", "exec", "echo", "hi"), ("sandbox", "ls"), ("sandbox", "rm", "x")],
    ids=" ".join,
)
def test_a_stopped_engine_is_one_line_naming_the_socket(
    stopped_engine: str, command: tuple[str, ...]
) -> None:
    docker_config()

    result = invoke(*command)

    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith(
        f"Error: cannot connect to the Docker engine at {stopped_engine} (DOCKER_HOST): "
        "connection refused: nothing listens there; start Docker"
    )
    assert result.stderr.count("\n") == 1


def test_the_console_command_refuses_a_misspelt_option_in_a_subprocess(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAI_")}
    completed = subprocess.run(
        [sys.executable, "-m", "pai.core", "sandbox", "exec", "--tiemout", "5", "echo", "hi"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
        check=False,
    )

    assert completed.returncode == 2
    assert "No such option '--tiemout'. Did you mean '--timeout'?" in completed.stderr
    assert "command not found" not in completed.stderr
    assert completed.stdout == ""
